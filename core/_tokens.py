"""Tokenising a whole batch at once: every document's words joined by single spaces in one
UTF-8 buffer, so that each shingle is one contiguous slice of it.

Every text is lowered by ``str.lower`` (so lowering is exactly Python's, final sigma and the
length-changing mappings included; an ASCII text skips it, the byte table lowers it), encoded to
UTF-8 once, and its ASCII bytes classified by a 256-entry ``bytes.translate`` table: word bytes
stay, every other ASCII byte becomes a space. Bytes of 0x80 and up are left as they are; only
they are then decoded to code points, vectorised from the UTF-8 bytes, and classified with the
code-point table (Python's ``\\w`` for str patterns is exactly ``str.isalnum()`` or ``_``): the
bytes of a non-word character become spaces. The cost of non-ASCII text is therefore one
``str.lower`` per text plus work in proportion to its non-ASCII bytes, not a slower path.
``core._text`` holds the scalar reference definitions these must agree with.
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
# Separates documents in the buffer (texts' own newlines are translated to spaces): the
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


def _byte_translation() -> bytes:
    """The translation of UTF-8 bytes: ASCII word bytes lowered, other ASCII bytes a space, and
    bytes from 0x80 up (parts of non-ASCII characters) unchanged."""
    table = bytearray([_SPACE] * 128) + bytearray(range(128, 256))
    for code in range(128):
        char = chr(code)
        if char.isalnum() or char == "_":
            table[code] = ord(char.lower())
    return bytes(table)


_TRANSLATION = _byte_translation()


class Tokens:
    """A batch tokenised into one byte buffer (UTF-8) in which words are joined by single spaces.

    Attributes:
        buf: the bytes, as uint8. Documents may be separated by other bytes.
        word_start, word_end: byte offsets of every word of the batch, in order.
        doc_words: how many words each document has.
    """

    __slots__ = ("buf", "doc_words", "word_end", "word_start")

    def __init__(self, texts: Sequence[str]) -> None:
        joined = b"\n".join(_encoded(texts))
        codes = np.frombuffer(joined, dtype=np.uint8)
        if not all(map(str.isascii, texts)):
            padded = np.zeros(len(codes) + 3, dtype=np.uint8)
            padded[: len(codes)] = codes
            _blank_non_word_characters(padded)
            codes = padded[: len(codes)]
        self.buf, self.word_start, self.word_end, self.doc_words = _words(codes, len(texts))


_TokenArrays = tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]


def _encoded(texts: Sequence[str]) -> list[bytes]:
    """Every text lowered, UTF-8 encoded and translated by ``_TRANSLATION``."""
    try:
        return [
            (text if text.isascii() else text.lower()).encode("utf-8").translate(_TRANSLATION)
            for text in texts
        ]
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


def _blank_non_word_characters(codes: NDArray[np.uint8]) -> None:
    """Turn every byte of a non-word non-ASCII character of the UTF-8 ``codes`` into a space.

    ``codes`` must have three bytes of padding after the text. Only the lead bytes of non-ASCII
    characters (0xC0 and up) are visited: each is read with the three bytes after it as one
    little-endian uint32 and decoded as if it led a 4-byte character; a shift right then drops
    the payload of the bytes past its own end. The code-point table classifies it, and the 2 to
    4 bytes of each non-word one are blanked.
    """
    at = np.flatnonzero(codes >= 0xC0)
    if len(at) == 0:
        return
    # The four bytes from every offset, as an unaligned little-endian uint32 view.
    quads = np.ndarray((len(codes) - 3,), dtype="<u4", buffer=codes, strides=(1,))
    word = quads.take(at).astype(np.uint32, copy=False)
    code_point = (word & np.uint32(0x1F)) << np.uint32(18)  # bit 4 of a 4-byte lead: masked
    code_point |= (word & np.uint32(0x3F00)) << np.uint32(4)
    code_point |= (word >> np.uint32(10)) & np.uint32(0xFC0)
    code_point |= (word >> np.uint32(24)) & np.uint32(0x3F)
    lead = word & np.uint32(0xFF)
    shift = (lead < 0xF0).astype(np.uint32)
    shift += lead < 0xE0
    shift *= np.uint32(6)
    code_point >>= shift
    code_point &= np.uint32(0x1FFFFF)
    blank = at[~word_table().take(code_point)]
    if len(blank) == 0:
        return
    width = _LEAD_WIDTH.take(codes[blank])
    for i in range(4):
        codes[blank[width > i] + i] = _SPACE


# The length of a UTF-8 character by its lead byte (continuation bytes: 0).
_LEAD_WIDTH = np.array(
    [1] * 128 + [0] * 64 + [2] * 32 + [3] * 16 + [4] * 8 + [0] * 8, dtype=np.uint8
)


def _words(codes: NDArray[np.uint8], n_docs: int) -> _TokenArrays:
    """Tokens of a buffer of documents separated by newlines in which every byte that is not
    part of a word is a space: spaces after a space or a newline are dropped, then the words
    are the runs between them."""
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
    bounds = np.empty(n_docs + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[1:-1] = np.searchsorted(start, newlines)
    bounds[-1] = len(start)
    return codes, start, end, np.diff(bounds)


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
