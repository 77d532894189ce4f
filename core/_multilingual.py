"""The ``multilingual`` tokenizer (docs/algorithm.md section 1), revision 3: normalization,
then words read off the shipped code-point table (``core._scripts``), vectorised over a batch.

1. ``normalize``: NFKC, case folding, NFKC again (Unicode's NFKC_Casefold closure), then the
   characters of ``DROPPED_RANGES`` are removed (and NFKC once more if any was): so NFC, NFD and
   NFKC spellings, full-width forms, vowel points and invisible joiners make one text. The
   shipped data of ``core._nfkc`` normalizes, at the tables' Unicode version (17.0.0), whatever
   the running Python's ``unicodedata`` is.
2. ``word_edges``: a word is a maximal run of word characters (letters, marks, numbers, ``_``:
   a combining mark, virama or vowel sign stays in its word in every script), except that an
   extended grapheme cluster (UAX #29, its rules GB6-GB9c at the table's version) whose first
   character is of a script written without spaces is a word of its own.

Costs: an ASCII text is only lowered; a text of ``_NUMPY_FROM`` characters or more is folded
in a few numpy passes up to what needs more (``core._fold.fold_until``, the kernel's checks),
that piece by the definition, and on; any other text is one ``str.translate`` and the shipped
algorithm on the pieces that need more (``core._nfkc``). Then a few numpy passes over the
batch's code points.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from neardup.core import _nfkc
from neardup.core._fold import checked_fold, fold_until
from neardup.core._nfkc import segment_starts
from neardup.core._scripts import (
    CONSONANT,
    EXTEND,
    GCB_MASK,
    HL,
    HLV,
    HLVT,
    HT,
    HV,
    INCB_EXTEND,
    INCB_SHIFT,
    LINKER,
    PREPEND,
    SPACING,
    UNSPACED_BIT,
    WORD_BIT,
    ZWJ,
    char_classes,
)

__all__ = [
    "normalize",
    "normalize_all",
    "original_spans",
    "token_arrays",
    "word_edges",
    "words_of",
]

#: From this many characters on, a text is folded by ``fold_until`` (a few numpy passes; their
#: fixed cost is more than ``core._nfkc.normalize`` spends on a shorter text).
_NUMPY_FROM = 100


def normalize(text: str) -> str:
    """``text`` as the multilingual tokenizer reads it (see the module docstring;
    ``core._nfkc.normalize`` is the definition).

    >>> normalize("Ｃａｆé ﬁ ẞ")
    'café fi ss'
    """
    if len(text) < _NUMPY_FROM or text.isascii():
        return _nfkc.normalize(text)
    out: list[str] = []
    while len(text) >= _NUMPY_FROM:
        folded, end, fail = fold_until(text)
        out.append(folded)
        if fail == len(text):
            return "".join(out)
        # The piece that needs more, to the next character never joined to what precedes it
        # (one Tamil vowel sign in two parts in a page), by the definition; then on.
        stop = _next_start(text, fail + 1)
        out.append(_nfkc.normalize(text[end:stop]))
        text = text[stop:]
    out.append(_nfkc.normalize(text))
    return "".join(out)


def normalize_all(texts: Sequence[str]) -> list[str]:
    """``[normalize(text) for text in texts]``: an ASCII text lowered, the others folded at once
    (``_fold_all``)."""
    out = [text.lower() if text.isascii() else "" for text in texts]
    others = [d for d, text in enumerate(texts) if not text.isascii()]
    for d, folded in zip(others, _fold_all([texts[d] for d in others]), strict=True):
        out[d] = folded
    return out


def _fold_all(texts: list[str]) -> list[str]:
    """``normalize`` of each of ``texts`` at once: joined by newlines (a starter composing
    with nothing, which normalization leaves as it is), folded in a few numpy passes
    (``checked_fold``), cut at the newlines; a text holding a character that needs more is
    normalized on its own."""
    joined = "\n".join(texts)
    if len(joined) < _NUMPY_FROM:
        return [normalize(text) for text in texts]
    codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    folded, origin, failing = checked_fold(codes.astype(np.uint32, copy=False))
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1
    firsts = np.cumsum(lengths) - lengths  # where each text starts in ``joined``
    newline = np.zeros(len(joined) + 1, dtype=np.bool_)
    newline[firsts[1:] - 1] = True
    cuts = np.flatnonzero(newline.take(origin)).tolist()
    out = folded.tobytes().decode("utf-32-le", "surrogatepass")  # one to be normalized again
    pieces = [out[a + 1 : b] for a, b in zip([-1, *cuts], [*cuts, len(out)], strict=True)]
    for d in np.unique(np.searchsorted(firsts, failing, side="right") - 1).tolist():
        pieces[d] = normalize(texts[d])
    return pieces


def _next_start(text: str, at: int) -> int:
    """The first place from ``at`` on before a ``segment_starts`` character, or the end."""
    starts = segment_starts()
    while at < len(text) and not starts[ord(text[at])]:
        at += 1
    return at


def _codes(text: str) -> NDArray[np.uint32]:
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint32, copy=False)


def word_edges(codes: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``[start, end)`` (code point indices) of every word of normalized text's code points."""
    info = char_classes().take(codes)
    word = (info & WORD_BIT) != 0
    n = len(codes)
    pos = np.arange(n, dtype=np.int64)
    # Whether UAX #29 keeps codes[i - 1] and codes[i] in one cluster, for i >= 1.
    gcb = info & GCB_MASK
    prev, cur = gcb[:-1], gcb[1:]
    stay = (cur == EXTEND) | (cur == ZWJ) | (cur == SPACING) | (prev == PREPEND)  # GB9-9b
    stay |= (prev == HL) & ((cur == HL) | (cur == HV) | (cur == HLV) | (cur == HLVT))  # GB6
    stay |= ((prev == HLV) | (prev == HV)) & ((cur == HV) | (cur == HT))  # GB7
    stay |= ((prev == HLVT) | (prev == HT)) & (cur == HT)  # GB8
    # GB9c: Consonant [Extend Linker]* Linker [Extend Linker]* x Consonant.
    incb = (info >> INCB_SHIFT) & 3
    joining = (incb == LINKER) | (incb == INCB_EXTEND)
    last = np.maximum.accumulate(np.where(joining, -1, pos))[:-1]  # at or before i - 1
    base = np.maximum(last, 0)
    links = np.cumsum(incb == LINKER)
    stay |= (
        (incb[1:] == CONSONANT)
        & (last >= 0)
        & (incb[base] == CONSONANT)
        & (links[:-1] > links[base])
    )
    both = word[:-1] & word[1:]
    broken = both & ~stay
    starts_cluster = np.ones(n, dtype=np.bool_)
    starts_cluster[1:] = ~both | broken
    first = np.maximum.accumulate(np.where(starts_cluster, pos, 0))
    unspaced = ((info & UNSPACED_BIT) != 0)[first]
    split = broken & (unspaced[:-1] | unspaced[1:])
    starts = word.copy()
    starts[1:] &= ~word[:-1] | split
    ends = word.copy()
    ends[:-1] &= ~word[1:] | split
    return np.flatnonzero(starts), np.flatnonzero(ends) + 1


