"""core/_fnv.py piece by piece against plain Python: the batching, the byte window, the
eight-byte words, the closed form (continued from any state), its low-byte recurrence and
prefix xor, and which path the spans take."""

from itertools import islice

import numpy as np
import pytest

from neardup.core import _fnv
from neardup.core._fnv import fnv1a64_spans
from neardup.core._hashing import FNV_OFFSET, FNV_PRIME, fnv1a64

MASK = 2**64 - 1


def fnv_from(h: int, data: bytes) -> int:
    """FNV-1a 64 continued from the state ``h``."""
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK
    return h


def noise(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def spans(lengths, gap=0):
    starts, at = [], 0
    for n in lengths:
        starts.append(at)
        at += n + gap
    starts = np.array(starts, dtype=np.int64)
    return starts, starts + np.array(lengths, dtype=np.int64)


def expected(data, starts, ends):
    return [fnv1a64(data[s:e]) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]


@pytest.mark.parametrize(
    ("sizes", "budget", "most", "ranges"),
    [
        ([], 10, 5, []),
        ([3, 3, 3, 3], 6, 10, [(0, 2), (2, 4)]),
        ([3, 3, 3, 3], 7, 10, [(0, 2), (2, 4)]),
        ([3, 3, 3, 3], 5, 10, [(0, 1), (1, 2), (2, 3), (3, 4)]),
        ([3, 3, 3, 3], 100, 3, [(0, 3), (3, 4)]),
        ([3, 3, 3, 3], 100, 1, [(0, 1), (1, 2), (2, 3), (3, 4)]),
        ([1, 9, 1, 1, 1], 4, 10, [(0, 1), (1, 2), (2, 5)]),
        ([0, 0, 5, 0], 2, 10, [(0, 2), (2, 3), (3, 4)]),
        ([2, 2, 2, 2, 2, 2], 4, 10, [(0, 2), (2, 4), (4, 6)]),
    ],
)
def test_budgeted_cuts_consecutive_ranges_within_the_budget_and_the_count(
    sizes, budget, most, ranges
):
    total = np.cumsum(np.array(sizes, dtype=np.int64))
    assert list(islice(_fnv._budgeted(total, budget, most), 20)) == ranges


@pytest.mark.parametrize(
    ("start", "length", "window"),
    [
        ([10, 20], [5, 5], (10, 25)),
        ([100, 7], [3, 9], (7, 103)),
        ([5000, 5010], [5, 5], (5000, 5015)),  # far from the buffer's start, close together
        ([0, 4116], [10, 0], (0, 4116)),  # hi - lo = 2 * total + 4096: still a window
        ([0, 4106], [5, 5], (0, 4111)),  # 4111 > 2 * 10 + 4096 = 4116? no: a window
    ],
)
def test_chunk_bytes_is_the_window_of_spans_close_together(start, length, window):
    buf = np.frombuffer(noise(9000), dtype=np.uint8)
    start = np.array(start, dtype=np.int64)
    length = np.array(length, dtype=np.int64)
    local, pos = _fnv._chunk_bytes(buf, start, length)
    lo, hi = window
    assert local.tobytes() == buf[lo:hi].tobytes()
    assert pos.tolist() == (start - lo).tolist()


@pytest.mark.parametrize(
    ("start", "length"),
    [([0, 4117], [10, 0]), ([50, 8000, 3000], [4, 6, 1]), ([8000, 0], [2, 3])],
)
def test_chunk_bytes_copies_spans_far_apart_end_to_end(start, length):
    data = noise(9000, 1)
    buf = np.frombuffer(data, dtype=np.uint8)
    local, pos = _fnv._chunk_bytes(
        buf, np.array(start, dtype=np.int64), np.array(length, dtype=np.int64)
    )
    assert local.tobytes() == b"".join(data[s : s + n] for s, n in zip(start, length, strict=True))
    assert pos.tolist() == np.concatenate([[0], np.cumsum(length)[:-1]]).tolist()


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 16, 17, 30])
def test_eight_byte_words_are_the_little_endian_word_at_every_offset(n):
    data = noise(n, n)
    words, stride = _fnv._eight_byte_words(np.frombuffer(data, dtype=np.uint8))
    assert stride == n // 8 + 1
    assert words.dtype == np.uint64
    padded = data + bytes(16)
    for p in range(n + 1):
        entry = int(words[(p & 7) * stride + (p >> 3)])
        assert entry == int.from_bytes(padded[p : p + 8], "little"), p
        if (p >> 3) + 1 < stride:
            following = int(words[(p & 7) * stride + (p >> 3) + 1])
            assert following == int.from_bytes(padded[p + 8 : p + 16], "little"), p


