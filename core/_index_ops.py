"""What ``neardup index info`` and ``neardup index compact`` do to an index (docs/index.md).

``index_info`` describes the latest committed version (parameters, parts with their rows, bytes
and runs, totals) and the leftovers of killed runs: files under ``parts/`` that the latest
version does not list, and temporary files in ``_index/``.

``compact_index`` rewrites runs of small parts as parts of about ``part_rows`` rows, atomically:
it writes the new parts' files, then commits the next version (the old parts dropped, the new
ones added) with the same exclusive create as an append, and only then removes the old parts'
files. A run that committed in between makes the commit fail (``IndexConflictError``): the new
files are removed and the index is as the other run left it. Leftovers older than
``LEFTOVER_AGE`` seconds are removed (a younger one may be a running writer's).

Both first check every listed file (``check_files``: its size, then its Parquet footer, its
columns and rows), so a damaged index is an error naming the file, never a smaller index.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._index import (
    DocIndex,
    IndexPart,
    commit_index,
    run_info,
    write_part,
)
from neardup.core._index_log import COMMITTED, GROUPED, all_versions, sealed_of
from neardup.core._index_parts import part_matrix
from neardup.core.errors import IndexDamagedError

__all__ = [
    "DROPPED",
    "LEFTOVER_AGE",
    "PART_ROWS",
    "CompactResult",
    "Leftover",
    "check_files",
    "commit_compaction",
    "compact_index",
    "compaction_run",
    "index_info",
    "leftovers",
    "remove_leftovers",
    "rewrite_group",
]

#: Seconds a leftover must have been left alone before ``compact_index`` removes it.
LEFTOVER_AGE = 3600.0
#: Rows ``compact_index`` gathers into one part by default.
PART_ROWS = 1_000_000
#: A marker in the directory of a part a compaction dropped but kept for readers of earlier
#: versions (``commit_compaction``): written as the part is dropped, so that the part is a
#: leftover as young as its drop.
DROPPED = "_dropped"
_PARTS = "parts"
_LOG = "_index"


@dataclass(frozen=True)
class Leftover:
    """A path under an index that its latest version does not list.

    Attributes:
        path: relative to the index (a part directory, a file, or a temporary version file).
        bytes: the bytes of the files under it.
        age: seconds since its newest file was modified (None where the filesystem does not say).
    """

    path: str
    bytes: int
    age: float | None


def _mtime(info: dict[str, Any]) -> float | None:
    """A file's modification time (Unix seconds) from ``fs.info``/``fs.find(detail=True)``."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, dt.datetime):
            return value.timestamp()
        if isinstance(value, str):
            with suppress(ValueError):
                return dt.datetime.fromisoformat(value).timestamp()  # "Z" read since 3.11
    return None


