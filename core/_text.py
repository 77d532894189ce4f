"""Words, shingles, word n-grams and Jaccard similarity (docs/algorithm.md section 1).

These are the scalar reference definitions; ``core._tokens`` tokenises whole batches at once
and must agree with them exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Set

__all__ = ["WORD_RE", "jaccard", "ngrams", "shingles", "words"]

#: A word is a maximal run of Unicode word characters (``str.isalnum()`` or ``_``).
WORD_RE = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The lower-cased words of ``text``: ``re.findall(r"\\w+", text.lower())``.

    >>> words("The CAT, sat!")
    ['the', 'cat', 'sat']
    """
    return WORD_RE.findall(text.lower())


def shingles(text: str, k: int = 5) -> set[str]:
    """Every run of ``k`` consecutive words, joined by one space.

    A text of 1 to k-1 words is ONE shingle (all its words); a wordless text has none.

    >>> sorted(shingles("the cat sat on the mat today", k=3))[:2]
    ['cat sat on', 'on the mat']
    >>> shingles("just two", k=5)
    {'just two'}
    """
    w = words(text)
    if not w:
        return set()
    if len(w) < k:
        return {" ".join(w)}
    return {" ".join(w[i : i + k]) for i in range(len(w) - k + 1)}


def ngrams(w: list[str], n: int) -> Iterator[str]:
    """Every word n-gram of the word list ``w``, the last window included; none if shorter."""
    for i in range(len(w) - n + 1):
        yield " ".join(w[i : i + n])


def jaccard(a: Set[str], b: Set[str]) -> float:
    """``|a & b| / |a | b|``, and 0.0 when both are empty.

    >>> round(jaccard(shingles("the cat sat on the mat today", 3),
    ...               shingles("the cat sat on the mat again", 3)), 3)
    0.667
    """
    union = len(a | b)
    return len(a & b) / union if union else 0.0
