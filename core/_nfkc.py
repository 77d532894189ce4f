"""Unicode normalization at the pinned version (``TABLE_VERSION``), read off the shipped data
(``core._nfkc_build`` writes ``core._nfkc_data``), never off the running Python's
``unicodedata`` or ``str.casefold``: the multilingual tokenizer folds a text the same on every
Python (docs/algorithm.md section 1a).

- ``nfkd``, ``nfkc``: Unicode's normalization forms (UAX #15): each character replaced by its
  full compatibility decomposition (Hangul syllables by rule), runs of combining marks sorted by
  combining class, then (NFKC) canonical composition where a composition's second part occurs.
- ``casefold``: full case folding (CaseFolding.txt, statuses C and F), as ``str.casefold``.
- ``normalize``: the multilingual tokenizer's folding (``core._multilingual.normalize``).

Costs: a text of characters that never join what precedes them (``segment_starts``: most
text) is one ``str.translate``; the other pieces, each such character with the marks after it,
are normalized one by one, remembered (``lru_cache``).
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np
from numpy.typing import NDArray

from neardup.core._scripts import DROPPED_RANGES, TABLE_VERSION

__all__ = [
    "all_chars",
    "casefold",
    "combining_classes",
    "compositions",
    "each",
    "nfkc",
    "nfkd",
    "normalize",
    "segment_starts",
]

#: Nothing at or above decomposes, folds or combines (``core._nfkc_build`` checks it).
TOP = 0x30000
_S_BASE, _L_BASE, _V_BASE, _T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
_L_COUNT, _V_COUNT, _T_COUNT = 19, 21, 28
_S_COUNT = _L_COUNT * _V_COUNT * _T_COUNT


@dataclass(frozen=True)
class _Tables:
    """The decoded data, with what ``nfkc`` and ``normalize`` look up."""

    ccc: NDArray[np.uint8]  # per code point
    classes: dict[str, int]  # the characters of nonzero class
    decompose: dict[int, str]  # ``str.translate`` tables
    fold: dict[int, str]
    pairs: list[tuple[int, int, int]]  # first, second, composite (Hangul's too)
    compose: dict[str, str]  # first + second: composite
    marks: re.Pattern[str]  # two or more characters of nonzero class
    composing: re.Pattern[str]  # a starter, then non-starters and seconds, a second among them


def _decode(data: bytes) -> list[list[list[int]]]:
    """``core._nfkc_build.encode``'s sections, back from its varints."""
    values: list[int] = []
    shift = value = 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            values.append((value >> 1) ^ -(value & 1))
            shift = value = 0
    sections: list[list[list[int]]] = []
    at = 0
    for number in range(4):
        count, at = values[at], at + 1
        entries: list[list[int]] = []
        prev = [0, 0, 0]
        for _ in range(count):
            if number in (0, 2):
                width = 2 if number == 0 else 3
                entry = [v + b for v, b in zip(values[at : at + width], prev, strict=False)]
                at += width
            else:
                step, length = values[at], values[at + 1]
                code = prev[0] + step
                same = prev[1] == length
                parts = [
                    v + (prev[2 + i] + step if same else code)
                    for i, v in enumerate(values[at + 2 : at + 2 + length])
                ]
                at += 2 + length
                entry = [code, length, *parts]
            entries.append(entry)
            prev = entry
        sections.append(entries)
    return sections


def _ranges(codes: list[int]) -> str:
    """The ranges of ``codes`` (sorted), as the inside of a regular-expression class."""
    out: list[str] = []
    start = prev = -2
    for code in [*codes, -3]:
        if code != prev + 1:
            if start >= 0:
                out.append(re.escape(chr(start)))
                if prev > start:
                    out.append("-" + re.escape(chr(prev)))
            start = code
        prev = code
    return "".join(out)


_ASTRAL = "\U00010000-\U0010ffff"


def _char_class(codes: list[int], negate: bool = False) -> str:
    """A regular expression matching one code point of ``codes`` (sorted), or (``negate``) one
    not of them. ``re`` tests a class's ranges above U+FFFF one by one, but those below in one
    lookup: the ranges above are tried only for a character above."""
    bmp = [c for c in codes if c < 0x10000]
    astral = _ranges([c for c in codes if c >= 0x10000])
    if negate:
        tail = f"(?![{astral}])[{_ASTRAL}]" if astral else f"[{_ASTRAL}]"
        return f"(?:[^{_ranges(bmp)}{_ASTRAL}]|{tail})"
    tail = f"|(?=[{_ASTRAL}])[{astral}]" if astral else ""
    return f"(?:[{_ranges(bmp)}]{tail})" if bmp else f"(?:(?=[{_ASTRAL}])[{astral}])"


