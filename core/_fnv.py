"""FNV-1a 64 over many byte spans at once (the shingles of a batch), exactly.

Spans are hashed one byte position at a time across all spans still longer than it (sorted by
length, so those are a suffix), reading eight bytes per gather. The few very long spans (a
10 MB "word") are hashed by an exact closed form vectorised along the bytes instead
(``_fnv1a64_pieces``), so no input makes the loop quadratic.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from neardup.core._hashing import FNV_OFFSET, FNV_PRIME

__all__ = ["fnv1a64_spans"]

_FNV_PRIME = np.uint64(FNV_PRIME)
# Shingles per chunk, and bytes per chunk (the chunk's eight-byte words are 8x that).
_FNV_CHUNK = 1 << 15
_FNV_CHUNK_BYTES = 1 << 20
# Shingles longer than this are hashed by the closed form only (lengths are sorted as uint16).
_FNV_LONG = (1 << 16) - 1
# With this few shingles left and this many bytes to go, numpy's per-call cost of the byte loop
# (~2.5 us a byte position) exceeds the closed form's (~150 us, plus ~25 ns a byte): switch.
_FNV_FEW = 64
_FNV_FEW_BYTES = 256
# Bytes per batch of the closed form, whose scratch is ~40 bytes a byte.
_FNV_PIECE = 1 << 20
# Byte r of a gathered little-endian word, in the uint8 view of the native uint64.
_BYTE_COLUMN = tuple(range(8)) if sys.byteorder == "little" else tuple(range(7, -1, -1))


def fnv1a64_spans(
    buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64]
) -> NDArray[np.uint64]:
    """FNV-1a 64 of every slice ``buf[start:end]``, all at once (uint64 arithmetic wraps)."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    h = np.empty(len(start), dtype=np.uint64)
    total = end - start
    long = np.flatnonzero(total > _FNV_LONG)
    long_end = end[long]
    if len(long):
        end = end.copy()
        end[long] = start[long]  # empty for the byte loop, hashed in closed form below
        total[long] = 0
    np.cumsum(total, out=total)
    # Consecutive spans up to a byte budget: a batch's shingles lie close together.
    for c0, c1 in _budgeted(total, _FNV_CHUNK_BYTES, _FNV_CHUNK):
        _fnv1a64_chunk(buf, start[c0:c1], end[c0:c1], h[c0:c1])
    if len(long):
        offset = np.full(len(long), FNV_OFFSET, dtype=np.uint64)
        h[long] = _fnv1a64_resume(buf, start[long], long_end, offset)
    return h


def _budgeted(total: NDArray[np.int64], budget: int, most: int) -> Iterator[tuple[int, int]]:
    """Consecutive ``[i0, i1)`` ranges of items whose sizes (``total``: their cumulative sum) add
    up to about ``budget``, at most ``most`` items each, and never empty."""
    i0 = 0
    while i0 < len(total):
        limit = (int(total[i0 - 1]) if i0 else 0) + budget
        i1 = max(int(np.searchsorted(total, limit, side="right")), i0 + 1)
        i1 = min(i1, i0 + most, len(total))
        yield i0, i1
        i0 = i1


def _fnv1a64_chunk(
    buf: NDArray[np.uint8],
    start: NDArray[np.int64],
    end: NDArray[np.int64],
    out: NDArray[np.uint64],
) -> None:
    """FNV-1a 64 of spans up to ``_FNV_LONG`` bytes long into ``out``, by byte position."""
    length = end - start
    max_len = int(length.max())
    out[:] = FNV_OFFSET
    if max_len == 0:
        return
    local, pos = _chunk_bytes(buf, start, length)
    words, stride = _eight_byte_words(local)
    # A stable radix sort by length: the spans longer than t are then a suffix, from done[t].
    order = np.argsort(length.astype(np.uint8 if max_len < 256 else np.uint16), kind="stable")
    done = np.cumsum(np.bincount(length, minlength=max_len + 1))
    pos = pos[order]
    index = (pos & 7) * stride + (pos >> 3)  # of the next eight bytes, in words
    h = out[order]
    for t0 in range(0, max_len, 8):
        i = int(done[t0])
        if len(h) - i <= _FNV_FEW and max_len - t0 >= _FNV_FEW_BYTES:
            tail = pos[i:]
            h[i:] = _fnv1a64_resume(local, tail + t0, tail + length[order[i:]], h[i:])
            break
        columns = words[index[i:]].view(np.uint8).reshape(-1, 8)
        index[i:] += 1
        for r in range(min(8, max_len - t0)):
            hv = h[int(done[t0 + r]) :]
            np.bitwise_xor(hv, columns[len(columns) - len(hv) :, _BYTE_COLUMN[r]], out=hv)
            hv *= _FNV_PRIME
    out[order] = h


