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


def test_perm_params_refusals_name_the_value_and_the_arrays_are_read_only():
    with pytest.raises(ParameterError) as caught:
        perm_params(0, 0)
    assert str(caught.value) == "num_perm must be at least 1, got 0"
    with pytest.raises(ParameterError) as caught:
        perm_params(4, 2**64)
    assert str(caught.value) == "seed must be in [0, 2**64), got 18446744073709551616"
    a, b = perm_params(2, 2**64 - 1)
    assert len(a) == len(b) == 2
    assert not a.flags.writeable and not b.flags.writeable


def test_pcg32_seeding_is_the_reference_srandom():
    # pcg32_srandom_r: state 0, inc = seq << 1 | 1, step, state += seed, step.
    mult, mask = 6364136223846793005, 2**64 - 1
    for seed, seq in ((0, 0), (42, 54), (2**64 - 1, 2**63 + 5)):
        inc = ((seq << 1) | 1) & mask
        state = ((0 * mult + inc) & mask) + seed
        state = (state * mult + inc) & mask
        rng = PCG32(seed, seq)
        assert (rng._state, rng._inc) == (state, inc)


@pytest.mark.parametrize(
    "state", [0, 2**64 - 1, 0x853C49E6748FEA9B, (1 << 59) | (1 << 40), (31 << 59) | 12345]
)
def test_pcg32_output_is_xsh_rr_of_the_old_state(state):
    rng = PCG32(0)
    rng._state = state
    xorshifted = (((state >> 18) ^ state) >> 27) & 0xFFFFFFFF
    rot = state >> 59
    want = ((xorshifted >> rot) | (xorshifted << ((32 - rot) % 32))) & 0xFFFFFFFF
    assert rng.next() == want
    assert rng._state == (state * 6364136223846793005 + rng._inc) % 2**64


@pytest.mark.parametrize("bound", [0, -1, 2**32, 2**40])
def test_below_refuses_bounds_outside_1_to_2_to_the_32_minus_1(bound):
    with pytest.raises(ParameterError) as caught:
        PCG32(1).below(bound)
    assert str(caught.value) == f"bound must be in [1, 2**32 - 1], got {bound}"


def test_fnv1a64_of_every_single_byte():
    prime, offset = 0x100000001B3, 0xCBF29CE484222325
    assert [fnv1a64(bytes([b])) for b in range(256)] == [
        ((offset ^ b) * prime) % 2**64 for b in range(256)
    ]
    assert fnv1a64(b"\xff" * 9) == fnv_of(b"\xff" * 9)


def fnv_of(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) % 2**64
    return h
