"""Union-find whose root is always the smallest member, so the surviving document is stable."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = ["UnionFind", "min_label_components"]


class _Ordered(Hashable, Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


_K = TypeVar("_K", bound=_Ordered)


class UnionFind(Generic[_K]):
    """Disjoint sets whose root is the smallest member (string order for ids), in any union order.

    Rooting by size or by argument order would make the survivor depend on arrival order; here
    the root of a merged set is ``min(root_x, root_y)``, with path halving for speed.

    >>> uf = UnionFind()
    >>> uf.union("b", "c")
    'b'
    >>> uf.union("c", "a")
    'a'
    >>> uf.find("b")
    'a'
    """

    def __init__(self, items: Iterable[_K] = ()) -> None:
        self._parent: dict[_K, _K] = {}
        for item in items:
            self.add(item)

    def add(self, x: _K) -> None:
        """Make ``x`` a singleton if it is not a member yet."""
        self._parent.setdefault(x, x)

    def __contains__(self, x: object) -> bool:
        return x in self._parent

    def __len__(self) -> int:
        return len(self._parent)

    def find(self, x: _K) -> _K:
        """The root of ``x`` (its set's smallest member); an unseen ``x`` becomes a singleton."""
        parent = self._parent
        if x not in parent:
            parent[x] = x
            return x
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, x: _K, y: _K) -> _K:
        """Merge the sets of ``x`` and ``y``; returns the new root, the smaller of the two roots."""
        rx, ry = self.find(x), self.find(y)
        if rx == ry:
            return rx
        if ry < rx:
            rx, ry = ry, rx
        self._parent[ry] = rx
        return rx

    def groups(self) -> dict[_K, set[_K]]:
        """Every set, keyed by its root."""
        out: dict[_K, set[_K]] = {}
        for x in self._parent:
            out.setdefault(self.find(x), set()).add(x)
        return out


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
