"""The code-point table of the ``multilingual`` tokenizer (docs/algorithm.md section 1),
generated once at a pinned Unicode version (``core._unicode_build`` writes
``core._unicode_data``) and shipped in the package: the tokenizer never depends on the installed
``regex``, nor (its normalization data shipped too: ``core._nfkc``) on Python's ``unicodedata``.

Each code point has one uint16 of bits: its Grapheme_Cluster_Break (UAX #29) in the low four,
its Indic_Conjunct_Break in the next two, then whether it is word material (General_Category L,
M or N, or ``_``), whether its Script is one of ``UNSPACED_SCRIPTS``, and whether it is dropped
before words are read (``DROPPED_RANGES``).
"""

from __future__ import annotations

import base64
import zlib
from functools import cache

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DROPPED_RANGES",
    "TABLE_VERSION",
    "UNSPACED_SCRIPTS",
    "char_classes",
    "tokenizer_name",
    "tokenizer_version",
]

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

#: Code points (inclusive ranges) dropped from the normalized text before words are read:
#: what a reader does not see as another word. Invisible format characters (soft hyphen,
#: combining grapheme joiner, Mongolian free variation selectors, ZWNJ, ZWJ, word joiner,
#: variation selectors, the byte-order mark), Hebrew cantillation and niqqud (points, dagesh,
#: shin and sin dots, rafe, meteg), and Arabic harakat, tanween, sukun, shadda, superscript
#: alef, tatweel and the Quranic annotation marks.
DROPPED_RANGES = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x0591, 0x05BD),  # Hebrew cantillation marks and points (to meteg)
    (0x05BF, 0x05BF),  # Hebrew rafe
    (0x05C1, 0x05C2),  # Hebrew shin and sin dots
    (0x05C4, 0x05C5),  # Hebrew upper and lower dots
    (0x05C7, 0x05C7),  # Hebrew qamats qatan
    (0x0610, 0x061A),  # Arabic small high marks
    (0x0640, 0x0640),  # Arabic tatweel
    (0x064B, 0x065F),  # Arabic harakat: tanween, fatha, damma, kasra, shadda, sukun, ...
    (0x0670, 0x0670),  # Arabic superscript alef
    (0x06D6, 0x06DC),  # Arabic Quranic annotation marks
    (0x06DF, 0x06E4),
    (0x06E7, 0x06E8),
    (0x06EA, 0x06ED),
    (0x08CA, 0x08E1),  # Arabic Extended-A/B marks
    (0x08E3, 0x08FF),
    (0x180B, 0x180F),  # Mongolian free variation selectors
    (0x200C, 0x200D),  # ZWNJ, ZWJ
    (0x2060, 0x2060),  # word joiner
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFEFF, 0xFEFF),  # byte-order mark (zero-width no-break space)
    (0xE0100, 0xE01EF),  # variation selectors supplement
)

#: Grapheme_Cluster_Break values (low four bits; 0 is Other).
GCB_CODES = {
    "Extend": 1,
    "SpacingMark": 2,
    "Prepend": 3,
    "ZWJ": 4,
    "L": 5,
    "V": 6,
    "T": 7,
    "LV": 8,
    "LVT": 9,
    "Control": 10,
    "CR": 10,
    "LF": 10,
    "Regional_Indicator": 11,
}
EXTEND, SPACING, PREPEND, ZWJ, HL, HV, HT, HLV, HLVT = range(1, 10)
GCB_MASK = 0xF
#: Indic_Conjunct_Break values (two bits from ``INCB_SHIFT``; 0 is None).
INCB_CODES = {"Consonant": 1, "Linker": 2, "Extend": 3}
INCB_SHIFT = 4
CONSONANT, LINKER, INCB_EXTEND = 1, 2, 3
WORD_BIT = 1 << 6
UNSPACED_BIT = 1 << 7
DROP_BIT = 1 << 8

#: The Unicode version of the shipped table; with the tokenizer's revision, what a lock records.
TABLE_VERSION = "17.0.0"
#: The revision of the multilingual tokenizer's definition (1: regex's tables, lower-casing;
#: 2: the shipped table, normalized by the running Python's ``unicodedata``; 3: normalized by
#: the shipped data at ``TABLE_VERSION`` too).
_REVISION = 3


def tokenizer_version(tokenizer: str) -> str:
    """What a lock, manifest or report records of ``tokenizer``: ``words`` (fixed by the
    contract), or ``multilingual-3@17.0.0`` (the definition's revision and the table's
    Unicode version).

    >>> tokenizer_version("multilingual")
    'multilingual-3@17.0.0'
    """
    if tokenizer == "words":
        return tokenizer
    return f"{tokenizer}-{_REVISION}@{TABLE_VERSION}"


def tokenizer_name(recorded: str) -> str:
    """The tokenizer a lock's ``recorded`` value names (``tokenizer_version``'s inverse, for any
    revision): ``multilingual-3@17.0.0``, ``multilingual-2@17.0.0`` and ``multilingual``
    (revision 1, which recorded no version) are all ``multilingual``.

    >>> tokenizer_name("multilingual-3@17.0.0"), tokenizer_name("words")
    ('multilingual', 'words')
    """
    return recorded.partition("-")[0] if "@" in recorded else recorded


@cache
def char_classes() -> NDArray[np.uint16]:
    """The bits of every code point (0 to 0x10FFFF), decoded from the shipped table once a
    process (~10 ms)."""
    from neardup.core._unicode_data import DATA, UNICODE_VERSION

    if UNICODE_VERSION != TABLE_VERSION:
        raise AssertionError(f"shipped table {UNICODE_VERSION}, expected {TABLE_VERSION}")
    raw = zlib.decompress(base64.b64decode("".join(DATA)))
    runs = len(raw) // 6
    starts = np.frombuffer(raw[: 4 * runs], dtype="<u4").astype(np.int64)
    values = np.frombuffer(raw[4 * runs :], dtype="<u2")
    lengths = np.diff(starts, append=0x110000)
    table: NDArray[np.uint16] = np.repeat(values, lengths).astype(np.uint16)
    return table
