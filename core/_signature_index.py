"""The incremental index: signatures by document number, their LSH buckets, and the confirmed
matches of new signatures against it (what the service and the reference ``LSH`` query).

Document numbers are given out in order (0, 1, ...); a removed number is never reused. Candidates
come from ``BandBuckets`` digest leads whose band rows compare equal, and are confirmed with the
same ``estimates`` as the batch path.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from core._banding import BandBuckets, candidate_pairs
from core._cluster import estimates

__all__ = ["Matches", "SignatureIndex", "batch_matches"]

#: ``(row, number, estimate)`` arrays: row of the query (or the later batch row), the matched
#: document's number (or the earlier batch row), and the estimate.
Matches = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]


class SignatureIndex:
    """Signatures (uint32, one row per document number), liveness, and band buckets.

    Args:
        num_perm: signature length.
        bands: LSH bands (rows = num_perm / bands).
    """

    def __init__(self, num_perm: int, bands: int) -> None:
        self.num_perm = num_perm
        self.bands = bands
        self.rows = num_perm // bands
        self._sigs = np.zeros((0, num_perm), dtype=np.uint32)
        self._alive = np.zeros(0, dtype=np.bool_)
        self.count = 0  # the next document number
        self.buckets = BandBuckets(bands, self.rows)

    def signatures(self, nums: NDArray[np.int64] | list[int]) -> NDArray[np.uint32]:
        """The stored signatures of those document numbers (a copy)."""
        return self._sigs[np.asarray(nums, dtype=np.int64)].copy()

    def stored(self) -> NDArray[np.uint32]:
        """The signature rows of every number given out so far (a view; removed rows included)."""
        return self._sigs[: self.count]

    def add(self, sigs: NDArray[np.uint32]) -> NDArray[np.int64]:
        """Append documents with these signatures; returns their numbers."""
        nums = np.arange(self.count, self.count + len(sigs), dtype=np.int64)
        self._reserve(self.count + len(sigs))
        self._sigs[nums] = sigs
        self._alive[nums] = True
        self.count += len(sigs)
        self.buckets.add(sigs, nums)
        return nums

    def start_load(self, count: int) -> None:
        """Begin a bulk load (recovery) of documents numbered below ``count``, with gaps where
        documents were deleted: ``load`` each chunk, then ``finish_load``."""
        self._reserve(count)
        self.count = max(self.count, count)

    def load(self, nums: NDArray[np.int64], sigs: NDArray[np.uint32]) -> None:
        """Bulk-load documents at given numbers (below the ``start_load`` count)."""
        self._sigs[nums] = sigs
        self._alive[nums] = True
        self.buckets.add(sigs, nums, merge=False)

    def finish_load(self) -> None:
        """Merge the buckets' append buffers after a bulk load."""
        self.buckets.merge()

    def remove(self, num: int) -> None:
        """Take ``num`` out of every later answer (its bucket entries are skipped)."""
        self._alive[num] = False

    def candidates(self, sigs: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Unique (query row, document number) pairs agreeing on every row of some band."""
        q, nums, bands = self.buckets.leads(sigs)
        keep = self._alive[nums] if len(nums) else np.zeros(0, dtype=np.bool_)
        q, nums, bands = q[keep], nums[keep], bands[keep]
        # A digest match is a candidate only when the band's rows really are equal.
        cols = bands[:, None] * self.rows + np.arange(self.rows)
        equal = (sigs[q[:, None], cols] == self._sigs[nums[:, None], cols]).all(axis=1)
        width = np.int64(max(self.count, 1))
        flat = np.unique(q[equal] * width + nums[equal])
        return flat // width, flat % width

    def matches(self, sigs: NDArray[np.uint32], threshold: float) -> Matches:
        """Confirmed (query row, document number, estimate) of every query signature."""
        if self.count == 0 or len(sigs) == 0:
            return _no_matches()
        q, nums = self.candidates(sigs)
        est = estimates(sigs, np.stack((q, nums), axis=1), self._sigs)
        hit = est >= threshold
        return q[hit], nums[hit], est[hit]

    def _reserve(self, count: int) -> None:
        if count <= len(self._sigs):
            return
        size = max(count, 2 * len(self._sigs), 1024)
        sigs = np.empty((size, self.num_perm), dtype=np.uint32)
        sigs[: self.count] = self._sigs[: self.count]
        alive = np.zeros(size, dtype=np.bool_)
        alive[: self.count] = self._alive[: self.count]
        self._sigs, self._alive = sigs, alive

    def nbytes(self) -> int:
        """Memory of the signatures, liveness flags and buckets."""
        arrays = self._sigs[: self.count].nbytes + self._alive[: self.count].nbytes
        return int(arrays + self.buckets.nbytes())


def batch_matches(sigs: NDArray[np.uint32], bands: int, threshold: float) -> Matches:
    """Confirmed pairs inside one batch: (later row, earlier row, estimate)."""
    if len(sigs) < 2:
        return _no_matches()
    pairs = candidate_pairs(sigs, bands)
    est = estimates(sigs, pairs)
    hit = est >= threshold
    return pairs[hit, 1], pairs[hit, 0], est[hit]


def _no_matches() -> Matches:
    none = np.empty(0, dtype=np.int64)
    return none, none, np.empty(0, dtype=np.float64)
