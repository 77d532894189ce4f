"""New documents against an index: exact copies and confirmed near pairs, streamed.

The index is read a row group at a time: its ``digest`` and ``bands`` columns are compared with
the new rows' (sorted per band; ``searchsorted`` over whole columns), nothing of them is kept,
and only a row group with a lead has its ``signature`` (and ``id``) column read, of which only
the lead rows are kept. A lead is a band digest match; it is a candidate once the band's rows
are compared equal (a digest collision never counts), and confirmed when the estimate of the
two signatures is at least the threshold: the same rule as among new rows (``cluster_roots``).
Resident memory is the new rows' digests plus the matched rows, none per indexed document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._banding import band_digests, empty_rows
from neardup.core._index import DocIndex, IndexFile, IndexPart
from neardup.core._index_parts import part_matrix
from neardup.core._index_rows import group_starts, ids_at, read_groups
from neardup.core.errors import SignatureError

__all__ = ["IndexLookup", "lookup_index", "lookup_without"]


@dataclass(frozen=True)
class IndexLookup:
    """What the new rows match in an index.

    Attributes:
        ids: the matched indexed documents (an exact copy or a confirmed pair), sorted by id.
        parts: the part of each.
        sigs: the signature of each, ``[len(ids), num_perm]``.
        exact: per new row, the position in ``ids`` of the smallest indexed id with the same
            text, or -1.
        pairs: ``[p, 2]`` confirmed (new row, position in ``ids``) pairs, sorted.
        estimate: the estimate of each pair.
    """

    ids: list[str]
    parts: list[str]
    sigs: NDArray[np.uint32]
    exact: NDArray[np.int64]
    pairs: NDArray[np.int64]
    estimate: NDArray[np.float64]

    @classmethod
    def empty(cls, rows: int, num_perm: int) -> IndexLookup:
        """No match for any of ``rows`` new rows."""
        return cls(
            [], [], np.empty((0, num_perm), dtype=np.uint32), np.full(rows, -1, dtype=np.int64),
            np.empty((0, 2), dtype=np.int64), np.empty(0, dtype=np.float64),
        )  # fmt: skip


# Bits of a band's membership filter per new row (rounded up to a power of two, within the
# bounds): 64 bits a row keep the share of indexed keys passing by chance near 1.5%.
_FILTER_BITS_PER_ROW = 64
_FILTER_MIN_BITS, _FILTER_MAX_BITS = 1 << 16, 1 << 25


class _KeyFilter:
    """A one-hash Bloom filter of 64-bit keys (their top bits): most indexed keys are not among
    the new rows', and one gather into a few MB says so before any binary search."""

    def __init__(self, keys: NDArray[np.uint64]) -> None:
        want = max(_FILTER_MIN_BITS, min(_FILTER_MAX_BITS, len(keys) * _FILTER_BITS_PER_ROW))
        self.shift = np.uint64(64 - max(int(want - 1).bit_length(), 1))
        slots = np.zeros(1 << (64 - int(self.shift)), dtype=np.bool_)
        slots[(keys >> self.shift).astype(np.int64)] = True
        self.bits = np.packbits(slots, bitorder="little")

    def passing(self, keys: NDArray[np.uint64]) -> NDArray[np.int64]:
        """The positions of ``keys`` that may be members."""
        slot = (keys >> self.shift).astype(np.int64)
        hit = (self.bits[slot >> 3] >> (slot & 7).astype(np.uint8)) & np.uint8(1)
        return np.flatnonzero(hit)


