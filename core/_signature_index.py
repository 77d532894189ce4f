"""The incremental index: signatures by document number, grouped into classes of identical
signatures, with one LSH bucket entry per class.

Copies of one text share a signature, so they share a class: the buckets hold the class once,
and a new copy costs one candidate whatever the number of earlier copies (never one per copy).
A class is named by its representative, the number of its first document; its members are kept
in key (id) order. Empty (all-P) signatures never form classes and are never candidates.

Adding is planned (``place``: pure) and applied (``add``), so a caller can plan off its event
loop and apply atomically. A removed document keeps its number's row until its owner swaps in
``compacted``, the index of the documents left, renumbered from 0.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._banding import BandBuckets, candidate_pairs, empty_rows, identical_rows
from neardup.core._cluster import estimates

__all__ = ["Matches", "Placement", "SignatureIndex", "batch_matches"]

#: ``(row, number, estimate)`` arrays: row of the query (or the later batch row), the matched
#: class representative (or the earlier batch row), and the estimate.
Matches = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]
#: Signature rows copied at a time by ``compacted`` (no second copy of the whole matrix).
_COMPACT_SLAB = 1 << 16


@dataclass(frozen=True)
class Placement:
    """Where each signature of a batch goes.

    Attributes:
        first: per distinct signature of the batch, its first row.
        copy_of: per row, the index of its distinct signature.
        joins: per distinct signature, the representative of the identical registered class,
            or -1 (a new class; always -1 for an empty signature).
        empty: per row, whether the signature is all-P.
        matches: (distinct index, class representative, estimate) of the registered classes
            each distinct signature matches at the threshold ``place`` was given.
    """

    first: NDArray[np.int64]
    copy_of: NDArray[np.int64]
    joins: NDArray[np.int64]
    empty: NDArray[np.bool_]
    #: the confirmed matches of every distinct signature (by its index) at the threshold asked
    matches: Matches


class SignatureIndex:
    """Signatures (uint32, one row per document number), classes of identical signatures, and
    band buckets over the classes.

    Args:
        num_perm: signature length.
        bands: LSH bands (rows = num_perm / bands).
        keys: the key of every document number, appended by the owner before ``add``; orders
            the members of a class (by number when None).
    """

    def __init__(self, num_perm: int, bands: int, keys: Sequence[Any] | None = None) -> None:
        self.num_perm = num_perm
        self.bands = bands
        self.rows = num_perm // bands
        self._key: Callable[[int], Any] | None = keys.__getitem__ if keys is not None else None
        self._sigs = np.zeros((0, num_perm), dtype=np.uint32)
        self._alive = np.zeros(0, dtype=np.bool_)
        self._class = np.zeros(0, dtype=np.int32)  # every number's representative
        self._size = np.zeros(0, dtype=np.int32)  # alive members, by representative
        #: alive members, in key order, of every class that ever had two or more
        self._copies: dict[int, list[int]] = {}
        self.count = 0  # the next document number
        self.buckets = BandBuckets(bands, self.rows)

    # --- reading ------------------------------------------------------------------------------

    def signatures(self, nums: NDArray[np.int64] | list[int]) -> NDArray[np.uint32]:
        """The stored signatures of those document numbers (a copy)."""
        return self._sigs[np.asarray(nums, dtype=np.int64)].copy()

    def stored(self) -> NDArray[np.uint32]:
        """The signature rows of every number given out so far (a view; removed rows included)."""
        return self._sigs[: self.count]

    def alive_many(self, nums: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each of ``nums`` was added and not removed."""
        return self._alive[nums]

    def representative(self, num: int) -> int:
        """The representative of ``num``'s class."""
        return int(self._class[num])

    def members(self, rep: int) -> list[int]:
        """The alive members of the class of ``rep``, in key order (do not modify)."""
        copies = self._copies.get(rep)
        if copies is not None:
            return copies
        return [rep] if self._alive[rep] else []

    def sizes(self, reps: NDArray[np.int64]) -> NDArray[np.int64]:
        """How many alive members the classes of ``reps`` have."""
        return self._size[reps].astype(np.int64)

    def candidates(self, sigs: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Unique (query row, class representative) pairs agreeing on every row of some band,
        over classes with an alive member."""
        q, reps, bands = self.buckets.leads(sigs)
        keep = self._size[reps] > 0
        q, reps, bands = q[keep], reps[keep], bands[keep]
        # A digest match is a candidate only when the band's rows really are equal.
        cols = bands[:, None] * self.rows + np.arange(self.rows)
        equal = (sigs[q[:, None], cols] == self._sigs[reps[:, None], cols]).all(axis=1)
        width = np.int64(max(self.count, 1))
        flat = np.unique(q[equal] * width + reps[equal])
        return flat // width, flat % width

    def matches(self, sigs: NDArray[np.uint32], threshold: float) -> Matches:
        """Confirmed (query row, class representative, estimate) of every query signature."""
        if self.count == 0 or len(sigs) == 0:
            return _no_matches()
        q, reps = self.candidates(sigs)
        est = estimates(sigs, np.stack((q, reps), axis=1), self._sigs)
        hit = est >= threshold
        return q[hit], reps[hit], est[hit]

    # --- writing ------------------------------------------------------------------------------

    def place(self, sigs: NDArray[np.uint32], threshold: float = 1.0) -> Placement:
        """Group a batch by identical signature, find the registered class each joins, and the
        classes each matches at ``threshold`` (one candidate search for both)."""
        first, copy_of = identical_rows(sigs)
        empty = empty_rows(sigs)
        joins = np.full(len(first), -1, dtype=np.int64)
        rows, reps, est = self.matches(sigs[first], threshold)
        identical = est == 1.0  # classes are distinct, so at most one a row is identical
        joins[rows[identical]] = reps[identical]
        joins[empty[first]] = -1
        return Placement(first, copy_of, joins, empty, (rows, reps, est))

    def add(
        self, sigs: NDArray[np.uint32], placement: Placement | None = None
    ) -> NDArray[np.int64]:
        """Append documents with these signatures (placed by ``place`` on this very index);
        returns their numbers."""
        where = self.place(sigs) if placement is None else placement
        n = len(sigs)
        nums = np.arange(self.count, self.count + n, dtype=np.int64)
        self._reserve(self.count + n)
        self._sigs[nums] = sigs
        self._alive[nums] = True
        reps = np.where(where.joins >= 0, where.joins, nums[where.first])[where.copy_of]
        reps[where.empty] = nums[where.empty]  # empty signatures never share a class
        self._class[nums] = reps
        np.add.at(self._size, reps, 1)
        self.count += n
        self._group(nums, reps)
        new = np.flatnonzero(reps == nums)
        self.buckets.add(sigs[new], nums[new])
        return nums

    def _group(self, nums: NDArray[np.int64], reps: NDArray[np.int64]) -> None:
        """Record the members of classes that now have two or more."""
        joined = np.flatnonzero(reps != nums)
        for num, rep in zip(nums[joined].tolist(), reps[joined].tolist(), strict=True):
            copies = self._copies.get(rep)
            if copies is None:
                copies = self._copies[rep] = [rep] if self._alive[rep] else []
            insort(copies, num, key=self._key)

    def remove(self, num: int) -> None:
        """Take ``num`` out of every later answer; its class lives on while it has members."""
        self._alive[num] = False
        self._size[self._class[num]] -= 1
        copies = self._copies.get(int(self._class[num]))
        if copies is not None:
            copies.remove(num)

    def start_load(self, count: int) -> None:
        """Begin a bulk load (recovery) of documents numbered below ``count``, with gaps where
        documents were deleted: ``load`` each chunk, then ``finish_load``."""
        self._reserve(count)
        self.count = max(self.count, count)

    def load(self, nums: NDArray[np.int64], sigs: NDArray[np.uint32]) -> None:
        """Bulk-load documents at given numbers (below the ``start_load`` count)."""
        self._sigs[nums] = sigs
        self._alive[nums] = True

    def finish_load(self) -> None:
        """Group the loaded documents into classes and index one row per class."""
        alive = np.flatnonzero(self._alive[: self.count])
        # Without gaps, a view: recovery must not hold the signature matrix twice.
        sigs = self._sigs[: self.count] if len(alive) == self.count else self._sigs[alive]
        first, copy_of = identical_rows(sigs)
        reps = alive[first][copy_of]
        empty = empty_rows(sigs)
        reps[empty] = alive[empty]
        self._class[alive] = reps
        np.add.at(self._size, reps, 1)
        self._group(alive, reps)
        new = np.flatnonzero(reps == alive)
        self.buckets.add(sigs[new], alive[new], merge=False)
        self.buckets.merge()

    def compacted(
        self, nums: NDArray[np.int64], keys: Sequence[Any] | None = None
    ) -> SignatureIndex:
        """A new index of only documents ``nums`` (alive, increasing), renumbered ``0, 1, ...``
        in that order: what a bulk load of their signatures builds, so that its memory follows
        the documents kept, not every number ever given out (the removed ones' rows, classes
        and bucket entries are left behind). Reads this index only.

        Args:
            nums: the documents to keep, increasing (their order is kept).
            keys: the key of every new number, as ``SignatureIndex`` takes them.
        """
        fresh = SignatureIndex(self.num_perm, self.bands, keys)
        fresh.start_load(len(nums))
        for lo in range(0, len(nums), _COMPACT_SLAB):
            part = np.asarray(nums[lo : lo + _COMPACT_SLAB], dtype=np.int64)
            fresh.load(np.arange(lo, lo + len(part), dtype=np.int64), self._sigs[part])
        fresh.finish_load()
        return fresh

    def _reserve(self, count: int) -> None:
        if count <= len(self._sigs):
            return
        size = max(count, 2 * len(self._sigs), 1024)
        sigs = np.empty((size, self.num_perm), dtype=np.uint32)
        sigs[: self.count] = self._sigs[: self.count]
        alive = np.zeros(size, dtype=np.bool_)
        alive[: self.count] = self._alive[: self.count]
        classes = np.arange(size, dtype=np.int32)
        classes[: self.count] = self._class[: self.count]
        sizes = np.zeros(size, dtype=np.int32)
        sizes[: self.count] = self._size[: self.count]
        self._sigs, self._alive, self._class, self._size = sigs, alive, classes, sizes

    def nbytes(self) -> int:
        """Memory of the signatures, flags, classes and buckets."""
        held = (self._sigs, self._alive, self._class, self._size)
        arrays = sum(a[: self.count].nbytes for a in held)
        copies = sum(56 + 8 * len(c) for c in self._copies.values())
        return int(arrays + copies + self.buckets.nbytes())


def batch_matches(sigs: NDArray[np.uint32], bands: int, threshold: float) -> Matches:
    """Confirmed pairs inside one batch: (later row, earlier row, estimate)."""
    if len(sigs) < 2:
        return _no_matches()
    pairs = candidate_pairs(sigs, bands)
    est = estimates(sigs, pairs)
    hit = est >= threshold
    return pairs[hit, 1], pairs[hit, 0], est[hit]


def _no_matches() -> Matches:
    none = np.empty(0, dtype=np.int64)
    return none, none, np.empty(0, dtype=np.float64)
