"""The compiled multilingual kernel's fast path (``core._jit.segment``): ``fold_table`` says,
per code point, what ``core._multilingual.normalize`` makes of it when a text needs no more
than character-by-character folding (one character, or several: ``_expansions``), and which
characters make a text need ``normalize`` itself. Read off the shipped normalization data
(``core._nfkc``, Unicode ``TABLE_VERSION``), never off the running Python's ``unicodedata``.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from numpy.typing import NDArray

from neardup.core import _nfkc
from neardup.core._scripts import DROP_BIT, WORD_BIT, char_classes

__all__ = [
    "FOLD_EXPAND",
    "FOLD_FIRST",
    "FOLD_MAYBE",
    "FOLD_SKIP",
    "FOLD_SPECIAL",
    "compositions",
    "exact_fold_table",
    "fold_table",
    "quick_fold",
]


def _codes(text: str) -> NDArray[np.uint32]:
    """The code points of ``text`` (a lone surrogate too: the fold table marks it special)."""
    raw = text.encode("utf-32-le", "surrogatepass")
    return np.frombuffer(raw, dtype="<u4").astype(np.uint32, copy=False)


def _utf8_width(codes: NDArray[np.uint32]) -> NDArray[np.int64]:
    return 1 + (codes >= 0x80).astype(np.int64) + (codes >= 0x800) + (codes >= 0x10000)


#: ``fold_table``'s bits: a text holding the code point is normalized by ``normalize``; it may
#: compose with a starter before it (NFKC_Quick_Check Maybe); it is a starter that may, or one
#: whose decomposition ends in marks that a mark after it may go before.
FOLD_SPECIAL = 1 << 21
FOLD_MAYBE = 1 << 22
FOLD_FIRST = 1 << 23
#: (With ``FOLD_SPECIAL`` clear and the code point 0:) a dropped character the kernel skips.
FOLD_SKIP = np.uint32(0x1FFFFF)
_FOLD_CCC_SHIFT = 24
#: (With ``FOLD_SPECIAL``, in the combining-class field, which no character's reaches:) the
#: code point folds to the characters listed in the table past ``0x10FFFF`` at the low 21 bits
#: (their count, then each one), which the kernel reads in its place.
FOLD_EXPAND = np.uint32(0xFF << _FOLD_CCC_SHIFT)


def compositions() -> tuple[list[int], list[int]]:
    """The first and second parts of every primary canonical composition (and Hangul's)."""
    pairs = _nfkc.compositions()
    return [a for a, _, _ in pairs], [b for _, b, _ in pairs]


def _hiding_marks(chars: str, decomposed: list[str], ccc: NDArray[np.uint8]) -> list[int]:
    """The starters among ``chars`` (every code point from 0) whose full decomposition
    (``decomposed``, each one's NFKD) holds a combining mark."""
    return [
        code
        for code, (char, parts) in enumerate(zip(chars, decomposed, strict=True))
        if parts != char and not ccc[code] and any(ccc[ord(p)] for p in parts)
    ]


@cache
def fold_table() -> NDArray[np.uint32]:
    """``_table``, the non-word characters that fold to non-word starters only (full-width
    punctuation, the ellipsis) left as they are (``_separators``): the words are the same.
    Then ``_kernel_compositions``' triples, and (the last entry) how many there are."""
    out = _table(separators=True)
    triples = _kernel_compositions(out, char_classes())
    count = np.array([len(triples) // 3], dtype=np.uint32)
    return np.concatenate((out, np.array(triples, dtype=np.uint32), count))


def _kernel_compositions(out: NDArray[np.uint32], classes: NDArray[np.uint16]) -> list[int]:
    """The primary compositions the kernel makes itself (first, second, composite, one after
    another): those where a word character is replaced by one of the same ``char_classes``
    bits (so the words around are cut the same), no shorter in UTF-8 and no longer than the
    two (the kernel's room), and all three fold to themselves with nothing else to check
    (Tamil ``ொ`` = ``ெ`` + ``ா``, Bengali ``ো``, Sinhala ``ො``, Malayalam, Kannada, Telugu,
    Oriya two-part vowels, ``a`` and a diaeresis, Cyrillic ``ё``): where the second
    follows the first with nothing between, a text holding it normalizes as one holding the
    composite (NFKC composes them, and nothing else changes). Not Hangul (a syllable's
    classes are not its first part's)."""
    low = np.uint32(0x1FFFFF)
    plain = (out[:0x110000] & (low | np.uint32(FOLD_SPECIAL))) == np.arange(
        0x110000, dtype=np.uint32
    )
    busy = np.uint32(FOLD_MAYBE | (0xFF << _FOLD_CCC_SHIFT))
    triples: list[int] = []
    for first, second, composite in _nfkc.compositions():
        widths = _utf8_width(np.array([first, composite], dtype=np.uint32))
        if (
            plain[first]
            and plain[second]
            and plain[composite]
            and not out[first] & busy
            and not out[composite] & busy
            and classes[first] & WORD_BIT
            and classes[first] == classes[composite]
            and widths[0] <= widths[1] <= widths[0] + _utf8_width(np.array([second]))[0]
        ):
            triples += [first, second, composite]
    return triples


@cache
def exact_fold_table() -> NDArray[np.uint32]:
    """``_table``, each character folded exactly as ``normalize`` folds it (``quick_fold``)."""
    return _table(separators=False)


def _table(separators: bool) -> NDArray[np.uint32]:
    """Per code point, for the compiled kernel's fast path: the code point ``normalize`` makes
    of it (low 21 bits) when a text is normalized one character at a time, its canonical
    combining class (from bit 24), whether it may compose with a starter before it
    (``FOLD_MAYBE``) or is a starter that may, or whose decomposition ends in marks a mark after
    it may go before (``FOLD_FIRST``), and ``FOLD_SPECIAL`` where it
    is not so mapped: it changes under NFKC, folds to several characters or to one of another
    UTF-8 length or class, or is dropped. A text with no ``FOLD_SPECIAL``, no ``FOLD_MAYBE``
    after a ``FOLD_FIRST`` starter and no decreasing nonzero combining classes is NFKC already
    (Unicode's quick check), and ``normalize`` maps it character by character. A special
    character with ``FOLD_EXPAND`` folds to several characters, or one of another UTF-8
    length, listed past ``0x10FFFF`` (``_expansions``). Read off ``core._nfkc`` once a process
    (~0.3 s), so it agrees with ``normalize``."""
    base, pieces, decomposed = _base()
    out = base.copy()
    classes = char_classes()
    if separators:
        _separators(out, pieces, classes)
    out[0] = 0
    out[0xD800:0xE000] = np.arange(0xD800, 0xE000, dtype=np.uint32) | FOLD_SPECIAL
    # A dropped character NFKC leaves alone, composing with nothing, is skipped: the kernel
    # reads the text as if it were not there (its neighbours' checks meet across it).
    dropped = np.flatnonzero((classes & DROP_BIT) != 0)
    skip = (out[dropped] & np.uint32(FOLD_SPECIAL | FOLD_MAYBE | FOLD_FIRST)) == 0
    out[dropped[skip]] = (out[dropped[skip]] & np.uint32(0xFF << _FOLD_CCC_SHIFT)) | FOLD_SKIP
    out[dropped[~skip]] |= FOLD_SPECIAL
    return np.concatenate((out, _expansions(out, pieces, decomposed, classes)))


@cache
def _base() -> tuple[NDArray[np.uint32], list[str], list[str]]:
    """``_table`` before separators and dropped characters, with each code point's fold
    (``pieces``) and NFKD."""
    top = _nfkc.TOP  # nothing above decomposes, folds or combines
    chars = _nfkc.all_chars()  # NUL and the surrogates are "a" (set to themselves after)
    codes = _codes(chars)
    once = _nfkc.each(_nfkc.nfkc, chars)
    pieces = _nfkc.each(lambda text: _nfkc.nfkc(_nfkc.casefold(_nfkc.nfkc(text))), chars)
    decomposed = _nfkc.each(_nfkc.nfkd, chars)
    ccc = _nfkc.combining_classes()
    plain = np.array([len(p) == 1 for p in pieces], dtype=np.bool_)
    folded = codes.copy()
    folded[plain] = _codes("".join(p for p in pieces if len(p) == 1))
    combining = ccc[:top].astype(np.uint32)
    firsts, seconds = compositions()
    alone = np.array([a == c for a, c in zip(once, chars, strict=True)], dtype=np.bool_)
    special = ~plain | ~alone
    special[plain] |= ~alone[folded[plain]] | (combining[folded[plain]] != combining[plain])
    special |= _utf8_width(folded) != _utf8_width(codes)
    out = np.arange(0x110000, dtype=np.uint32)
    out[:top] = np.where(special, codes, folded) | (combining << _FOLD_CCC_SHIFT)
    out[:top][special] |= FOLD_SPECIAL
    # Composition bits of what the kernel reads after folding: the folded character's own.
    out[seconds] |= FOLD_MAYBE
    out[firsts] |= FOLD_FIRST
    # A starter that decomposes into one with marks after it (é) is one too: a mark of a lower
    # class after it goes before its own marks, and may compose with what they follow.
    out[_hiding_marks(chars, decomposed, ccc)] |= FOLD_FIRST
    mapped = out[:top] & 0x1FFFFF
    out[:top] |= out.take(mapped) & np.uint32(FOLD_MAYBE | FOLD_FIRST)
    return out, pieces, decomposed


def _separators(out: NDArray[np.uint32], pieces: list[str], classes: NDArray[np.uint16]) -> None:
    """Clear ``FOLD_SPECIAL`` of the non-word characters that normalize to non-word starters
    only (full-width punctuation, the ellipsis): as a separator either way, the kernel reads
    them as they are; ``FOLD_FIRST`` if any of what they become may compose."""
    for code in np.flatnonzero(out[: len(pieces)] & np.uint32(FOLD_SPECIAL)).tolist():
        piece = pieces[code]
        if not piece or classes[code] & (WORD_BIT | DROP_BIT) or out[code] & FOLD_MAYBE:
            continue
        parts = [ord(c) for c in piece]
        if any(classes[c] & (WORD_BIT | DROP_BIT | 0x30) or out[c] >> 24 for c in parts):
            continue
        if any(out[c] & (FOLD_MAYBE | FOLD_SPECIAL) for c in parts if c < len(pieces)):
            continue
        first = any(out[c] & FOLD_FIRST for c in parts)
        out[code] = (out[code] & ~np.uint32(FOLD_SPECIAL)) | (FOLD_FIRST if first else 0)


def _expansions(
    out: NDArray[np.uint32],
    pieces: list[str],
    decomposed: list[str],
    classes: NDArray[np.uint16],
) -> NDArray[np.uint32]:
    """Make ``FOLD_EXPAND`` entries of the special characters whose fold is a piece of text
    the kernel can read in their place (``ß`` ss, ``ﬁ`` fi, Thai ``ำ`` ํา, Bengali ``য়``
    য়, full-width A a, ``㎏`` kg, ``Ⅻ`` xii), and return the lists they point to.

    Such a character ``c`` is a starter that is not dropped, and folds to
    ``casefold(NFKD(c))``, fully decomposed, of characters the table maps to themselves (not
    special, not dropped). Nothing in the piece recomposes, so a text holding ``c`` normalizes
    as one holding the piece (NFKC depends only on the full decomposition, and case folding
    goes character by character): the kernel reads the piece in its place and checks it as
    any other text, composition and order of marks at its edges included. (A combining mark
    is no such character: it would be ordered by its own class, not its piece's, as U+0345
    folding to a Greek iota; nor is a character whose decomposition holds a mark that folds,
    as U+1FB3 and U+037A: a mark of a lower class after it goes before their U+0345, which
    then folds.)
    """
    tail: list[int] = []
    base = len(out)
    plain = (out & (FOLD_SPECIAL | np.uint32(0x1FFFFF))) == np.arange(len(out), dtype=np.uint32)
    plain &= (classes & DROP_BIT) == 0
    ccc = _nfkc.combining_classes()
    for code in np.flatnonzero(out[: len(pieces)] & FOLD_SPECIAL).tolist():
        if 0xD800 <= code < 0xE000 or classes[code] & DROP_BIT or ccc[code]:
            continue
        piece = pieces[code]
        if (
            piece
            and piece == _nfkc.casefold(decomposed[code])
            and piece == _nfkc.nfkd(piece)
            and all(plain[ord(p)] for p in piece)
            and all(not ccc[ord(d)] or _nfkc.casefold(d) == d for d in decomposed[code])
        ):
            out[code] = FOLD_SPECIAL | FOLD_EXPAND | np.uint32(base + len(tail))
            tail += [len(piece), *map(ord, piece)]
    return np.array(tail, dtype=np.uint32)


_LOW = np.uint32(0x1FFFFF)
_EXPANDS = FOLD_SPECIAL | FOLD_EXPAND


def quick_fold(text: str) -> str | None:
    """``normalize(text)`` read off ``exact_fold_table`` in a few numpy passes (``fold_until``),
    or None when the text needs more (``core._nfkc.normalize``)."""
    folded, _, fail = fold_until(text)
    return folded if fail == len(text) else None


def fold_until(text: str) -> tuple[str, int, int]:
    """``normalize(text[:end])``, ``end`` and ``fail``: where the first character is that
    needs more than the kernel's checks allow (``len(text)`` if none), and the last
    ``segment_starts`` character at or before it (``checked_fold``)."""
    folded, origin, failing = checked_fold(_codes(text))
    fail = int(failing.min()) if len(failing) else len(text)
    end = fail
    if fail < len(text):
        starts = _nfkc.segment_starts()
        while end > 0 and not starts[ord(text[end])]:
            end -= 1
        folded = folded[origin < end]
    return folded.tobytes().decode("utf-32-le", "surrogatepass"), end, fail


def checked_fold(
    codes: NDArray[np.uint32],
) -> tuple[NDArray[np.uint32], NDArray[np.int64], NDArray[np.int64]]:
    """Text's code points folded by ``exact_fold_table`` in a few numpy passes, the kernel's
    checks made: each character folded (to one character, or an expansion's several), the
    dropped ones removed, marks out of canonical order put back where the starter before them
    composes with nothing. Returns the folded code points, where each came from in ``codes``,
    and where the characters are that need more (in no order): a special one (not an
    expansion), one that may compose with the starter before it, a starter that may compose
    and that marks out of order follow. Each check looks back to the last starter at most: a
    character that needs none of them is folded right whatever comes after it."""
    fold = exact_fold_table()
    found = fold.take(codes)
    failing: list[NDArray[np.int64]] = []
    if (found & FOLD_SPECIAL).any():
        expand = (found & _EXPANDS) == _EXPANDS
        failing.append(np.flatnonzero(((found & FOLD_SPECIAL) != 0) & ~expand))
        codes, origin = _expanded(codes, found, np.flatnonzero(expand).tolist(), fold)
        found = fold.take(codes)
    else:
        origin = np.arange(len(codes), dtype=np.int64)
    kept = (found & _LOW) != FOLD_SKIP
    if not kept.all():
        found, origin = found[kept], origin[kept]
    ccc = found >> np.uint32(_FOLD_CCC_SHIFT)
    if ccc.any() and ((ccc[1:] != 0) & (ccc[1:] < ccc[:-1])).any():
        found, ccc, origin, bad = _reordered(found, ccc, origin)
        failing.append(bad)
    maybe = (found & FOLD_MAYBE) != 0
    if maybe.any():
        at = np.arange(len(found), dtype=np.int64)
        starter = np.maximum.accumulate(np.where(ccc == 0, at, -1))  # the last at or before
        before = np.concatenate((np.array([-1], dtype=np.int64), starter[:-1]))
        first = (found.take(np.maximum(before, 0)) & FOLD_FIRST) != 0
        failing.append(origin[maybe & (before >= 0) & first])
    empty = np.zeros(0, dtype=np.int64)
    return found & _LOW, origin, np.concatenate(failing) if failing else empty


def _reordered(
    found: NDArray[np.uint32], ccc: NDArray[np.uint32], origin: NDArray[np.int64]
) -> tuple[NDArray[np.uint32], NDArray[np.uint32], NDArray[np.int64], NDArray[np.int64]]:
    """Canonical ordering (marks after each starter sorted by class, stably), and where the
    starters are (``origin``) that marks out of order follow and that compose or hide marks
    (``FOLD_FIRST``): elsewhere, the order is all NFKC changes (Burmese asat before dot
    below)."""
    run = np.cumsum(ccc == 0)  # a starter begins a run; marks before any are run 0
    disordered = np.unique(run[1:][(ccc[1:] != 0) & (ccc[1:] < ccc[:-1])])
    led = np.flatnonzero(ccc == 0).take(disordered[disordered > 0] - 1)
    bad = origin.take(led[(found.take(led) & FOLD_FIRST) != 0])
    order = np.argsort(run.astype(np.int64) * 256 + ccc, kind="stable")
    return found.take(order), ccc.take(order), origin.take(order), bad


def _expanded(
    codes: NDArray[np.uint32], found: NDArray[np.uint32], at: list[int], fold: NDArray[np.uint32]
) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
    """``codes`` with the characters at ``at`` replaced by their expansions' lists, and where
    each character came from."""
    parts: list[NDArray[np.uint32]] = []
    lengths = np.ones(len(codes), dtype=np.int64)
    done = 0
    for i in at:
        start = int(found[i] & _LOW)
        lengths[i] = int(fold[start])
        parts += [codes[done:i], fold[start + 1 : start + 1 + lengths[i]]]
        done = i + 1
    parts.append(codes[done:])
    return np.concatenate(parts), np.repeat(np.arange(len(codes), dtype=np.int64), lengths)
