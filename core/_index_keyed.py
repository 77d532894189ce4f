"""New documents against the parts that have a key table: found by key, not by a scan.

The new rows' keys (each text digest's first 8 bytes, and each live row's band digests) are
looked up in each part's key table (``_index_keys.KeyTable.find``: O(keys) pages read), then
only the rows found have their ``id``, ``digest`` and ``signature`` read, by row position, and
are decided by the same rules as a scan (``_index_lookup``): the full 16-byte digest for an
exact copy, the band's entries and the estimate for a near pair.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from neardup.core._banding import band_digests, empty_rows
from neardup.core._index_keys import DIGEST_BAND
from neardup.core._index_rows import by_file

if TYPE_CHECKING:
    from neardup.core._index import DocIndex, IndexPart
    from neardup.core._index_lookup import IndexLookup, _Found

__all__ = ["band_keys", "keyed_lookup", "near_matches", "new_keys"]


def new_keys(
    sigs: NDArray[np.uint32], digests: NDArray[np.uint64], bands: int
) -> tuple[NDArray[np.int64], NDArray[np.int16], NDArray[np.int64]]:
    """``(key, band, new row)`` of the new rows' lookups, sorted by key: every text digest
    (band ``DIGEST_BAND``), and the band digests of every live row (``band_keys``')."""
    n = len(sigs)
    bkeys, bband, bnew = _band_rows(sigs, bands)
    keys = np.concatenate((np.ascontiguousarray(digests[:, 0], dtype="<u8").view("<i8"), bkeys))
    band = np.concatenate((np.full(n, DIGEST_BAND, dtype=np.int16), bband))
    new = np.concatenate((np.arange(n, dtype=np.int64), bnew))
    order = np.argsort(keys, kind="stable")
    return keys[order], band[order], new[order]


def keyed_lookup(
    index: DocIndex,
    parts: list[IndexPart],
    sigs: NDArray[np.uint32],
    digests: NDArray[np.uint64],
    found: _Found,
) -> None:
    """Add to ``found`` what the new rows match in ``parts`` (each with a key table)."""
    from neardup.core._index_lookup import _confirmed

    params = index.minhash_params()
    keys, band, new = new_keys(sigs, digests, params.bands)
    for part in parts:
        hit = _candidates(index, part, keys, band, params.num_perm)
        if hit is None:
            continue
        query, at, cand_ids, cand_sigs, cand_digests = hit
        is_digest = band[query] == DIGEST_BAND
        e_at, e_new = at[is_digest], new[query[is_digest]]
        same = (cand_digests[e_at] == digests[e_new]).all(axis=1)
        l_at, l_new = at[~is_digest], new[query[~is_digest]]
        l_band = band[query[~is_digest]].astype(np.int64)
        confirmed = _confirmed(sigs, cand_sigs, l_at, l_new, l_band, params.rows, params.threshold)
        found.add(part.name, cand_ids, cand_sigs, (e_at[same], e_new[same]), confirmed)


def near_matches(index: DocIndex, sigs: NDArray[np.uint32], threshold: float) -> IndexLookup:
    """The indexed documents each of ``sigs`` matches as the service matches documents: a band
    in common (its rows equal) and an estimate of at least ``threshold``; an empty (all-P)
    signature never matches, on either side, and equal text digests alone are no match
    (``exact`` is all -1). Through each part's key table (IndexLayoutError for a part without
    one: ``neardup index compact`` gives it one); O(keys) pages read per part."""
    from neardup.core._index_lookup import IndexLookup, _confirmed, _Found
    from neardup.core.errors import IndexLayoutError, SignatureError

    n = len(sigs)
    if not index.parts or n == 0:
        return IndexLookup.empty(n, sigs.shape[1] if sigs.ndim == 2 else 0)
    params = index.minhash_params()
    if sigs.ndim != 2 or sigs.shape[1] != params.num_perm:
        raise SignatureError(
            f"signatures have shape {sigs.shape}, the index takes {params.num_perm} entries"
        )
    keys, band, new = band_keys(sigs, params.bands)
    found = _Found(n, params.num_perm)
    none = np.empty(0, dtype=np.int64)
    for part in index.parts:
        if part.keys is None:
            raise IndexLayoutError(index.url, part.name)
        hit = _candidates(index, part, keys, band, params.num_perm)
        if hit is None:
            continue
        query, at, cand_ids, cand_sigs, _ = hit
        live = ~empty_rows(cand_sigs)[at]
        at, query = at[live], query[live]
        confirmed = _confirmed(
            sigs, cand_sigs, at, new[query], band[query].astype(np.int64), params.rows, threshold
        )
        found.add(part.name, cand_ids, cand_sigs, (none, none), confirmed)
    return found.lookup()


def band_keys(
    sigs: NDArray[np.uint32], bands: int
) -> tuple[NDArray[np.int64], NDArray[np.int16], NDArray[np.int64]]:
    """``(key, band, row)`` of the band digests of every live row of ``sigs``, sorted by key."""
    keys, band, new = _band_rows(sigs, bands)
    order = np.argsort(keys, kind="stable")
    return keys[order], band[order], new[order]


def _band_rows(
    sigs: NDArray[np.uint32], bands: int
) -> tuple[NDArray[np.int64], NDArray[np.int16], NDArray[np.int64]]:
    """``(key, band, row)`` of the band digests of every live row of ``sigs``, band by band."""
    live = np.flatnonzero(~empty_rows(sigs))
    bd = np.ascontiguousarray(band_digests(sigs[live], bands), dtype="<u8")
    keys = bd.T.reshape(-1).view("<i8")
    band = np.repeat(np.arange(bands, dtype=np.int16), len(live))
    return keys, band, np.tile(live, bands).astype(np.int64)


def _candidates(
    index: DocIndex,
    part: IndexPart,
    keys: NDArray[np.int64],
    band: NDArray[np.int16],
    num_perm: int,
) -> (
    tuple[NDArray[np.int64], NDArray[np.int64], list[str], NDArray[np.uint32], NDArray[np.uint64]]
    | None
):
    """The rows of ``part`` whose key table holds one of ``(keys, band)``: ``(query, at, ids,
    signatures, digests)``, ``keys[query]`` found at candidate ``at`` (of the candidates read,
    each once, by row); None when there is none."""
    with index.key_table(part) as table:
        query, rows = table.find(keys, band)
    query, rows = index.deletes.live_hits(part, query, rows)  # deleted rows are never read
    if len(rows) == 0:
        return None
    if int(rows.max()) >= part.rows or int(rows.min()) < 0:
        from neardup.core.errors import IndexDamagedError

        raise IndexDamagedError(
            index.url,
            part.keys.path if part.keys else part.name,
            "names a row the part has not",
        )
    wanted = np.unique(rows)
    cand_ids, cand_sigs, cand_digests = _rows_of(index, part, wanted, num_perm)
    return query, np.searchsorted(wanted, rows), cand_ids, cand_sigs, cand_digests


def _rows_of(
    index: DocIndex, part: IndexPart, rows: NDArray[np.int64], num_perm: int
) -> tuple[list[str], NDArray[np.uint32], NDArray[np.uint64]]:
    """The ids, signatures and digests of a part's ``rows`` (sorted, numbered across its files
    in listing order), reading only the row groups that hold one."""
    from neardup.core._index_lookup import _read_rows

    ids: list[str] = []
    sigs: list[NDArray[np.uint32]] = []
    digests: list[NDArray[np.uint64]] = []
    for held in by_file(part, rows):
        with index.parquet(held.file) as parquet:
            groups = list(range(parquet.metadata.num_row_groups))
            i, s, d = _read_rows(index, held.file, parquet, groups, held.local, num_perm)
        ids.extend(i)
        sigs.append(s)
        digests.append(d)
    return ids, np.concatenate(sigs), np.concatenate(digests)