def _files(fs: Any, directory: str) -> dict[str, dict[str, Any]]:
    """Every file below ``directory`` (absolute path on ``fs`` -> its info); none if missing."""
    try:
        found = fs.find(directory, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    return {str(path): info for path, info in found.items() if info.get("type") != "directory"}


def _hidden_files(fs: Any, directory: str) -> dict[str, dict[str, Any]]:
    """The files named ``.*`` in ``directory`` itself (a listing, not a walk: the grouped log's
    versions are not listed); none if it is missing."""
    try:
        found = fs.ls(directory, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    return {
        str(info["name"]): info
        for info in found
        if info.get("type") != "directory"
        and posixpath.basename(str(info["name"]).rstrip("/")).startswith(".")
    }


def leftovers(index: DocIndex, now: float | None = None) -> list[Leftover]:
    """The leftovers under ``index``: part directories (or stray files) under ``parts/`` that its
    version does not list, and temporary files in ``_index/`` and ``_index/log/``, sorted by
    path."""
    now = time.time() if now is None else now
    listed = {f.path for p in index.parts for f in p.all_files}
    names = {p.name for p in index.parts}
    root = index.root.rstrip("/") + "/"
    groups: dict[str, list[dict[str, Any]]] = {}
    for path, info in _files(index.fs, index.path(_PARTS)).items():
        relative = path[len(root) :] if path.startswith(root) else path
        pieces = relative.split("/")
        inside = len(pieces) > 2 and pieces[1] in names  # in a listed part's directory
        if relative in listed or (inside and pieces[2:] in ([COMMITTED], [DROPPED])):
            continue  # a listed file, or a listed part's marker
        # parts/<part>, or a stray file alone where its directory is a listed part's
        key = "/".join(pieces[:2]) if len(pieces) > 2 and not inside else relative
        groups.setdefault(key, []).append(info)
    for log in (_LOG, f"{_LOG}/{GROUPED}"):  # a commit's temporary files: never in a group
        for path, info in _hidden_files(index.fs, index.path(log)).items():
            groups.setdefault(f"{log}/{posixpath.basename(path)}", []).append(info)
    out = []
    for key, infos in sorted(groups.items()):
        times = [_mtime(i) for i in infos]
        known = [t for t in times if t is not None]
        age = now - max(known) if known and len(known) == len(times) else None
        out.append(Leftover(key, sum(int(i.get("size") or 0) for i in infos), age))
    return out


def check_files(index: DocIndex) -> None:
    """IndexDamagedError naming the first listed file that is missing, of another size, not
    Parquet (its footer is read), without the columns, or of other rows than listed; or a key
    table that is not one of its part's rows."""
    index.verify()
    for part in index.parts:
        for f in part.files:
            with index.parquet(f):
                pass
        if part.keys is not None:  # its footer, layout and fences
            with index.key_table(part):
                pass
        if part.ids is not None:
            with index.id_table(part):
                pass
        index.deletes.rows(part)  # its deletion vector, read and checked whole


def _layout(part: IndexPart) -> int:
    """The format_version that introduced what ``part`` has: 1 (data files only), 2 (a key
    table), 3 (an id table too)."""
    return 1 if part.keys is None else 2 if part.ids is None else 3


def index_info(url: str, *, limit: int = 100) -> dict[str, Any]:
    """What ``neardup index info`` prints: the latest version (and the committed versions, the
    last ``limit``, all counted: the whole log is listed and checked, 1 to the newest), its
    parameters and parts (the first ``limit``, all counted),
    totals, and the leftovers (the first ``limit``, counted).

    Raises:
        IndexMissingError: nothing committed at ``url``.
        IndexDamagedError: a listed file is missing or damaged (``check_files``), or a version
            of the log is missing (``all_versions``).
    """
    index = DocIndex.open(url)
    check_files(index)
    found = leftovers(index)
    versions = all_versions(url, index.fs, index.root, sealed_of(index.manifest))  # 1 to N
    parts = [
        {"name": p.name, "rows": p.live_rows, "bytes": sum(f.bytes for f in p.all_files),
         "files": len(p.files), "layout": _layout(p), "run": p.run,
         "deleted": 0 if p.deleted is None else p.deleted.rows}
        for p in index.parts
    ]  # fmt: skip
    return {
        "index": url,
        "format": index.manifest.get("format"),
        "format_version": index.manifest.get("format_version"),
        "version": index.version,
        "versions_total": len(versions),
        "versions": versions[-limit:] if limit else [],
        "params": index.params,
        "rows": index.rows,
        "deleted": sum(p["deleted"] for p in parts),
        "bytes": sum(p["bytes"] for p in parts),
        "files": sum(p["files"] for p in parts),
        "parts_total": len(parts),
        "parts": parts[:limit],
        "leftovers_total": len(found),
        "leftovers_bytes": sum(x.bytes for x in found),
        "leftovers": [
            {
                "path": x.path,
                "bytes": x.bytes,
                "age_seconds": None if x.age is None else round(x.age),
            }
            for x in found[:limit]
        ],
    }


@dataclass(frozen=True)
class CompactResult:
    """What ``compact_index`` did.

    Attributes:
        version: the version committed (the one read when nothing was merged).
        merged: the parts rewritten (names), in listing order.
        added: the new parts (names).
        parts_before: parts of the version read.
        parts_after: parts of the version left.
        rows: documents in the index (unchanged by compaction).
        removed: leftovers removed (relative paths), the old parts' directories not included.
    """

    version: int
    merged: tuple[str, ...]
    added: tuple[str, ...]
    parts_before: int
    parts_after: int
    rows: int
    removed: tuple[str, ...]


def _old(part: IndexPart) -> bool:
    """Whether ``part`` lacks a key table or an id table (written before them)."""
    return part.keys is None or part.ids is None


def _groups(parts: Sequence[IndexPart], part_rows: int) -> list[list[IndexPart]]:
    """Runs of consecutive parts to rewrite as one: each holds at most ``part_rows`` rows (a part
    as large alone stays as it is) and more than one file, or a part without a key table or an
    id table (an older layout, rewritten with both), or a part with a deletion vector (rewritten
    without its deleted rows); a single one-file part with both tables and no vector is left."""
    groups: list[list[IndexPart]] = []
    current: list[IndexPart] = []

    def close() -> None:
        old = any(_old(p) or p.deleted is not None for p in current)
        if sum(len(p.files) for p in current) > 1 or old:
            groups.append(list(current))
        current.clear()

    for part in parts:
        if current and sum(p.rows for p in current) + part.rows > part_rows:
            close()
        current.append(part)
    close()
    return groups


def _read_rows(
    index: DocIndex, parts: Sequence[IndexPart]
) -> tuple[list[str], NDArray[np.uint64], NDArray[np.uint32]]:
    """The ids, digests and signatures of every live row of ``parts`` (deleted rows dropped),
    read a batch of row groups at a time into arrays sized once from the listing (``bands`` is
    not read: ``write_part`` computes it again); IndexDamagedError naming a file that cannot be
    read or holds a null id or values of the wrong width."""
    num_perm = index.minhash_params().num_perm
    total = sum(p.live_rows for p in parts)
    digests = np.empty((total, 2), dtype=np.uint64)
    sigs = np.empty((total, num_perm), dtype=np.uint32)
    ids: list[str] = []
    batches = index.row_group_batches(("id", "digest", "signature"), parts=parts)
    for part, f, parquet, groups, table in batches:
        at, column = len(ids), table.column("id")
        if column.null_count:
            raise IndexDamagedError(index.url, f.path, "has a null id")
        live = index.deletes.batch_live(part, f, parquet, groups)
        for name, width, target in (("digest", 16, digests), ("signature", 4 * num_perm, sigs)):
            values = part_matrix(index.url, f.path, table, name, width, target.dtype.str)
            values = values if live is None else values[live]
            target[at : at + len(values)] = values
        every = column.to_pylist()
        ids.extend(every if live is None else (i for i, k in zip(every, live, strict=True) if k))
    return ids, digests, sigs


def _remove_tree(index: DocIndex, relative: str) -> None:
    with suppress(FileNotFoundError):
        index.fs.rm(index.path(relative), recursive=True)


def rewrite_group(
    index: DocIndex, group: Sequence[IndexPart], run: dict[str, Any]
) -> IndexPart | None:
    """The live rows of ``group`` (parts of ``index``) written as one new part, sorted by id,
    for the version after ``index.version`` with ``run`` (listed by no version until
    ``commit_compaction`` commits it); None when every row is deleted (the group is only
    dropped). Memory: about 750 bytes a live row at 128 permutations plus ~90 MB for the
    batches (docs/index.md, "Leftovers and compaction")."""
    ids, digests, sigs = _read_rows(index, group)
    if not ids:
        return None
    return write_part(index, index.minhash_params(), ids, digests, sigs, run)


def compaction_run(
    neardup: str, group: Sequence[IndexPart], engine: str = "local"
) -> dict[str, Any]:
    """A compacted part's ``run``: ``mode`` ``compact`` and ``from_parts``, the group's names."""
    return {**run_info(engine, neardup, [], mode="compact"), "from_parts": [p.name for p in group]}


def _mark_dropped(index: DocIndex, names: Sequence[str], marked: bool) -> None:
    """Write (``marked``) or remove the ``DROPPED`` marker of each part of ``names``."""
    for name in names:
        path = index.path(f"{_PARTS}/{name}/{DROPPED}")
        with suppress(OSError, FileNotFoundError):
            if marked:
                index.fs.pipe_file(path, b"{}\n")
            else:
                index.fs.rm(path)


def commit_compaction(
    index: DocIndex,
    groups: Sequence[Sequence[IndexPart]],
    added: Sequence[IndexPart],
    *,
    keep_merged: bool = False,
) -> int:
    """Commit the next version of ``index``: the parts of ``groups`` dropped, ``added`` (their
    ``rewrite_group`` parts) added. IndexConflictError if another run committed first (the
    caller removes ``added``). With ``keep_merged`` the dropped parts' files stay for readers
    of earlier versions: each is marked ``DROPPED`` (written before the commit, removed if it
    fails), so it is a leftover as young as its drop, removed once older than the leftover
    age (``remove_leftovers``); without, the caller removes them at once."""
    merged = [p.name for g in groups for p in g]
    if keep_merged:
        _mark_dropped(index, merged, True)
    try:
        params = index.minhash_params()
        return commit_index(index, params, add=added, drop=merged, compaction=True)
    except BaseException:
        if keep_merged:
            _mark_dropped(index, merged, False)
        raise


def remove_leftovers(index: DocIndex, age: float = LEFTOVER_AGE) -> tuple[str, ...]:
    """Remove the leftovers of ``index`` left alone for ``age`` seconds or more (those whose
    age the filesystem does not say stay); their paths."""
    stale = [x for x in leftovers(index) if x.age is not None and x.age >= age]
    for x in stale:
        _remove_tree(index, x.path)
    return tuple(x.path for x in stale)


def compact_index(
    url: str,
    *,
    neardup: str,
    part_rows: int = PART_ROWS,
    leftover_age: float = LEFTOVER_AGE,
    before_commit: Callable[[], None] | None = None,
) -> CompactResult:
    """Rewrite runs of small parts of the index at ``url`` as parts of at most ``part_rows``
    rows, commit that as the next version (an index of format_version 3 or older gets one even
    with nothing to rewrite: its log is then grouped, ``_index_log``), then remove the old
    parts' files and the leftovers older than ``leftover_age`` seconds.

    Args:
        url: the index.
        neardup: the version of neardup, for the new parts' ``run``.
        part_rows: the most rows gathered into one part.
        leftover_age: the age from which a leftover is removed.
        before_commit: called once the new files are written, just before the commit (a test
            hook).

    Raises:
        IndexMissingError: nothing committed at ``url``.
        IndexDamagedError: a listed file is missing or wrong (nothing is changed).
        IndexConflictError: another run committed first (the new files are removed).
    """
    index = DocIndex.open(url)
    check_files(index)
    stale = [x for x in leftovers(index) if x.age is not None and x.age >= leftover_age]
    groups = _groups(index.parts, part_rows)
    added: list[IndexPart] = []
    version = index.version
    try:
        for group in groups:
            part = rewrite_group(index, group, compaction_run(neardup, group))
            if part is not None:  # a group whose every row is deleted is only dropped
                added.append(part)
        if groups or sealed_of(index.manifest) is None:  # (or only the log migrated)
            if before_commit is not None:
                before_commit()
            version = commit_compaction(index, groups, added)
    except BaseException:
        for part in added:  # never committed: nobody lists them
            _remove_tree(index, f"{_PARTS}/{part.name}")
        raise
    merged_parts = [p for g in groups for p in g]
    for part in merged_parts:  # committed away: no version read from now on lists them
        for f in part.files:
            with suppress(FileNotFoundError):
                index.fs.rm(index.path(f.path))
        _remove_tree(index, f"{_PARTS}/{part.name}")
    for x in stale:
        _remove_tree(index, x.path)
    return CompactResult(
        version=version,
        merged=tuple(p.name for p in merged_parts),
        added=tuple(p.name for p in added),
        parts_before=len(index.parts),
        parts_after=len(index.parts) - len(merged_parts) + len(added),
        rows=index.rows,
        removed=tuple(x.path for x in stale),
    )
