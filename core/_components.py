"""Connected components whose root is the member with the smallest key (the smallest id), so the
surviving document is stable whatever the order of the unions.

- Batch: ``min_label_components`` labels every node of a whole edge list at once.
- Incremental: ``Components`` merges edges as they come (path halving, the smaller key's root
  wins) and, when it keeps its edges, repairs a cluster after a node is removed (a chain
  x~y~z that loses y splits into {x} and {z}).

The contract's ``UnionFind`` is a thin face over ``Components``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Components", "min_label_components"]


def min_label_components(
    n: int, left: NDArray[np.int64], right: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Connected components of ``n`` nodes and the edges ``left[i] - right[i]``, vectorised.

    Returns, for every node, the smallest node number in its component: the same partition and
    roots as a ``UnionFind`` over the node numbers, computed by min-label propagation with
    pointer jumping instead of a Python loop per edge.
    """
    label = np.arange(n, dtype=np.int64)
    if len(left) == 0:
        return label
    while True:
        low = np.minimum(label[left], label[right])
        before = label.copy()
        np.minimum.at(label, left, low)
        np.minimum.at(label, right, low)
        # Pointer jumping: follow labels to their labels until they stop moving.
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
        if np.array_equal(label, before):
            return label


class Components:
    """Components of nodes numbered 0, 1, ...; ``keys[num]`` orders roots (smallest wins).

    Args:
        keys: the key (id) of every node number; the owner appends to it as nodes are added.
        keep_edges: remember every linked edge and its estimate, so ``remove`` can recompute a
            cluster; without it ``link`` is ``union``.

    >>> keys = ["b", "c", "a"]
    >>> c = Components(keys)
    >>> c.grow(3)
    >>> c.union(0, 1), c.union(1, 2)
    (0, 2)
    >>> keys[c.find(0)]
    'a'
    """

    def __init__(self, keys: Sequence[Any], *, keep_edges: bool = True) -> None:
        self._keys = keys
        self._keep_edges = keep_edges
        self._parent = np.zeros(0, dtype=np.int32)
        #: members of every cluster of two or more, by root number
        self.members: dict[int, list[int]] = {}
        #: linked edges: neighbour number -> estimate, both ways (with keep_edges)
        self.edges: dict[int, dict[int, float]] = {}

    def grow(self, count: int) -> None:
        """Make room for nodes up to number ``count - 1``; new ones are singletons."""
        old = len(self._parent)
        if count <= old:
            return
        parent = np.empty(max(count, 2 * old), dtype=np.int32)
        parent[:old] = self._parent
        parent[old:] = np.arange(old, len(parent), dtype=np.int32)
        self._parent = parent

    def find(self, x: int) -> int:
        """The root number of ``x``'s component (path halving)."""
        parent = self._parent
        while (p := int(parent[x])) != x:
            grand = int(parent[p])
            parent[x] = grand
            x = grand
        return x

    def union(self, x: int, y: int) -> int:
        """Merge the components of ``x`` and ``y``; returns the root, the smaller key's."""
        rx, ry = self.find(x), self.find(y)
        if rx == ry:
            return rx
        if self._keys[ry] < self._keys[rx]:
            rx, ry = ry, rx
        self._parent[ry] = rx
        self.members[rx] = self.members.pop(rx, [rx]) + self.members.pop(ry, [ry])
        return rx

    def link(self, x: int, y: int, estimate: float) -> int:
        """Record the confirmed edge (with keep_edges) and merge; returns the root."""
        if self._keep_edges and x != y:
            self.edges.setdefault(x, {})[y] = estimate
            self.edges.setdefault(y, {})[x] = estimate
        return self.union(x, y)

    def remove(self, x: int) -> list[int]:
        """Take ``x`` out; its component is recomputed from the remaining edges.

        Returns the other former members, whose root may have changed.
        """
        root = self.find(x)
        group = [m for m in self.members.pop(root, [x]) if m != x]
        for other in self.edges.pop(x, {}):
            self.edges[other].pop(x, None)
            if not self.edges[other]:
                del self.edges[other]
        self._parent[x] = x
        if not group:
            return group
        # Local numbers in key order, so every label is its component's smallest key.
        order = sorted(group, key=self._keys.__getitem__)
        local = {m: i for i, m in enumerate(order)}
        pairs = [(local[m], local[o]) for m in order for o in self.edges.get(m, {}) if o in local]
        edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        labels = min_label_components(len(order), edges[:, 0], edges[:, 1]).tolist()
        for m, label in zip(order, labels, strict=True):
            self._parent[m] = order[label]
            if label != local[m]:
                self.members.setdefault(order[label], [order[label]]).append(m)
        return group

    def load(
        self, count: int, left: NDArray[np.int64], right: NDArray[np.int64], est: NDArray[Any]
    ) -> None:
        """Rebuild from stored edges (after a restart), vectorised."""
        self.grow(count)
        rank_order = np.argsort(np.array(self._keys[:count], dtype=object), kind="stable")
        rank = np.empty(count, dtype=np.int64)
        rank[rank_order] = np.arange(count)
        if self._keep_edges:
            for a, b, e in zip(left.tolist(), right.tolist(), est.tolist(), strict=True):
                if a == b:
                    continue
                self.edges.setdefault(a, {})[b] = e
                self.edges.setdefault(b, {})[a] = e
        root_rank = min_label_components(count, rank[left], rank[right])
        roots: NDArray[np.int64] = rank_order[root_rank[rank]]
        self._parent[:count] = roots
        self.members = {}
        for num in np.flatnonzero(roots != np.arange(count)).tolist():
            root = int(roots[num])
            self.members.setdefault(root, [root]).append(num)

    def nbytes(self) -> int:
        """Memory of the parent array (edges and members are a small share: duplicates only)."""
        return int(self._parent.nbytes)
