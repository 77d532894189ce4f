"""The batch signature kernel, and the spawn process pool over contiguous chunks.

A batch of texts becomes a ``[len(texts), num_perm]`` uint32 matrix without any per-shingle
Python, in three vectorised steps:

1. Tokenise: lower each text, join the batch, classify every code point as word or not with a
   table (Python's ``\\w`` for str patterns is exactly ``str.isalnum()`` or ``_``), and compact the
   batch so each document's words are joined by single spaces. A shingle is then one contiguous
   slice of a UTF-8 buffer.
2. Hash: FNV-1a 64 over all shingle slices at once, one step per byte position, on the shingles
   still longer than that position (sorted by length, so the active ones are a suffix); then
   ``x = h mod P``.
3. Permute and take minima: ``(a*x + b) mod P`` for a block of shingles against every
   permutation, reduced mod P with the Mersenne fold into uint32, then ``np.minimum.reduceat``
   per document.

Every value is below P < 2**31, so signatures are returned as uint32; ``core.minhash.minhash``
returns the spec's uint64 for a single set.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import cache
from multiprocessing import get_context

import numpy as np
from numpy.typing import NDArray

from core.errors import ParameterError, WorkerError
from core.hashing import FNV_OFFSET, FNV_PRIME, MERSENNE31, perm_params

__all__ = ["Tokens", "batch_signatures", "shingle_spans", "signatures", "spawn_pool"]

_P64 = np.uint64(MERSENNE31)
_P32 = np.uint32(MERSENNE31)
_SPACE = 0x20
# Shingles per block in the permutation step: a (block, num_perm) uint64 matrix of 1 MiB at
# 128 permutations stays in L2, where numpy's element-wise passes run several times faster.
_BLOCK_ELEMENTS = 1 << 17
# Which uint32 half of a uint64 is the high word, for the fold that reads both halves in place.
_HI, _LO = (1, 0) if sys.byteorder == "little" else (0, 1)


@cache
def _word_table() -> NDArray[np.bool_]:
    """True for every code point that Python's ``re`` counts as ``\\w``; built once a process."""
    table = np.zeros(sys.maxunicode + 1, dtype=np.bool_)
    chars = (
        "".join(map(chr, range(0xD800)))
        + "\0" * 0x800
        + "".join(map(chr, range(0xE000, sys.maxunicode + 1)))
    )
    table[:] = np.fromiter(
        (c.isalnum() or c == "_" for c in chars), dtype=np.bool_, count=len(chars)
    )
    table[ord("_")] = True
    return table


_ASCII_TABLE = np.array([chr(i).isalnum() or chr(i) == "_" for i in range(128)], dtype=np.bool_)


class Tokens:
    """A batch tokenised into one UTF-8 buffer of words joined by single spaces.

    Attributes:
        buf: the UTF-8 bytes, as uint8.
        word_start, word_end: byte offsets of every word of the batch, in order.
        doc_words: how many words each document has.
    """

    __slots__ = ("buf", "doc_words", "word_end", "word_start")

    def __init__(self, texts: Sequence[str]) -> None:
        lowered = [t.lower() for t in texts]
        lengths = np.fromiter(map(len, lowered), dtype=np.int64, count=len(lowered))
        joined = "\n".join(lowered)
        if joined.isascii():
            codes: NDArray[np.uint32] | NDArray[np.uint8] = np.frombuffer(
                joined.encode("ascii"), dtype=np.uint8
            )
            is_word = _ASCII_TABLE[codes]
        else:
            codes = np.frombuffer(_encode_utf32(joined, lowered), dtype=np.uint32)
            is_word = _word_table()[codes]
        # Keep every word character and the first non-word character after a word, as a space.
        keep = is_word.copy()
        keep[1:] |= is_word[:-1]
        compact = np.where(is_word, codes, codes.dtype.type(_SPACE))[keep]
        cword = is_word[keep]
        starts = _run_starts(cword)
        ends = _run_ends(cword)
        # The document of each word: document d starts at code point offset[d] of the batch.
        offsets = np.zeros(len(texts), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=offsets[1:])
        kept_before = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))
        doc_of_word = np.searchsorted(kept_before[offsets], starts, side="right") - 1
        self.doc_words = np.bincount(doc_of_word, minlength=len(texts)).astype(np.int64)
        if compact.dtype == np.uint8:
            self.buf = compact
            self.word_start, self.word_end = starts, ends
        else:
            self.buf, byte_at = _utf8(compact)
            self.word_start, self.word_end = byte_at[starts], byte_at[ends]


def _encode_utf32(joined: str, texts: Sequence[str]) -> bytes:
    try:
        return joined.encode("utf-32-le")
    except UnicodeEncodeError:
        for i, text in enumerate(texts):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ParameterError(
                    f"text {i} is not valid Unicode (a lone surrogate at character {exc.start}); "
                    "shingles are hashed as UTF-8, so every text must encode"
                ) from None
        raise


