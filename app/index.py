"""The in-memory index the service queries: signatures, LSH buckets, ids and clusters.

Mutation is planned first (``plan``: pure computation on the current index) and applied after
the store has made the batch durable (``apply``, synchronous), so a reader never sees half a
batch and a failed write leaves the index untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from app.buckets import BandBuckets
from app.clusters import ClusterState
from core.cluster import candidate_pairs, estimates

__all__ = ["Plan", "ServiceIndex"]


@dataclass
class Plan:
    """A batch of new documents, checked against the index and ready to apply."""

    ids: list[str]
    sigs: NDArray[np.uint32]
    nums: list[int]
    #: per new document: (earlier document number, estimate) of its confirmed matches
    matches: list[list[tuple[int, float]]] = field(default_factory=list)

    def pairs(self) -> list[tuple[int, int, float]]:
        """Every confirmed pair of the batch, as (smaller number, larger number, estimate)."""
        return [
            (other, num, est)
            for num, found in zip(self.nums, self.matches, strict=True)
            for other, est in found
        ]


class ServiceIndex:
    """Signatures (uint32, one row per document number), buckets, ids and clusters.

    Args:
        num_perm: signature length.
        bands: LSH bands (rows = num_perm / bands).
        threshold: the confirmation threshold on the estimate.
    """

    def __init__(self, num_perm: int, bands: int, threshold: float) -> None:
        self.num_perm = num_perm
        self.bands = bands
        self.rows = num_perm // bands
        self.threshold = threshold
        self._sigs = np.zeros((0, num_perm), dtype=np.uint32)
        self._alive = np.zeros(0, dtype=np.bool_)
        self.count = 0  # the next document number
        self.ids: list[str] = []
        self.num_of: dict[str, int] = {}
        self._id_chars = 0  # total length of the ids, for nbytes()
        self.version = 0  # bumped by every change, for caches of derived views
        self.buckets = BandBuckets(bands, self.rows)
        self.clusters = ClusterState(self.ids)

    # --- reading ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.num_of)

    def signatures(self, nums: list[int]) -> NDArray[np.uint32]:
        """The stored signatures of those document numbers (a copy)."""
        return self._sigs[np.array(nums, dtype=np.int64)].copy()

    def root_id(self, num: int) -> str:
        """The id of the root of ``num``'s cluster."""
        return self.ids[self.clusters.find(num)]

    def candidates(self, sigs: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Unique (query row, document number) pairs agreeing on every row of some band."""
        q, nums, bands = self.buckets.leads(sigs)
        keep = self._alive[nums] if len(nums) else np.zeros(0, dtype=np.bool_)
        q, nums, bands = q[keep], nums[keep], bands[keep]
        # A digest match is a candidate only when the band's rows really are equal.
        cols = bands[:, None] * self.rows + np.arange(self.rows)
        equal = (sigs[q[:, None], cols] == self._sigs[nums[:, None], cols]).all(axis=1)
        flat = np.unique(q[equal] * np.int64(max(self.count, 1)) + nums[equal])
        return flat // max(self.count, 1), flat % max(self.count, 1)

    def matches(
        self, sigs: NDArray[np.uint32], threshold: float | None = None
    ) -> list[list[tuple[int, float]]]:
        """Per query signature: (document number, estimate) of registered near duplicates."""
        t = self.threshold if threshold is None else threshold
        out: list[list[tuple[int, float]]] = [[] for _ in range(len(sigs))]
        if self.count == 0 or len(sigs) == 0:
            return out
        q, nums = self.candidates(sigs)
        est = estimates(sigs, np.stack((q, nums), axis=1), self._sigs)
        hit = est >= t
        for row, num, e in zip(q[hit].tolist(), nums[hit].tolist(), est[hit].tolist(), strict=True):
            out[row].append((num, e))
        return out

    def sorted_matches(self, found: list[tuple[int, float]]) -> list[tuple[str, float]]:
        """Matches as (id, estimate), by estimate descending then id."""
        return sorted(((self.ids[n], e) for n, e in found), key=lambda m: (-m[1], m[0]))

    # --- writing ------------------------------------------------------------------------------

    def plan(self, ids: list[str], sigs: NDArray[np.uint32]) -> Plan:
        """Number the new documents and find their confirmed matches among everything
        registered before each of them, earlier documents of the same batch included."""
        nums = list(range(self.count, self.count + len(ids)))
        plan = Plan(ids, sigs, nums, self.matches(sigs))
        if len(sigs) > 1:
            pairs = candidate_pairs(sigs, self.bands)
            est = estimates(sigs, pairs)
            hit = est >= self.threshold
            for i, j, e in zip(*pairs[hit].T.tolist(), est[hit].tolist(), strict=True):
                plan.matches[j].append((nums[i], e))
        return plan

    def apply(self, plan: Plan) -> None:
        """Add a planned batch (after it is durable). Synchronous: readers never see half."""
        n = len(plan.ids)
        self.version += 1
        self._reserve(self.count + n)
        nums = np.arange(self.count, self.count + n, dtype=np.int64)
        self._sigs[self.count : self.count + n] = plan.sigs
        self._alive[self.count : self.count + n] = True
        self.ids.extend(plan.ids)
        self.num_of.update(zip(plan.ids, plan.nums, strict=True))
        self._id_chars += sum(map(len, plan.ids))
        self.count += n
        self.clusters.grow(self.count)
        self.buckets.add(plan.sigs, nums)
        for a, b, est in plan.pairs():
            self.clusters.union(a, b, est)

    def remove(self, doc_id: str) -> None:
        """Take a document out (after the store deleted it); its cluster is recomputed."""
        num = self.num_of.pop(doc_id)
        self.version += 1
        self._alive[num] = False
        self.clusters.remove(num)

    def _reserve(self, count: int) -> None:
        if count <= len(self._sigs):
            return
        size = max(count, 2 * len(self._sigs), 1024)
        sigs = np.empty((size, self.num_perm), dtype=np.uint32)
        sigs[: self.count] = self._sigs[: self.count]
        alive = np.zeros(size, dtype=np.bool_)
        alive[: self.count] = self._alive[: self.count]
        self._sigs, self._alive = sigs, alive

    # --- recovery -----------------------------------------------------------------------------

    def load(
        self,
        count: int,
        chunks: Iterable[tuple[list[int], list[str], NDArray[np.uint32]]],
        pairs: list[tuple[int, int, float]],
    ) -> None:
        """Rebuild from the store: documents numbered below ``count`` (with gaps, after
        deletions), a chunk at a time, then the confirmed pairs."""
        self._reserve(count)
        self.ids.extend([""] * count)
        for nums, ids, sigs in chunks:
            rows = np.array(nums, dtype=np.int64)
            self._sigs[rows] = sigs
            self._alive[rows] = True
            for num, doc_id in zip(nums, ids, strict=True):
                self.ids[num] = doc_id
                self.num_of[doc_id] = num
            self._id_chars += sum(map(len, ids))
            self.buckets.add(sigs, rows, merge=False)
        self.count = count
        self.buckets.merge()
        self.clusters.load(count, pairs)

    def nbytes(self) -> int:
        """Approximate memory of the index: arrays exactly, the id map by CPython's sizes."""
        arrays = self._sigs[: self.count].nbytes + self._alive[: self.count].nbytes
        # A str of n ASCII chars is 49 + n bytes; a list slot 8; a dict entry about 100.
        id_bytes = self._id_chars + 157 * len(self.ids)
        return int(arrays + self.buckets.nbytes() + self.clusters.nbytes() + id_bytes)