@cache
def _tables() -> _Tables:
    """The shipped data, decoded once a process."""
    from neardup.core._nfkc_data import DATA, UNICODE_VERSION

    if UNICODE_VERSION != TABLE_VERSION:
        raise AssertionError(
            f"shipped normalization data {UNICODE_VERSION}, expected {TABLE_VERSION}"
        )
    classes, decompositions, compositions, folds = _decode(
        zlib.decompress(base64.b64decode("".join(DATA)))
    )
    ccc = np.zeros(0x110000, dtype=np.uint8)
    for code, value in classes:
        ccc[code] = value
    decompose = {e[0]: "".join(map(chr, e[2:])) for e in decompositions}
    pairs = [(a, b, c) for a, b, c in compositions]
    for s in range(_S_COUNT):
        l_part, v_part, t_part = (
            s // (_V_COUNT * _T_COUNT),
            (s // _T_COUNT) % _V_COUNT,
            s % _T_COUNT,
        )
        lv = _S_BASE + s - t_part
        decompose[_S_BASE + s] = (
            chr(_L_BASE + l_part)
            + chr(_V_BASE + v_part)
            + (chr(_T_BASE + t_part) if t_part else "")
        )
        pairs.append(
            (lv, _T_BASE + t_part, _S_BASE + s)
            if t_part
            else (_L_BASE + l_part, _V_BASE + v_part, lv)
        )
    seconds = sorted({b for _, b, _ in pairs})
    nonzero = [code for code, _ in classes]
    others = sorted(set(nonzero) - set(seconds))
    either = sorted(set(nonzero) | set(seconds))
    return _Tables(
        ccc=ccc,
        classes={chr(code): value for code, value in classes},
        decompose=decompose,
        fold={e[0]: "".join(map(chr, e[2:])) for e in folds},
        pairs=pairs,
        compose={chr(a) + chr(b): chr(c) for a, b, c in pairs},
        marks=re.compile(_char_class(nonzero) + "{2,}"),
        composing=re.compile(
            f"{_char_class(either, negate=True)}?{_char_class(others)}*"
            f"{_char_class(seconds)}{_char_class(either)}*"
        ),
    )


def combining_classes() -> NDArray[np.uint8]:
    """The canonical combining class of every code point (0 to 0x10FFFF)."""
    return _tables().ccc


def compositions() -> list[tuple[int, int, int]]:
    """Every primary canonical composition (Hangul's too): first part, second, composite."""
    return _tables().pairs


@lru_cache(maxsize=1 << 14)
def _ordered(run: str) -> str:
    """A run of combining marks in canonical order (a stable sort by class)."""
    return "".join(sorted(run, key=_tables().classes.__getitem__))


@lru_cache(maxsize=1 << 16)
def _composed(piece: str) -> str:
    """Canonical composition of a decomposed, ordered ``piece``: its first character, then
    non-starters and characters that are seconds of compositions."""
    tables = _tables()
    classes, compose = tables.classes, tables.compose
    out = [piece[0]]
    starter = 0 if piece[0] not in classes else -1
    last = 0 if starter == 0 else 256
    for char in piece[1:]:
        ccc = classes.get(char, 0)
        if starter >= 0 and (last < ccc or last == 0):
            composite = compose.get(out[starter] + char)
            if composite is not None:
                out[starter] = composite
                continue
        if ccc == 0:
            starter = len(out)
        last = ccc
        out.append(char)
    return "".join(out)


def nfkd(text: str) -> str:
    """``text`` in Normalization Form KD (``unicodedata.normalize("NFKD", text)``)."""
    tables = _tables()
    out = text.translate(tables.decompose)
    return tables.marks.sub(lambda m: _ordered(m.group()), out)


def nfkc(text: str) -> str:
    """``text`` in Normalization Form KC (``unicodedata.normalize("NFKC", text)``)."""
    return _tables().composing.sub(lambda m: _composed(m.group()), nfkd(text))


def casefold(text: str) -> str:
    """``text`` case-folded (``str.casefold`` at the pinned version)."""
    return text.translate(_tables().fold)


# One C scan finds them (``str.translate`` with a dict looks every character up: 5x slower).
_DROP = re.compile("[" + "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
                                 for lo, hi in DROPPED_RANGES) + "]+")  # fmt: skip


