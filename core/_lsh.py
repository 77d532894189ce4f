"""The contract's ``LSH`` (docs/algorithm.md section 3): keys and signatures in, candidate keys out.

A thin face over the engine's one banding implementation (``SignatureIndex`` for inserts and
queries, ``candidate_pairs`` for every pair): band digests, then the band's rows compared, the
band index in every bucket, empty signatures never indexed.
"""

from __future__ import annotations

from numpy.typing import ArrayLike

from neardup.core._banding import (
    as_signature,
    candidate_pairs,
    empty_rows,
    lsh_probability,
    lsh_threshold,
)
from neardup.core._signature_index import SignatureIndex
from neardup.core.errors import ParameterError, SignatureError

__all__ = ["LSH"]


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
        self._index = SignatureIndex(bands * rows, bands)
        self._indexed: list[str] = []  # the key of every indexed (non-empty) signature, by number
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

    def insert(self, key: str, sig: ArrayLike) -> None:
        """Index ``sig`` under ``key``. Raises SignatureError for a repeated key or a bad shape."""
        if key in self._keys:
            raise SignatureError(f"key {key!r} is already inserted")
        row = as_signature(sig, self.num_perm)[None]
        self._keys.add(key)
        if empty_rows(row)[0]:
            return  # an empty document: never indexed, nobody's candidate
        self._indexed.append(key)
        self._index.add(row)

    def query(self, sig: ArrayLike) -> list[str]:
        """The sorted keys sharing at least one band with ``sig``; none for an empty signature."""
        _, reps = self._index.candidates(as_signature(sig, self.num_perm)[None])
        members = (m for rep in reps.tolist() for m in self._index.members(rep))
        return sorted(self._indexed[m] for m in members)

    def candidates(self) -> list[tuple[str, str]]:
        """Every candidate pair once, as (smaller, larger), sorted."""
        pairs = candidate_pairs(self._index.stored(), self.bands)
        keys = self._indexed
        found = (sorted((keys[i], keys[j])) for i, j in pairs.tolist())
        return sorted((a, b) for a, b in found)
