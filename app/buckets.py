"""LSH buckets in numpy: per band, a sorted array of 64-bit band digests and the document numbers.

No Python object per entry: 12 bytes a document a band (a uint64 digest, an int32 number), plus
an append buffer merged in batches. A digest match is only a lead; the caller compares the band's
rows before treating two documents as candidates, so a digest collision is never a candidate.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from core.cluster import band_digest
from core.hashing import MERSENNE31

__all__ = ["BandBuckets"]

# The append buffer is merged into the sorted arrays once it holds this share of them (or at
# least _MIN_BUFFER entries): inserts cost amortised O(log n), lookups scan a short buffer.
_BUFFER_SHARE = 8
_MIN_BUFFER = 4096


class _Band:
    """One band's sorted digests and document numbers, plus the unsorted buffer."""

    __slots__ = ("buf_keys", "buf_nums", "keys", "nums")

    def __init__(self) -> None:
        self.keys = np.empty(0, dtype=np.uint64)
        self.nums = np.empty(0, dtype=np.int32)
        self.buf_keys: list[NDArray[np.uint64]] = []
        self.buf_nums: list[NDArray[np.int32]] = []

    def buffered(self) -> int:
        return sum(len(k) for k in self.buf_keys)

    def merge(self) -> None:
        if not self.buf_keys:
            return
        keys = np.concatenate([self.keys, *self.buf_keys])
        nums = np.concatenate([self.nums, *self.buf_nums])
        order = np.argsort(keys, kind="stable")
        self.keys, self.nums = keys[order], nums[order]
        self.buf_keys, self.buf_nums = [], []

    def lookup(self, keys: NDArray[np.uint64]) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
        """(query index, document number) of every entry whose digest equals a query key."""
        lo = np.searchsorted(self.keys, keys, side="left")
        hi = np.searchsorted(self.keys, keys, side="right")
        count = hi - lo
        query = np.repeat(np.arange(len(keys)), count)
        offset = np.arange(len(query)) - np.repeat(np.cumsum(count) - count, count)
        nums = self.nums[np.repeat(lo, count) + offset]
        if not self.buf_keys:
            return query, nums
        buf_keys = np.concatenate(self.buf_keys)
        buf_nums = np.concatenate(self.buf_nums)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        pos = np.searchsorted(sorted_keys, buf_keys, side="left")
        extra_q: list[NDArray[np.int64]] = []
        extra_n: list[NDArray[np.int32]] = []
        # Each buffered entry can match several equal query keys: walk the runs.
        while True:
            hit = pos < len(sorted_keys)
            hit[hit] = sorted_keys[pos[hit]] == buf_keys[hit]
            if not hit.any():
                break
            extra_q.append(order[pos[hit]])
            extra_n.append(buf_nums[hit])
            pos = np.where(hit, pos + 1, len(sorted_keys))
        return np.concatenate([query, *extra_q]), np.concatenate([nums, *extra_n])

    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.nums.nbytes) + 12 * self.buffered()


class BandBuckets:
    """The LSH buckets of every band.

    Args:
        bands: how many bands.
        rows: signature entries per band.
    """

    def __init__(self, bands: int, rows: int) -> None:
        self.bands = bands
        self.rows = rows
        self._bands = [_Band() for _ in range(bands)]

    def digests(self, sigs: NDArray[np.uint32]) -> NDArray[np.uint64]:
        """``[len(sigs), bands]`` band digests."""
        out = np.empty((len(sigs), self.bands), dtype=np.uint64)
        for band in range(self.bands):
            out[:, band] = band_digest(sigs[:, band * self.rows : (band + 1) * self.rows])
        return out

    def add(self, sigs: NDArray[np.uint32], nums: NDArray[np.int64]) -> None:
        """Index documents ``nums`` with signatures ``sigs``; empty (all-P) ones are skipped."""
        live = ~(sigs == MERSENNE31).all(axis=1)
        sigs, nums32 = sigs[live], nums[live].astype(np.int32)
        if len(sigs) == 0:
            return
        digests = self.digests(sigs)
        for band, entry in enumerate(self._bands):
            entry.buf_keys.append(digests[:, band].copy())
            entry.buf_nums.append(nums32)
            if entry.buffered() >= max(_MIN_BUFFER, len(entry.keys) // _BUFFER_SHARE):
                entry.merge()

    def merge(self) -> None:
        """Merge every append buffer (after a bulk load)."""
        for entry in self._bands:
            entry.merge()

    def leads(
        self, sigs: NDArray[np.uint32]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """(query row, document number, band) of every digest match; empty rows have none.

        A lead becomes a candidate once the band's rows are compared equal.
        """
        live = np.flatnonzero(~(sigs == MERSENNE31).all(axis=1))
        if len(live) == 0:
            none = np.empty(0, dtype=np.int64)
            return none, none, none
        digests = self.digests(sigs[live])
        queries: list[NDArray[np.int64]] = []
        nums: list[NDArray[np.int64]] = []
        bands: list[NDArray[np.int64]] = []
        for band, entry in enumerate(self._bands):
            q, n = entry.lookup(digests[:, band])
            queries.append(live[q])
            nums.append(n.astype(np.int64))
            bands.append(np.full(len(q), band, dtype=np.int64))
        return np.concatenate(queries), np.concatenate(nums), np.concatenate(bands)

    def nbytes(self) -> int:
        """Memory held by the buckets."""
        return sum(entry.nbytes() for entry in self._bands)
