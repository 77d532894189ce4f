"""The parameters of a run, validated once: ``MinhashParams``.

Every knob has one spelling everywhere (core keywords, settings, JSON fields, CLI flags). The
checks live here and nowhere else; the public functions that take loose keywords
(``signatures(texts, num_perm=...)``) call the same field checks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from neardup.core._banding import lsh_reach
from neardup.core._scripts import tokenizer_version
from neardup.core._text import check_tokenizer
from neardup.core._windows import window_version
from neardup.core.errors import ParameterError

__all__ = ["INDEX_KEYS", "MinhashParams", "check_signature_params"]

_SEED_LIMIT = 2**64

#: The parameters a stored index is built with: signatures and buckets depend on them, so a
#: store refuses to be reopened with other values. (threshold and ngram may change freely.)
#: The tokenizer is one too: it decides the shingles and the protected n-grams; it is recorded
#: with its version (``tokenizer_version``), so another version of it is refused too.
INDEX_KEYS = ("num_perm", "bands", "k", "seed", "tokenizer")


def _at_least_one(name: str, value: int, meaning: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(f"{name} ({meaning}) must be a whole number >= 1, got {value!r}")


def check_signature_params(num_perm: int, seed: int, k: int) -> None:
    """Raise ParameterError unless ``num_perm``, ``seed`` and ``k`` can make signatures."""
    _at_least_one("num_perm", num_perm, "the signature length")
    _at_least_one("k", k, "words per shingle")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < _SEED_LIMIT:
        raise ParameterError(f"seed must be a whole number in [0, 2**64), got {seed!r}")


@dataclass(frozen=True)
class MinhashParams:
    """Signature, banding, confirmation and contamination parameters, checked at construction.

    Args:
        num_perm: signature length (hash functions).
        bands: LSH bands; ``num_perm`` must be a multiple (each band takes ``rows`` entries).
        threshold: a candidate pair is confirmed when its estimate is at least this, in (0, 1].
        k: words per shingle.
        seed: the PCG32 seed of the hash parameters, in [0, 2**64).
        ngram: words per contamination n-gram.
        tokenizer: how a text is cut into words, ``words`` (``\\w+`` runs, the default) or
            ``multilingual`` (a word per grapheme cluster in scripts written without spaces).

    >>> MinhashParams().rows
    8
    >>> MinhashParams(num_perm=100)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    neardup.core.errors.ParameterError: num_perm (100) must be a multiple of bands (16): ...
    """

    num_perm: int = 128
    bands: int = 16
    threshold: float = 0.8
    k: int = 5
    seed: int = 0
    ngram: int = 13
    tokenizer: str = "words"

    def __post_init__(self) -> None:
        check_signature_params(self.num_perm, self.seed, self.k)
        check_tokenizer(self.tokenizer)
        _at_least_one("bands", self.bands, "LSH bands")
        _at_least_one("ngram", self.ngram, "words per contamination n-gram")
        if self.num_perm % self.bands:
            divisors = ", ".join(
                str(d) for d in range(1, self.num_perm + 1) if self.num_perm % d == 0
            )
            raise ParameterError(
                f"num_perm ({self.num_perm}) must be a multiple of bands ({self.bands}): each "
                f"band takes num_perm / bands consecutive entries; pick bands from {divisors}"
            )
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 < t <= 1.0:
            raise ParameterError(f"threshold must be a number in (0, 1], got {t!r}")

    @property
    def rows(self) -> int:
        """Signature entries per band: ``num_perm / bands``."""
        return self.num_perm // self.bands

    @property
    def lsh_threshold(self) -> float:
        """``(1/bands) ** (1/rows)``: the usual approximation of where the S-curve rises
        steepest (0.7071, where p = 0.64, for 16 x 8)."""
        return float((1.0 / self.bands) ** (1.0 / self.rows))

    @property
    def query_floor(self) -> float:
        """The smallest threshold a query may ask for: the bands' reach (``lsh_reach``, where a
        pair is a candidate with probability 1/2), or the confirmation threshold if lower."""
        return min(lsh_reach(self.bands, self.rows), float(self.threshold))

    @property
    def tokenizer_version(self) -> str:
        """The tokenizer with its version, as locks, manifests and reports record it:
        ``words``, or ``multilingual-3@17.0.0`` (docs/algorithm.md section 1a)."""
        return tokenizer_version(self.tokenizer)

    @property
    def window_version(self) -> str:
        """How its decontamination windows are made, as manifests, reports and ``/v1/config``
        record it: ``words`` (``ngram`` words) or ``weighted-3`` (``ngram`` English words' worth
        of words weighed by script, docs/algorithm.md section 5)."""
        return window_version(self.tokenizer)

    def index_params(self) -> dict[str, int | str]:
        """The values a stored index is locked to (``INDEX_KEYS``), the tokenizer with its
        version."""
        locked = {key: getattr(self, key) for key in INDEX_KEYS}
        return {**locked, "tokenizer": self.tokenizer_version}

    def store_params(self) -> dict[str, int | str]:
        """What a service store records and checks: ``index_params`` and the window definition
        (``window_version``), which every replica of one store must share."""
        return {**self.index_params(), "windows": self.window_version}

    def as_dict(self) -> dict[str, Any]:
        """Every field, for manifests and ``/v1/config``."""
        return asdict(self)
