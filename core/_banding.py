"""LSH banding, the one implementation: band digests, then the band's rows compared.

A signature of ``bands * rows`` entries is cut into ``bands`` runs of ``rows`` consecutive
entries; two signatures are candidates when they agree on every row of at least one band. Both
paths hash a band's rows to a 64-bit digest and treat a digest match only as a lead: the rows
are compared before a pair counts, so a digest collision is never a candidate, and the band
index is part of every bucket (equal rows in different bands never meet). All-P rows
(documents without shingles) are never indexed.

- Batch: ``candidate_pairs`` sorts a whole matrix's band digests and pairs each run of equal rows.
- Incremental: ``BandBuckets`` keeps, per band, sorted digests and document numbers plus an
  append buffer merged in O(n); ``BandBuckets.leads`` finds the digest matches of new rows.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from neardup.core._hashing import MERSENNE31
from neardup.core.errors import SignatureError

__all__ = [
    "BandBuckets",
    "as_signature",
    "band_digest",
    "band_digests",
    "candidate_pairs",
    "empty_rows",
    "equal_runs",
    "identical_rows",
    "lsh_probability",
    "lsh_threshold",
]

_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant (golden ratio) for the band digest
# Rows checked per step by empty_rows (bounds the boolean scratch).
_SLAB = 1 << 16


def lsh_threshold(bands: int, rows: int) -> float:
    """``(1/b) ** (1/r)``: the usual approximation of where the S-curve rises steepest."""
    return float((1.0 / bands) ** (1.0 / rows))


def lsh_probability(s: float, bands: int, rows: int) -> float:
    """The chance that a pair of Jaccard ``s`` is a candidate: ``1 - (1 - s**r) ** b``."""
    return float(1.0 - (1.0 - s**rows) ** bands)


#: The chance of becoming a candidate that defines the bands' reach: below ``lsh_reach`` a pair
#: is more likely missed than found.
REACH_PROBABILITY = 0.5


def lsh_reach(bands: int, rows: int, probability: float = REACH_PROBABILITY) -> float:
    """The similarity at which a pair becomes a candidate with ``probability``: the inverse of
    ``lsh_probability``, ``(1 - (1 - p) ** (1/b)) ** (1/r)`` (0.674 for 16 x 8 at p = 0.5)."""
    return float((1.0 - (1.0 - probability) ** (1.0 / bands)) ** (1.0 / rows))


def as_signature(sig: ArrayLike, length: int) -> NDArray[np.uint32]:
    """``sig`` as a uint32 vector of ``length`` entries, each in ``[0, P]``; else SignatureError."""
    arr = np.asarray(sig)
    if arr.ndim != 1 or len(arr) != length:
        raise SignatureError(
            f"a signature must have {length} entries (bands * rows), got shape {arr.shape}"
        )
    if arr.dtype.kind not in "iu":
        raise SignatureError(f"signature entries must be integers, got dtype {arr.dtype}")
    if len(arr) and (int(arr.min()) < 0 or int(arr.max()) > MERSENNE31):
        raise SignatureError("signature entries must lie in [0, 2**31 - 1]")
    return arr.astype(np.uint32)


def band_digest(block: NDArray[np.uint32]) -> NDArray[np.uint64]:
    """A 64-bit digest of every row of ``block`` (equal rows, equal digests; the converse is
    checked by whoever relies on it)."""
    digest = np.zeros(len(block), dtype=np.uint64)
    for col in range(block.shape[1]):
        digest ^= block[:, col].astype(np.uint64)
        digest *= _MIX
        digest ^= digest >> np.uint64(29)
    return digest


def band_digests(sigs: NDArray[np.uint32], bands: int) -> NDArray[np.uint64]:
    """``[len(sigs), bands]``: the digest of every band of every row."""
    rows = sigs.shape[1] // bands
    out = np.empty((len(sigs), bands), dtype=np.uint64)
    for band in range(bands):
        out[:, band] = band_digest(sigs[:, band * rows : (band + 1) * rows])
    return out


def equal_runs(block: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
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


def identical_rows(sigs: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The first row of each distinct signature, in row order, and for every row the index of
    its signature in that list (so all-distinct rows give ``arange(n)`` both times)."""
    order, run_start = equal_runs(sigs)
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


