"""Deletion vectors: the rows of a part deleted since it was written (Delta Lake's idea).

A part's files never change. A delete (``neardup index delete``, ``--recrawled replace``) writes,
for each part holding one of the ids, a small Arrow IPC file in the part's directory,
``deleted-{V:08d}-{12 hex}.arrow`` (V: the version it is written for), of one ``uint32`` column
``row``: every deleted row of the part (numbered across its data files in listing order),
ascending, those of the part's earlier vector included. The manifest of version V lists it as
the part's ``deleted`` entry (path, rows deleted, bytes), which a later version's vector for the
same part replaces. A manifest listing one is of ``format_version`` 3, which a neardup reading
only 1 and 2 refuses: it never serves deleted rows.

Every reader skips the deleted rows: lookups by key drop them from a key table's hits before any
row is read (``Deletes.live_hits``), scans mask them (``Deletes.batch_live``), lookups by id drop
the ids read at them (``Deletes.ids``). ``neardup index compact`` rewrites a part with a vector
without its deleted rows, and the vector goes with the old part.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._index_log import PARTS
from neardup.core._index_rows import by_file, group_starts, ids_at, read_groups
from neardup.core._json import read_json
from neardup.core.errors import IndexConflictError, IndexDamagedError

if TYPE_CHECKING:
    from neardup.core._index import DocIndex, IndexFile, IndexPart

__all__ = [
    "DELETES_FORMAT_VERSION",
    "DeleteResult",
    "Deletes",
    "delete_ids",
    "deleted_since",
    "deletes_problem",
    "write_deletes",
]

#: The manifest format version of an index whose parts list deletion vectors.
DELETES_FORMAT_VERSION = 3
#: The schema metadata key of a vector: JSON ``{"part": name, "part_rows": rows}``.
META_KEY = b"neardup.deleted"
_COLUMN = "row"


def deletes_problem(item: dict[str, Any], format_version: int) -> str | None:
    """What is wrong with a part's ``deleted`` entry (its deletion vector), if it has one."""
    name, entry = item["name"], item.get("deleted")
    if entry is None:
        return None
    if format_version < DELETES_FORMAT_VERSION:
        return f"part {name} lists a deletion vector, which format_version {format_version} has not"
    path = entry.get("path") if isinstance(entry, dict) else None
    if not isinstance(entry, dict) or not isinstance(path, str):
        return f"part {name} has deleted without a path"
    pieces = path.split("/")
    if pieces[:2] != [PARTS, name] or len(pieces) != 3 or pieces[2] in {"", ".", ".."}:
        return f"part {name} lists deleted {path!r}, not a file under {PARTS}/{name}/"
    rows, size = entry.get("rows"), entry.get("bytes")
    if not (isinstance(rows, int) and isinstance(size, int)) or isinstance(rows, bool):
        return f"part {name} lists deleted {path} without whole rows and bytes"
    if isinstance(size, bool) or size < 0 or not 1 <= rows <= item["rows"]:
        return f"part {name} lists deleted {path} with rows {rows!r} (1 to {item['rows']})"
    return None


def _table(part: str, part_rows: int, rows: NDArray[np.int64]) -> Any:
    import pyarrow as pa

    meta = {META_KEY: json.dumps({"part": part, "part_rows": part_rows}).encode("utf-8")}
    schema = pa.schema([pa.field(_COLUMN, pa.uint32(), nullable=False)], metadata=meta)
    return pa.table([pa.array(rows.astype(np.uint32), type=pa.uint32())], schema=schema)


def _parse(data: bytes, part: IndexPart, listed: int) -> NDArray[np.int64]:
    """The rows a vector's bytes hold; ValueError saying what is wrong."""
    import pyarrow as pa

    try:
        table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise ValueError(f"is not a readable deletion vector ({exc})") from None
    meta = read_json((table.schema.metadata or {}).get(META_KEY, b"null").decode("utf-8"))
    if table.schema.names != [_COLUMN] or table.schema.field(0).type != pa.uint32():
        raise ValueError(f"has columns {table.schema}, not one uint32 column {_COLUMN!r}")
    if meta != {"part": part.name, "part_rows": part.rows}:
        raise ValueError(f"is the deletion vector of {meta!r}, not of part {part.name}")
    column = table.column(0)
    if column.null_count or table.num_rows != listed:
        raise ValueError(f"holds {table.num_rows} rows, the index lists {listed}")
    rows: NDArray[np.int64] = np.asarray(column.to_numpy(), dtype=np.int64)
    if len(rows) and (np.any(np.diff(rows) <= 0) or rows[-1] >= part.rows):
        raise ValueError(f"is not ascending rows of the part's {part.rows}")
    return rows


