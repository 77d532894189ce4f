"""The service's clusters: an incremental union-find over document numbers, rooted at the
smallest id, with the confirmed pairs kept so a deletion can recompute its cluster."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from core.unionfind import UnionFind, min_label_components

__all__ = ["ClusterState"]


class ClusterState:
    """Clusters of documents numbered 0, 1, ...; ``ids[num]`` gives the id that orders roots.

    Args:
        ids: the id of every document number (shared with the index, appended by it).
    """

    def __init__(self, ids: list[str]) -> None:
        self._ids = ids
        self._parent = np.zeros(0, dtype=np.int32)
        #: members of every cluster of two or more, by root number
        self.members: dict[int, list[int]] = {}
        #: confirmed pairs: neighbour number -> estimate, both ways
        self.pairs: dict[int, dict[int, float]] = {}

    def grow(self, count: int) -> None:
        """Make room for documents up to number ``count - 1``; new ones are singletons."""
        old = len(self._parent)
        if count <= old:
            return
        parent = np.empty(max(count, 2 * old), dtype=np.int32)
        parent[:old] = self._parent
        parent[old:] = np.arange(old, len(parent), dtype=np.int32)
        self._parent = parent

    def find(self, x: int) -> int:
        """The root number of ``x``'s cluster (path halving)."""
        parent = self._parent
        while (p := int(parent[x])) != x:
            grand = int(parent[p])
            parent[x] = grand
            x = grand
        return x

    def union(self, x: int, y: int, estimate: float) -> None:
        """Record the confirmed pair and merge the clusters; the smaller id becomes the root."""
        self.pairs.setdefault(x, {})[y] = estimate
        self.pairs.setdefault(y, {})[x] = estimate
        rx, ry = self.find(x), self.find(y)
        if rx == ry:
            return
        if self._ids[ry] < self._ids[rx]:
            rx, ry = ry, rx
        self._parent[ry] = rx
        merged = self.members.pop(rx, [rx]) + self.members.pop(ry, [ry])
        self.members[rx] = merged

    def remove(self, x: int) -> list[int]:
        """Take ``x`` out; its cluster is recomputed from the remaining confirmed pairs.

        Returns the numbers whose root may have changed.
        """
        root = self.find(x)
        group = [m for m in self.members.pop(root, [x]) if m != x]
        for other in self.pairs.pop(x, {}):
            self.pairs[other].pop(x, None)
            if not self.pairs[other]:
                del self.pairs[other]
        self._parent[x] = x
        uf: UnionFind[str] = UnionFind(self._ids[m] for m in group)
        for m in group:
            for other in self.pairs.get(m, {}):
                uf.union(self._ids[m], self._ids[other])
        num_of = {self._ids[m]: m for m in group}
        for root_id, member_ids in uf.groups().items():
            new_root = num_of[root_id]
            nums = [num_of[i] for i in member_ids]
            for m in nums:
                self._parent[m] = new_root
            if len(nums) > 1:
                self.members[new_root] = nums
        return group

    def load(self, count: int, pairs: Sequence[tuple[int, int, float]]) -> None:
        """Rebuild from stored pairs (after a restart), vectorised."""
        self.grow(count)
        rank_order = np.argsort(np.array(self._ids[:count], dtype=object), kind="stable")
        rank = np.empty(count, dtype=np.int64)
        rank[rank_order] = np.arange(count)
        left = np.array([p[0] for p in pairs], dtype=np.int64)
        right = np.array([p[1] for p in pairs], dtype=np.int64)
        for a, b, est in pairs:
            self.pairs.setdefault(a, {})[b] = est
            self.pairs.setdefault(b, {})[a] = est
        root_rank = min_label_components(count, rank[left], rank[right])
        roots: NDArray[np.int64] = rank_order[root_rank[rank]]
        self._parent[:count] = roots
        self.members = {}
        for num in np.flatnonzero(roots != np.arange(count)).tolist():
            root = int(roots[num])
            self.members.setdefault(root, [root]).append(num)

    def nbytes(self) -> int:
        """Memory of the parent array (pairs and members are a small share: duplicates only)."""
        return int(self._parent.nbytes)