def _equal_key_pairs(
    keys: NDArray[np.uint64], sorted_keys: NDArray[np.uint64], sieve: _KeyFilter
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(i, pos)`` of every ``keys[i] == sorted_keys[pos]`` (``sieve`` holds ``sorted_keys``)."""
    passing = sieve.passing(keys)
    i, pos = _searched_pairs(keys[passing], sorted_keys)
    return passing[i], pos


def _searched_pairs(
    keys: NDArray[np.uint64], sorted_keys: NDArray[np.uint64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(i, pos)`` of every ``keys[i] == sorted_keys[pos]``, by binary search."""
    lo = np.searchsorted(sorted_keys, keys, side="left")
    hi = np.searchsorted(sorted_keys, keys, side="right")
    count = hi - lo
    hit = np.flatnonzero(count)
    if len(hit) == 0:
        none = np.empty(0, dtype=np.int64)
        return none, none
    span = count[hit]
    i = np.repeat(hit, span)
    pos = np.repeat(lo[hit], span) + np.arange(len(i)) - np.repeat(np.cumsum(span) - span, span)
    return i.astype(np.int64), pos.astype(np.int64)


class _NewSide:
    """The new rows, sorted once: text digests, and per band the band digests of live rows."""

    def __init__(self, sigs: NDArray[np.uint32], digests: NDArray[np.uint64], bands: int) -> None:
        self.digests = digests
        self.digest_order = np.argsort(digests[:, 0], kind="stable")
        self.digest_keys = np.ascontiguousarray(digests[self.digest_order, 0])
        self.digest_sieve = _KeyFilter(self.digest_keys)
        live = np.flatnonzero(~empty_rows(sigs))
        bd = band_digests(sigs[live], bands)
        self.band_rows: list[NDArray[np.int64]] = []
        self.band_keys: list[NDArray[np.uint64]] = []
        self.band_sieves: list[_KeyFilter] = []
        for band in range(bands):
            order = np.argsort(bd[:, band], kind="stable")
            self.band_rows.append(live[order])
            self.band_keys.append(np.ascontiguousarray(bd[order, band]))
            self.band_sieves.append(_KeyFilter(self.band_keys[-1]))

    def exact(self, digest: NDArray[np.uint64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(indexed row, new row) of equal text digests (all 128 bits)."""
        at, pos = _equal_key_pairs(
            np.ascontiguousarray(digest[:, 0]), self.digest_keys, self.digest_sieve
        )
        new = self.digest_order[pos]
        same = self.digests[new, 1] == digest[at, 1]
        return at[same], new[same]

    def leads(
        self, bands: NDArray[np.uint64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """(indexed row, new row, band) of every band digest match."""
        at, new, band_of = [], [], []
        for band, keys in enumerate(self.band_keys):
            column = np.ascontiguousarray(bands[:, band])
            i, pos = _equal_key_pairs(column, keys, self.band_sieves[band])
            at.append(i)
            new.append(self.band_rows[band][pos])
            band_of.append(np.full(len(i), band, dtype=np.int64))
        return np.concatenate(at), np.concatenate(new), np.concatenate(band_of)


def _confirmed(
    new_sigs: NDArray[np.uint32],
    cand: NDArray[np.uint32],
    at: NDArray[np.int64],
    new: NDArray[np.int64],
    band: NDArray[np.int64],
    rows: int,
    threshold: float,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """The leads whose band rows are equal and whose estimate reaches ``threshold``, once per
    (indexed row, new row): ``(at, new, estimate)``; ``cand[at]`` is the indexed signature."""
    cols = band[:, None] * rows + np.arange(rows)[None, :]
    equal = (new_sigs[new[:, None], cols] == cand[at[:, None], cols]).all(axis=1)
    at, new = at[equal], new[equal]
    key = np.unique(at * np.int64(len(new_sigs)) + new)
    at, new = key // len(new_sigs), key % len(new_sigs)
    est = np.count_nonzero(new_sigs[new] == cand[at], axis=1) / new_sigs.shape[1]
    ok = est >= threshold
    return at[ok], new[ok], est[ok].astype(np.float64)


class _Found:
    """The matched indexed rows gathered part by part, renumbered in id order at the end."""

    def __init__(self, rows: int, num_perm: int) -> None:
        self.rows, self.num_perm = rows, num_perm
        self.ids: list[str] = []
        self.parts: list[str] = []
        self.sigs: list[NDArray[np.uint32]] = []
        self.exact: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
        self.pairs: list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]] = []

    def add(
        self,
        part: str,
        cand_ids: list[str],
        cand_sigs: NDArray[np.uint32],
        exact: tuple[NDArray[np.int64], NDArray[np.int64]],
        pairs: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]],
    ) -> None:
        """Candidates ``cand_*`` of one read, with the exact ``(candidate, new row)`` and the
        confirmed ``(candidate, new row, estimate)`` among them; only those used are kept."""
        (e_at, e_new), (c_at, c_new, c_est) = exact, pairs
        used = np.unique(np.concatenate((e_at, c_at)))
        remap = np.full(len(cand_ids), -1, dtype=np.int64)
        remap[used] = len(self.ids) + np.arange(len(used))
        self.ids.extend(cand_ids[u] for u in used.tolist())
        self.parts.extend([part] * len(used))
        self.sigs.append(cand_sigs[used])
        self.exact.append((e_new, remap[e_at]))
        self.pairs.append((c_new, remap[c_at], c_est))

    def lookup(self) -> IndexLookup:
        n = self.rows
        if not self.ids:
            return IndexLookup.empty(n, self.num_perm)
        order = sorted(range(len(self.ids)), key=self.ids.__getitem__)
        renumber = np.empty(len(order), dtype=np.int64)
        renumber[np.array(order, dtype=np.int64)] = np.arange(len(order))
        exact = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        e_new = np.concatenate([e[0] for e in self.exact])
        e_at = np.concatenate([e[1] for e in self.exact])
        np.minimum.at(exact, e_new, renumber[e_at])
        exact[exact == np.iinfo(np.int64).max] = -1
        p_new = np.concatenate([p[0] for p in self.pairs])
        p_at = np.concatenate([p[1] for p in self.pairs])
        est = np.concatenate([p[2] for p in self.pairs])
        pairs = np.stack((p_new, renumber[p_at]), axis=1)
        by = np.lexsort((pairs[:, 1], pairs[:, 0]))
        return IndexLookup(
            [self.ids[i] for i in order], [self.parts[i] for i in order],
            np.concatenate(self.sigs)[np.array(order, dtype=np.int64)], exact,
            pairs[by], est[by],
        )  # fmt: skip


def lookup_index(
    index: DocIndex, sigs: NDArray[np.uint32], digests: NDArray[np.uint64], *, scan: bool = False
) -> IndexLookup:
    """Every exact copy and confirmed near pair of the new rows (``sigs``, ``digests``) in
    ``index``, under the index's parameters: through each part's key table, or by a scan of the
    parts without one (all with ``scan``: the reference the key tables are tested against)."""
    n = len(sigs)
    if not index.parts or n == 0:  # nothing to match (a new index has no parameters yet)
        return IndexLookup.empty(n, sigs.shape[1] if sigs.ndim == 2 else 0)
    params = index.minhash_params()
    if sigs.ndim != 2 or sigs.shape[1] != params.num_perm:
        raise SignatureError(
            f"signatures have shape {sigs.shape}, the index takes {params.num_perm} entries"
        )
    found = _Found(n, params.num_perm)
    keyed = [p for p in index.parts if p.keys is not None and not scan]
    scanned = [p for p in index.parts if p.keys is None or scan]
    if keyed:
        from neardup.core._index_keyed import keyed_lookup

        keyed_lookup(index, keyed, sigs, digests, found)
    if scanned:
        _scan(index, scanned, sigs, digests, found)
    return found.lookup()


def _scan(
    index: DocIndex,
    parts: list[IndexPart],
    sigs: NDArray[np.uint32],
    digests: NDArray[np.uint64],
    found: _Found,
) -> None:
    """Look the new rows up in ``parts`` by reading their digests and bands whole."""
    params = index.minhash_params()
    side = _NewSide(sigs, digests, params.bands)
    for part, file, parquet, groups, table in index.row_group_batches(
        ["digest", "bands"], parts=parts
    ):
        digest = part_matrix(index.url, file.path, table, "digest", 16, "<u8")
        bands = part_matrix(index.url, file.path, table, "bands", 8 * params.bands, "<u8")
        e_at, e_new = side.exact(digest)
        l_at, l_new, l_band = side.leads(bands)
        live = index.deletes.batch_live(part, file, parquet, groups)
        if live is not None:  # deleted rows are no match
            e_at, e_new = e_at[live[e_at]], e_new[live[e_at]]
            keep = live[l_at]
            l_at, l_new, l_band = l_at[keep], l_new[keep], l_band[keep]
        if len(e_at) == 0 and len(l_at) == 0:
            continue
        wanted = np.unique(np.concatenate((e_at, l_at)))
        cand_ids, cand_sigs, _ = _read_rows(index, file, parquet, groups, wanted, params.num_perm)
        local = np.searchsorted(wanted, l_at)
        confirmed = _confirmed(sigs, cand_sigs, local, l_new, l_band, params.rows, params.threshold)
        found.add(part.name, cand_ids, cand_sigs, (np.searchsorted(wanted, e_at), e_new), confirmed)


def _read_rows(
    index: DocIndex,
    file: IndexFile,
    parquet: Any,
    groups: list[int],
    rows: NDArray[np.int64],
    num_perm: int,
) -> tuple[list[str], NDArray[np.uint32], NDArray[np.uint64]]:
    """The ids, signatures and text digests of ``rows`` (sorted, numbered from the first of
    ``groups``), reading only the row groups that hold one."""
    starts = group_starts(parquet, groups)
    group_of = np.searchsorted(starts, rows, side="right") - 1
    ids: list[str] = []
    sigs: list[NDArray[np.uint32]] = []
    digests: list[NDArray[np.uint64]] = []
    for k in np.unique(group_of).tolist():
        local = rows[group_of == k] - starts[k]
        table = read_groups(index, file, parquet, [groups[k]], ["id", "digest", "signature"])
        ids.extend(ids_at(index, file, table, local))
        sigs.append(
            part_matrix(index.url, file.path, table, "signature", 4 * num_perm, "<u4")[local]
        )
        digests.append(part_matrix(index.url, file.path, table, "digest", 16, "<u8")[local])
    return (
        ids,
        np.ascontiguousarray(np.concatenate(sigs), dtype=np.uint32),
        np.ascontiguousarray(np.concatenate(digests), dtype=np.uint64),
    )


def lookup_without(lookup: IndexLookup, names: set[str]) -> IndexLookup:
    """``lookup`` less the indexed documents ``names`` (taken out of the index by this run:
    ``--recrawled replace``): their matches dropped, the others renumbered."""
    if not names or not any(i in names for i in lookup.ids):
        return lookup
    keep = np.array([i not in names for i in lookup.ids], dtype=np.bool_)
    renumber = np.full(len(keep) + 1, -1, dtype=np.int64)  # the last: "no match" (-1) stays -1
    renumber[np.flatnonzero(keep)] = np.arange(int(keep.sum()))
    exact = renumber[lookup.exact]
    taken = keep[lookup.pairs[:, 1]] if len(lookup.pairs) else np.empty(0, dtype=np.bool_)
    pairs = lookup.pairs[taken]
    pairs = np.stack((pairs[:, 0], renumber[pairs[:, 1]]), axis=1) if len(pairs) else pairs
    return IndexLookup(
        [i for i, k in zip(lookup.ids, keep.tolist(), strict=True) if k],
        [p for p, k in zip(lookup.parts, keep.tolist(), strict=True) if k],
        lookup.sigs[keep], exact, pairs, lookup.estimate[taken],
    )  # fmt: skip
