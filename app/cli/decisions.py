"""What happens to every row of a batch run, decided from the signature pass's arrays.

The exact stage keeps the preferred row of each group of identical texts; the near stage the
preferred row of each cluster (``KeepPolicy``). A dropped row names the document kept in its
place: for ``exact``, the kept row with the same text (estimate 1.0), or when the near stage
dropped that row too, what it names (its estimate); for ``near``, its cluster's survivor (the
estimate of their signatures). ``duplicate_of`` is never a dropped row. The cluster's identity
stays its smallest id.

Against an index (``IndexLookup``: the indexed documents the rows match), the indexed documents
join the graph and always survive (docs/algorithm.md, incremental runs): a row with the text of
an indexed document is ``exact`` of it (the smallest such id); every other row of a component
holding indexed documents (but a copy of another row, still ``exact`` of it) is ``near`` of the
component's smallest indexed id; components without
indexed documents are decided as without an index. Rows ``n, n+1, ...`` of ``root`` and
``duplicate_of`` name the matched indexed documents, in ``IndexLookup.ids`` order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from neardup.app.cli.options import DedupParams
from neardup.core.engine import (
    IndexLookup,
    cluster_roots,
    cluster_survivors,
    estimates,
    exact_survivors,
    id_rank,
    min_label_components,
)

__all__ = ["EXACT", "KEPT", "NEAR", "RECRAWLED", "Decisions", "decide"]

#: Row outcomes of the dedup stages; RECRAWLED: a re-crawled id whose text changed beyond the
#: threshold, dropped by ``--recrawled keep-indexed`` (``app.cli.recrawl``).
KEPT, EXACT, NEAR, RECRAWLED = 0, 1, 2, 3


@dataclass
class Decisions:
    """Per row: outcome (KEPT, EXACT, NEAR, RECRAWLED), cluster root row, the row it duplicates
    and the estimate to it. A root or duplicate ``n + j`` (n rows) is the indexed document
    ``indexed_ids[j]`` of part ``indexed_parts[j]``, whose own root is ``indexed_root[j]``."""

    outcome: NDArray[np.int8]
    root: NDArray[np.int64]
    duplicate_of: NDArray[np.int64]
    estimate: NDArray[np.float64]
    indexed_ids: list[str] = field(default_factory=list)
    indexed_parts: list[str] = field(default_factory=list)
    indexed_root: NDArray[np.int64] = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def _sizes(self) -> NDArray[np.int64]:
        nodes = np.concatenate((self.root, self.indexed_root))
        return np.bincount(nodes, minlength=len(nodes))

    def cluster_sizes(self) -> dict[str, int]:
        """How many clusters have each size (singletons included; the indexed documents the
        rows match counted as members), by size."""
        sizes = self._sizes()
        counted = Counter(sizes[sizes > 0].tolist())
        return {str(size): counted[size] for size in sorted(counted)}

    @property
    def clusters(self) -> int:
        """Clusters of two or more members."""
        return int(np.count_nonzero(self._sizes() >= 2))

    def name(self, ids: list[str], node: int) -> str:
        """The id of a row (``node < len(ids)``) or of a matched indexed document."""
        return ids[node] if node < len(ids) else self.indexed_ids[node - len(ids)]

    def part(self, ids: list[str], node: int) -> str | None:
        """The index part of ``node``, None for a row of this run."""
        return None if node < len(ids) else self.indexed_parts[node - len(ids)]


def decide(
    ids: list[str],
    digests: NDArray[np.uint64],
    sigs: NDArray[np.uint32],
    params: DedupParams,
    lengths: NDArray[np.int64] | None = None,
    values: NDArray[np.float64] | None = None,
    lookup: IndexLookup | None = None,
) -> Decisions:
    """The outcome of every row under ``params`` (the ``keep`` policy among them), against the
    indexed documents of ``lookup`` when given."""
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
    decisions = Decisions(outcome, root, duplicate_of, estimate)
    if lookup is not None and lookup.ids:
        _against_index(decisions, ids, sigs, lookup)
    _resolve_chains(decisions)
    return decisions


def _resolve_chains(decisions: Decisions) -> None:
    """Make every ``duplicate_of`` name a kept row or an indexed document: an exact copy whose
    text's kept row a later stage dropped too names what that row names, with its estimate
    (their texts, so their signatures, are identical). The targets of ``near`` rows are kept or
    indexed already, so each step shortens a chain; the loop ends."""
    n = len(decisions.outcome)
    target = decisions.duplicate_of
    for _ in range(n + 1):  # a chain is at most n rows long
        dropped = np.flatnonzero((decisions.outcome != KEPT) & (target < n))
        hop = dropped[decisions.outcome[target[dropped]] != KEPT]
        if len(hop) == 0:
            return
        via = target[hop]
        target[hop] = target[via]
        decisions.estimate[hop] = decisions.estimate[via]


def _against_index(
    decisions: Decisions, ids: list[str], sigs: NDArray[np.uint32], lookup: IndexLookup
) -> None:
    """Join the matched indexed documents (nodes ``n + j``) to the components of ``decisions``
    and overrule its outcomes where they reach: indexed documents always survive."""
    n, t = len(ids), len(lookup.ids)
    rank = id_rank([*ids, *lookup.ids])  # a row id also indexed is refused before (check_ids)
    rows = np.arange(n, dtype=np.int64)
    exact_of = lookup.exact
    exact = np.flatnonzero(exact_of >= 0)
    # The components among rows (their roots), plus the confirmed and exact links to the index.
    left = np.concatenate((rows, lookup.pairs[:, 0], exact))
    right = np.concatenate((decisions.root, n + lookup.pairs[:, 1], n + exact_of[exact]))
    by_rank = np.empty(n + t, dtype=np.int64)
    by_rank[rank] = np.arange(n + t)
    root = by_rank[min_label_components(n + t, rank[left], rank[right])[rank]]
    # The smallest indexed id of every component that holds one.
    first_indexed = np.full(n + t, n + t, dtype=np.int64)
    np.minimum.at(first_indexed, root[n:], rank[n:])
    held = first_indexed[root[:n]] < n + t
    smallest = by_rank[np.minimum(first_indexed[root[:n]], n + t - 1)]
    # A copy of another row stays that row's exact duplicate (the exact stage comes first).
    near = np.flatnonzero(held & (exact_of < 0) & (decisions.outcome != EXACT))
    decisions.outcome[exact] = EXACT
    decisions.duplicate_of[exact] = n + exact_of[exact]
    decisions.estimate[exact] = 1.0
    decisions.outcome[near] = NEAR
    decisions.duplicate_of[near] = smallest[near]
    decisions.estimate[near] = estimates(
        sigs, np.stack((near, smallest[near] - n), axis=1), lookup.sigs
    )
    decisions.root = root[:n]
    decisions.indexed_ids = list(lookup.ids)
    decisions.indexed_parts = list(lookup.parts)
    decisions.indexed_root = root[n:]