def _utf8(codes: NDArray[np.uint32]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """UTF-8 bytes of the code points, and the byte offset of each code point (plus the end)."""
    data = codes.tobytes().decode("utf-32-le").encode("utf-8")
    width = 1 + (codes >= 0x80).astype(np.int64) + (codes >= 0x800) + (codes >= 0x10000)
    byte_at = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(width, out=byte_at[1:])
    return np.frombuffer(data, dtype=np.uint8), byte_at


def _run_starts(mask: NDArray[np.bool_]) -> NDArray[np.int64]:
    edge = mask.copy()
    edge[1:] &= ~mask[:-1]
    return np.flatnonzero(edge)


def _run_ends(mask: NDArray[np.bool_]) -> NDArray[np.int64]:
    edge = mask.copy()
    edge[:-1] &= ~mask[1:]
    return np.flatnonzero(edge) + 1


def shingle_spans(
    tokens: Tokens, k: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Byte spans ``[start, end)`` of every shingle of the batch, and shingles per document.

    A document of m >= k words has m - k + 1 shingles; of 1 to k-1 words, one (all its words);
    of none, none.
    """
    m = tokens.doc_words
    per_doc = np.where(m >= k, m - k + 1, np.minimum(m, 1))
    first_word = np.zeros(len(m), dtype=np.int64)
    np.cumsum(m[:-1], out=first_word[1:])
    doc = np.repeat(np.arange(len(m)), per_doc)
    first_shingle = np.zeros(len(m), dtype=np.int64)
    np.cumsum(per_doc[:-1], out=first_shingle[1:])
    lo = first_word[doc] + np.arange(len(doc)) - first_shingle[doc]
    hi = lo + np.minimum(m, k)[doc] - 1
    return tokens.word_start[lo], tokens.word_end[hi], per_doc


def fnv1a64_spans(
    buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64]
) -> NDArray[np.uint64]:
    """FNV-1a 64 of every slice ``buf[start:end]``, all at once (uint64 arithmetic wraps)."""
    length = end - start
    order = np.argsort(length, kind="stable")
    sorted_len = length[order]
    pos = start[order]
    h = np.full(len(order), FNV_OFFSET, dtype=np.uint64)
    prime = np.uint64(FNV_PRIME)
    max_len = int(sorted_len[-1]) if len(sorted_len) else 0
    # At byte position t, the shingles longer than t are the suffix from first_active[t].
    first_active = np.searchsorted(sorted_len, np.arange(max_len), side="right")
    for t in range(max_len):
        i = first_active[t]
        hv = h[i:]
        pv = pos[i:]
        np.bitwise_xor(hv, buf[pv], out=hv)
        hv *= prime
        pv += 1
    out = np.empty_like(h)
    out[order] = h
    return out


def _minima(
    x: NDArray[np.uint64],
    per_doc: NDArray[np.int64],
    a: NDArray[np.uint64],
    b: NDArray[np.uint64],
) -> NDArray[np.uint32]:
    """Per document, per permutation, ``min over its shingles of (a*x + b) mod P``.

    Computed on ``2*x`` with ``2*b`` so the uint64 product's high uint32 word is ``y >> 31``
    and its low word is ``2*(y & P)``: the Mersenne fold reads both halves in place. Since
    a, x, b <= P-1, the folded sum is below 2P, and one wrapping ``min(s, s - P)`` finishes it.
    """
    num_perm = len(a)
    sig = np.full((len(per_doc), num_perm), MERSENNE31, dtype=np.uint32)
    a2 = a
    b2 = b << np.uint64(1)
    x2 = x << np.uint64(1)
    ends = np.cumsum(per_doc)
    block = max(1, _BLOCK_ELEMENTS // num_perm)
    prod = np.empty((block, num_perm), dtype=np.uint64)
    fold = np.empty((block, num_perm), dtype=np.uint32)
    wrap = np.empty((block, num_perm), dtype=np.uint32)
    d0 = 0
    n_docs = len(per_doc)
    while d0 < n_docs:
        s0 = int(ends[d0] - per_doc[d0])
        # Whole documents per block; a document longer than a block gets a block of its own.
        d1 = max(int(np.searchsorted(ends, s0 + block, side="right")), d0 + 1)
        s1 = int(ends[d1 - 1])
        _block_minima(x2[s0:s1], per_doc[d0:d1], a2, b2, sig[d0:d1], prod, fold, wrap)
        d0 = d1
    return sig


def _block_minima(
    x2: NDArray[np.uint64],
    per_doc: NDArray[np.int64],
    a: NDArray[np.uint64],
    b2: NDArray[np.uint64],
    out: NDArray[np.uint32],
    prod: NDArray[np.uint64],
    fold: NDArray[np.uint32],
    wrap: NDArray[np.uint32],
) -> None:
    n = len(x2)
    if n == 0:
        return
    if n > len(prod):
        prod = np.empty((n, len(a)), dtype=np.uint64)
        fold = np.empty((n, len(a)), dtype=np.uint32)
        wrap = np.empty((n, len(a)), dtype=np.uint32)
    y = prod[:n]
    np.multiply(x2[:, None], a, out=y)
    y += b2
    halves = y.view(np.uint32).reshape(n, len(a), 2)
    s = fold[:n]
    np.right_shift(halves[:, :, _LO], np.uint32(1), out=s)
    s += halves[:, :, _HI]
    w = wrap[:n]
    np.subtract(s, _P32, out=w)
    np.minimum(s, w, out=s)
    nonempty = per_doc > 0
    starts = np.zeros(len(per_doc), dtype=np.int64)
    np.cumsum(per_doc[:-1], out=starts[1:])
    out[nonempty] = np.minimum.reduceat(s, starts[nonempty], axis=0)


def batch_signatures(
    texts: Sequence[str], num_perm: int = 128, seed: int = 0, k: int = 5
) -> NDArray[np.uint32]:
    """The ``[len(texts), num_perm]`` uint32 signatures of a batch, in this process."""
    _check(num_perm, k)
    a, b = perm_params(num_perm, seed)
    if not texts:
        return np.empty((0, num_perm), dtype=np.uint32)
    tokens = Tokens(texts)
    start, end, per_doc = shingle_spans(tokens, k)
    h = fnv1a64_spans(tokens.buf, start, end)
    x = h % _P64
    return _minima(x, per_doc, a, b)


def _check(num_perm: int, k: int) -> None:
    if num_perm < 1:
        raise ParameterError(f"num_perm must be at least 1, got {num_perm}")
    if k < 1:
        raise ParameterError(f"k (words per shingle) must be at least 1, got {k}")


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool with the spawn start method (no forked copies of threads or locks)."""
    if workers < 1:
        raise ParameterError(f"workers must be at least 1, got {workers}")
    return ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))