@pytest.mark.parametrize("n", [1, 2, 5, 4095, 4096, 4097, 8192, 8193, 9000])
def test_inverse_powers_are_the_powers_of_the_primes_inverse(n):
    got = _fnv._inverse_powers(n)
    assert got.dtype == np.uint64
    assert len(got) == n
    inverse = pow(FNV_PRIME, -1, 2**64)
    picks = sorted(
        {0, 1, 2, n // 2, n - 2, n - 1, min(n - 1, 4095), min(n - 1, 4096)} & set(range(n))
    )
    assert [int(got[g]) for g in picks] == [pow(inverse, g, 2**64) for g in picks]
    assert all(int(v) * pow(FNV_PRIME, g, 2**64) % 2**64 == 1 for g, v in enumerate(got[:40]))


@pytest.mark.parametrize("n", [0, 1, 2, 63, 64, 65, 127, 128, 129, 300])
def test_prefix_xor_is_the_xor_of_the_bits_before_each(n):
    bits = np.random.default_rng(n).integers(0, 2, n, dtype=np.uint8)
    got = _fnv._prefix_xor(bits)
    before, want = 0, []
    for bit in bits.tolist():
        want.append(before)
        before ^= bit
    assert got.tolist() == want
    ones = np.ones(n, dtype=np.uint8)
    assert _fnv._prefix_xor(ones).tolist() == [i % 2 for i in range(n)]


def test_low_bytes_are_those_of_the_state_before_each_byte_from_each_spans_start():
    data = noise(400, 3)
    lengths = [1, 7, 100, 64, 3, 200, 25]
    lows = [0x00, 0xFF, 0x25, 0x80, 0x01, 0x7F, 0xC3]
    c = np.frombuffer(data[: sum(lengths)], dtype=np.uint8)
    n_bytes = np.array(lengths, dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(n_bytes)[:-1]]).astype(np.int64)
    got = _fnv._fnv_low_bytes(c, np.array(lows, dtype=np.uint8), first, n_bytes)
    want = []
    for f, n, low in zip(first.tolist(), lengths, lows, strict=True):
        h = low
        for byte in data[f : f + n]:
            want.append(h & 0xFF)
            h = fnv_from(h, bytes([byte]))
    assert got.dtype == np.uint8
    assert got.tolist() == want


STATES = [FNV_OFFSET, 0, 1, 0xFF, MASK, 0x0123456789ABCDEF, 2**63]


def test_pieces_continue_fnv_from_any_state():
    data = noise(3000, 4)
    buf = np.frombuffer(data, dtype=np.uint8)
    start = np.array([0, 10, 11, 500, 2999, 1000, 40], dtype=np.int64)
    end = np.array([10, 11, 500, 2999, 3000, 2500, 41], dtype=np.int64)
    h = np.array(STATES, dtype=np.uint64)
    got = _fnv._fnv1a64_pieces(buf, start, end, h)
    assert got.dtype == np.uint64
    want = [fnv_from(s, data[a:b]) for s, a, b in zip(STATES, start, end, strict=True)]
    assert got.tolist() == want
    assert h.tolist() == STATES


@pytest.mark.parametrize("piece", [1, 7, 64, 1 << 20])
def test_resume_continues_fnv_from_any_state_in_pieces(monkeypatch, piece):
    monkeypatch.setattr(_fnv, "_FNV_PIECE", piece)
    data = noise(300, 5)
    buf = np.frombuffer(data, dtype=np.uint8)
    start = np.array([0, 5, 5, 30, 100, 299, 70], dtype=np.int64)
    end = np.array([5, 5, 30, 100, 300, 300, 299], dtype=np.int64)
    h = np.array(STATES, dtype=np.uint64)
    got = _fnv._fnv1a64_resume(buf, start, end, h)
    want = [fnv_from(s, data[a:b]) for s, a, b in zip(STATES, start, end, strict=True)]
    assert got.tolist() == want
    assert h.tolist() == STATES  # a copy: the states given are left alone


def test_resume_of_empty_spans_is_the_states_given():
    buf = np.frombuffer(noise(10), dtype=np.uint8)
    h = np.array([5, 6], dtype=np.uint64)
    got = _fnv._fnv1a64_resume(buf, np.array([3, 9]), np.array([3, 9]), h)
    assert got.tolist() == [5, 6]


@pytest.mark.parametrize(
    "lengths",
    [
        [0],
        [1],
        [8],
        [9],
        [0, 0, 0],
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17],
        [255, 0, 1, 256, 257],
        [17, 3, 16, 15, 8, 7, 9, 1],
    ],
)
@pytest.mark.parametrize("gap", [0, 5000])
def test_spans_equal_fnv_of_each(lengths, gap):
    starts, ends = spans(lengths, gap)
    data = noise(int(ends[-1]) + 16, len(lengths))
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.dtype == np.uint64
    assert got.tolist() == expected(data, starts, ends)


def test_spans_overlapping_and_out_of_order_equal_fnv_of_each():
    data = noise(600, 6)
    starts = np.array([500, 0, 3, 3, 100, 2, 599], dtype=np.int64)
    ends = np.array([600, 300, 11, 4, 100, 30, 600], dtype=np.int64)
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == expected(data, starts, ends)


