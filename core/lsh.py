"""LSH banding over MinHash signatures (CORE.md section 3).

A signature of ``bands * rows`` entries is cut into ``bands`` runs of ``rows`` consecutive
entries; two keys are candidates when they agree on every row of at least one band. Buckets are
kept per band, so equal rows in different bands never meet.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from core.errors import ParameterError, SignatureError
from core.hashing import MERSENNE31

__all__ = ["LSH", "as_signature", "lsh_probability", "lsh_threshold"]


def lsh_threshold(bands: int, rows: int) -> float:
    """The similarity where a pair becomes a candidate with about even odds: ``(1/b) ** (1/r)``."""
    return float((1.0 / bands) ** (1.0 / rows))


def lsh_probability(s: float, bands: int, rows: int) -> float:
    """The chance that a pair of Jaccard ``s`` is a candidate: ``1 - (1 - s**r) ** b``."""
    return float(1.0 - (1.0 - s**rows) ** bands)


def as_signature(sig: ArrayLike, length: int) -> NDArray[np.uint32]:
    """``sig`` as a uint32 vector of ``length`` entries, each in ``[0, P]``; else SignatureError."""
    arr = np.asarray(sig)
    if arr.ndim != 1 or len(arr) != length:
        raise SignatureError(
            f"a signature must have {length} entries (bands * rows), got shape {arr.shape}"
        )
    if arr.dtype.kind not in "iu":
        raise SignatureError(f"signature entries must be integers, got dtype {arr.dtype}")
    if len(arr) and (int(arr.min()) < 0 or int(arr.max()) > MERSENNE31):
        raise SignatureError("signature entries must lie in [0, 2**31 - 1]")
    return arr.astype(np.uint32)


class LSH:
    """Band-indexed buckets of signatures.

    Args:
        bands: how many bands, at least 1.
        rows: entries per band, at least 1; signatures have ``bands * rows`` entries.

    >>> lsh = LSH(bands=16, rows=8)
    >>> round(lsh.threshold, 4), round(lsh.probability(0.8), 4), round(lsh.probability(0.5), 4)
    (0.7071, 0.947, 0.0607)
    """

    def __init__(self, bands: int = 16, rows: int = 8) -> None:
        if bands < 1 or rows < 1:
            raise ParameterError(
                f"bands and rows must both be at least 1, got bands={bands}, rows={rows}; "
                "their product is the signature length (num_perm)"
            )
        self.bands = bands
        self.rows = rows
        self._buckets: list[dict[bytes, list[str]]] = [{} for _ in range(bands)]
        self._keys: set[str] = set()

    @property
    def num_perm(self) -> int:
        """The signature length this index takes."""
        return self.bands * self.rows

    @property
    def threshold(self) -> float:
        """``(1/bands) ** (1/rows)``: 0.7071 for 16 x 8."""
        return lsh_threshold(self.bands, self.rows)

    def probability(self, s: float) -> float:
        """``1 - (1 - s**rows) ** bands``: p(0.8) = 0.9470, p(0.5) = 0.0607 for 16 x 8."""
        return lsh_probability(s, self.bands, self.rows)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def _band_keys(self, sig: ArrayLike) -> list[bytes] | None:
        arr = as_signature(sig, self.num_perm)
        if bool((arr == MERSENNE31).all()):
            return None  # an empty document: never indexed, nobody's candidate
        raw = arr.astype("<u4").tobytes()
        width = 4 * self.rows
        return [raw[i * width : (i + 1) * width] for i in range(self.bands)]

    def insert(self, key: str, sig: ArrayLike) -> None:
        """Index ``sig`` under ``key``. Raises SignatureError for a repeated key or a bad shape."""
        if key in self._keys:
            raise SignatureError(f"key {key!r} is already inserted")
        bands = self._band_keys(sig)
        self._keys.add(key)
        if bands is None:
            return
        for bucket, band in zip(self._buckets, bands, strict=True):
            bucket.setdefault(band, []).append(key)

    def query(self, sig: ArrayLike) -> list[str]:
        """The sorted keys sharing at least one band with ``sig``; none for an empty signature."""
        bands = self._band_keys(sig)
        if bands is None:
            return []
        found: set[str] = set()
        for bucket, band in zip(self._buckets, bands, strict=True):
            found.update(bucket.get(band, ()))
        return sorted(found)

    def candidates(self) -> list[tuple[str, str]]:
        """Every candidate pair once, as (smaller, larger), sorted."""
        pairs: set[tuple[str, str]] = set()
        for bucket in self._buckets:
            for members in bucket.values():
                _add_pairs(pairs, sorted(members))
        return sorted(pairs)


def _add_pairs(pairs: set[tuple[str, str]], members: Sequence[str]) -> None:
    for i, x in enumerate(members):
        for y in members[i + 1 :]:
            pairs.add((x, y))