class Deletes:
    """The deletion vectors of one version of an index, read once each (they are small)."""

    def __init__(self, index: DocIndex) -> None:
        self.index = index
        self._rows: dict[str, NDArray[np.int64]] = {}
        self._ids: dict[str, frozenset[str]] = {}

    def rows(self, part: IndexPart) -> NDArray[np.int64]:
        """The deleted rows of ``part``, ascending (none without a vector); IndexDamagedError
        naming the vector if it is missing or not the listed vector of this part."""
        f = part.deleted
        if f is None:
            return np.empty(0, dtype=np.int64)
        if part.name not in self._rows:
            index = self.index
            try:
                with index.fs.open(index.path(f.path), "rb") as handle:
                    data = handle.read()
            except (OSError, FileNotFoundError):
                raise index._missing(f) from None
            if len(data) != f.bytes:
                raise IndexDamagedError(
                    index.url, f.path, f"has {len(data)} bytes, the index lists {f.bytes}"
                )
            try:
                self._rows[part.name] = _parse(data, part, f.rows)
            except ValueError as exc:
                raise IndexDamagedError(index.url, f.path, str(exc)) from None
        return self._rows[part.name]

    def ids(self, part: IndexPart) -> frozenset[str]:
        """The ids at the deleted rows of ``part`` (read by row, once)."""
        if part.deleted is None:
            return frozenset()
        if part.name not in self._ids:
            self._ids[part.name] = frozenset(_ids_at(self.index, part, self.rows(part)))
        return self._ids[part.name]

    def live_hits(
        self, part: IndexPart, query: NDArray[np.int64], rows: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """A key table's hits ``(query, row)`` of ``part`` without those at deleted rows."""
        if part.deleted is None or len(rows) == 0:
            return query, rows
        live = ~np.isin(rows, self.rows(part))
        return query[live], rows[live]

    def batch_live(
        self, part: IndexPart, f: IndexFile, parquet: Any, groups: Sequence[int]
    ) -> NDArray[np.bool_] | None:
        """Which rows of the row groups ``groups`` (consecutive) of ``part``'s file ``f`` are
        live; None when every row of the part is."""
        if part.deleted is None:
            return None
        offset = 0
        for g in part.files:
            if g.path == f.path:
                break
            offset += g.rows
        meta = parquet.metadata
        start = offset + sum(meta.row_group(g).num_rows for g in range(groups[0]))
        count = sum(meta.row_group(g).num_rows for g in groups)
        return ~np.isin(np.arange(start, start + count, dtype=np.int64), self.rows(part))

    def all_ids(self) -> Iterator[tuple[str, str]]:
        """``(id, part name)`` of every deleted row of the version."""
        for part in self.index.parts:
            for doc_id in sorted(self.ids(part)):
                yield doc_id, part.name


def _ids_at(index: DocIndex, part: IndexPart, rows: NDArray[np.int64]) -> list[str]:
    """The ids at ``rows`` (ascending) of ``part``, reading only the row groups holding one."""
    out: list[str] = []
    for held in by_file(part, rows):
        with index.parquet(held.file) as parquet:
            starts = group_starts(parquet)
            group_of = np.searchsorted(starts, held.local, side="right") - 1
            for g in np.unique(group_of).tolist():
                table = read_groups(index, held.file, parquet, [g], ["id"])
                at = held.local[group_of == g] - starts[g]
                out.extend(ids_at(index, held.file, table, at))
    return out


def live_rows_of(
    index: DocIndex, ids: Collection[str]
) -> dict[str, tuple[NDArray[np.int64], list[str]]]:
    """Per part name, the live rows holding one of ``ids`` (ascending) and their ids, found by
    core's one lookup of ids (``_index_idrows.find_ids``)."""
    from neardup.core._index_idrows import find_ids

    found = find_ids(index, ids, ())
    by_part: dict[str, list[int]] = {}
    for i, name in enumerate(found.parts):
        by_part.setdefault(name, []).append(i)
    out: dict[str, tuple[NDArray[np.int64], list[str]]] = {}
    for name, found_at in by_part.items():
        at = np.array(found_at, dtype=np.int64)
        order = at[np.argsort(found.rows[at], kind="stable")]
        out[name] = (found.rows[order], [found.ids[i] for i in order.tolist()])
    return out


def write_deletes(index: DocIndex, ids: Collection[str]) -> tuple[dict[str, IndexFile], list[str]]:
    """Deletion vectors taking ``ids`` out of ``index``: for each part holding a live one, a new
    vector (its earlier one's rows and these) written in the part's directory for the version
    after ``index.version``, listed by no version until ``commit_index(deletes=...)`` commits
    it. Returns the vectors by part name, and the ids found (sorted; the others are not in
    the index)."""
    import pyarrow as pa

    from neardup.core._index import IndexFile, _sync

    vectors: dict[str, IndexFile] = {}
    found: list[str] = []
    parts = {p.name: p for p in index.parts}
    for name, (rows, names) in live_rows_of(index, ids).items():
        part = parts[name]
        merged = np.union1d(index.deletes.rows(part), rows)
        relative = f"{PARTS}/{name}/deleted-{index.version + 1:08d}-{uuid.uuid4().hex[:12]}.arrow"
        path = index.path(relative)
        table = _table(name, part.rows, merged)
        with (
            index.fs.open(path, "wb") as handle,
            pa.ipc.new_file(handle, table.schema) as writer,
        ):
            writer.write_table(table)
        _sync(index, path)
        vectors[name] = IndexFile(relative, len(merged), int(index.fs.size(path)))
        found.extend(names)
    return vectors, sorted(found)


def apply_deletes(parts: Sequence[IndexPart], deletes: Mapping[str, IndexFile]) -> list[IndexPart]:
    """``parts`` with the vectors ``deletes`` (by part name) as their ``deleted`` entries;
    ValueError naming a vector of a part not among them."""
    names = {p.name for p in parts}
    unknown = sorted(set(deletes) - names)
    if unknown:
        raise ValueError(f"a deletion vector of part {unknown[0]}, which the version has not")
    return [replace(p, deleted=deletes[p.name]) if p.name in deletes else p for p in parts]


@dataclass(frozen=True)
class DeleteResult:
    """What ``delete_ids`` did.

    Attributes:
        version: the version committed (the one read when nothing was deleted).
        deleted: the ids taken out of the index, sorted.
        missing: the ids asked for that the index did not hold, sorted.
        parts: the parts given a new deletion vector.
        rows: the documents left in the index.
    """

    version: int
    deleted: tuple[str, ...]
    missing: tuple[str, ...]
    parts: tuple[str, ...]
    rows: int


def delete_ids(
    url: str, ids: Collection[str], *, before_commit: Callable[[], None] | None = None
) -> DeleteResult:
    """Take the documents ``ids`` out of the index at ``url``: a deletion vector for each part
    holding one, committed as the next version (nothing is committed when none is indexed).

    Args:
        url: the index.
        ids: the ids to delete; those not in the index are returned as ``missing``.
        before_commit: called once the vectors are written, just before the commit (a test hook).

    Raises:
        IndexMissingError: nothing committed at ``url``.
        IndexDamagedError: a listed file is missing or wrong (nothing is changed).
        IndexConflictError: another run committed first (the new vectors are removed).
    """
    from neardup.core._index import DocIndex, commit_index

    index = DocIndex.open(url)
    index.verify()
    vectors, found = write_deletes(index, ids)
    missing = tuple(sorted(set(ids) - set(found)))
    if not vectors:
        return DeleteResult(index.version, (), missing, (), index.rows)
    try:
        if before_commit is not None:
            before_commit()
        version = commit_index(index, index.minhash_params(), deletes=vectors)
    except IndexConflictError as exc:
        for f in vectors.values():  # listed by no version: removed
            with suppress(OSError, FileNotFoundError):
                index.fs.rm(index.path(f.path))
        raise IndexConflictError(url, exc.version, exc.parts, deletion=True) from None
    except BaseException:
        for f in vectors.values():
            with suppress(OSError, FileNotFoundError):
                index.fs.rm(index.path(f.path))
        raise
    rows = index.rows - len(found)
    return DeleteResult(version, tuple(found), missing, tuple(sorted(vectors)), rows)


def deleted_since(old: DocIndex, new: DocIndex) -> list[str]:
    """The ids of rows live in ``old`` that ``new`` (a later version) deleted, in the parts both
    list (sorted)."""
    before = {p.name: p for p in old.parts}
    out: set[str] = set()
    for part in new.parts:
        was = before.get(part.name)
        if was is None or part.deleted is None or part.deleted == was.deleted:
            continue
        rows = np.setdiff1d(new.deletes.rows(part), old.deletes.rows(was))
        out.update(_ids_at(new, part, rows))
    return sorted(out)
