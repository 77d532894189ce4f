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

from neardup.core._banding import candidate_pairs, empty_rows, identical_rows
from neardup.core._components import min_label_components
from neardup.core._params import MinhashParams
from neardup.core._signatures import signatures
from neardup.core.errors import SignatureError

__all__ = ["cluster_roots", "clusters", "confirm", "estimates", "groups_of"]

# Pairs whose estimates are computed per step; bounds the (pairs, num_perm) comparison matrix.
_ESTIMATE_CHUNK = 1 << 16


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


def cluster_roots(
    sigs: NDArray[np.uint32], params: MinhashParams, rank: NDArray[np.int64] | None = None
) -> NDArray[np.int64]:
    """For every row, the row of its cluster's root: the member first in id order.

    Args:
        sigs: one signature per row, ``params.num_perm`` entries each.
        params: bands and threshold are used.
        rank: every row's position in id order; by default the rows are in id order already
            (then each root is the smallest row number of its cluster).
    """
    n, num_perm = sigs.shape
    if num_perm != params.num_perm:
        raise SignatureError(f"signatures have {num_perm} entries, params say {params.num_perm}")
    if n == 0:
        return np.empty(0, dtype=np.int64)
    # Identical signatures (estimate 1.0) are merged up front; banding runs on one row of each,
    # picked by row number rather than copied out of the matrix.
    first, copy_of = identical_rows(sigs)
    live = ~empty_rows(sigs)
    copies = np.flatnonzero(live & (first[copy_of] != np.arange(n)))
    same_sig = np.stack((copies, first[copy_of[copies]]), axis=1)
    near = confirm(sigs, candidate_pairs(sigs, params.bands, among=first), params.threshold)
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
    tokenizer: str = "words",
) -> list[set[str]]:
    """Every cluster of near duplicates among ``docs`` (id -> text), singletons included.

    Independent of input order and worker count; sorted by root, the smallest id of each.
    """
    params = MinhashParams(
        num_perm=num_perm, bands=bands, threshold=threshold, k=k, seed=seed, tokenizer=tokenizer
    )
    ids = sorted(docs)
    sigs = signatures(
        [docs[i] for i in ids], num_perm=num_perm, seed=seed, k=k, workers=workers,
        tokenizer=tokenizer,
    )  # fmt: skip
    return groups_of(ids, cluster_roots(sigs, params))


def groups_of(ids: Sequence[str], roots: NDArray[np.int64]) -> list[set[str]]:
    """The clusters as sets of ids, sorted by root, from the root row number of every row."""
    groups: dict[int, set[str]] = {}
    for i, root in enumerate(roots.tolist()):
        groups.setdefault(root, set()).add(ids[i])
    return [groups[r] for r in sorted(groups)]