def chunk_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``[lo, hi)`` ranges covering ``range(n)``, sizes differing by <= 1."""
    parts = max(1, min(parts, n))
    q, r = divmod(n, parts)
    bounds = []
    lo = 0
    for i in range(parts):
        hi = lo + q + (1 if i < r else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def signatures(
    texts: Sequence[str],
    *,
    num_perm: int = 128,
    seed: int = 0,
    k: int = 5,
    workers: int = 1,
    pool: ProcessPoolExecutor | None = None,
) -> NDArray[np.uint32]:
    """MinHash signatures of ``texts``, ``[len(texts), num_perm]``, identical for any ``workers``.

    With ``workers > 1`` (or a ``pool``), the texts are split into contiguous chunks, computed on
    a spawn process pool with the same parameters, and concatenated in chunk order.

    Args:
        texts: the documents.
        num_perm: signature length.
        seed: the PCG32 seed of the permutation parameters.
        k: words per shingle.
        workers: processes for a pool created (and shut down) by this call; 1 computes here.
        pool: an existing pool to reuse (the service keeps one); its size sets the chunk count.

    Raises:
        ParameterError: a parameter out of range, or a text that cannot be encoded as UTF-8.
        WorkerError: a worker process died.
    """
    _check(num_perm, k)
    if workers < 1:
        raise ParameterError(f"workers must be at least 1, got {workers}")
    texts = list(texts)
    if pool is None and (workers == 1 or len(texts) < 2):
        return batch_signatures(texts, num_perm, seed, k)
    if pool is not None:
        return _on_pool(pool, texts, num_perm, seed, k, _pool_size(pool))
    with spawn_pool(workers) as own:
        return _on_pool(own, texts, num_perm, seed, k, workers)


def _pool_size(pool: ProcessPoolExecutor) -> int:
    return int(getattr(pool, "_max_workers", 1))


def _on_pool(
    pool: ProcessPoolExecutor,
    texts: list[str],
    num_perm: int,
    seed: int,
    k: int,
    parts: int,
) -> NDArray[np.uint32]:
    bounds = chunk_bounds(len(texts), parts)
    futures = [pool.submit(batch_signatures, texts[lo:hi], num_perm, seed, k) for lo, hi in bounds]
    try:
        # Results are taken in submission (chunk) order, never as they finish.
        chunks = [f.result() for f in futures]
    except BrokenProcessPool as exc:
        raise WorkerError(f"a signature worker process died: {exc}") from exc
    if not chunks:
        return np.empty((0, num_perm), dtype=np.uint32)
    return np.concatenate(chunks, axis=0)
