"""Tokenising a whole batch at once: every document's words joined by single spaces in one
UTF-8 buffer, so that each shingle is one contiguous slice of it.

An all-ASCII batch is lowered and classified with ``bytes.translate``; any other batch has every
code point classified with a table (Python's ``\\w`` for str patterns is exactly
``str.isalnum()`` or ``_``) and is then UTF-8 encoded. ``core._text`` holds the scalar reference
definitions these must agree with.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import cache

import numpy as np
from numpy.typing import NDArray

from core.errors import ParameterError

__all__ = ["Tokens", "shingle_spans", "word_table"]

_SPACE = 0x20
# Separates documents in the ASCII buffer (texts' own newlines are translated to spaces): the
# compaction only drops spaces.
_NEWLINE = 0x0A


@cache
def word_table() -> NDArray[np.bool_]:
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


def _ascii_translation() -> bytes:
    """The translation of ASCII bytes: word bytes lowered, all others a space."""
    table = bytearray([_SPACE] * 256)
    for code in range(128):
        char = chr(code)
        if char.isalnum() or char == "_":
            table[code] = ord(char.lower())
    return bytes(table)


_ASCII_TRANSLATION = _ascii_translation()


class Tokens:
    """A batch tokenised into one byte buffer (UTF-8) in which words are joined by single spaces.

    Attributes:
        buf: the bytes, as uint8. Documents may be separated by other bytes.
        word_start, word_end: byte offsets of every word of the batch, in order.
        doc_words: how many words each document has.
    """

    __slots__ = ("buf", "doc_words", "word_end", "word_start")

    def __init__(self, texts: Sequence[str]) -> None:
        if all(map(str.isascii, texts)):
            self.buf, self.word_start, self.word_end, self.doc_words = _ascii_tokens(texts)
        else:
            self.buf, self.word_start, self.word_end, self.doc_words = _unicode_tokens(texts)


_TokenArrays = tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]


def _ascii_tokens(texts: Sequence[str]) -> _TokenArrays:
    """Tokens of an all-ASCII batch, where ``str.lower`` and ``\\w`` work byte by byte."""
    joined = b"\n".join([text.encode("ascii").translate(_ASCII_TRANSLATION) for text in texts])
    codes = np.frombuffer(joined, dtype=np.uint8)
    # Drop every space that follows a separator; newlines stay, so documents stay apart.
    separator = codes <= _SPACE
    scratch = np.empty(len(codes) + 1, dtype=np.bool_)
    redundant = np.equal(codes, _SPACE, out=scratch[: len(codes)])
    redundant[1:] &= separator[:-1]
    if redundant.any():
        keep = np.logical_not(redundant, out=redundant)
        codes = codes[keep]
        separator = separator[keep]
    start, end = _runs(separator, scratch)  # the scratch is free again afterwards
    # Document d ends at the d-th newline: count the words that start before each newline.
    newlines = np.flatnonzero(np.equal(codes, _NEWLINE, out=scratch[: len(codes)]))
    bounds = np.empty(len(texts) + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[1:-1] = np.searchsorted(start, newlines)
    bounds[-1] = len(start)
    return codes, start, end, np.diff(bounds)


def _unicode_tokens(texts: Sequence[str]) -> _TokenArrays:
    """Tokens of any batch: every lowered code point classified by table, then UTF-8 encoded."""
    lowered = [t.lower() for t in texts]
    lengths = np.fromiter(map(len, lowered), dtype=np.int64, count=len(lowered))
    joined = "\n".join(lowered)
    codes = np.frombuffer(_encode_utf32(joined, lowered), dtype=np.uint32)
    is_word = word_table()[codes]
    # Keep every word character and the first non-word character after a word, as a space.
    keep = is_word.copy()
    keep[1:] |= is_word[:-1]
    compact = np.where(is_word, codes, np.uint32(_SPACE))[keep]
    starts, ends = _runs(~is_word[keep])
    # The document of each word: document d starts at code point offset[d] of the batch.
    offsets = np.zeros(len(texts), dtype=np.int64)
    np.cumsum(lengths[:-1] + 1, out=offsets[1:])
    kept_before = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))
    doc_of_word = np.searchsorted(kept_before[offsets], starts, side="right") - 1
    doc_words = np.bincount(doc_of_word, minlength=len(texts)).astype(np.int64)
    buf, byte_at = _utf8(compact)
    return buf, byte_at[starts], byte_at[ends], doc_words


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


def _runs(
    gap: NDArray[np.bool_], scratch: NDArray[np.bool_] | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``[start, end)`` of every maximal run of False in ``gap``.

    The edges go to ``scratch`` (at least ``len(gap) + 1`` booleans) if given.
    """
    edge = np.empty(len(gap) + 1, dtype=np.bool_) if scratch is None else scratch[: len(gap) + 1]
    edge[0] = len(gap) > 0 and not gap[0]
    np.not_equal(gap[1:], gap[:-1], out=edge[1:-1])
    edge[-1] = len(gap) > 0 and not gap[-1]
    flips = np.flatnonzero(edge)
    return flips[0::2], flips[1::2]


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
    first_shingle = np.zeros(len(m), dtype=np.int64)
    np.cumsum(per_doc[:-1], out=first_shingle[1:])
    # The first word of each shingle: one more than the previous one's, except where a
    # document starts (its first word), as a cumulative sum of steps.
    lo = np.ones(int(per_doc.sum()), dtype=np.int64)
    nonempty = np.flatnonzero(per_doc)
    at = first_shingle[nonempty]
    lo[at] = first_word[nonempty]
    lo[at[1:]] -= first_word[nonempty[:-1]] + per_doc[nonempty[:-1]] - 1
    np.cumsum(lo, out=lo)
    start = tokens.word_start[lo]
    # Its last word is k - 1 further on, except in documents shorter than k.
    lo += k - 1
    end = np.take(tokens.word_end, lo, mode="clip")
    short = np.flatnonzero((m > 0) & (m < k))
    end[first_shingle[short]] = tokens.word_end[first_word[short] + m[short] - 1]
    return start, end, per_doc