def test_spans_given_as_lists_and_left_unchanged():
    data = noise(50, 7)
    starts, ends = [0, 10, 20], [10, 45, 20]
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == [fnv1a64(data[0:10]), fnv1a64(data[10:45]), FNV_OFFSET]
    end = np.array([10, 45, 20], dtype=np.int64)
    fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), np.array([0, 10, 20]), end)
    assert end.tolist() == [10, 45, 20]


def test_spans_given_as_uint64_arrays_equal_fnv_of_each():
    data = noise(300, 11)
    starts = np.array([0, 7, 100, 250], dtype=np.uint64)
    ends = np.array([7, 100, 250, 300], dtype=np.uint64)
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == expected(data, starts.astype(np.int64), ends.astype(np.int64))


def test_long_spans_weigh_nothing_in_the_byte_loops_chunks(monkeypatch):
    monkeypatch.setattr(_fnv, "_FNV_LONG", 20)
    monkeypatch.setattr(_fnv, "_FNV_CHUNK_BYTES", 10)
    data = noise(200, 12)
    starts, ends = spans([5, 100, 5, 5])
    chunks = []
    real = _fnv._fnv1a64_chunk

    def spy(buf, start, end, out):
        chunks.append((start.tolist(), end.tolist()))
        real(buf, start, end, out)

    monkeypatch.setattr(_fnv, "_fnv1a64_chunk", spy)
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == expected(data, starts, ends)
    # The long span is empty in the byte loop (its end moved to its start), and weighs 0.
    assert chunks == [([0, 5, 105], [5, 5, 110]), ([110], [115])]


def test_long_spans_take_the_closed_form_and_leave_ends_alone(monkeypatch):
    monkeypatch.setattr(_fnv, "_FNV_LONG", 20)
    monkeypatch.setattr(_fnv, "_FNV_PIECE", 8)
    data = noise(400, 8)
    starts, ends = spans([20, 21, 5, 100, 0, 40, 19])
    keep = ends.copy()
    resumed = []
    real = _fnv._fnv1a64_resume

    def spy(buf, start, end, h):
        resumed.append((start.tolist(), end.tolist(), h.tolist()))
        return real(buf, start, end, h)

    monkeypatch.setattr(_fnv, "_fnv1a64_resume", spy)
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == expected(data, starts, ends)
    assert ends.tolist() == keep.tolist()
    # Only the spans longer than 20, from the offset basis, over their whole length.
    assert resumed == [([20, 46, 146], [41, 146, 186], [FNV_OFFSET] * 3)]


def test_chunks_of_few_bytes_and_few_shingles_hash_every_span(monkeypatch):
    monkeypatch.setattr(_fnv, "_FNV_CHUNK_BYTES", 10)
    monkeypatch.setattr(_fnv, "_FNV_CHUNK", 3)
    data = noise(300, 9)
    starts, ends = spans([4, 4, 4, 30, 0, 1, 2, 3, 9, 9, 9, 0, 12])
    chunks = []
    real = _fnv._fnv1a64_chunk

    def spy(buf, start, end, out):
        chunks.append(len(start))
        real(buf, start, end, out)

    monkeypatch.setattr(_fnv, "_fnv1a64_chunk", spy)
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == expected(data, starts, ends)
    assert chunks == [2, 1, 1, 3, 1, 1, 1, 2, 1]


@pytest.mark.parametrize(
    ("few", "lengths", "t0", "which"),
    [
        # Two spans of 300 bytes: the closed form takes both from their first byte.
        (2, [300, 300], 0, [0, 1]),
        # Three spans of 300 are more than two: the byte loop to the end.
        (2, [300, 300, 300], None, []),
        # Once the short span is done (after 8 bytes), two are left with 292 bytes to go.
        (2, [300, 5, 300], 8, [0, 2]),
        # At byte 8, exactly 256 bytes to go: the closed form.
        (2, [264, 5, 264], 8, [0, 2]),
        # At byte 8, 255 bytes to go: the byte loop to the end.
        (2, [263, 5, 263], None, []),
        (1, [264, 8], 8, [0]),
        (1, [300, 20, 16], 24, [0]),
    ],
)
def test_the_last_few_long_spans_switch_to_the_closed_form(monkeypatch, few, lengths, t0, which):
    monkeypatch.setattr(_fnv, "_FNV_FEW", few)
    data = noise(sum(lengths) + 8, 10)
    starts, ends = spans(lengths)
    resumed = []
    real = _fnv._fnv1a64_resume

    def spy(buf, start, end, h):
        resumed.append((start.tolist(), end.tolist()))
        return real(buf, start, end, h)

    monkeypatch.setattr(_fnv, "_fnv1a64_resume", spy)
    got = fnv1a64_spans(np.frombuffer(data, dtype=np.uint8), starts, ends)
    assert got.tolist() == expected(data, starts, ends)
    # The spans start at 0, one after the other: positions in the window are offsets in data.
    if t0 is None:
        assert resumed == []
    else:
        assert resumed == [([int(starts[i]) + t0 for i in which], [int(ends[i]) for i in which])]
