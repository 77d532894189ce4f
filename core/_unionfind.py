"""The contract's ``UnionFind`` (docs/algorithm.md section 4): a thin face over the engine's
incremental ``Components``, keyed by any ordered hashable value instead of node numbers."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from neardup.core._components import Components

__all__ = ["UnionFind"]


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
        self._keys: list[_K] = []
        self._num: dict[_K, int] = {}
        self._components = Components(self._keys)
        for item in items:
            self.add(item)

    def add(self, x: _K) -> None:
        """Make ``x`` a singleton if it is not a member yet."""
        if x not in self._num:
            self._num[x] = len(self._keys)
            self._keys.append(x)
            self._components.grow(len(self._keys))

    def __contains__(self, x: object) -> bool:
        return x in self._num

    def __len__(self) -> int:
        return len(self._keys)

    def find(self, x: _K) -> _K:
        """The root of ``x`` (its set's smallest member); an unseen ``x`` becomes a singleton."""
        self.add(x)
        return self._keys[self._components.find(self._num[x])]

    def union(self, x: _K, y: _K) -> _K:
        """Merge the sets of ``x`` and ``y``; returns the new root, the smaller of the two roots."""
        self.add(x)
        self.add(y)
        return self._keys[self._components.union(self._num[x], self._num[y])]

    def groups(self) -> dict[_K, set[_K]]:
        """Every set, keyed by its root."""
        out: dict[_K, set[_K]] = {}
        for num, x in enumerate(self._keys):
            out.setdefault(self._keys[self._components.find(num)], set()).add(x)
        return out
