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

# The append buffer is merged into the sorted arrays once it holds 1/_BUFFER_SHARE of them (or
# _MIN_BUFFER entries): a merge costs O(n), lookups search a short buffer.
_BUFFER_SHARE = 64
_MIN_BUFFER = 4096


class _Band:
    """One band's sorted digests and document numbers, plus an unsorted append buffer."""

    __slots__ = ("buf_keys", "buf_nums", "buffered", "keys", "nums")

    def __init__(self) -> None:
        self.keys = np.empty(0, dtype=np.uint64)
        self.nums = np.empty(0, dtype=np.int32)
        self.buf_keys = np.empty(_MIN_BUFFER, dtype=np.uint64)
        self.buf_nums = np.empty(_MIN_BUFFER, dtype=np.int32)
        self.buffered = 0

    def append(self, keys: NDArray[np.uint64], nums: NDArray[np.int32], merge: bool = True) -> None:
        end = self.buffered + len(keys)
        if end > len(self.buf_keys):
            size = max(end, 2 * len(self.buf_keys))
            self.buf_keys = np.resize(self.buf_keys, size)
            self.buf_nums = np.resize(self.buf_nums, size)
        self.buf_keys[self.buffered : end] = keys
        self.buf_nums[self.buffered : end] = nums
        self.buffered = end
        if merge and self.buffered >= self._limit():
            self.merge()

    def _limit(self) -> int:
        return max(_MIN_BUFFER, len(self.keys) // _BUFFER_SHARE)

    def merge(self) -> None:
        """Insert the (sorted) buffer into the sorted arrays: O(n + b log b), no full re-sort."""
        if not self.buffered:
            return
        order = np.argsort(self.buf_keys[: self.buffered], kind="stable")
        keys = self.buf_keys[: self.buffered][order]
        nums = self.buf_nums[: self.buffered][order]
        at = np.searchsorted(self.keys, keys, side="right")
        self.keys = np.insert(self.keys, at, keys)
        self.nums = np.insert(self.nums, at, nums)
        self.buffered = 0
        if len(self.buf_keys) > 2 * self._limit():  # after a bulk load: give the memory back
            self.buf_keys = np.empty(self._limit(), dtype=np.uint64)
            self.buf_nums = np.empty(self._limit(), dtype=np.int32)

    def lookup(self, keys: NDArray[np.uint64]) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
        """(query index, document number) of every entry whose digest equals a query key."""
        lo = np.searchsorted(self.keys, keys, side="left")
        count = np.searchsorted(self.keys, keys, side="right") - lo
        query = np.repeat(np.arange(len(keys)), count)
        offset = np.arange(len(query)) - np.repeat(np.cumsum(count) - count, count)
        nums = self.nums[np.repeat(lo, count) + offset]
        if not self.buffered:
            return query, nums
        buf_keys = self.buf_keys[: self.buffered]
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        first = np.searchsorted(sorted_keys, buf_keys, side="left")
        last = np.searchsorted(sorted_keys, buf_keys, side="right")
        hits = np.flatnonzero(last > first)
        # A buffered entry matches every equal query key: one pair per (entry, equal key).
        span = last[hits] - first[hits]
        entry = np.repeat(hits, span)
        pos = (
            np.repeat(first[hits], span)
            + np.arange(len(entry))
            - np.repeat(np.cumsum(span) - span, span)
        )
        return (
            np.concatenate([query, order[pos]]),
            np.concatenate([nums, self.buf_nums[entry]]),
        )

    def nbytes(self) -> int:
        return int(
            self.keys.nbytes + self.nums.nbytes + self.buf_keys.nbytes + self.buf_nums.nbytes
        )


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

    def add(self, sigs: NDArray[np.uint32], nums: NDArray[np.int64], merge: bool = True) -> None:
        """Index documents ``nums`` with signatures ``sigs``; empty (all-P) ones are skipped.

        With ``merge=False`` (a bulk load) the buffers only grow; call ``merge()`` at the end.
        """
        live = ~(sigs == MERSENNE31).all(axis=1)
        sigs, nums32 = sigs[live], nums[live].astype(np.int32)
        if len(sigs) == 0:
            return
        digests = self.digests(sigs)
        for band, entry in enumerate(self._bands):
            entry.append(digests[:, band], nums32, merge)

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
