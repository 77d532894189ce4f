"""Words, shingles, word n-grams and Jaccard similarity (docs/algorithm.md section 1).

These are the scalar reference definitions; ``core._tokens`` tokenises whole batches at once
and must agree with them exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Set

from neardup.core._multilingual import words_of
from neardup.core.errors import ParameterError

__all__ = [
    "TOKENIZERS",
    "WORD_RE",
    "check_tokenizer",
    "jaccard",
    "ngrams",
    "shingles",
    "word_re",
    "words",
]

#: A word is a maximal run of Unicode word characters (``str.isalnum()`` or ``_``).
WORD_RE = re.compile(r"\w+")
#: The tokenizers: ``words`` (``\w+`` runs, the default) and ``multilingual`` (normalized text,
#: whole orthographic words with their marks, and one word per grapheme cluster in a script
#: written without spaces: ``core._multilingual``).
TOKENIZERS = ("words", "multilingual")


def check_tokenizer(tokenizer: str) -> None:
    """ParameterError unless ``tokenizer`` is one of ``TOKENIZERS``."""
    if tokenizer not in TOKENIZERS:
        raise ParameterError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got {tokenizer!r}")


def word_re(tokenizer: str = "words") -> re.Pattern[str]:
    """The pattern whose matches in the lower-cased text are its words under ``words``; the
    ``multilingual`` tokenizer has none (``core._multilingual``: it normalizes first)."""
    check_tokenizer(tokenizer)
    if tokenizer != "words":
        raise ParameterError(
            "the multilingual tokenizer is no pattern: call words(text, tokenizer)"
        )
    return WORD_RE


def words(text: str, tokenizer: str = "words") -> list[str]:
    """The lower-cased words of ``text``: ``re.findall(r"\\w+", text.lower())``; with
    ``tokenizer="multilingual"``, the words of the text normalized (NFKC, case folding, vowel
    points and invisible joiners dropped): letters with their marks, and every grapheme cluster
    of a script written without spaces a word of its own (docs/algorithm.md section 1).

    >>> words("The CAT, sat!")
    ['the', 'cat', 'sat']
    >>> words("abc中文def สวัสดี हिन्दी", "multilingual")
    ['abc', '中', '文', 'def', 'ส', 'วั', 'ส', 'ดี', 'हिन्दी']
    """
    if tokenizer == "words":
        return WORD_RE.findall(text.lower())
    check_tokenizer(tokenizer)
    return words_of(text)


def shingles(text: str, k: int = 5, tokenizer: str = "words") -> set[str]:
    """Every run of ``k`` consecutive words, joined by one space.

    A text of 1 to k-1 words is ONE shingle (all its words); a wordless text has none.

    >>> sorted(shingles("the cat sat on the mat today", k=3))[:2]
    ['cat sat on', 'on the mat']
    >>> shingles("just two", k=5)
    {'just two'}
    """
    w = words(text, tokenizer)
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
