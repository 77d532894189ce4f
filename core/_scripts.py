"""The code-point tables of the ``multilingual`` tokenizer (docs/algorithm.md section 1).

Scripts written without spaces between words (``UNSPACED_SCRIPTS``, by Unicode's Script
property) are cut into one word per grapheme cluster: a letter, mark or number of such a script
(General_Category L, M or N), followed by every continuation after it (Unicode's
Grapheme_Cluster_Break Extend, SpacingMark or ZWJ: Thai, Khmer and Myanmar vowel signs and tone
marks, kana voicing marks, variation selectors). Python's ``unicodedata`` has neither property;
the ``regex`` module has both, and the tables are read off it once a process.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
from numpy.typing import NDArray

__all__ = ["UNSPACED_SCRIPTS", "multilingual_re", "script_tables"]

#: The scripts whose text is written without spaces between words: Chinese (Han, and the
#: Bopomofo of Taiwanese phonetic annotation), Japanese (Han, Hiragana, Katakana), Thai, Lao,
#: Khmer, Myanmar and Tibetan. Hangul is written with spaces and is not among them.
UNSPACED_SCRIPTS = (
    "Han",
    "Hiragana",
    "Katakana",
    "Bopomofo",
    "Thai",
    "Lao",
    "Khmer",
    "Myanmar",
    "Tibetan",
)
_CONTINUATION = ("Extend", "SpacingMark", "ZWJ")
_CODE_POINTS = 0x110000


def _all_code_points() -> str:
    codes = np.arange(_CODE_POINTS, dtype="<u4")
    codes[0xD800:0xE000] = 0  # surrogates: no str encodes them
    return codes.tobytes().decode("utf-32-le")


def _marked(pattern: str, chars: str) -> NDArray[np.bool_]:
    import regex  # only when the multilingual tokenizer first runs

    out = np.zeros(len(chars), dtype=np.bool_)
    for run in regex.finditer(pattern, chars):
        out[run.start() : run.end()] = True
    return out


@cache
def script_tables() -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per code point: whether it starts a word of its own (its Script is one of
    ``UNSPACED_SCRIPTS`` and it is a letter, mark or number), and whether it is a continuation
    (Grapheme_Cluster_Break Extend, SpacingMark or ZWJ); built once a process (~0.1 s)."""
    chars = _all_code_points()
    scripts = "".join(rf"\p{{Script={name}}}" for name in UNSPACED_SCRIPTS)
    breaks = "".join(rf"\p{{Grapheme_Cluster_Break={name}}}" for name in _CONTINUATION)
    unspaced = _marked(f"[{scripts}]+", chars)
    continuation = _marked(f"[{breaks}]+", chars)
    unspaced &= _marked(r"[\p{L}\p{M}\p{N}]+", chars)
    return unspaced, continuation


def _char_class(table: NDArray[np.bool_]) -> str:
    """A regular-expression character class body holding exactly the code points of ``table``."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], table.view(np.int8), [0]))))
    out = []
    for lo, hi in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
        out.append(
            re.escape(chr(lo)) if hi - lo == 1 else f"{re.escape(chr(lo))}-{re.escape(chr(hi - 1))}"
        )
    return "".join(out)


@cache
def multilingual_re() -> re.Pattern[str]:
    """The words of the ``multilingual`` tokenizer in lower-cased text, as one ``re`` pattern:
    a starting character of an unspaced script with the continuations after it, or a maximal
    run of the other word characters (Python's ``\\w``, exactly as the ``words`` tokenizer)."""
    unspaced, continuation = script_tables()
    starts, follows = _char_class(unspaced), _char_class(continuation)
    return re.compile(f"[{starts}][{follows}]*|[^\\W{starts}]+")
