"""Decontamination windows: which runs of words are a text's protected n-grams
(docs/algorithm.md section 5).

Under ``words`` a window is ``n`` consecutive words, exactly as the contract says. Under
``multilingual`` a word covers a different amount of text in every script (one Thai grapheme
cluster is about a sixth of an English word, one Tamil word about a word and a half), so every
word weighs ``WEIGHT_UNIT``-ths of an English word by the script of its first character: a
word of a script of ``SCRIPT_WEIGHTS`` weighs that script's weight, a grapheme cluster of a
script of ``CHARACTER_WEIGHTS`` (the Brahmic scripts written without spaces) weighs that
script's weight per code point of the cluster. The window starting at each word is the
shortest run of words from it whose weights add up to ``n`` English words
(``n * WEIGHT_UNIT``); a text whose remaining words weigh less has no window starting there.
A window depends on its own words alone, so a quoted passage makes the same windows in an eval
set and in the corpus quoting it. A window is its words joined by single spaces, as an n-gram
of ``words`` is, and hashed alike.

Whole items (``weighted-3``): the unspaced scripts' windows are about the catalogs' mean text
of ``n`` English words, so the tersest translation of an ``n``-word item holds none. A
protected text with no window whose words weigh at least ``n * WEIGHT_UNIT`` by
``FLOOR_WEIGHTS`` (heavier than the window weights in the unspaced scripts alone, so a text of
spaced scripts only never qualifies) is protected as a whole: its words joined by single
spaces are its one n-gram, and a text holding all its words in a row matches it. A text finds
it by its anchor: its shortest first run of words weighing ``anchor_weight(n)``, a window of
that weight, looked up at every word.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache

import numpy as np
from numpy.typing import NDArray

from neardup.core._text import ngrams

__all__ = [
    "CHARACTER_WEIGHTS",
    "FLOOR_WEIGHTS",
    "SCRIPT_WEIGHTS",
    "WEIGHT_UNIT",
    "WINDOWS_REVISION",
    "anchor_weight",
    "buffer_weights",
    "floor_weights",
    "is_whole",
    "protected_grams",
    "text_grams",
    "window_ends",
    "window_grams",
    "window_version",
    "windows",
    "word_weights",
]

#: Weights are whole numbers of this fraction of an English word (fixed point: integer sums,
#: the same on every machine and in every engine).
WEIGHT_UNIT = 64
#: The revision of the weights' definition; with it, what reports and manifests record
#: (``weighted-1``: every word weighed by its script alone; ``weighted-2``: clusters of
#: ``CHARACTER_WEIGHTS``' scripts by their code points; ``weighted-3``: the unspaced scripts'
#: windows longer, and short texts protected whole by ``FLOOR_WEIGHTS``).
WINDOWS_REVISION = 3

#: (name, weight in WEIGHT_UNIT-ths of an English word, code-point ranges (inclusive)) of
#: every script whose words are not one English word each, by the first character of a word of
#: the normalized text; every other word (Latin, digits, ...) weighs WEIGHT_UNIT. Measured on
#: the gettext catalogs (``python -m bench.multilingual.ratios``: words of the translation per
#: word of its English source, over every message), then lowered by about a sixth so that a
#: quote of 13 English words holds a whole window even where its translation is terser than
#: the catalog's mean; docs/algorithm.md section 5 gives the figures. Scripts of the same family
#: without a catalog here take the family's weight (Indic scripts Bengali's and Tamil's mean).
#: Han and kana (``weighted-3``): windows of about 20 English words' worth at the weights of
#: ``weighted-2`` (59 and 24), as the scripts of CHARACTER_WEIGHTS: a terse item is caught
#: whole (FLOOR_WEIGHTS).
SCRIPT_WEIGHTS: tuple[tuple[str, int, tuple[tuple[int, int], ...]], ...] = (
    ("Han", 38, ((0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),
                 (0x3100, 0x312F), (0x31A0, 0x31BF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
                 (0xF900, 0xFAFF), (0x20000, 0x3FFFF))),
    ("Kana", 16, ((0x3041, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F), (0x1B000, 0x1B16F))),
    ("Hangul", 125, ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7FF))),
    ("Arabic", 128, ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF),
                    (0xFE70, 0xFEFF))),
    ("Hebrew", 130, ((0x0590, 0x05FF), (0xFB1D, 0xFB4F))),
    ("Devanagari", 98, ((0x0900, 0x097F), (0xA8E0, 0xA8FF))),
    ("Bengali", 114, ((0x0980, 0x09FF),)),
    ("Indic", 117, ((0x0A00, 0x0B7F), (0x0C00, 0x0D7F))),
    ("Tamil", 141, ((0x0B80, 0x0BFF),)),
    ("Sinhala", 117, ((0x0D80, 0x0DFF),)),
    ("Cyrillic", 114, ((0x0400, 0x052F), (0x1C80, 0x1C8F), (0x2DE0, 0x2DFF), (0xA640, 0xA69F))),
    ("Greek", 98, ((0x0370, 0x03FF), (0x1F00, 0x1FFF))),
)  # fmt: skip

#: (name, weight per code point in WEIGHT_UNIT-ths of an English word, code-point ranges) of
#: the Brahmic scripts written without spaces, whose words are grapheme clusters of one to five
#: code points (a consonant alone, or with vowel signs, tone marks, subscripts): a cluster
#: weighs its code points times the weight, so a run of clusters weighs its code points
#: whatever the cluster boundaries, and a consonant with three marks is no more "one word"
#: than a bare one. ``weighted-3``: 12/64 each, a window of 70 code points, about the
#: catalogs' mean text of 13 English words (Thai 70, Khmer 81, Burmese 80 code points): the
#: weights of ``weighted-2`` (19, 19, 19, 20, 18: the least catching the tersest quotes) times
#: 13/20, rounded (Burmese 13/22), swept on seeds 1 to 5 of ``python -m
#: bench.multilingual.whole`` (Tibetan on Dzongkha's catalogs; Lao, without enough text here,
#: takes Thai's); the figures reported (docs/algorithm.md section 5) are of other seeds.
CHARACTER_WEIGHTS: tuple[tuple[str, int, tuple[tuple[int, int], ...]], ...] = (
    ("Thai", 12, ((0x0E00, 0x0E7F),)),
    ("Lao", 12, ((0x0E80, 0x0EFF),)),
    ("Khmer", 12, ((0x1780, 0x17FF), (0x19E0, 0x19FF))),
    ("Myanmar", 12, ((0x1000, 0x109F), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F))),
    ("Tibetan", 12, ((0x0F00, 0x0FFF),)),
)  # fmt: skip

#: Script name -> its weight (per code point for CHARACTER_WEIGHTS' scripts) when a text with
#: no window is weighed for protection as a whole; every other script weighs its window
#: weight, so only texts with words of these scripts qualify. Each is ``weighted-2``'s weight
#: times 13/9: a whole item is at least 9 English words' worth at those weights, the floor
#: catching every quote on seeds 1 to 5 (10 missed some zh_CN and zh_TW ones).
FLOOR_WEIGHTS: dict[str, int] = {
    "Han": 85, "Kana": 35, "Thai": 27, "Lao": 27, "Khmer": 27, "Myanmar": 29, "Tibetan": 26,
}  # fmt: skip


def window_version(tokenizer: str) -> str:
    """What reports, manifests and ``/v1/config`` record of how windows are made: ``words``
    (``n`` consecutive words, the contract) or ``weighted-3`` (``WINDOWS_REVISION``).

    >>> window_version("words"), window_version("multilingual")
    ('words', 'weighted-3')
    """
    return "words" if tokenizer == "words" else f"weighted-{WINDOWS_REVISION}"


@cache
def weight_table(floor: bool = False) -> NDArray[np.int64]:
    """The weight of a word by its first code point (every code point), built once a process:
    a script of ``SCRIPT_WEIGHTS`` its weight, one of ``CHARACTER_WEIGHTS`` minus its weight
    per code point (the sign says "times the word's code points"), any other ``WEIGHT_UNIT``;
    ``floor``: ``FLOOR_WEIGHTS``' where it names the script."""
    table = np.full(0x110000, WEIGHT_UNIT, dtype=np.int64)
    for name, weight, ranges in SCRIPT_WEIGHTS:
        for lo, hi in ranges:
            table[lo : hi + 1] = FLOOR_WEIGHTS.get(name, weight) if floor else weight
    for name, weight, ranges in CHARACTER_WEIGHTS:
        for lo, hi in ranges:
            table[lo : hi + 1] = -(FLOOR_WEIGHTS.get(name, weight) if floor else weight)
    return table