def _chunk_bytes(
    buf: NDArray[np.uint8], start: NDArray[np.int64], length: NDArray[np.int64]
) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """The window of ``buf`` holding the spans, and their starts in it.

    Spans far apart (not a batch's shingles) are copied out end to end instead, so that the
    window never costs more than the spans themselves.
    """
    lo = int(start.min())
    hi = int((start + length).max())
    total = int(length.sum())
    if hi - lo <= 2 * total + 4096:
        return buf[lo:hi], start - lo
    offset = np.zeros(len(start), dtype=np.int64)
    np.cumsum(length[:-1], out=offset[1:])
    gather = np.repeat(start - offset, length)
    gather += np.arange(total)
    return buf[gather], offset


def _eight_byte_words(buf: NDArray[np.uint8]) -> tuple[NDArray[np.uint64], int]:
    """The little-endian uint64 at every byte offset p of ``buf`` (zero-padded past its end).

    Stored as eight planes, one per ``p mod 8``, each an aligned copy of the bytes from that
    offset: word p is entry ``(p & 7) * stride + (p >> 3)``, and word p + 8 the next entry.
    """
    stride = len(buf) // 8 + 1
    padded = np.zeros(8 * stride + 8, dtype=np.uint8)
    padded[: len(buf)] = buf
    words = np.empty((8, stride), dtype="<u8")
    as_bytes = words.view(np.uint8)
    for shift in range(8):
        as_bytes[shift] = padded[shift : shift + 8 * stride]
    return words.astype(np.uint64, copy=False).reshape(-1), stride