def all_chars() -> str:
    """Every code point below ``TOP``, ``a`` for NUL and the surrogates (no str holds a
    surrogate, and ``each`` separates characters with NUL)."""
    codes = np.arange(TOP, dtype="<u4")
    codes[0xD800:0xE000] = ord("a")
    codes[0] = ord("a")
    return codes.tobytes().decode("utf-32-le")


def each(function: Callable[[str], str], chars: str) -> list[str]:
    """``function`` (NFKD, NFKC, case folding, ``normalize`` or a chain of them) of each of
    ``chars`` (no NUL among them), in one call: on those it may change (they decompose, fold
    or are dropped), joined by NUL, which is a starter composing with nothing; each of the
    others is itself."""
    tables = _tables()
    moving = np.zeros(0x110000, dtype=np.bool_)
    moving[list(tables.decompose)] = True
    moving[list(tables.fold)] = True
    for lo, hi in DROPPED_RANGES:
        moving[lo : hi + 1] = True
    out = list(chars)
    at = np.flatnonzero(moving.take(_utf32(chars))).tolist()
    for i, piece in zip(at, function("\0".join(out[i] for i in at)).split("\0"), strict=True):
        out[i] = piece
    return out


def _utf32(text: str) -> NDArray[np.uint32]:
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint32, copy=False)


def _by_definition(text: str) -> str:
    """``normalize`` by its definition: NFKC, case folding, NFKC, then the dropped characters
    removed and NFKC once more if any was."""
    folded = nfkc(casefold(nfkc(text)))
    if _DROP.search(folded) is None:
        return folded
    return nfkc(_DROP.sub("", folded))


_folded = lru_cache(maxsize=1 << 16)(_by_definition)


@dataclass(frozen=True)
class _Segments:
    """What ``normalize`` needs beyond ``_Tables``."""

    starts: NDArray[np.bool_]  # ``segment_starts``
    single: dict[int, str]  # each such character's fold, where it is not itself
    joined: re.Pattern[str]  # a character that is not such a one
    piece: re.Pattern[str]  # such a character (if any) and the others after it


@cache
def _segments() -> _Segments:
    """Built once a process (~0.2 s)."""
    tables = _tables()
    chars = all_chars()
    seconds = np.zeros(0x110000, dtype=np.bool_)
    seconds[[b for _, b, _ in tables.pairs]] = True
    starts = (tables.ccc == 0) & ~seconds
    for lo, hi in DROPPED_RANGES:
        starts[lo : hi + 1] = False
    starts[0xD800:0xE000] = False
    # Where what a character decomposes into, or folds to, begins with a non-starter or a
    # second (U+0F73, U+FF9E), it may join what precedes it.
    heads = each(nfkd, chars), each(_by_definition, chars)
    for pieces in heads:
        first = np.array([ord(p[0]) if p else 0x300 for p in pieces], dtype=np.int64)
        starts[:TOP] &= starts[first]
    starts[0] = True
    single = {
        code: piece for code, piece in enumerate(heads[1]) if starts[code] and piece != chars[code]
    }
    outside = np.flatnonzero(~starts).tolist()
    return _Segments(
        starts=starts,
        single=single,
        joined=re.compile(_char_class(outside)),
        piece=re.compile(f"{_char_class(outside, negate=True)}?{_char_class(outside)}+"),
    )


def segment_starts() -> NDArray[np.bool_]:
    """Per code point, whether normalizing a text never joins it to what precedes it: a
    starter, the second part of no composition, not dropped, and what it decomposes into and
    what it folds to begin with such a one. ``normalize`` of a text cut before such
    characters is the pieces' ``normalize`` one after another."""
    return _segments().starts


def normalize(text: str) -> str:
    """``text`` as the multilingual tokenizer reads it: NFKC, case folding, NFKC, then the
    characters of ``DROPPED_RANGES`` removed (and NFKC once more if any was).

    >>> normalize("Ｃａｆé ﬁ ẞ")
    'café fi ss'
    """
    if text.isascii():
        return text.lower()
    segments = _segments()
    if segments.joined.search(text) is None:
        return text.translate(segments.single)
    out: list[str] = []
    at = 0
    for match in segments.piece.finditer(text):
        out.append(text[at : match.start()].translate(segments.single))
        out.append(_folded(match.group()))
        at = match.end()
    out.append(text[at:].translate(segments.single))
    return "".join(out)
