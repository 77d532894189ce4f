"""A seeded synthetic corpus for benchmarks.

Words are pseudo-words built from syllables and drawn from a Zipf-like distribution
(``p ~ 1 / rank**1.07``, close to the exponent measured on English text), grouped into
sentences with capitalisation and punctuation so that tokenisation has real work to do.
Everything is drawn from ``numpy.random.default_rng(seed)``, so a seed fixes the corpus.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ZIPF_EXPONENT",
    "doc_id",
    "documents",
    "near_copy",
    "vocabulary",
    "zipf_probabilities",
]

#: The exponent s of the word-frequency law ``p(rank) ~ 1 / rank**s``.
ZIPF_EXPONENT = 1.07

_ONSETS = [
    *("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z"),
    *("bl", "br", "ch", "cl", "cr", "dr", "fl", "fr", "gl", "gr", "pl", "pr", "sh", "sk"),
    *("sl", "sp", "st", "str", "th", "tr", "wh"),
]
_NUCLEI = ["a", "e", "i", "o", "u", "y", "ai", "ea", "ee", "ie", "oa", "oo", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "nt", "rk", "st", "ft"]
_MIN_SYLLABLES = 1
_MAX_SYLLABLES = 4
_MIN_SENTENCE_WORDS = 4
_MAX_SENTENCE_WORDS = 24
_COMMA_RATE = 0.06
_ENDINGS = np.array([".", ".", ".", ".", ".", "?", "!", ";"])


def _pseudo_word(rng: np.random.Generator) -> str:
    """One pseudo-word of 1 to 4 onset-nucleus-coda syllables."""
    syllables = int(rng.integers(_MIN_SYLLABLES, _MAX_SYLLABLES + 1))
    parts = [
        _ONSETS[rng.integers(len(_ONSETS))]
        + _NUCLEI[rng.integers(len(_NUCLEI))]
        + _CODAS[rng.integers(len(_CODAS))]
        for _ in range(syllables)
    ]
    return "".join(parts)


def vocabulary(size: int = 20000, seed: int = 0) -> list[str]:
    """Distinct lowercase pseudo-words, shortest first, so frequent ranks get short words.

    Args:
        size: how many words.
        seed: the seed of ``numpy.random.default_rng``.

    Returns:
        ``size`` distinct words of ASCII letters; the same list for the same arguments.

    Raises:
        ValueError: ``size`` is negative.
    """
    if size < 0:
        raise ValueError(f"size must be non-negative, got {size}")
    return list(_vocabulary(size, seed))


@functools.lru_cache(maxsize=8)
def _vocabulary(size: int, seed: int) -> tuple[str, ...]:
    """``vocabulary``'s words, drawn once a process per arguments (a corpus and the batch
    written from it draw the same ones: ~0.2 s each)."""
    rng = np.random.default_rng(seed)
    seen: dict[str, None] = {}
    while len(seen) < size:
        seen.setdefault(_pseudo_word(rng), None)
    # A stable sort keeps the draw order among words of equal length.
    return tuple(sorted(seen, key=len))


def zipf_probabilities(size: int, exponent: float = ZIPF_EXPONENT) -> NDArray[np.float64]:
    """The normalised probabilities ``1 / rank**exponent`` of ranks ``1..size``.

    Args:
        size: the number of ranks.
        exponent: the Zipf exponent s.

    Returns:
        A float64 array of ``size`` probabilities summing to 1.
    """
    weights: NDArray[np.float64] = 1.0 / np.arange(1, size + 1, dtype=np.float64) ** exponent
    probabilities: NDArray[np.float64] = weights / weights.sum()
    return probabilities


def _sentence_lengths(rng: np.random.Generator, n_words: int) -> list[int]:
    """Sentence lengths that add up to exactly ``n_words``."""
    lengths: list[int] = []
    left = n_words
    while left > 0:
        length = min(left, int(rng.integers(_MIN_SENTENCE_WORDS, _MAX_SENTENCE_WORDS + 1)))
        lengths.append(length)
        left -= length
    return lengths


def _render(words: list[str], rng: np.random.Generator) -> str:
    """Words as sentences: capitalised first words, some commas, varied end punctuation."""
    sentences = []
    pos = 0
    for length in _sentence_lengths(rng, len(words)):
        sentence = words[pos : pos + length]
        pos += length
        commas = np.flatnonzero(rng.random(length - 1) < _COMMA_RATE)
        for i in commas:
            sentence[i] += ","
        sentence[0] = sentence[0].capitalize()
        sentences.append(" ".join(sentence) + str(rng.choice(_ENDINGS)))
    return " ".join(sentences)


def documents(
    n: int,
    *,
    seed: int = 0,
    min_words: int = 150,
    max_words: int = 400,
    vocab_size: int = 20000,
) -> list[str]:
    """``n`` synthetic documents of Zipf-distributed pseudo-words in punctuated sentences.

    Args:
        n: how many documents.
        seed: the seed of ``numpy.random.default_rng``; the vocabulary uses the same seed.
        min_words: the fewest words in a document (inclusive).
        max_words: the most words in a document (inclusive).
        vocab_size: the number of distinct words to draw from.

    Returns:
        ``n`` ASCII documents; the same list for the same arguments.

    Raises:
        ValueError: a count is negative, or ``min_words`` is not in ``1..max_words``.
    """
    if n < 0 or vocab_size < 1:
        raise ValueError(f"n must be >= 0 and vocab_size >= 1, got {n} and {vocab_size}")
    if not 1 <= min_words <= max_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words} and {max_words}")
    words = np.array(vocabulary(vocab_size, seed), dtype=object)
    cdf = np.cumsum(zipf_probabilities(vocab_size))
    rng = np.random.default_rng([seed, 1])
    lengths = rng.integers(min_words, max_words + 1, size=n)
    docs = []
    for length in lengths:
        ranks = np.searchsorted(cdf, rng.random(int(length)) * cdf[-1], side="right")
        ranks = np.minimum(ranks, vocab_size - 1)
        docs.append(_render(list(words[ranks]), rng))
    return docs


def doc_id(num: int) -> str:
    """The id of document number ``num``: ``d`` and eight digits (string order is number order)."""
    return f"d{num:08d}"


def near_copy(
    text: str, rng: np.random.Generator, every: int = 100, vocab: Sequence[str] | None = None
) -> str:
    """``text`` with about one word in ``every`` (at least one) replaced by another word.

    With 5-word shingles a changed word changes up to 5 shingles: at one word in 100, a Jaccard
    of about 0.9.

    Args:
        text: words separated by single spaces.
        rng: the generator of the positions and the replacements.
        every: about one word in this many is replaced.
        vocab: the replacements are drawn from these words; None draws them from ``text``.
    """
    words = text.split(" ")
    source = words if vocab is None else vocab
    changes = min(len(words), max(1, round(len(words) / every)))
    for pos in rng.choice(len(words), size=changes, replace=False).tolist():
        words[pos] = source[int(rng.integers(len(source)))]
    return " ".join(words)