def _fnv1a64_resume(
    buf: NDArray[np.uint8],
    start: NDArray[np.int64],
    end: NDArray[np.int64],
    h: NDArray[np.uint64],
) -> NDArray[np.uint64]:
    """FNV-1a 64 continued from the states ``h`` over each ``buf[start:end]``, in O(bytes).

    The spans are cut into pieces of at most ``_FNV_PIECE`` bytes, hashed a batch of
    consecutive pieces at a time (so one span's pieces are in separate, ordered batches), which
    bounds the memory of ``_fnv1a64_pieces``.
    """
    out = h.copy()
    pieces = np.maximum(-(-(end - start) // _FNV_PIECE), 0)
    span = np.repeat(np.arange(len(start)), pieces)
    step = np.arange(len(span)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    lo = start[span] + step * _FNV_PIECE
    hi = np.minimum(lo + _FNV_PIECE, end[span])
    for b0, b1 in _budgeted(np.cumsum(hi - lo), _FNV_PIECE, len(span)):
        which = span[b0:b1]
        out[which] = _fnv1a64_pieces(buf, lo[b0:b1], hi[b0:b1], out[which])
    return out


def _fnv1a64_pieces(
    buf: NDArray[np.uint8],
    start: NDArray[np.int64],
    end: NDArray[np.int64],
    h: NDArray[np.uint64],
) -> NDArray[np.uint64]:
    """FNV-1a 64 continued from ``h`` over each non-empty ``buf[start:end]``, with no loop over
    byte positions.

    Since ``c < 256``, ``h ^ c == h + d`` with ``d = (l ^ c) - l`` for the low byte l of h, so
    ``h_n = p**n * (h + sum_t d_t * p**-t)`` (p is odd, so invertible mod 2**64). The low byte
    evolves on its own, ``l' = ((l ^ c) * 0xB3) & 0xFF`` (the prime is 0xB3 mod 256), and bit k
    of it flips by a function of the bits below k: bit by bit, one prefix xor each recovers it.
    """
    n_bytes = end - start
    first = np.zeros(len(start), dtype=np.int64)
    np.cumsum(n_bytes[:-1], out=first[1:])
    c = np.concatenate([buf[s:e] for s, e in zip(start.tolist(), end.tolist(), strict=True)])
    low = _fnv_low_bytes(c, (h & np.uint64(0xFF)).astype(np.uint8), first, n_bytes)
    d = (low ^ c).astype(np.int64)
    d -= low
    # p**-t relative to each span is p**first * p**-(position in c).
    sums = np.add.reduceat(d.view(np.uint64) * _inverse_powers(len(c)), first)
    mod = 1 << 64
    out = np.empty_like(h)
    for i, (h0, n, f, total) in enumerate(
        zip(h.tolist(), n_bytes.tolist(), first.tolist(), sums.tolist(), strict=True)
    ):
        out[i] = (h0 + pow(FNV_PRIME, f, mod) * total) * pow(FNV_PRIME, n, mod) % mod
    return out


def _inverse_powers(n: int) -> NDArray[np.uint64]:
    """``FNV_PRIME**-g mod 2**64`` for g in range(n), as a (rows, 4096) outer product."""
    inverse = pow(FNV_PRIME, -1, 1 << 64)
    width = min(n, 4096)
    inner = np.full(width, inverse, dtype=np.uint64)
    inner[0] = 1
    np.multiply.accumulate(inner, out=inner)
    outer = np.full(-(-n // width), pow(inverse, width, 1 << 64), dtype=np.uint64)
    outer[0] = 1
    np.multiply.accumulate(outer, out=outer)
    return (outer[:, None] * inner).reshape(-1)[:n]


def _fnv_low_bytes(
    c: NDArray[np.uint8],
    low0: NDArray[np.uint8],
    first: NDArray[np.int64],
    n_bytes: NDArray[np.int64],
) -> NDArray[np.uint8]:
    """The low byte of the FNV-1a state before each byte of ``c``, per span, from ``low0``.

    Bit k of ``(v * 0xB3) mod 256`` is bit k of v xor bit k of ``(v mod 2**k) * 0xB3``, so
    bit k of the next low byte is this one's, xor bit k of c, xor a function of lower bits.
    """
    low = np.zeros(len(c), dtype=np.uint8)
    flip = np.empty_like(c)
    for k in range(8):
        np.bitwise_xor(low, c, out=flip)
        flip &= np.uint8((1 << k) - 1)
        flip *= np.uint8(0xB3)
        flip ^= c
        flip >>= np.uint8(k)
        flip &= np.uint8(1)
        before = _prefix_xor(flip)
        # Restart at each span: its first byte sees the span's own initial bit.
        before ^= np.repeat(before[first] ^ ((low0 >> np.uint8(k)) & np.uint8(1)), n_bytes)
        before <<= np.uint8(k)
        low |= before
    return low


def _prefix_xor(bits: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """For an array of 0/1 bytes, the xor of the bytes before each one, 64 at a time."""
    packed = np.packbits(bits, bitorder="little")
    raw = np.zeros(-(-len(packed) // 8), dtype="<u8")
    raw.view(np.uint8)[: len(packed)] = packed
    words = raw.astype(np.uint64)
    for shift in (1, 2, 4, 8, 16, 32):
        words ^= words << np.uint64(shift)  # inclusive prefix within each word
    parity = words >> np.uint64(63)
    carry = np.bitwise_xor.accumulate(parity) ^ parity  # of the words before
    words ^= np.uint64(0) - carry  # all ones where the earlier words' parity is odd
    inclusive = np.unpackbits(words.astype("<u8").view(np.uint8), bitorder="little")
    return inclusive[: len(bits)] ^ bits