@cache
def anchor_weight(n: int) -> int:
    """The weight of a whole item's anchor: the most that every text weighing ``n`` English
    words by ``FLOOR_WEIGHTS`` weighs by the window weights (each script's ratio of the two,
    the least of them).

    >>> anchor_weight(13)  # Burmese: 13 * 64 * 12 / 29
    344
    """
    scripts = (*SCRIPT_WEIGHTS, *CHARACTER_WEIGHTS)
    return min(n * WEIGHT_UNIT * w // FLOOR_WEIGHTS.get(name, w) for name, w, _ in scripts)


def _weigh(by_first: NDArray[np.int64], code_points: NDArray[np.int64]) -> NDArray[np.int64]:
    """Every word's weight from ``weight_table``'s entry of its first code point and its
    length in code points."""
    found: NDArray[np.int64] = np.where(by_first < 0, -by_first * code_points, by_first)
    return found


def word_weights(words: Sequence[str], floor: bool = False) -> NDArray[np.int64]:
    """The weight of every word (none empty) of a text (``floor``: by ``FLOOR_WEIGHTS``)."""
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    codes = np.frombuffer("".join(words).encode("utf-32-le"), dtype="<u4")
    return _weigh(weight_table(floor).take(codes[np.cumsum(lengths) - lengths]), lengths)


def floor_weights(words: Sequence[str]) -> NDArray[np.int64]:
    """The weight of every word by ``FLOOR_WEIGHTS`` (their scripts) and the window weights."""
    return word_weights(words, floor=True)


def is_whole(w: Sequence[str], n: int, tokenizer: str = "words") -> bool:
    """Whether a protected text of words ``w`` is protected as a whole (the module says when):
    never under ``words``.

    >>> is_whole(["ก"] * 40, 13, "multilingual"), is_whole(["ก"] * 20, 13, "multilingual")
    (True, False)
    """
    if tokenizer == "words" or not w:
        return False
    need = n * WEIGHT_UNIT
    return int(word_weights(w).sum()) < need <= int(floor_weights(w).sum())


#: By a word's first byte: the bits of it its code point keeps (all of a byte that begins no
#: multi-byte sequence), and how many bytes the code point spans.
_LEAD_BITS = np.array([0xFF] * 0xC0 + [0x1F] * 0x20 + [0x0F] * 0x10 + [0x07] * 0x10, np.int64)
_LEAD_WIDTH = np.array([1] * 0xC0 + [2] * 0x20 + [3] * 0x10 + [4] * 0x10, dtype=np.int8)


def buffer_weights(
    buf: NDArray[np.uint8], word_start: NDArray[np.int64], word_end: NDArray[np.int64]
) -> NDArray[np.int64]:
    """The weight of every word ``buf[word_start:word_end]`` of a ``Tokens`` buffer (UTF-8),
    by the code point its bytes begin, decoded in numpy, and, for the scripts weighed per code
    point only, its code points (its bytes that are no UTF-8 continuation byte)."""
    lead = buf.take(word_start)
    width = _LEAD_WIDTH.take(lead)
    code = _LEAD_BITS.take(lead) & lead
    for i in range(1, 4):
        more = np.flatnonzero(width > i)
        following = buf.take(word_start[more] + i, mode="clip") & 0x3F
        code[more] = (code[more] << 6) | following
    by_first = weight_table().take(code)
    counted = np.flatnonzero(by_first < 0)
    if not len(counted):
        return by_first
    by_first[counted] *= -_code_points(buf, word_start[counted], word_end[counted])
    return by_first


def _code_points(
    buf: NDArray[np.uint8], start: NDArray[np.int64], end: NDArray[np.int64]
) -> NDArray[np.int64]:
    """The code points of every ``buf[start:end]``: its bytes that are no UTF-8 continuation
    byte, counted by one prefix sum over the bytes (int32 where it holds every count: half the
    memory of int64)."""
    wide = np.int32 if len(buf) < 1 << 31 else np.int64
    leads = np.zeros(len(buf) + 1, dtype=wide)
    np.cumsum(np.not_equal(buf & 0xC0, 0x80), out=leads[1:], dtype=wide)
    before: NDArray[np.int64] = leads.take(start).astype(np.int64)
    return leads.take(end).astype(np.int64) - before


def window_ends(
    weights: NDArray[np.int64], doc_words: NDArray[np.int64], n: int, need: int | None = None
) -> NDArray[np.int64]:
    """For every word of a batch (``doc_words`` words a document), one past the last word of
    the window starting at it, or -1 where the rest of its document weighs under ``n`` English
    words: the first end whose weights from the start reach ``n * WEIGHT_UNIT`` (``need``:
    that weight instead, as an anchor's)."""
    total = np.zeros(len(weights) + 1, dtype=np.int64)
    np.cumsum(weights, out=total[1:])
    reach = n * WEIGHT_UNIT if need is None else need
    ends = np.searchsorted(total, total[:-1] + reach, side="left")
    doc_end = np.repeat(np.cumsum(doc_words), doc_words)
    return np.where(ends <= doc_end, ends, -1).astype(np.int64)


def windows(w: Sequence[str], n: int, tokenizer: str = "words") -> list[tuple[int, int]]:
    """``[lo, hi)`` word indices of every window of the word list ``w``, in order (see the
    module docstring): under ``words`` every run of ``n`` words, the last included.

    >>> windows(["a", "b", "c"], 2)
    [(0, 2), (1, 3)]
    >>> windows(["ก"] * 6, 1, "multilingual")  # a Thai code point weighs 12/64 of a word
    [(0, 6)]
    >>> windows(["ดี", "ดี", "ดี", "ก", "ก"], 1, "multilingual")  # two code points: 24/64
    [(0, 3), (1, 5)]
    """
    if tokenizer == "words":
        return [(i, i + n) for i in range(len(w) - n + 1)]
    ends = window_ends(word_weights(w), np.array([len(w)], dtype=np.int64), n)
    found = np.flatnonzero(ends >= 0)
    return list(zip(found.tolist(), ends[found].tolist(), strict=True))


def window_grams(w: Sequence[str], n: int, tokenizer: str = "words") -> list[str]:
    """Every window of ``w`` as its words joined by single spaces (``ngrams`` under ``words``)."""
    return [" ".join(w[lo:hi]) for lo, hi in windows(w, n, tokenizer)]


def protected_grams(w: Sequence[str], n: int, tokenizer: str = "words") -> list[str]:
    """The n-grams a protected text of words ``w`` protects: its windows, or, when it is
    protected as a whole (``is_whole``), its words joined by single spaces."""
    found = window_grams(w, n, tokenizer)
    if not found and is_whole(w, n, tokenizer):
        return [" ".join(w)]
    return found


def text_grams(w: list[str], n: int, tokenizer: str = "words") -> Iterator[str]:
    """``window_grams`` one at a time: under ``words`` lazily (``ngrams``), so that a scan
    stopping at the first match joins no more windows than it reads."""
    if tokenizer == "words":
        return ngrams(w, n)
    return iter(window_grams(w, n, tokenizer))
