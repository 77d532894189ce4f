"""Which member of a group survives: ``--keep smallest-id | first | longest | max:FIELD``.

A policy is a total order on the rows (ties always go to the smallest id), given as every row's
``preference`` (0 = most preferred). The exact stage keeps the most preferred row of each group
of identical texts; the near stage the most preferred row of each cluster. Both use the same
order, so a cluster's survivor is also the survivor of its own group of identical texts. A
cluster's identity (``minhash_cluster``) stays its smallest id whatever the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from neardup.core.errors import ParameterError

__all__ = ["KEEP_POLICIES", "KeepPolicy", "cluster_survivors", "exact_survivors", "value_ranks"]

#: The policies, as ``--keep`` spells them (``max:`` takes a field name).
KEEP_POLICIES = ("smallest-id", "first", "longest", "max:FIELD")


@dataclass(frozen=True)
class KeepPolicy:
    """One survivor policy: ``kind`` is ``smallest-id``, ``first``, ``longest`` or ``max``;
    ``field`` is the (dotted) field ``max`` compares."""

    kind: str = "smallest-id"
    field: str | None = None

    @classmethod
    def parse(cls, spelled: str) -> KeepPolicy:
        """``"max:quality"`` -> ``KeepPolicy("max", "quality")``; ParameterError otherwise."""
        if spelled in ("smallest-id", "first", "longest"):
            return cls(spelled)
        if spelled.startswith("max:") and spelled[4:].strip():
            return cls("max", spelled[4:].strip())
        raise ParameterError(
            f"--keep {spelled!r} is not a policy; use one of {', '.join(KEEP_POLICIES)}"
        )

    def __str__(self) -> str:
        return f"max:{self.field}" if self.kind == "max" else self.kind

    def preference(
        self,
        id_rank: NDArray[np.int64],
        lengths: NDArray[np.int64] | None = None,
        values: NDArray[np.float64] | None = None,
    ) -> NDArray[np.int64]:
        """Every row's place in this policy's order (rows are in input order).

        Args:
            id_rank: every row's position in id order (the tie-break).
            lengths: text lengths in characters (``longest``).
            values: the ``max`` field per row, NaN where absent (absent comes last).
        """
        n = len(id_rank)
        if self.kind == "smallest-id":
            return id_rank
        if self.kind == "first":
            return np.arange(n, dtype=np.int64)
        if self.kind == "longest":
            if lengths is None:
                raise ParameterError("--keep longest needs the text lengths")
            order = np.lexsort((id_rank, -lengths))
        else:
            if values is None:
                raise ParameterError(f"--keep max:{self.field} needs the field's values")
            absent = np.isnan(values)
            order = np.lexsort((id_rank, -np.where(absent, 0.0, values), absent))
        preference = np.empty(n, dtype=np.int64)
        preference[order] = np.arange(n, dtype=np.int64)
        return preference


def value_ranks(values: Sequence[int | float | None]) -> NDArray[np.float64]:
    """``--keep max:FIELD``'s values as ``preference`` takes them: each value's place among the
    distinct values (0 = smallest), NaN where absent (None or NaN).

    The order is Python's, exact for any mix of integers and floats (``2**70 + 1`` is above
    ``2**70``, which float64 values would tie); the places are small enough to be exact floats.
    """
    present = {v for v in values if v is not None and v == v}
    place = {v: float(i) for i, v in enumerate(sorted(present))}
    return np.array([np.nan if v is None or v != v else place[v] for v in values], dtype=np.float64)


def _best_per_group(
    keys: tuple[NDArray[np.generic], ...], preference: NDArray[np.int64]
) -> NDArray[np.int64]:
    """For every row, the most preferred row with the same ``keys``."""
    n = len(preference)
    order = np.lexsort((preference, *keys))
    first = np.ones(n, dtype=np.bool_)
    if n:
        first[1:] = np.zeros(n - 1, dtype=np.bool_)
        for key in keys:
            k = key[order]
            first[1:] |= k[1:] != k[:-1]
    group = np.cumsum(first) - 1
    best = order[first]
    out = np.empty(n, dtype=np.int64)
    out[order] = best[group]
    return out


def exact_survivors(
    digests: NDArray[np.uint64], preference: NDArray[np.int64]
) -> NDArray[np.int64]:
    """For every row, the row kept from its group of identical texts (identical digests)."""
    return _best_per_group((digests[:, 1], digests[:, 0]), preference)


def cluster_survivors(roots: NDArray[np.int64], preference: NDArray[np.int64]) -> NDArray[np.int64]:
    """For every row, the row kept from its cluster (rows sharing a root)."""
    return _best_per_group((roots,), preference)
