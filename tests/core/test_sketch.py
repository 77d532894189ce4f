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
