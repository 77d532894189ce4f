"""A persistent index of kept documents (issue 20): Parquet parts plus a manifest log.

Layout of an index at ``URL`` (a directory or an fsspec URL; docs/index.md)::

    URL/_index/00000001.json              committed versions (the flat log, to the seal)
    URL/_index/log/00000/00000002.json    those after the seal, 1,000 a directory
    URL/parts/<part>/data-00000.parquet

A version lists its parameters (``index_params``: every ``MinhashParams`` field but ``ngram``,
which only decontamination reads) and its parts, each with its files' paths, rows and bytes.
A commit writes the part's files first, then creates the next version's file exclusively (a
link from a temporary name locally, which fails when the name exists; ``xb`` elsewhere): of two
runs committing the same version one wins and the other gets ``IndexConflictError``, and no
reader ever sees a part that is not complete. Files under ``parts/`` that no version lists are
leftovers of killed runs, invisible to readers. Which versions are committed, each manifest's
checks are ``_index_log``'s (a lost version is damage, never a rollback), the commit itself
``_index_commit``'s.
"""

from __future__ import annotations

import datetime as dt
import os
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._index_commit import create_version, mark_committed
from neardup.core._index_ids import IDS_FILE, IdBuilder
from neardup.core._index_keys import KEYS_FILE, KeyBuilder
from neardup.core._index_log import (
    FORMAT,
    FORMAT_VERSION,
    PARTS,
    index_params,
    manifest_problem,
    part_name,
    part_version,
    read_latest,
    read_version,
    sealed_of,
    version_file,
)
from neardup.core._index_parts import (
    BATCH_ROWS,
    COLUMNS,
    PARQUET_OPTIONS,
    ROW_GROUP,
    binary_matrix,
    part_matrix,
    part_table,
)
from neardup.core._params import MinhashParams
from neardup.core._scripts import tokenizer_name, tokenizer_version
from neardup.core._storage import _is_local, check_bucket, filesystem
from neardup.core._text import TOKENIZERS
from neardup.core.errors import (
    IndexChangedError,
    IndexConflictError,
    IndexDamagedError,
    IndexIdError,
    IndexMissingError,
    IndexParameterError,
)

if TYPE_CHECKING:
    from neardup.core._index_deletes import Deletes
    from neardup.core._index_ids import IdTable
    from neardup.core._index_keys import KeyTable
    from neardup.core._index_lookup import IndexLookup

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_RUN_INPUTS",
    "DocIndex",
    "IndexFile",
    "IndexPart",
    "commit_index",
    "index_params",
    "index_record",
    "index_record_line",
    "run_info",
    "write_part",
    "write_part_keys",
]

#: The input names a part's ``run`` lists at most (then ``inputs_total`` counts them all).
MAX_RUN_INPUTS = 100


def run_info(
    engine: str, version: str, inputs: Sequence[str], mode: str = "append"
) -> dict[str, Any]:
    """A part's ``run``: when, which engine and neardup version, from which inputs (capped)."""
    return {
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "engine": engine,
        "neardup": version,
        "inputs": list(inputs[:MAX_RUN_INPUTS]),
        "inputs_total": len(inputs),
        "mode": mode,
    }


def index_record(
    url: str, mode: str, version: int, rows: int, matched: int, matching: int
) -> dict[str, Any]:
    """A run's manifest ``index`` object before its part is added (both engines write it):
    the version read and its documents, the indexed documents the run's rows match
    (``matched``) and the rows matching one (``matching``)."""
    return {
        "url": url,
        "mode": mode,
        "version_read": version,
        "version_written": None,
        "part": None,
        "rows_added": 0,
        "indexed_rows": rows,
        "indexed_rows_matched": matched,
        "rows_matching_index": matching,
    }


def index_record_line(record: Mapping[str, Any]) -> str:
    """An ``index_record`` in one line, as ``neardup dedup`` reports it on either engine."""
    added = (
        f"added {record['rows_added']} rows as version {record['version_written']} "
        f"(part {record['part']})"
        if record["version_written"] is not None
        else "added nothing"
    )
    return (
        f"neardup dedup: index {record['url']}: read version {record['version_read']} "
        f"({record['indexed_rows']} documents, {record['indexed_rows_matched']} matched), " + added
    )


@dataclass(frozen=True)
class IndexFile:
    """One Parquet file of a part: ``path`` relative to the index, its rows and bytes."""

    path: str
    rows: int
    bytes: int


