"""FNV-1a 64, PCG32 and perm_params against the published check vectors and the spec."""

import numpy as np
import pytest

from neardup.core import _fnv
from neardup.core._fnv import fnv1a64_spans
from neardup.core.errors import ParameterError
from neardup.core.minhash import MERSENNE31, PCG32, fnv1a64, perm_params


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", 0xCBF29CE484222325), (b"a", 0xAF63DC4C8601EC8C), (b"foobar", 0x85944171F73967E8)],
)
def test_fnv1a64_check_vectors(data, expected):
    assert fnv1a64(data) == expected


def test_pcg32_published_demo_vectors():
    rng = PCG32(42)
    assert [rng.next() for _ in range(6)] == [
        0xA15C02B7, 0x7B47F409, 0xBA1D3330, 0x83D2F293, 0xBFA4784B, 0xCBED606E,
    ]  # fmt: skip
    coins = "".join("H" if rng.below(2) else "T" for _ in range(65))
    assert coins == "HHTTTHTHHHTHTTTHHHHHTTTHHHTHTHTHTTHTTTHHHHHHTTTTHHTTTTTHTTTTTTTHT"
    rolls = [rng.below(6) + 1 for _ in range(33)]
    assert rolls == [int(c) for c in "341122324324335231315141564662633"]


def test_pcg32_default_sequence_is_54():
    assert [PCG32(7).next() for _ in range(3)] == [PCG32(7, seq=54).next() for _ in range(3)]
    assert PCG32(7).next() != PCG32(7, seq=55).next()


def test_perm_params_draws_a_then_b_interleaved():
    rng = PCG32(3)
    expected_a, expected_b = [], []
    for _ in range(16):
        expected_a.append(1 + rng.below(MERSENNE31 - 1))
        expected_b.append(rng.below(MERSENNE31))
    a, b = perm_params(16, 3)
    assert a.tolist() == expected_a
    assert b.tolist() == expected_b
    assert str(a.dtype) == "uint64" and str(b.dtype) == "uint64"


def test_perm_params_ranges_and_prefix_stability():
    a, b = perm_params(256, 0)
    assert int(a.min()) >= 1 and int(a.max()) < MERSENNE31
    assert int(b.min()) >= 0 and int(b.max()) < MERSENNE31
    a64, b64 = perm_params(64, 0)
    assert (a[:64] == a64).all() and (b[:64] == b64).all()


def test_perm_params_rejects_bad_values():
    with pytest.raises(ParameterError, match="num_perm"):
        perm_params(0, 0)
    with pytest.raises(ParameterError, match="seed"):
        perm_params(4, -1)


def _draws(seed: int, n: int) -> list[int]:
    rng = PCG32(seed)
    return [rng.next() for _ in range(n)]


def test_below_accepts_draws_from_2_to_the_32_mod_bound_up_and_takes_every_bound_it_documents():
    bound = 3 * 2**30  # 2**32 mod bound = 2**30: a quarter of the draws is rejected
    seed = next(s for s in range(1000) if sum(r < 2**30 for r in _draws(s, 20)) >= 3)
    rng, raw = PCG32(seed), PCG32(seed)
    expected = []
    while len(expected) < 20:
        r = raw.next()
        if r >= 2**30:
            expected.append(r % bound)
    assert [rng.below(bound) for _ in range(20)] == expected
    # A first draw equal to the threshold is accepted.
    seed = next(s for s in range(100) if PCG32(s).next() < 2**31)
    first = PCG32(seed).next()
    assert PCG32(seed).below(2**32 - first) == first
    assert PCG32(1).below(1) == 0
    assert 0 <= PCG32(1).below(2**32 - 1) < 2**32 - 1
    with pytest.raises(ParameterError) as caught:
        PCG32(1).below(0)
    assert str(caught.value) == "bound must be in [1, 2**32 - 1], got 0"


@pytest.mark.parametrize("longest", [255, 256, 257])
def test_fnv_of_many_spans_equals_fnv_of_each_around_a_longest_span_of_256_bytes(longest):
    # Spans are radix-sorted by length as one byte up to 255 bytes, as two from 256.
    data = bytes(range(256)) * 4
    lengths = [longest, 3, 0, 100, longest, 1, 255]
    starts = np.cumsum([0, *lengths[:-1]])
    ends = starts + np.array(lengths)
    buf = np.frombuffer(data, dtype=np.uint8)
    got = fnv1a64_spans(buf, starts, ends)
    assert got.tolist() == [fnv1a64(data[s:e]) for s, e in zip(starts, ends, strict=True)]


def test_fnv_of_a_few_spans_far_apart_in_a_large_buffer_equals_fnv_of_each():
    # Spans spread over 100 KB are gathered into a buffer of their own before hashing.
    data = bytes(range(256)) * 400
    starts = np.array([5, 50_000, 99_000, 70_000], dtype=np.int64)
    ends = starts + np.array([40, 7, 300, 0])
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == [fnv1a64(data[s:e]) for s, e in zip(starts, ends, strict=True)]


def test_fnv_of_long_spans_cut_into_pieces_equals_fnv_of_each(monkeypatch):
    # Spans longer than _FNV_LONG are hashed a piece at a time, in batches of pieces; made
    # small here (pieces of 64 bytes past 100) so that the scalar FNV checks them at once.
    monkeypatch.setattr(_fnv, "_FNV_LONG", 100)
    monkeypatch.setattr(_fnv, "_FNV_PIECE", 64)
    data = bytes(range(256)) * 8
    lengths = [10, 300, 101, 64, 1000, 0, 129]
    starts = np.cumsum([0, *lengths[:-1]])
    ends = starts + np.array(lengths)
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == [fnv1a64(data[s:e]) for s, e in zip(starts, ends, strict=True)]
