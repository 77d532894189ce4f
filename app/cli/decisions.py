"""What happens to every row of a batch run, decided from the signature pass's arrays.

The exact stage keeps the preferred row of each group of identical texts; the near stage the
preferred row of each cluster (``KeepPolicy``). A dropped row names the row it duplicates: for
``exact``, the kept row with the same text (estimate 1.0); for ``near``, its cluster's survivor
(the estimate of their signatures). The cluster's identity stays its smallest id.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from neardup.app.cli.options import DedupParams
from neardup.core.engine import (
    cluster_roots,
    cluster_survivors,
    estimates,
    exact_survivors,
    id_rank,
)

__all__ = ["EXACT", "KEPT", "NEAR", "Decisions", "decide"]

#: Row outcomes of the dedup stages.
KEPT, EXACT, NEAR = 0, 1, 2


@dataclass
class Decisions:
    """Per row: outcome (KEPT, EXACT, NEAR), cluster root row, the row it duplicates and the
    estimate to it."""

    outcome: NDArray[np.int8]
    root: NDArray[np.int64]
    duplicate_of: NDArray[np.int64]
    estimate: NDArray[np.float64]

    def cluster_sizes(self) -> dict[str, int]:
        """How many clusters have each size (singletons included), by size."""
        sizes = np.bincount(self.root, minlength=len(self.root))
        counted = Counter(sizes[sizes > 0].tolist())
        return {str(size): counted[size] for size in sorted(counted)}

    @property
    def clusters(self) -> int:
        """Clusters of two or more rows."""
        sizes = np.bincount(self.root, minlength=len(self.root))
        return int(np.count_nonzero(sizes >= 2))


def decide(
    ids: list[str],
    digests: NDArray[np.uint64],
    sigs: NDArray[np.uint32],
    params: DedupParams,
    lengths: NDArray[np.int64] | None = None,
    values: NDArray[np.float64] | None = None,
) -> Decisions:
    """The outcome of every row under ``params`` (the ``keep`` policy among them)."""
    n = len(ids)
    rank = id_rank(ids)
    preference = params.keep.preference(rank, lengths, values)
    same_text = exact_survivors(digests, preference)
    root = cluster_roots(sigs, params.minhash, rank)
    # Identical texts are one cluster, named by its smallest id under every policy, even when
    # they have no words: their empty signatures are never banded, so each would be its own root.
    smallest = exact_survivors(digests, rank)
    root = np.where(rank[smallest] < rank[root], smallest, root)
    survivor = cluster_survivors(root, preference)
    rows = np.arange(n, dtype=np.int64)
    exact = same_text != rows
    near = ~exact & (survivor != rows)
    outcome = np.full(n, KEPT, dtype=np.int8)
    outcome[exact] = EXACT
    outcome[near] = NEAR
    duplicate_of = np.where(exact, same_text, survivor)
    estimate = np.ones(n, dtype=np.float64)
    pairs = np.flatnonzero(near)
    estimate[pairs] = estimates(sigs, np.stack((pairs, survivor[pairs]), axis=1))
    return Decisions(outcome, root, duplicate_of, estimate)