def words_of(text: str) -> list[str]:
    """The words of ``text`` (``words(text, "multilingual")``)."""
    norm = normalize(text)
    start, end = word_edges(_codes(norm))
    return [norm[s:e] for s, e in zip(start.tolist(), end.tolist(), strict=True)]


_TokenArrays = tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]


def _utf8_width(codes: NDArray[np.uint32]) -> NDArray[np.int64]:
    return 1 + (codes >= 0x80).astype(np.int64) + (codes >= 0x800) + (codes >= 0x10000)


def token_arrays(normalized: Sequence[str]) -> _TokenArrays:
    """``core._tokens.Tokens``' arrays of normalized texts, in numpy: the words of each text
    joined by single spaces (each word followed by one), their byte offsets, words per text."""
    codes = _codes("\n".join(normalized))
    start, end = word_edges(codes)
    length = end - start
    word = np.zeros(len(codes) + 1, dtype=np.int64)  # +1 at a start, -1 at an end
    np.add.at(word, start, 1)
    np.add.at(word, end, -1)
    kept = codes[np.cumsum(word[:-1]) > 0]
    out = np.insert(kept, np.cumsum(length), np.uint32(0x20))
    at = np.cumsum(length + 1) - length - 1  # each word's first character in ``out``
    offset = np.zeros(len(out) + 1, dtype=np.int64)
    np.cumsum(_utf8_width(out), out=offset[1:])
    buf = out.astype("<u4").tobytes().decode("utf-32-le").encode("utf-8")
    lengths = np.fromiter(map(len, normalized), dtype=np.int64, count=len(normalized)) + 1
    doc_start = np.cumsum(lengths) - lengths
    bounds = np.append(np.searchsorted(start, doc_start), len(start))
    return (
        np.frombuffer(buf, dtype=np.uint8),
        offset[at],
        offset[at + length],
        np.diff(bounds),
    )


def original_spans(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of ``text`` (exactly ``words_of``) and each one's [start, end) in ``text``
    itself: the text is cut where normalization never joins characters, each piece normalized
    on its own, and a word spans the pieces its characters came from (a word made of part of
    one character, as ``㍿`` makes four, spans that whole character)."""
    norm = normalize(text)
    start, end = word_edges(_codes(norm))
    found = [norm[s:e] for s, e in zip(start.tolist(), end.tolist(), strict=True)]
    if text.isascii() or not found:
        return found, list(zip(start.tolist(), end.tolist(), strict=True))
    codes = _codes(text)
    cut = segment_starts().take(codes)
    cut[:1] = True
    lo = np.flatnonzero(cut)
    hi = np.append(lo[1:], len(text))
    sep = _unused_separator(text)
    pieces = normalize(sep.join(text[a:b] for a, b in zip(lo.tolist(), hi.tolist(), strict=True)))
    sizes = np.fromiter(map(len, pieces.split(sep)), dtype=np.int64, count=len(lo))
    if pieces.replace(sep, "") != norm:  # never seen; then every word spans the whole text
        lo, hi, sizes = lo[:1], hi[-1:], np.array([len(norm)], dtype=np.int64)
    piece = np.repeat(np.arange(len(lo)), sizes)
    spans = list(zip(lo[piece[start]].tolist(), hi[piece[end - 1]].tolist(), strict=True))
    return found, spans


def _unused_separator(text: str) -> str:
    """A private-use character not in ``text`` (normalization leaves it, and never joins it)."""
    code = 0xE000
    while chr(code) in text:
        code += 1
    return chr(code)