@dataclass(frozen=True)
class IndexPart:
    """One part: its name, rows, files and the run that made it (``run_info``)."""

    name: str
    rows: int
    files: tuple[IndexFile, ...]
    run: dict[str, Any] = field(default_factory=dict)
    #: Its key table (``_index_keys``); None for a part of the first layout, read by a scan.
    keys: IndexFile | None = None
    #: Its id table (``_index_ids``); None for a part written before them (format_version 1
    #: and 2), whose ids are checked through the data files' statistics.
    ids: IndexFile | None = None
    #: Its deletion vector (``_index_deletes``: ``rows`` counts the rows deleted); None: none.
    deleted: IndexFile | None = None

    @property
    def all_files(self) -> tuple[IndexFile, ...]:
        """Every file the part lists: its data files, then its key table, id table and deletion
        vector if it has them."""
        return (*self.files, *(f for f in (self.keys, self.ids, self.deleted) if f is not None))

    @property
    def live_rows(self) -> int:
        """Its documents: its rows less those its deletion vector deletes."""
        return self.rows - (0 if self.deleted is None else self.deleted.rows)

    def as_json(self) -> dict[str, Any]:
        """The part as a version file lists it."""
        files = [{"path": f.path, "rows": f.rows, "bytes": f.bytes} for f in self.files]
        body = {"name": self.name, "rows": self.rows, "files": files, "run": self.run}
        for name, f in (("keys", self.keys), ("ids", self.ids), ("deleted", self.deleted)):
            if f is not None:
                body[name] = {"path": f.path, "rows": f.rows, "bytes": f.bytes}
        return body

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> IndexPart:
        """The part of a version file's entry (KeyError/TypeError on a malformed one)."""
        files = tuple(
            IndexFile(str(f["path"]), int(f["rows"]), int(f["bytes"])) for f in item["files"]
        )
        keys, ids, deleted = (
            None if item.get(name) is None
            else IndexFile(str(item[name]["path"]), int(item[name]["rows"]),
                           int(item[name]["bytes"]))
            for name in ("keys", "ids", "deleted")
        )  # fmt: skip
        run = dict(item.get("run") or {})
        return cls(str(item["name"]), int(item["rows"]), files, run, keys, ids, deleted)