def empty_rows(sigs: NDArray[np.uint32]) -> NDArray[np.bool_]:
    """True for every all-P row (a document without shingles), computed a slab at a time."""
    out = np.empty(len(sigs), dtype=np.bool_)
    for lo in range(0, len(sigs), _SLAB):
        out[lo : lo + _SLAB] = (sigs[lo : lo + _SLAB] == MERSENNE31).all(axis=1)
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
        order, run_start = equal_runs(block)
        found.append(live[_pairs_in_runs(order, run_start)])
    pairs = np.sort(np.concatenate(found), axis=1)  # one array per band, so never none
    flat = np.unique(pairs[:, 0] * np.int64(max(n, 1)) + pairs[:, 1])
    return np.stack((flat // max(n, 1), flat % max(n, 1)), axis=1)


# The append buffer is merged into the sorted arrays once it holds 1/_BUFFER_SHARE of them (or
# _MIN_BUFFER entries): a merge costs O(n), lookups search a short buffer.
_BUFFER_SHARE = 64
_MIN_BUFFER = 4096


class _Band:
    """One band's sorted digests and document numbers, plus an unsorted append buffer."""

    __slots__ = ("buf_keys", "buf_nums", "buffered", "keys", "nums")

    def __init__(self) -> None:
        self.keys = np.empty(0, dtype=np.uint64)
        self.nums = np.empty(0, dtype=np.int32)
        self.buf_keys = np.empty(_MIN_BUFFER, dtype=np.uint64)
        self.buf_nums = np.empty(_MIN_BUFFER, dtype=np.int32)
        self.buffered = 0

    def append(self, keys: NDArray[np.uint64], nums: NDArray[np.int32], merge: bool = True) -> None:
        end = self.buffered + len(keys)
        if end > len(self.buf_keys):
            size = max(end, 2 * len(self.buf_keys))
            self.buf_keys = np.resize(self.buf_keys, size)
            self.buf_nums = np.resize(self.buf_nums, size)
        self.buf_keys[self.buffered : end] = keys
        self.buf_nums[self.buffered : end] = nums
        self.buffered = end
        if merge and self.buffered >= self._limit():
            self.merge()

    def _limit(self) -> int:
        return max(_MIN_BUFFER, len(self.keys) // _BUFFER_SHARE)

    def merge(self) -> None:
        """Insert the (sorted) buffer into the sorted arrays: O(n + b log b), no full re-sort."""
        if not self.buffered:
            return
        order = np.argsort(self.buf_keys[: self.buffered], kind="stable")
        keys = self.buf_keys[: self.buffered][order]
        nums = self.buf_nums[: self.buffered][order]
        at = np.searchsorted(self.keys, keys, side="right")
        self.keys = np.insert(self.keys, at, keys)
        self.nums = np.insert(self.nums, at, nums)
        self.buffered = 0
        if len(self.buf_keys) > 2 * self._limit():  # after a bulk load: give the memory back
            self.buf_keys = np.empty(self._limit(), dtype=np.uint64)
            self.buf_nums = np.empty(self._limit(), dtype=np.int32)

    def lookup(self, keys: NDArray[np.uint64]) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
        """(query index, document number) of every entry whose digest equals a query key."""
        lo = np.searchsorted(self.keys, keys, side="left")
        count = np.searchsorted(self.keys, keys, side="right") - lo
        query = np.repeat(np.arange(len(keys)), count)
        offset = np.arange(len(query)) - np.repeat(np.cumsum(count) - count, count)
        nums = self.nums[np.repeat(lo, count) + offset]
        if not self.buffered:
            return query, nums
        buf_keys = self.buf_keys[: self.buffered]
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        first = np.searchsorted(sorted_keys, buf_keys, side="left")
        last = np.searchsorted(sorted_keys, buf_keys, side="right")
        hits = np.flatnonzero(last > first)
        # A buffered entry matches every equal query key: one pair per (entry, equal key).
        span = last[hits] - first[hits]
        entry = np.repeat(hits, span)
        pos = (
            np.repeat(first[hits], span)
            + np.arange(len(entry))
            - np.repeat(np.cumsum(span) - span, span)
        )
        return (
            np.concatenate([query, order[pos]]),
            np.concatenate([nums, self.buf_nums[entry]]),
        )

    def nbytes(self) -> int:
        return int(
            self.keys.nbytes + self.nums.nbytes + self.buf_keys.nbytes + self.buf_nums.nbytes
        )


class BandBuckets:
    """The LSH buckets of every band.

    Args:
        bands: how many bands.
        rows: signature entries per band.
    """

    def __init__(self, bands: int, rows: int) -> None:
        self.bands = bands
        self.rows = rows
        self._bands = [_Band() for _ in range(bands)]

    def add(self, sigs: NDArray[np.uint32], nums: NDArray[np.int64], merge: bool = True) -> None:
        """Index documents ``nums`` with signatures ``sigs``; empty (all-P) ones are skipped.

        With ``merge=False`` (a bulk load) the buffers only grow; call ``merge()`` at the end.
        """
        live = ~empty_rows(sigs)
        sigs, nums32 = sigs[live], nums[live].astype(np.int32)
        if len(sigs) == 0:
            return
        digests = band_digests(sigs, self.bands)
        for band, entry in enumerate(self._bands):
            entry.append(digests[:, band], nums32, merge)

    def merge(self) -> None:
        """Merge every append buffer (after a bulk load)."""
        for entry in self._bands:
            entry.merge()

    def leads(
        self, sigs: NDArray[np.uint32]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """(query row, document number, band) of every digest match; empty rows have none.

        A lead becomes a candidate once the band's rows are compared equal.
        """
        live = np.flatnonzero(~empty_rows(sigs))
        if len(live) == 0:
            none = np.empty(0, dtype=np.int64)
            return none, none, none
        digests = band_digests(sigs[live], self.bands)
        queries: list[NDArray[np.int64]] = []
        nums: list[NDArray[np.int64]] = []
        bands: list[NDArray[np.int64]] = []
        for band, entry in enumerate(self._bands):
            q, n = entry.lookup(digests[:, band])
            queries.append(live[q])
            nums.append(n.astype(np.int64))
            bands.append(np.full(len(q), band, dtype=np.int64))
        return np.concatenate(queries), np.concatenate(nums), np.concatenate(bands)

    def nbytes(self) -> int:
        """Memory held by the buckets."""
        return sum(entry.nbytes() for entry in self._bands)
