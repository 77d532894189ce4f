"""Connected components whose root is the member with the smallest key (the smallest id), so the
surviving document is stable whatever the order of the unions.

- Batch: ``min_label_components`` labels every node of a whole edge list at once.
- Incremental: ``Components`` merges edges as they come (path halving, the smaller key's root
  wins); after a node is removed, its former component is regrouped from roots its owner
  recomputes (a chain x~y~z that loses y splits into {x} and {z}).

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

    >>> keys = ["b", "c", "a"]
    >>> c = Components(keys)
    >>> c.grow(3)
    >>> c.union(0, 1), c.union(1, 2)
    (0, 2)
    >>> keys[c.find(0)]
    'a'
    """

    def __init__(self, keys: Sequence[Any]) -> None:
        self._keys = keys
        self._parent = np.zeros(0, dtype=np.int32)
        #: members of every cluster of two or more, by root number
        self.members: dict[int, list[int]] = {}

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

    def roots(self, nums: NDArray[np.int64]) -> NDArray[np.int64]:
        """The root of every node of ``nums``, by pointer jumping over the whole array."""
        found = self._parent[nums].astype(np.int64)
        while True:
            up = self._parent[found].astype(np.int64)
            if np.array_equal(up, found):
                return found
            found = up

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

    def detach(self, x: int) -> list[int]:
        """Take ``x`` out of its component; returns the other former members, whose roots are
        stale until ``regroup`` gives them their new ones."""
        root = self.find(x)
        group = [m for m in self.members.pop(root, [x]) if m != x]
        self._parent[x] = x
        return group

    def regroup(self, nums: Sequence[int], roots: Sequence[int]) -> None:
        """Set the root of every node of ``nums`` (one whole former component) to ``roots``."""
        for m, root in zip(nums, roots, strict=True):
            self._parent[m] = root
            if m != root:
                self.members.setdefault(root, [root]).append(m)

    def assign(self, roots: NDArray[np.int64]) -> None:
        """Set every node's root at once (a batch clustering, after a restart)."""
        self.grow(len(roots))
        self._parent[: len(roots)] = roots
        self.members = {}
        for num in np.flatnonzero(roots != np.arange(len(roots))).tolist():
            root = int(roots[num])
            self.members.setdefault(root, [root]).append(num)

    def nbytes(self) -> int:
        """Memory of the parent array (members are a small share: duplicates only)."""
        return int(self._parent.nbytes)