class DocIndex:
    """One committed version of an index (or the empty index at a new location: version 0).

    Attributes:
        url: the index's location, as given.
        version: the version read (0: nothing committed yet).
        manifest: that version's JSON object (empty at version 0).
        parts: its parts, in the order they were added.
    """

    def __init__(
        self, url: str, fs: Any, root: str, version: int, manifest: dict[str, Any]
    ) -> None:
        self.url = url
        self.fs = fs
        self.root = root.rstrip("/") or root
        self.version = version
        self.manifest = manifest
        if version or manifest:  # version 0 is the empty index: no manifest
            problem = manifest_problem(manifest, version)
            if problem is not None:
                raise IndexDamagedError(url, version_file(version), problem)
        self.parts = [IndexPart.from_json(p) for p in manifest.get("parts", [])]

    @classmethod
    def open(cls, url: str, *, missing_ok: bool = False) -> DocIndex:
        """The latest committed version at ``url``, read from fresh listings and checked whole
        (``_index_log.read_latest``: IndexDamagedError for a missing version or a malformed
        manifest); IndexMissingError when there is none (with ``missing_ok``, the empty index of
        version 0 instead, to create: IndexBucketError if it would be in a bucket that does not
        exist, which the first write would create)."""
        fs, root = filesystem(url)
        version, manifest = read_latest(url, fs, root)
        if not version and not missing_ok:
            raise IndexMissingError(url)
        if not version:
            check_bucket(url, fs, root)
        return cls(url, fs, root, version, manifest)

    @property
    def rows(self) -> int:
        """Documents in the index (deleted rows not counted)."""
        return sum(p.live_rows for p in self.parts)

    @cached_property
    def deletes(self) -> Deletes:
        """The parts' deletion vectors, each read once when first asked."""
        from neardup.core._index_deletes import Deletes

        return Deletes(self)

    @property
    def params(self) -> dict[str, Any] | None:
        """The locked parameters (None before the first commit)."""
        params = self.manifest.get("params")
        return dict(params) if isinstance(params, dict) else None

    def minhash_params(self) -> MinhashParams:
        """The index's parameters as ``MinhashParams`` (``ngram`` at its default);
        IndexParameterError if it was built with another version of its tokenizer."""
        params = dict(self.params or {})
        recorded = str(params.get("tokenizer", "words"))
        name = tokenizer_name(recorded)
        if name in TOKENIZERS and recorded != tokenizer_version(name):
            raise IndexParameterError(self.url, "tokenizer", recorded, tokenizer_version(name))
        return MinhashParams(**{**params, "tokenizer": name})

    def check_params(self, params: MinhashParams) -> None:
        """IndexParameterError naming the first parameter (sorted) that differs from the
        index's, or that one side lacks; nothing to check before the first commit."""
        locked = self.params
        if locked is None:
            return
        given = index_params(params)
        for name in sorted(set(locked) | set(given)):
            if name not in locked or name not in given or locked[name] != given[name]:
                raise IndexParameterError(self.url, name, locked.get(name), given.get(name))

    def path(self, relative: str) -> str:
        """A path inside the index on ``fs``."""
        return posixpath.join(self.root, relative)

    def file_urls(self) -> list[str]:
        """Every data file of this version, as other tools open them (pyarrow, DuckDB, Spark):
        local paths, or URLs of other filesystems."""
        paths = [self.path(f.path) for p in self.parts for f in p.files]
        if _is_local(self.fs):
            return paths
        return [str(self.fs.unstrip_protocol(p)) for p in paths]

    def verify(self) -> None:
        """IndexDamagedError naming the first listed file that is missing or of another size."""
        for part in self.parts:
            for f in part.all_files:
                try:
                    size = int(self.fs.size(self.path(f.path)))
                except (OSError, FileNotFoundError):
                    raise self._missing(f) from None
                if size != f.bytes:
                    raise IndexDamagedError(
                        self.url, f.path, f"has {size} bytes, the index lists {f.bytes}"
                    )

    def _missing(self, f: IndexFile) -> Exception:
        """The error for a listed file that is gone: IndexChangedError when a newer version no
        longer lists it (compacted away while this run read the index), else damage."""
        with suppress(Exception):
            latest = DocIndex.open(self.url)
            listed = {g.path for p in latest.parts for g in p.all_files}
            if latest.version > self.version and f.path not in listed:
                return IndexChangedError(self.url, self.version, latest.version, f.path)
        return IndexDamagedError(self.url, f.path, "is missing")

    @contextmanager
    def parquet(self, f: IndexFile) -> Iterator[Any]:
        """A ``pyarrow.parquet.ParquetFile`` of a listed file, checked against the listing:
        IndexDamagedError if it is missing, unreadable, lacks a column or holds other rows."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.path(f.path)
        try:
            # A local file is read by Arrow itself (twice as fast as through a Python file).
            handle = open(path, "rb") if _is_local(self.fs) else self.fs.open(path, "rb")  # noqa: SIM115
        except (OSError, FileNotFoundError):
            raise self._missing(f) from None
        with handle:
            try:
                parquet = pq.ParquetFile(handle.name if _is_local(self.fs) else handle)
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise IndexDamagedError(
                    self.url, f.path, f"is not readable Parquet ({exc})"
                ) from None
            missing = [c for c in COLUMNS if c not in parquet.schema_arrow.names]
            if missing:
                raise IndexDamagedError(self.url, f.path, f"has no column {missing[0]!r}")
            if parquet.metadata.num_rows != f.rows:
                raise IndexDamagedError(
                    self.url,
                    f.path,
                    f"holds {parquet.metadata.num_rows} rows, the index lists {f.rows}",
                )
            yield parquet

    @contextmanager
    def key_table(self, part: IndexPart) -> Iterator[KeyTable]:
        """The key table of a part of the second layout (memory-mapped locally), checked against
        the listing: IndexDamagedError if it is missing or not the table of the part's rows."""
        from neardup.core import _index_keys

        if part.keys is None:
            raise ValueError(f"part {part.name} has no key table")
        with self._table(part.keys, _index_keys.KeyTable) as table:
            yield table

    @contextmanager
    def id_table(self, part: IndexPart) -> Iterator[IdTable]:
        """The id table of a part that has one (memory-mapped locally), checked against the
        listing: IndexDamagedError if it is missing or not the table of the part's rows."""
        from neardup.core import _index_ids

        if part.ids is None:
            raise ValueError(f"part {part.name} has no id table")
        with self._table(part.ids, _index_ids.IdTable) as table:
            yield table

    @contextmanager
    def _table(self, f: IndexFile, table: Any) -> Iterator[Any]:
        """A listed table file opened as ``table(source, rows)`` (a local file memory-mapped, else
        an open handle); its TableError is IndexDamagedError naming it."""
        from neardup.core._index_sorted import TableError, map_local

        path = self.path(f.path)
        try:
            if _is_local(self.fs):
                if not os.path.exists(path):
                    raise self._missing(f)
                yield table(map_local(path), f.rows)
                return
            try:
                handle = self.fs.open(path, "rb")
            except (OSError, FileNotFoundError):
                raise self._missing(f) from None
            with handle:
                yield table(handle, f.rows)
        except TableError as exc:
            raise IndexDamagedError(self.url, f.path, str(exc)) from None

    def row_groups(
        self, columns: Sequence[str]
    ) -> Iterator[tuple[IndexPart, IndexFile, Any, int, Any]]:
        """``(part, file, parquet file, row group number, table of columns)`` of every row
        group, in listing order; a file that breaks while read is IndexDamagedError naming it."""
        for part, f, parquet, groups, table in self.row_group_batches(columns, rows=1):
            yield part, f, parquet, groups[0], table

    def row_group_batches(
        self,
        columns: Sequence[str],
        rows: int | None = None,
        parts: Sequence[IndexPart] | None = None,
    ) -> Iterator[tuple[IndexPart, IndexFile, Any, list[int], Any]]:
        """``(part, file, parquet file, row group numbers, table)``: consecutive row groups of
        each file of ``parts`` (by default all) read together, about ``rows`` rows at a time (at
        least one group), in listing order (``rows`` by default ``BATCH_ROWS``);
        IndexDamagedError naming a file that breaks while read."""
        import pyarrow as pa

        rows = BATCH_ROWS if rows is None else rows
        for part in self.parts if parts is None else parts:
            for f in part.files:
                with self.parquet(f) as parquet:
                    meta = parquet.metadata
                    for groups in _spans(
                        [meta.row_group(g).num_rows for g in range(meta.num_row_groups)], rows
                    ):
                        try:
                            # One thread: Arrow's decoding threads each keep memory of their own.
                            table = parquet.read_row_groups(
                                groups, columns=list(columns), use_threads=False
                            )
                        except (OSError, ValueError, pa.ArrowException) as exc:
                            raise IndexDamagedError(
                                self.url, f.path, f"cannot be read ({exc})"
                            ) from None
                        yield part, f, parquet, groups, table

    def id_parts(self, ids: Sequence[str]) -> dict[str, str]:
        """The ids of ``ids`` already in the index, each with the name of its part
        (``_index_idrows.find_ids``: through each part's id table, O(ids) pages read)."""
        from neardup.core._index_idrows import find_ids

        found = find_ids(self, ids, ())
        return dict(zip(found.ids, found.parts, strict=True))

    def id_digests(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The ids of ``ids`` in the index, each with its 16-byte text digest (the first 16
        bytes of the text's SHA-256); found as ``id_parts`` finds them."""
        from neardup.core._index_idrows import find_ids

        found = find_ids(self, ids, ("digest",))
        raw = np.ascontiguousarray(found.digests, dtype="<u8").tobytes()
        return {doc_id: raw[16 * i : 16 * i + 16] for i, doc_id in enumerate(found.ids)}

    def id_signatures(self, ids: Sequence[str]) -> dict[str, NDArray[np.uint32]]:
        """The ids of ``ids`` in the index, each with its signature; found as ``id_parts``
        finds them. IndexDamagedError naming the file where a signature has another width."""
        from neardup.core._index_idrows import find_ids

        found = find_ids(self, ids, ("signature",))
        return {doc_id: found.sigs[i].copy() for i, doc_id in enumerate(found.ids)}

    def signature_batches(
        self, parts: Sequence[IndexPart]
    ) -> Iterator[tuple[list[str], NDArray[np.uint32]]]:
        """``(ids, signatures)`` of every row of ``parts``, about ``BATCH_ROWS`` rows at a time,
        in listing order (what a reader of new parts links against: memory bounded by a
        batch); IndexDamagedError naming a file that breaks or holds another width."""
        num_perm = self.minhash_params().num_perm
        batches = self.row_group_batches(("id", "signature"), parts=parts)
        for part, f, parquet, groups, table in batches:
            column = table.column("id")
            if column.null_count:
                raise IndexDamagedError(self.url, f.path, "has a null id")
            sigs = part_matrix(self.url, f.path, table, "signature", 4 * num_perm, "<u4")
            ids = column.to_pylist()
            live = self.deletes.batch_live(part, f, parquet, groups)
            if live is not None:  # deleted rows skipped
                ids, sigs = [i for i, k in zip(ids, live.tolist(), strict=True) if k], sigs[live]
            yield ids, np.ascontiguousarray(sigs, dtype=np.uint32)

    def near(self, sigs: NDArray[np.uint32], threshold: float) -> IndexLookup:
        """The indexed documents each of ``sigs`` matches, by the service's rule: a shared band
        and an estimate of at least ``threshold``, empty signatures never (``pairs``,
        ``estimate``; ``exact`` all -1). By key, through each part's key table
        (``_index_keyed.near_matches``)."""
        from neardup.core._index_keyed import near_matches

        return near_matches(self, sigs, threshold)

    def lookup(self, sigs: NDArray[np.uint32], digests: NDArray[np.uint64]) -> IndexLookup:
        """Every exact copy and confirmed near pair of new rows in the index
        (``lookup_index``)."""
        from neardup.core._index_lookup import lookup_index

        return lookup_index(self, sigs, digests)

    def files_of_version(self, version: int) -> set[str] | None:
        """Every file (path) that version ``version`` of this index lists: its parts' data
        files, key, id tables and deletion vectors (versions never change, and each path is
        written for one version only, so a path tells whose commit a version was); None when
        there is no such version; IndexDamagedError if its file is malformed."""
        older = self.at_version(version)
        return None if older is None else {f.path for p in older.parts for f in p.all_files}

    def at_version(self, version: int) -> DocIndex | None:
        """Version ``version`` of this index (an earlier one, or this one), read from its file
        alone (versions never change; in either log: ``read_version``); None when there is no
        such version; IndexDamagedError if its file is malformed."""
        if version == self.version:
            return self
        sealed = sealed_of(self.manifest) if self.manifest else None
        manifest = read_version(self.url, self.fs, self.root, version, sealed)
        if manifest is None:
            return None
        return DocIndex(self.url, self.fs, self.root, version, manifest)

    def check_ids(self, ids: Sequence[str]) -> None:
        """IndexIdError naming every id of ``ids`` already in the index and its part."""
        found = self.id_parts(ids)
        if found:
            raise IndexIdError(self.url, found)


def _spans(sizes: Sequence[int], rows: int) -> Iterator[list[int]]:
    """Consecutive group numbers whose ``sizes`` add up to about ``rows`` (one at least)."""
    span: list[int] = []
    total = 0
    for group, size in enumerate(sizes):
        if span and total + size > rows:
            yield span
            span, total = [], 0
        span.append(group)
        total += size
    if span:
        yield span


def write_part(
    index: DocIndex,
    params: MinhashParams,
    ids: Sequence[str],
    digests: NDArray[np.uint64],
    sigs: NDArray[np.uint32],
    run: dict[str, Any],
) -> IndexPart:
    """Write a new part of ``ids`` (with their text digests and signatures) under ``index``'s
    ``parts/``, named for the version after ``index.version``; listed by no version until
    ``commit_index`` commits it."""
    import pyarrow.parquet as pq

    name = part_name(index.version + 1)
    relative = f"{PARTS}/{name}/data-00000.parquet"
    path = index.path(relative)
    index.fs.makedirs(posixpath.dirname(path), exist_ok=True)
    # Sorted once, then written a slice at a time: the Arrow copy of a part is never whole.
    order = np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.int64)
    keys, id_table = KeyBuilder(params.bands), IdBuilder()
    with index.fs.open(path, "wb") as handle:
        writer = None
        for lo in range(0, max(len(order), 1), BATCH_ROWS):
            rows = order[lo : lo + BATCH_ROWS]
            table = part_table(
                [ids[i] for i in rows.tolist()], digests[rows], sigs[rows], params.bands,
                index_params(params),
            )  # fmt: skip
            if writer is None:
                writer = pq.ParquetWriter(handle, table.schema, **PARQUET_OPTIONS)
            writer.write_table(table, row_group_size=ROW_GROUP)
            keys.add(digests[rows], _matrix(table, "bands", 8 * params.bands))
            id_table.add(table.column("id"))
        if writer is not None:
            writer.close()
    _sync(index, path)
    size = int(index.fs.size(path))
    part = IndexPart(name, len(ids), (IndexFile(relative, len(ids), size),), run)
    return _with_tables(index, part, keys, id_table)


def _matrix(table: Any, column: str, width: int) -> NDArray[np.uint64]:
    values = binary_matrix(table.column(column), width, "<u8")
    if values is None:  # only a part written with other parameters: never one neardup wrote
        raise ValueError(f"{column} values are not {width} bytes")
    return values


def _sync(index: DocIndex, path: str) -> None:
    """On disk before a version lists it (the version is fsynced too)."""
    if _is_local(index.fs):
        with open(index.fs._strip_protocol(path), "rb+") as written:
            os.fsync(written.fileno())


def _with_tables(index: DocIndex, part: IndexPart, keys: KeyBuilder, ids: IdBuilder) -> IndexPart:
    """``part`` with the key table ``keys`` and the id table ``ids`` written in its directory."""
    listed = []
    for name, builder in ((KEYS_FILE, keys), (IDS_FILE, ids)):
        relative = f"{PARTS}/{part.name}/{name}"
        path = index.path(relative)
        rows = builder.write(index.fs, path)
        _sync(index, path)
        listed.append(IndexFile(relative, rows, int(index.fs.size(path))))
    return IndexPart(part.name, part.rows, part.files, part.run, *listed)


def write_part_keys(index: DocIndex, part: IndexPart, params: MinhashParams) -> IndexPart:
    """``part`` (written, not yet committed: the Spark engine's) with a key table and an id
    table built from its data files, read in listing order: the same bytes ``write_part``
    writes for its rows."""
    builder, id_table = KeyBuilder(params.bands), IdBuilder()
    width = 8 * params.bands
    columns = ("id", "digest", "bands")
    for _, f, _, _, table in index.row_group_batches(columns, parts=[part]):
        digest = binary_matrix(table.column("digest"), 16, "<u8")
        band_keys = binary_matrix(table.column("bands"), width, "<u8")
        if digest is None or band_keys is None:
            raise IndexDamagedError(index.url, f.path, "has digests or bands of another width")
        if table.column("id").null_count:
            raise IndexDamagedError(index.url, f.path, "has a null id")
        builder.add(digest, band_keys)
        id_table.add(table.column("id"))
    return _with_tables(index, part, builder, id_table)


def commit_index(
    index: DocIndex,
    params: MinhashParams,
    add: Sequence[IndexPart] = (),
    drop: Sequence[str] = (),
    *,
    compaction: bool = False,
    deletes: Mapping[str, IndexFile] | None = None,
) -> int:
    """Commit version ``index.version + 1``: ``index``'s parts less ``drop`` (names), with the
    deletion vectors ``deletes`` (by part name: ``write_deletes``), plus ``add`` (parts written
    for that version: ``write_part``), then mark the added parts committed. Returns the version;
    IndexConflictError if another run committed it first (``compaction``: its message says
    what a losing compaction leaves). Every version written is of ``FORMAT_VERSION`` (4: the
    grouped log after the first such version, the seal), which neardups reading 3 at most
    refuse."""
    from neardup.core._index_deletes import apply_deletes

    version = index.version + 1
    for part in add:
        if part_version(part.name) != version:
            raise ValueError(
                f"{index.url}: part {part.name!r} is not named for version {version}: "
                "write it with write_part against the version read"
            )
    kept = apply_deletes([p for p in index.parts if p.name not in set(drop)], deletes or {})
    parts = [*kept, *add]
    body = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "version": version,
        "params": index.params or index_params(params),
        "parts": [p.as_json() for p in parts],
        "rows": sum(p.live_rows for p in parts),
        # The first version of FORMAT_VERSION seals the flat log; later ones keep its number.
        "sealed": sealed_of(index.manifest) or version,
    }
    if not create_version(index.url, index.fs, index.root, version, body):
        winner = DocIndex.open(index.url)  # a fresh listing: never the version this run read
        known = {p.name for p in index.parts}
        added = [p.name for p in winner.parts if p.name not in known]
        raise IndexConflictError(index.url, version, added, compaction=compaction)
    mark_committed(index.fs, index.root, [p.name for p in add], version)
    return version
