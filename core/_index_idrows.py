"""Is this id indexed? The one lookup of ids every caller uses (``find_ids``).

The re-crawl check of ``neardup dedup --index``, ``DocIndex.id_parts``/``id_digests``/
``id_signatures`` (``if_new``, the service's id checks) all come here. Per part:

- with an id table (``_index_ids``): the asked ids' hashes are looked up in it (O(ids) pages),
  and only the rows found are read from the data files (the row groups holding them): each
  row's real id is compared with the asked ones, so a hash shared by two ids never makes one
  count as the other, and a row whose id does not have the hash the table gives it is damage;
- without one (a part written before id tables): the row groups whose ``id`` statistics range
  holds an asked id have their ``id`` column compared (Arrow's hashed ``is_in``), as before.

Either way the rows found then give their digests and signatures, read by row.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._index_parts import BATCH_ROWS, ROW_GROUP, part_matrix
from neardup.core._index_rows import by_file, group_starts, ids_at, read_groups
from neardup.core.errors import IndexDamagedError

if TYPE_CHECKING:
    from neardup.core._index import DocIndex, IndexFile, IndexPart

__all__ = ["IndexedDocs", "find_ids", "groups_in_range"]

#: The columns ``find_ids`` may read beside ``id``, with their widths in bytes per entry.
_COLUMNS = ("digest", "signature")


@dataclass(frozen=True)
class IndexedDocs:
    """Indexed documents read by id: ``ids`` (sorted), and of each its part, text digest
    ``[k, 2]`` and signature ``[k, num_perm]`` (``[k, 0]`` for a column not asked for), and its
    row in its part (numbered across the part's files, as deletion vectors number them)."""

    ids: list[str]
    parts: list[str]
    digests: NDArray[np.uint64]
    sigs: NDArray[np.uint32]
    rows: NDArray[np.int64]

    def position(self) -> dict[str, int]:
        """Each id's row."""
        return {doc_id: i for i, doc_id in enumerate(self.ids)}


def _utf8(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate), as every indexed id has."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Gathered:
    """What ``find_ids`` found, part by part."""

    def __init__(self, num_perm: int, columns: Sequence[str]) -> None:
        self.widths = {"digest": 2 if "digest" in columns else 0,
                       "signature": num_perm if "signature" in columns else 0}  # fmt: skip
        self.ids: list[str] = []
        self.parts: list[str] = []
        self.digests: list[NDArray[np.uint64]] = []
        self.sigs: list[NDArray[np.uint32]] = []
        self.rows: list[NDArray[np.int64]] = []

    def docs(self) -> IndexedDocs:
        order = np.array(sorted(range(len(self.ids)), key=self.ids.__getitem__), dtype=np.int64)
        digests = np.concatenate(self.digests) if self.digests else None
        sigs = np.concatenate(self.sigs) if self.sigs else None
        return IndexedDocs(
            [self.ids[i] for i in order.tolist()], [self.parts[i] for i in order.tolist()],
            np.empty((0, self.widths["digest"]), np.uint64) if digests is None
            else np.ascontiguousarray(digests[order], dtype=np.uint64),
            np.empty((0, self.widths["signature"]), np.uint32) if sigs is None
            else np.ascontiguousarray(sigs[order], dtype=np.uint32),
            np.concatenate(self.rows)[order] if self.rows else np.empty(0, np.int64),
        )  # fmt: skip


def find_ids(
    index: DocIndex,
    ids: Collection[str],
    columns: Sequence[str] = _COLUMNS,
    *,
    scan: bool = False,
) -> IndexedDocs:
    """The indexed documents among ``ids``, with the ``columns`` (of ``digest``,
    ``signature``) asked for: through each part's id table, or the statistics of a part without
    one (all parts with ``scan``: the reference the tables are tested against)."""
    unknown = sorted(set(columns) - set(_COLUMNS))
    if unknown:
        raise ValueError(f"find_ids reads {_COLUMNS}, not {unknown[0]!r}")
    num_perm = index.minhash_params().num_perm if index.parts else 0
    found = _Gathered(num_perm, columns)
    asked = sorted(i for i in set(ids) if _utf8(i))  # others cannot be indexed ids
    if not asked or not index.parts:
        return found.docs()
    wanted = set(asked)
    hashes = None
    for part in index.parts:
        if part.ids is not None and not scan:
            if hashes is None:
                from neardup.core._index_ids import id_hashes

                hashes = np.unique(id_hashes(asked))  # ids of one hash: one lookup
            rows, given = _table_rows(index, part, hashes)
            live = ~np.isin(rows, index.deletes.rows(part))  # deleted rows are never read
            rows, given = rows[live], given[live]
            if len(rows):
                _gather(index, part, (rows, given), wanted, columns, found)
        else:
            _statistics_found(index, part, asked, columns, found)
    return found.docs()


def _table_rows(
    index: DocIndex, part: IndexPart, hashes: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The rows of ``part`` whose id has one of ``hashes`` (sorted, once each), and the hash
    the id table gives each; IndexDamagedError for a row out of the part or listed twice."""
    with index.id_table(part) as table:
        query, rows = table.find(hashes)
    path = part.ids.path if part.ids else part.name
    if len(rows) and (int(rows.max()) >= part.rows or int(rows.min()) < 0):
        raise IndexDamagedError(index.url, path, "names a row the part has not")
    order = np.argsort(rows, kind="stable")
    rows, given = rows[order], hashes[query[order]]
    if len(rows) > 1 and bool((rows[1:] == rows[:-1]).any()):
        raise IndexDamagedError(index.url, path, "lists a row twice")
    return rows, given


def groups_in_range(meta: Any, ordered: Sequence[str]) -> list[int]:
    """The row groups of a file whose ``id`` statistics may hold one of ``ordered`` (sorted);
    every group without statistics."""
    column = meta.schema.names.index("id")
    out = []
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max:
            out.append(group)
            continue
        low, high = stats.min, stats.max
        if isinstance(low, bytes) or isinstance(high, bytes):
            out.append(group)  # statistics not as strings: read the group
            continue
        if bisect.bisect_left(ordered, low) < bisect.bisect_right(ordered, high):
            out.append(group)
    return out


def _statistics_found(
    index: DocIndex, part: IndexPart, ordered: list[str], columns: Sequence[str], found: _Gathered
) -> None:
    """Add to ``found`` the rows of ``part`` whose id is one of ``ordered``: the ``id`` (and
    ``columns``) of the row groups whose statistics range holds one, a span of groups a read,
    the ids compared whole."""
    import pyarrow as pa

    # pyarrow.compute (~0.2 s to import, once): its hashed membership test decodes no Python
    # string per indexed id (6x less CPU than comparing ``to_pylist``'s).
    import pyarrow.compute as pc

    asked = pa.array(ordered, type=pa.string())
    step = max(BATCH_ROWS // ROW_GROUP, 1)
    start = 0  # the file's first row in the part
    for f in part.files:
        with index.parquet(f) as parquet:
            meta = parquet.metadata
            sizes = np.array([meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
            first = np.cumsum([0, *sizes.tolist()])
            groups = groups_in_range(meta, ordered)
            for lo in range(0, len(groups), step):
                chosen = groups[lo : lo + step]
                table = read_groups(index, f, parquet, chosen, ["id", *columns])
                # Row i of the groups read together is row i - read[j] + first[chosen[j]].
                read = np.cumsum([0, *sizes[chosen].tolist()])
                column = table.column("id")
                held = pc.is_in(column, value_set=asked.cast(column.type))
                at = np.flatnonzero(held.to_numpy(zero_copy_only=False))
                got = [column[i].as_py() for i in at.tolist()]
                deleted = index.deletes.ids(part)  # a deleted id may be live in a later part
                if deleted:
                    keep = np.array([i not in deleted for i in got], dtype=np.bool_)
                    at, got = at[keep], [i for i in got if i not in deleted]
                if len(at):
                    j = np.searchsorted(read, at, side="right") - 1
                    rows = start + first[np.asarray(chosen)[j]] + at - read[j]
                    _add_rows(index, f, table, (at, rows), got, part.name, found)
        start += f.rows


def _add_rows(
    index: DocIndex,
    f: IndexFile,
    table: Any,
    at_rows: tuple[NDArray[np.int64], NDArray[np.int64]],
    ids: list[str],
    part: str,
    found: _Gathered,
) -> None:
    """Add rows ``at`` of ``table`` (read from ``f``), whose ids are ``ids`` and rows in their
    part ``rows``, to ``found``."""
    at, rows = at_rows
    found.ids.extend(ids)
    found.rows.append(np.asarray(rows, dtype=np.int64))
    found.parts.extend([part] * len(at))
    if found.widths["digest"]:
        found.digests.append(part_matrix(index.url, f.path, table, "digest", 16, "<u8")[at])
    if found.widths["signature"]:
        width = 4 * found.widths["signature"]
        found.sigs.append(part_matrix(index.url, f.path, table, "signature", width, "<u4")[at])


def _gather(
    index: DocIndex,
    part: IndexPart,
    rows_given: tuple[NDArray[np.int64], NDArray[np.int64]],
    wanted: set[str],
    columns: Sequence[str],
    found: _Gathered,
) -> None:
    """Add to ``found`` the rows of ``part`` among ``rows`` (sorted, numbered across its files)
    whose real id is one of ``wanted``, with ``columns``; IndexDamagedError for a row whose id
    has not the hash the id table gives it (``given``)."""
    rows, given = rows_given
    step = max(BATCH_ROWS // ROW_GROUP, 1)  # groups a read, as the statistics path
    for held in by_file(part, rows):
        f, local, hashes = held.file, held.local, given[held.inside]
        with index.parquet(f) as parquet:
            first = group_starts(parquet)
            group_of = np.searchsorted(first, local, side="right") - 1
            groups = np.unique(group_of).tolist()
            for lo in range(0, len(groups), step):
                chosen = groups[lo : lo + step]
                sel = np.isin(group_of, chosen)
                # Row ``r`` of group ``chosen[j]`` is row ``r - first[chosen[j]] + read[j]`` of
                # the groups read together.
                read = group_starts(parquet, chosen)
                j = np.searchsorted(chosen, group_of[sel])
                at = local[sel] - first[group_of[sel]] + read[j]
                table = read_groups(index, f, parquet, chosen, ["id", *columns])
                got = ids_at(index, f, table, at)
                _check_hashes(index, part, got, hashes[sel])
                keep = np.array([i in wanted for i in got], dtype=np.bool_)
                if keep.any():
                    kept = [i for i, w in zip(got, keep.tolist(), strict=True) if w]
                    found_rows = local[sel][keep] + held.start
                    _add_rows(index, f, table, (at[keep], found_rows), kept, part.name, found)


def _check_hashes(
    index: DocIndex, part: IndexPart, ids: list[str], given: NDArray[np.int64]
) -> None:
    """IndexDamagedError unless each of ``ids`` (read at rows the id table gave) has the hash
    the table gives its row: a table of other rows, or garbled, is never read as absence."""
    from neardup.core._index_ids import id_hashes

    wrong = np.flatnonzero(id_hashes(ids) != given)
    if len(wrong):
        raise IndexDamagedError(
            index.url, part.ids.path if part.ids else part.name,
            f"does not hold the hash of the id {ids[int(wrong[0])]!r} at its row",
        )  # fmt: skip
