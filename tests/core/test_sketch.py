"""The estimate: position by position, and unbiased."""

import math
import random

import numpy as np
import pytest

from neardup.core.errors import SignatureError
from neardup.core.minhash import MERSENNE31, estimate, minhash


def test_estimate_worked_toy():
    # docs/algorithm.md's toy (P = 7): minima (0, 0, 0) for A and (0, 0, 1) for B.
    assert estimate([0, 0, 0], [0, 0, 1]) == 2 / 3


def test_estimate_compares_positions_not_sets():
    # The same values in another order share no position: as sets they would be equal.
    assert estimate([1, 2, 3, 4], [4, 3, 2, 1]) == 0.0
    assert estimate(np.array([5, 5, 6, 7]), np.array([5, 6, 6, 7])) == 0.75


def test_estimate_rejects_mismatched_signatures():
    with pytest.raises(SignatureError) as caught:
        estimate([1, 2, 3], [1, 2])
    assert str(caught.value) == (
        "signatures must be non-empty vectors of one length, got (3,) and (2,)"
    )
    with pytest.raises(SignatureError):
        estimate([], [])


def test_estimate_is_unbiased_at_one_third():
    # 40 fresh pairs with J = 50 / 150 = 1/3 exactly; the mean estimate must sit within
    # |z| < 3.29 (two-sided 0.1%) of J, with sd sqrt(J(1-J)/n) per estimate.
    rng = random.Random(1234)
    j, n, pairs = 1 / 3, 128, 40
    values = []
    for p in range(pairs):
        tokens = [f"p{p}-{rng.getrandbits(40):x}" for _ in range(150)]
        a, b = set(tokens[:100]), set(tokens[50:])
        assert len(a & b) / len(a | b) == j
        values.append(estimate(minhash(a, num_perm=n), minhash(b, num_perm=n)))
    sd_mean = math.sqrt(j * (1 - j) / n) / math.sqrt(pairs)
    z = (float(np.mean(values)) - j) / sd_mean
    assert abs(z) < 3.29, (np.mean(values), z)


def test_a_signature_is_uint64_with_or_without_shingles():
    empty = minhash([], num_perm=4)
    assert empty.dtype == np.uint64 and empty.tolist() == [MERSENNE31] * 4
    assert minhash(["the cat sat on the"], num_perm=4).dtype == np.uint64


def test_minhash_defaults_to_128_permutations_of_seed_0():
    from neardup.core.minhash import perm_params, shingle_hashes

    sh = ["a b c", "b c d", "ü ö ä"]
    sig = minhash(sh)
    a, b = perm_params(128, 0)
    x = shingle_hashes(sh)
    assert sig.tolist() == [min((ai * int(v) + bi) % MERSENNE31 for v in x) for ai, bi in
                            zip(a.tolist(), b.tolist(), strict=True)]  # fmt: skip
    assert sig.tolist() == minhash(sh, 128, 0).tolist()
    assert minhash(sh, seed=1).tolist() != sig.tolist()


def test_shingle_hashes_of_nothing_and_of_one_empty_shingle():
    from neardup.core.minhash import shingle_hashes

    none = shingle_hashes([])
    assert none.dtype == np.uint64 and none.tolist() == []
    assert shingle_hashes([""]).tolist() == [0xCBF29CE484222325 % MERSENNE31]
    assert shingle_hashes(iter(["a", "é"])).tolist() == [
        0xAF63DC4C8601EC8C % MERSENNE31, shingle_hashes(["é"]).tolist()[0]]  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b", "shapes"),
    [
        ([[1, 2], [3, 4]], [[1, 2], [3, 4]], "(2, 2) and (2, 2)"),
        ([], [], "(0,) and (0,)"),
        (5, 5, "() and ()"),
        ([1, 2], [[1, 2]], "(2,) and (1, 2)"),
    ],
)
def test_estimate_refuses_anything_but_two_non_empty_vectors_of_one_length(a, b, shapes):
    with pytest.raises(SignatureError) as caught:
        estimate(a, b)
    assert str(caught.value) == (
        f"signatures must be non-empty vectors of one length, got {shapes}"
    )


def test_estimate_of_one_position():
    assert estimate([7], [7]) == 1.0
    assert estimate([7], [8]) == 0.0
    assert isinstance(estimate([1, 2], [1, 3]), float)
