"""Candidates -> estimate check -> union-find, over a whole signature matrix at once.

This is the batch path behind ``clusters`` and ``near_dedup``. It computes exactly what the
reference ``LSH`` + ``UnionFind`` would (the tests hold the two against each other), without a
Python object per bucket entry:

1. documents with identical signatures are merged first (their estimate is 1.0), so exact copies
   never make a quadratic bucket;
2. per band, the distinct signatures are sorted by a 64-bit digest of the band's rows and each
   run of equal rows yields its pairs (runs are checked row by row, so a digest collision can
   never make a false candidate);
3. candidate pairs are confirmed when ``estimate >= threshold``;
4. confirmed pairs are merged by min-label components, where node numbers follow id order, so
   every root is the smallest id of its cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from core.errors import ParameterError
from core.hashing import MERSENNE31
from core.signatures import signatures
from core.unionfind import min_label_components

__all__ = [
    "band_digest",
    "candidate_pairs",
    "cluster_roots",
    "clusters",
    "confirm",
    "empty_rows",
    "estimates",
]

_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant (golden ratio) for the band digest
# Pairs whose estimates are computed per step; bounds the (pairs, num_perm) comparison matrix.
_ESTIMATE_CHUNK = 1 << 16


def check_params(num_perm: int, bands: int, threshold: float) -> int:
    """Validate the banding parameters; returns ``rows = num_perm // bands``."""
    if bands < 1 or num_perm < 1 or num_perm % bands:
        raise ParameterError(
            f"num_perm ({num_perm}) must be a positive multiple of bands ({bands}): "
            "each band takes num_perm / bands consecutive rows"
        )
    if not 0.0 < threshold <= 1.0:
        raise ParameterError(f"threshold must be in (0, 1], got {threshold}")
    return num_perm // bands


def band_digest(block: NDArray[np.uint32]) -> NDArray[np.uint64]:
    """A 64-bit digest of every row of ``block`` (equal rows, equal digests; the converse is
    checked by whoever relies on it)."""
    digest = np.zeros(len(block), dtype=np.uint64)
    for col in range(block.shape[1]):
        digest ^= block[:, col].astype(np.uint64)
        digest *= _MIX
        digest ^= digest >> np.uint64(29)
    return digest


