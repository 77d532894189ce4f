"""The copies planted in the corpus: word edits, diacritic-only edits, NFD and full-width forms.

Words are those of the multilingual tokenizer (``word_spans(text, "multilingual")``: a Chinese
or Japanese character, a Thai cluster, a German or a Hindi word), found in the original text.

- ``near_copy``: a share of the words (at least one) each replaced by another word of the text.
- ``diacritic_copy``: a share of the words (at least one) each changed in what a reader does
  not see as another word (``DIACRITICS`` says how, per language); None where no edit is
  defined.
- ``nfd_copy``: the whole text in Unicode NFD (decomposed).
- ``fullwidth_copy``: every ASCII letter, digit and sign as its full-width form (U+FF01 to
  U+FF5E) and every space as the ideographic space U+3000, as CJK input methods type them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import numpy as np

from neardup.core.engine import word_spans

__all__ = [
    "DIACRITICS",
    "FULLWIDTH_LANGUAGES",
    "diacritic_copy",
    "fullwidth_copy",
    "near_copy",
    "nfd_copy",
]

_FATHA, _TATWEEL = "\u064e", "\u0640"
_PATAH, _DAGESH = "\u05b7", "\u05bc"
_ZWNJ, _ZWSP = "\u200c", "\u200b"
_ACUTE = "\u0301"
_VIRAMAS = {"\u094d", "\u09cd", "\u0bcd", "\u0dca"}


def _arabic(word: str, turn: int) -> str:
    """Even turns: a fatha after every Arabic letter (vocalized); odd: a tatweel after the
    first letter (stretched)."""
    if turn % 2 == 0:
        return "".join(c + _FATHA if "\u0621" <= c <= "\u064a" else c for c in word)
    return word[:1] + _TATWEEL + word[1:]


def _hebrew(word: str, turn: int) -> str:
    """A dagesh and a patah after the first letter, a patah after every other letter."""
    out = []
    for i, c in enumerate(word):
        out.append(c)
        if "\u05d0" <= c <= "\u05ea":
            out.append(_DAGESH + _PATAH if i == 0 else _PATAH)
    return "".join(out)


def _stripped(word: str, turn: int) -> str:
    """Every combining mark removed (NFD, marks dropped, NFC): Vietnamese or Greek typed
    without accents."""
    marks = unicodedata.normalize("NFD", word)
    return unicodedata.normalize("NFC", "".join(c for c in marks if not unicodedata.combining(c)))


def _stressed(word: str, turn: int) -> str:
    """A combining acute (stress mark) after the first vowel, as dictionaries and textbooks
    print Russian."""
    for i, c in enumerate(word):
        if c.lower() in "аеёиоуыэюя":
            return word[: i + 1] + _ACUTE + word[i + 1 :]
    return word


def _joined(word: str, turn: int) -> str:
    """A zero-width non-joiner after every virama (the explicit half form), or after the
    first character where there is none."""
    if any(c in _VIRAMAS for c in word):
        return "".join(c + _ZWNJ if c in _VIRAMAS else c for c in word)
    return word[:1] + _ZWNJ + word[1:]


def _spaced(word: str, turn: int) -> str:
    """A zero-width space after the word (a word break marked as Thai, Khmer, Lao and Burmese
    writers mark them)."""
    return word + _ZWSP


#: Per language, the diacritic-only edit of one word (see each function) and its short name.
DIACRITICS: dict[str, tuple[str, Callable[[str, int], str]]] = {
    "ar": ("harakat / tatweel", _arabic),
    "he": ("niqqud", _hebrew),
    "vi": ("accents stripped", _stripped),
    "el": ("accents stripped", _stripped),
    "ru": ("stress marks", _stressed),
    "hi": ("ZWNJ after virama", _joined),
    "bn": ("ZWNJ after virama", _joined),
    "ta": ("ZWNJ after virama", _joined),
    "si": ("ZWNJ after virama", _joined),
    "th": ("ZWSP between words", _spaced),
    "km": ("ZWSP between words", _spaced),
    "my": ("ZWSP between words", _spaced),
    "lo": ("ZWSP between words", _spaced),
    "bo": ("ZWSP between words", _spaced),
}
#: The languages whose copies are also planted in full-width form.
FULLWIDTH_LANGUAGES = ("zh_CN", "zh_TW", "ja", "ko")


def _chosen(count: int, share: float, rng: np.random.Generator) -> list[int]:
    edits = min(count, max(1, round(share * count)))
    return sorted(rng.choice(count, size=edits, replace=False).tolist())


def near_copy(text: str, share: float, rng: np.random.Generator) -> str:
    """``text`` with ``share`` of its multilingual words (at least one) replaced, each by another
    word of the text that differs from it."""
    found, spans = word_spans(text, "multilingual")
    if len(set(found)) < 2:
        return text + " x"
    pieces, pos = [], 0
    for i in _chosen(len(found), share, rng):
        start, end = spans[i]
        other = found[int(rng.integers(len(found)))]
        while other == found[i]:
            other = found[int(rng.integers(len(found)))]
        pieces += [text[pos:start], other]
        pos = end
    return "".join(pieces) + text[pos:]


def diacritic_copy(text: str, language: str, share: float, rng: np.random.Generator) -> str | None:
    """``text`` with ``share`` of its multilingual words (at least one) given the language's
    diacritic-only edit (``DIACRITICS``); None if the language has none. Only words the edit
    changes are drawn."""
    if language not in DIACRITICS:
        return None
    edit = DIACRITICS[language][1]
    found, spans = word_spans(text, "multilingual")
    words = [(s, e) for s, e in spans if edit(text[s:e], 0) != text[s:e]]
    if not words:
        return None
    pieces, pos = [], 0
    for turn, i in enumerate(_chosen(len(words), share * len(found) / len(words), rng)):
        start, end = words[i]
        pieces += [text[pos:start], edit(text[start:end], turn)]
        pos = end
    return "".join(pieces) + text[pos:]


def nfd_copy(text: str) -> str:
    """The text in NFD."""
    return unicodedata.normalize("NFD", text)


_FULLWIDTH = {code: code + 0xFEE0 for code in range(0x21, 0x7F)} | {0x20: 0x3000}


def fullwidth_copy(text: str) -> str:
    """ASCII signs, letters and digits as their full-width forms, spaces as U+3000."""
    return text.translate(_FULLWIDTH)
