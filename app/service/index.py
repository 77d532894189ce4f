"""The in-memory index the service queries, in terms of document ids: core's incremental
``SignatureIndex`` (signatures and LSH buckets) and ``Components`` (clusters with smallest-id
roots and deletion repair), plus the id of every document number.

Mutation is planned first (``plan``: pure computation on the current index, safe to run off
the event loop) and applied after the store has made the batch durable (``apply``, synchronous),
so a reader never sees half a batch and a failed write leaves the index untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from core.engine import Components, MinhashParams, SignatureIndex, batch_matches

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
    """Documents by id: signatures, buckets and clusters.

    Args:
        params: num_perm, bands and threshold are used.
    """

    def __init__(self, params: MinhashParams) -> None:
        self.params = params
        self.threshold = params.threshold
        self._ids: list[str] = []  # the id of every document number ("" for never-loaded gaps)
        self._num_of: dict[str, int] = {}
        self._id_chars = 0  # total length of the ids, for nbytes()
        self.version = 0  # bumped by every change, for caches of derived views
        self._sigs = SignatureIndex(params.num_perm, params.bands)
        self._clusters = Components(self._ids)

    # --- reading, by id -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._num_of)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._num_of

    def root_of(self, doc_id: str) -> str:
        """The id of the root of ``doc_id``'s cluster (KeyError if unknown)."""
        return self._ids[self._clusters.find(self._num_of[doc_id])]

    def is_root(self, doc_id: str) -> bool:
        """Whether ``doc_id`` is registered and the root of its cluster."""
        num = self._num_of.get(doc_id)
        return num is not None and self._clusters.find(num) == num

    def members(self, root: str) -> list[str]:
        """The sorted member ids of the cluster rooted at ``root`` (just ``root`` if alone)."""
        num = self._num_of[root]
        return sorted(self._ids[m] for m in self._clusters.members.get(num, [num]))

    def clusters_by_size(self, min_size: int = 2) -> dict[str, int]:
        """Root id -> size of every cluster of at least ``min_size`` (>= 2) members."""
        members = self._clusters.members
        return {self._ids[r]: len(m) for r, m in members.items() if len(m) >= max(min_size, 2)}

    def roots(self) -> list[str]:
        """The root id of every cluster, singletons included (unsorted)."""
        find = self._clusters.find
        return [self._ids[n] for n in self._num_of.values() if find(n) == n]

    def earlier_matches(self, doc_id: str) -> list[tuple[str, float]]:
        """The confirmed matches of ``doc_id`` registered before it, best first."""
        num = self._num_of[doc_id]
        found = [(o, e) for o, e in self._clusters.edges.get(num, {}).items() if o < num]
        return self._ranked(found)

    def signatures_of(self, doc_ids: list[str]) -> NDArray[np.uint32]:
        """The stored signatures of those documents (a copy)."""
        return self._sigs.signatures([self._num_of[i] for i in doc_ids])

    def matches(
        self, sigs: NDArray[np.uint32], threshold: float | None = None
    ) -> list[list[tuple[str, float]]]:
        """Per query signature: (id, estimate) of registered near duplicates, best first."""
        t = self.threshold if threshold is None else threshold
        rows, nums, est = self._sigs.matches(sigs, t)
        out: list[list[tuple[int, float]]] = [[] for _ in range(len(sigs))]
        for row, num, e in zip(rows.tolist(), nums.tolist(), est.tolist(), strict=True):
            out[row].append((num, e))
        return [self._ranked(found) for found in out]

    def _ranked(self, found: list[tuple[int, float]]) -> list[tuple[str, float]]:
        """Matches as (id, estimate), by estimate descending then id."""
        return sorted(((self._ids[n], e) for n, e in found), key=lambda m: (-m[1], m[0]))

    # --- writing ------------------------------------------------------------------------------

    def plan(self, ids: list[str], sigs: NDArray[np.uint32]) -> Plan:
        """Number the new documents and find their confirmed matches among everything
        registered before each of them, earlier documents of the same batch included."""
        start = self._sigs.count
        nums = list(range(start, start + len(ids)))
        plan = Plan(ids, sigs, nums, [[] for _ in ids])
        rows, found, est = self._sigs.matches(sigs, self.threshold)
        for row, num, e in zip(rows.tolist(), found.tolist(), est.tolist(), strict=True):
            plan.matches[row].append((num, e))
        later, earlier, est = batch_matches(sigs, self.params.bands, self.threshold)
        for j, i, e in zip(later.tolist(), earlier.tolist(), est.tolist(), strict=True):
            plan.matches[j].append((nums[i], e))
        return plan

    def apply(self, plan: Plan) -> None:
        """Add a planned batch (after it is durable). Synchronous: readers never see half.

        Raises:
            RuntimeError: the index changed since the plan was made.
        """
        if plan.nums and plan.nums[0] != self._sigs.count:
            raise RuntimeError("the index changed between planning and applying a batch")
        self.version += 1
        self._sigs.add(plan.sigs)
        self._ids.extend(plan.ids)
        self._num_of.update(zip(plan.ids, plan.nums, strict=True))
        self._id_chars += sum(map(len, plan.ids))
        self._clusters.grow(self._sigs.count)
        for a, b, est in plan.pairs():
            self._clusters.link(a, b, est)

    def remove(self, doc_id: str) -> None:
        """Take a document out (after the store deleted it); its cluster is recomputed."""
        num = self._num_of.pop(doc_id)
        self.version += 1
        self._sigs.remove(num)
        self._clusters.remove(num)

    def number(self, doc_id: str) -> int | None:
        """The document number of ``doc_id`` (what the store keys rows by), or None."""
        return self._num_of.get(doc_id)

    # --- recovery -----------------------------------------------------------------------------

    def load(
        self,
        count: int,
        chunks: Iterable[tuple[list[int], list[str], NDArray[np.uint32]]],
        pairs: list[tuple[int, int, float]],
    ) -> None:
        """Rebuild from the store: documents numbered below ``count`` (with gaps, after
        deletions), a chunk at a time, then the confirmed pairs."""
        self._ids.extend([""] * count)
        self._sigs.start_load(count)
        for nums, ids, sigs in chunks:
            self._sigs.load(np.array(nums, dtype=np.int64), sigs)
            for num, doc_id in zip(nums, ids, strict=True):
                self._ids[num] = doc_id
                self._num_of[doc_id] = num
            self._id_chars += sum(map(len, ids))
        self._sigs.finish_load()
        edges = np.array([(a, b) for a, b, _ in pairs], dtype=np.int64).reshape(-1, 2)
        est = np.array([e for _, _, e in pairs], dtype=np.float64)
        self._clusters.load(count, edges[:, 0], edges[:, 1], est)

    def nbytes(self) -> int:
        """Approximate memory of the index: arrays exactly, the id map by CPython's sizes."""
        # A str of n ASCII chars is 49 + n bytes; a list slot 8; a dict entry about 100.
        id_bytes = self._id_chars + 157 * len(self._ids)
        return int(self._sigs.nbytes() + self._clusters.nbytes() + id_bytes)