def _equal_runs(block: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """A stable row order grouping equal rows together, and the start of each run in it."""
    digest = band_digest(block)
    order = np.argsort(digest, kind="stable")
    sorted_digest = digest[order]
    # Rows are compared only where neighbouring digests agree (few), never the whole matrix.
    same = np.flatnonzero(sorted_digest[1:] == sorted_digest[:-1])
    rows_equal = np.zeros(max(len(order) - 1, 0), dtype=np.bool_)
    rows_equal[same] = (block[order[same]] == block[order[same + 1]]).all(axis=1)
    if not bool(rows_equal[same].all()):
        # A digest collision between different rows: fall back to an exact (stable) row sort.
        order = np.lexsort(block.T[::-1])
        rows_equal = (block[order][1:] == block[order][:-1]).all(axis=1)
    run_start = np.flatnonzero(np.concatenate(([len(order) > 0], ~rows_equal)))
    return order, run_start


def _pairs_in_runs(order: NDArray[np.int64], run_start: NDArray[np.int64]) -> NDArray[np.int64]:
    """All pairs of positions inside each run, as an (m, 2) array of node numbers."""
    n = len(order)
    run_len = np.diff(np.append(run_start, n))
    # remaining[p] = how many later members share p's run.
    remaining = np.repeat(run_start + run_len, run_len) - np.arange(n) - 1
    pos = np.flatnonzero(remaining >= 1)
    out = []
    d = 1
    while len(pos):
        out.append(np.stack((order[pos], order[pos + d]), axis=1))
        d += 1
        pos = pos[remaining[pos] >= d]
    return np.concatenate(out) if out else np.empty((0, 2), dtype=np.int64)


def empty_rows(sigs: NDArray[np.uint32]) -> NDArray[np.bool_]:
    """True for every all-P row (a document without shingles), computed a slab at a time."""
    out = np.empty(len(sigs), dtype=np.bool_)
    for lo in range(0, len(sigs), _ESTIMATE_CHUNK):
        out[lo : lo + _ESTIMATE_CHUNK] = (sigs[lo : lo + _ESTIMATE_CHUNK] == MERSENNE31).all(axis=1)
    return out


def candidate_pairs(
    sigs: NDArray[np.uint32], bands: int, among: NDArray[np.int64] | None = None
) -> NDArray[np.int64]:
    """Unique (i, j), i < j, of rows agreeing on all rows of at least one band, sorted.

    Rows that are entirely P (documents without shingles) are never candidates. With ``among``,
    only those rows are considered (without copying the matrix).
    """
    n, num_perm = sigs.shape
    rows = num_perm // bands
    among = np.arange(n) if among is None else among
    live = among[~empty_rows(sigs)[among]]
    found = []
    for band in range(bands):
        block = np.ascontiguousarray(sigs[live, band * rows : (band + 1) * rows])
        order, run_start = _equal_runs(block)
        found.append(live[_pairs_in_runs(order, run_start)])
    pairs = np.concatenate(found) if found else np.empty((0, 2), dtype=np.int64)
    pairs = np.sort(pairs, axis=1)
    flat = np.unique(pairs[:, 0] * np.int64(max(n, 1)) + pairs[:, 1])
    return np.stack((flat // max(n, 1), flat % max(n, 1)), axis=1)


def estimates(
    sigs: NDArray[np.uint32],
    pairs: NDArray[np.int64],
    other: NDArray[np.uint32] | None = None,
) -> NDArray[np.float64]:
    """``estimate`` of every pair: the share of positions where the two signatures agree.

    A pair is (row of ``sigs``, row of ``other``), ``other`` being ``sigs`` by default.
    """
    second = sigs if other is None else other
    out = np.empty(len(pairs), dtype=np.float64)
    for lo in range(0, len(pairs), _ESTIMATE_CHUNK):
        p = pairs[lo : lo + _ESTIMATE_CHUNK]
        equal = np.count_nonzero(sigs[p[:, 0]] == second[p[:, 1]], axis=1)
        out[lo : lo + len(p)] = equal / sigs.shape[1]
    return out


def confirm(
    sigs: NDArray[np.uint32], pairs: NDArray[np.int64], threshold: float
) -> NDArray[np.int64]:
    """The pairs whose estimate is at least ``threshold``."""
    return pairs[estimates(sigs, pairs) >= threshold]


def _identical_rows(sigs: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The first row of each distinct signature, in row order, and for every row the index of
    its signature in that list (so all-distinct rows give ``arange(n)`` both times)."""
    order, run_start = _equal_runs(sigs)
    starts = np.zeros(len(order), dtype=np.int64)
    starts[run_start] = 1
    run_of_sorted = np.cumsum(starts) - 1
    copy_of = np.empty(len(order), dtype=np.int64)
    copy_of[order] = run_of_sorted
    # Both sorts are stable, so each run starts at its smallest row number.
    first = order[run_start]
    by_row = np.argsort(first, kind="stable")
    renumber = np.empty(len(first), dtype=np.int64)
    renumber[by_row] = np.arange(len(first))
    return first[by_row], renumber[copy_of]


def cluster_roots(
    sigs: NDArray[np.uint32],
    *,
    bands: int,
    threshold: float,
    rank: NDArray[np.int64] | None = None,
) -> NDArray[np.int64]:
    """For every row, the row of its cluster's root: the member first in id order.

    Args:
        sigs: one signature per row.
        bands: LSH bands.
        threshold: the confirmation threshold on the estimate.
        rank: every row's position in id order; by default the rows are in id order already
            (then each root is the smallest row number of its cluster).
    """
    n, num_perm = sigs.shape
    check_params(num_perm, bands, threshold)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    # Identical signatures (estimate 1.0) are merged up front; banding runs on one row of each,
    # picked by row number rather than copied out of the matrix.
    first, copy_of = _identical_rows(sigs)
    live = ~empty_rows(sigs)
    copies = np.flatnonzero(live & (first[copy_of] != np.arange(n)))
    same_sig = np.stack((copies, first[copy_of[copies]]), axis=1)
    near = confirm(sigs, candidate_pairs(sigs, bands, among=first), threshold)
    edges = np.concatenate((same_sig, near))
    if rank is None:
        return min_label_components(n, edges[:, 0], edges[:, 1])
    # Components over id ranks, so each root is the first member in id order; back to rows.
    by_rank = np.empty(n, dtype=np.int64)
    by_rank[rank] = np.arange(n)
    root_rank = min_label_components(n, rank[edges[:, 0]], rank[edges[:, 1]])
    return by_rank[root_rank[rank]]


def clusters(
    docs: Mapping[str, str],
    *,
    num_perm: int = 128,
    bands: int = 16,
    threshold: float = 0.8,
    k: int = 5,
    seed: int = 0,
    workers: int = 1,
) -> list[set[str]]:
    """Every cluster of near duplicates among ``docs`` (id -> text), singletons included.

    Independent of input order and worker count; sorted by root, the smallest id of each.
    """
    check_params(num_perm, bands, threshold)
    ids = sorted(docs)
    sigs = signatures([docs[i] for i in ids], num_perm=num_perm, seed=seed, k=k, workers=workers)
    return groups_of(ids, cluster_roots(sigs, bands=bands, threshold=threshold))


def groups_of(ids: Sequence[str], roots: NDArray[np.int64]) -> list[set[str]]:
    """The clusters as sets of ids, sorted by root, from the root row number of every row."""
    groups: dict[int, set[str]] = {}
    for i, root in enumerate(roots.tolist()):
        groups.setdefault(root, set()).add(ids[i])
    return [groups[r] for r in sorted(groups)]
