"""The version log of an index: which versions are committed, each checked whole, and the commit.

An index holds ``_index/{V:08d}.json`` for V = 1 .. N (N, the newest, is the index) and part
directories ``parts/p{V:08d}-{12 hex digits}/``, V being the version the part was written for:
the one after the version its run read, which it becomes if that run wins the commit. This
module decides from names, manifests and one marker file what is committed; it never looks at
what a part's files hold (``_index`` and ``_index_parts`` do), so a new part layout keeps it.

- Listings are never served from a cache: fsspec's object-store filesystems keep directory
  listings for the life of a process, so ``forget_listings`` drops them before every listing
  here (each open, each commit and its conflict check).
- Versions are contiguous: one missing between 1 and N is damage.
- A committed part holds ``parts/<part>/_committed`` (``COMMITTED``), written just after its
  version. A part marked committed as a version past N, or any part written for a version past
  N + 1 (its run read that version), proves a committed version is missing: damage
  (IndexDamagedError naming the version file), never the index rolled back to N, never a
  leftover to remove, never a new index when N = 0. A part of a killed run (written, never
  committed) has no marker: a leftover.
- Every manifest is validated whole (``manifest_problem``: format, version, a ``params`` object
  with every parameter typed and valid, parts of unique names and files, rows adding up) before
  it is used, and before it is written.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import uuid
from collections.abc import Iterable, MutableMapping
from contextlib import suppress
from dataclasses import fields
from typing import Any

from neardup.core._json import read_json
from neardup.core._params import MinhashParams
from neardup.core._scripts import tokenizer_name
from neardup.core._storage import _is_local
from neardup.core.errors import IndexDamagedError, NeardupError

__all__ = [
    "COMMITTED",
    "FORMAT",
    "FORMAT_VERSION",
    "FORMAT_VERSIONS",
    "LOG",
    "PARTS",
    "create_version",
    "forget_listings",
    "index_params",
    "manifest_problem",
    "mark_committed",
    "part_name",
    "part_version",
    "read_latest",
    "version_file",
    "versions",
]

FORMAT = "neardup-index"
#: The version this neardup writes: 2 lists a part's key table (``keys``, docs/index.md); a
#: part without one (every part of a version 1 file) is read by a scan. 3 lists its id table
#: (``ids``) too, and its deletion vector (``deleted``, while it has one: ``_index_deletes``): a
#: neardup that reads 2 refuses it rather than take the tables for leftovers or serve deleted rows.
FORMAT_VERSION = 3
#: The format versions this neardup reads.
FORMAT_VERSIONS = (1, 2, 3)
#: The directory of the version files, and that of the parts.
LOG = "_index"
PARTS = "parts"
#: The marker a committed part holds (hidden: a leading ``_``, which directory inputs skip).
COMMITTED = "_committed"
_VERSION_FILE = re.compile(r"^(\d{8})\.json$")
_PART_NAME = re.compile(r"^p(\d{8})-[0-9a-f]{12}$")
#: Times ``read_latest`` lists the log again when versions were committed while it read.
_REREADS = 8
_PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "num_perm": (int,), "bands": (int,), "k": (int,), "seed": (int,),
    "threshold": (int, float), "tokenizer": (str,),
}  # fmt: skip


def index_params(params: MinhashParams) -> dict[str, Any]:
    """The parameters an index is locked to: every ``MinhashParams`` field but ``ngram``, the
    tokenizer with its version (``multilingual-3@17.0.0``)."""
    locked = {f.name: getattr(params, f.name) for f in fields(params) if f.name != "ngram"}
    return {**locked, "tokenizer": params.tokenizer_version}


def version_file(version: int) -> str:
    """A version's file, relative to the index."""
    return f"{LOG}/{version:08d}.json"


def part_name(version: int) -> str:
    """A new part's name: ``p`` + the version it is written for + 12 random hex digits."""
    return f"p{version:08d}-{uuid.uuid4().hex[:12]}"


def part_version(name: str) -> int | None:
    """The version a part of this name was written for; None for a name no run gives."""
    match = _PART_NAME.match(name)
    return int(match.group(1)) if match else None


def forget_listings(fs: Any, root: str) -> None:
    """Drop ``fs``'s cached listings of ``root`` and everything under it (s3fs, gcsfs and adlfs
    keep them per process: a stale one hides versions and files committed since)."""
    fs.invalidate_cache(root)  # root and its parents, on every filesystem
    cache = getattr(fs, "dircache", None)
    if isinstance(cache, MutableMapping):
        inside = root.rstrip("/") + "/"
        for key in [k for k in cache if str(k) == root or str(k).startswith(inside)]:
            cache.pop(key, None)


def versions(fs: Any, root: str) -> list[int]:
    """The committed version numbers at ``root``, ascending, from a fresh listing."""
    forget_listings(fs, root)
    log = posixpath.join(root, LOG)
    try:
        names = fs.ls(log, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        match = _VERSION_FILE.match(posixpath.basename(str(name).rstrip("/")))
        if match and int(match.group(1)) > 0:
            found.append(int(match.group(1)))
    return sorted(found)


def _past(fs: Any, root: str, newest: int) -> tuple[int, str] | None:
    """A version past ``newest`` that some part proves committed, and how; None if none does."""
    try:
        names = fs.ls(posixpath.join(root, PARTS), detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    for name in sorted(posixpath.basename(str(n).rstrip("/")) for n in names):
        written = part_version(name)
        if written is None or written <= newest:
            continue
        if written - 1 > newest:
            return written - 1, f"{PARTS}/{name} was written by a run that read it"
        if fs.exists(posixpath.join(root, PARTS, name, COMMITTED)):
            return written, f"{PARTS}/{name} was committed as it"
    return None


def read_latest(url: str, fs: Any, root: str) -> tuple[int, dict[str, Any]]:
    """The newest version at ``root`` and its manifest, checked whole; ``(0, {})`` when nothing
    is committed. IndexDamagedError when a version is missing (between 1 and the newest, or
    past it as a part proves) or the newest manifest is unreadable or malformed."""
    found: list[int] = []
    for _ in range(_REREADS):
        found = versions(fs, root)
        newest = found[-1] if found else 0
        if len(found) != newest:
            gap = min(set(range(1, newest + 1)) - set(found))
            raise IndexDamagedError(
                url, version_file(gap), f"is missing (versions 1 to {newest} must all be there); "
                "restore it: an index is never read without one of its versions"
            )  # fmt: skip
        proof = _past(fs, root, newest)
        if proof is None:
            break
        if versions(fs, root)[-1:] >= [proof[0]]:
            continue  # committed while this was read: read the newer log
        missing, how = proof
        raise IndexDamagedError(
            url, version_file(missing), f"is missing but {how}; restore it: an index is never "
            "read as an older version, nor started again over committed parts"
        )  # fmt: skip
    if not found:
        return 0, {}
    newest = found[-1]
    name = version_file(newest)
    try:
        with fs.open(posixpath.join(root, name), "rb") as handle:
            manifest = read_json(handle.read().decode("utf-8"))
    except (OSError, ValueError) as exc:  # JSONError included: deep nesting, huge integers
        raise IndexDamagedError(url, name, f"cannot be read ({exc})") from None
    problem = manifest_problem(manifest, newest)
    if problem is not None:
        raise IndexDamagedError(url, name, problem)
    return newest, manifest


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _params_problem(params: object) -> str | None:
    if not isinstance(params, dict):
        return f"params is {type(params).__name__}, not an object"
    for key, kinds in _PARAM_TYPES.items():
        if key not in params:
            return f"params lacks {key}"
        value = params[key]
        if isinstance(value, bool) or not isinstance(value, kinds):
            return f"params.{key} is {value!r}, not {'a string' if str in kinds else 'a number'}"
    unknown = sorted(set(params) - set(_PARAM_TYPES))
    if unknown:
        return f"params has {unknown[0]!r}, which this neardup does not know"
    try:  # the tokenizer as recorded with its version (any revision: checked when opened)
        MinhashParams(**{**params, "tokenizer": tokenizer_name(params["tokenizer"])})
    except NeardupError as exc:
        return f"params are not valid: {exc}"
    return None


def _part_problem(item: object, at: int, version: int) -> str | None:
    if not isinstance(item, dict):
        return f"parts[{at}] is not an object"
    name = item.get("name")
    if not isinstance(name, str) or part_version(name) is None:
        return f"parts[{at}].name {name!r} is not a part name (p, 8 digits, -, 12 hex digits)"
    written = part_version(name) or 0
    if written > version:
        return f"part {name} was written for version {written}, after this one"
    files, rows, run = item.get("files"), item.get("rows"), item.get("run", {})
    if not _count(rows):
        return f"part {name} has rows {rows!r}"
    if not isinstance(run, dict):
        return f"part {name} has a run that is not an object"
    if not isinstance(files, list):
        return f"part {name} has files that are not a list"
    total = 0
    for f in files:
        path = f.get("path") if isinstance(f, dict) else None
        if not isinstance(f, dict) or not isinstance(path, str):
            return f"part {name} lists a file without a path"
        pieces = path.split("/")
        if pieces[:2] != [PARTS, name] or len(pieces) < 3 or {"", ".", ".."} & set(pieces):
            return f"part {name} lists {path!r}, not a file under {PARTS}/{name}/"
        if not (_count(f.get("rows")) and _count(f.get("bytes"))):
            return f"part {name} lists {path} without whole rows and bytes"
        total += f["rows"]
    if total != rows:
        return f"part {name} has {rows} rows but its files {total}"
    return None


#: A part's tables: the manifest's entry, the format_version from which it may be listed, what
#: it is called in messages.
_TABLES = (("keys", 2, "a key table"), ("ids", 3, "an id table"))


def _table_problem(item: dict[str, Any], format_version: int, bands: int) -> str | None:
    """What is wrong with a part's ``keys`` (its key table) or ``ids`` (its id table) entry,
    of those it has: ``bands + 1`` keys a row, one id a row."""
    name = item["name"]
    for entry, since, called in _TABLES:
        table = item.get(entry)
        if table is None:
            continue
        if format_version < since:
            return f"part {name} lists {called}, which format_version {format_version} has not"
        path = table.get("path") if isinstance(table, dict) else None
        if not isinstance(table, dict) or not isinstance(path, str):
            return f"part {name} has {entry} without a path"
        pieces = path.split("/")
        if pieces[:2] != [PARTS, name] or len(pieces) != 3 or pieces[2] in {"", ".", ".."}:
            return f"part {name} lists {entry} {path!r}, not a file under {PARTS}/{name}/"
        if not (_count(table.get("rows")) and _count(table.get("bytes"))):
            return f"part {name} lists {entry} {path} without whole rows and bytes"
        per_row = bands + 1 if entry == "keys" else 1
        if table["rows"] != item["rows"] * per_row:
            return (
                f"part {name} lists {table['rows']} {entry}, not {per_row} a row "
                f"({item['rows'] * per_row})"
            )
    return None


def manifest_problem(body: object, version: int) -> str | None:
    """What is wrong with a manifest meant to be version ``version`` (None: nothing), as the end
    of an IndexDamagedError: every field is checked before any is used."""
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        return f"is not a {FORMAT} version file"
    found = body.get("format_version")
    if found not in FORMAT_VERSIONS or isinstance(found, bool):
        known = ", ".join(map(str, FORMAT_VERSIONS[:-1])) + f" and {FORMAT_VERSIONS[-1]}"
        return f"has format_version {found!r}; this neardup reads {known}"
    problem = _manifest_body_problem(body, version)
    return None if problem is None else f"is malformed ({problem})"


def _manifest_body_problem(body: dict[str, Any], version: int) -> str | None:
    from neardup.core._index_deletes import deletes_problem  # it imports this module

    if body.get("version") != version or isinstance(body.get("version"), bool):
        return f"its version is {body.get('version')!r}, its name says {version}"
    problem = _params_problem(body.get("params"))
    if problem is not None:
        return problem
    parts = body.get("parts")
    if not isinstance(parts, list):
        return "parts is not a list"
    names: set[str] = set()
    paths: set[str] = set()
    for at, item in enumerate(parts):
        problem = _part_problem(item, at, version)
        if problem is not None:
            return problem
        if item["name"] in names:
            return f"part {item['name']} is listed twice"
        names.add(item["name"])
        for f in item["files"]:
            if f["path"] in paths:
                return f"{f['path']} is listed twice"
            paths.add(f["path"])
        problem = _table_problem(item, body["format_version"], body["params"]["bands"])
        if problem is not None:
            return problem
        problem = deletes_problem(item, body["format_version"])
        if problem is not None:
            return problem
        for entry in ("keys", "ids", "deleted"):
            if item.get(entry) is not None:
                if item[entry]["path"] in paths:
                    return f"{item[entry]['path']} is listed twice"
                paths.add(item[entry]["path"])
    rows = body.get("rows")
    live = sum(p["rows"] - (p["deleted"]["rows"] if p.get("deleted") else 0) for p in parts)
    if not _count(rows) or rows != live:
        return f"rows is {rows!r}, its parts hold {live}"
    return None


def create_version(url: str, fs: Any, root: str, version: int, body: dict[str, Any]) -> bool:
    """Create version ``version`` holding ``body`` (checked first: ValueError naming what is
    wrong; nothing written) unless it exists (then False), all or nothing."""
    problem = manifest_problem(body, version)
    if problem is not None:
        raise ValueError(f"{url}: {version_file(version)} would be malformed: it {problem}")
    data = (json.dumps(body, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    fs.makedirs(posixpath.join(root, LOG), exist_ok=True)
    forget_listings(fs, root)  # where a store has no exclusive create, a listing decides
    return _create_exclusive(fs, posixpath.join(root, version_file(version)), data)


def mark_committed(fs: Any, root: str, names: Iterable[str], version: int) -> None:
    """Mark the parts ``names`` (those written for ``version``) committed as ``version``.

    Best effort: the version is committed already, and a part without its marker is still
    read; only a later loss of this version's file would then go unnoticed."""
    body = (json.dumps({"version": version}) + "\n").encode("utf-8")
    for name in names:
        if part_version(name) == version:
            with suppress(OSError):
                fs.pipe_file(posixpath.join(root, PARTS, name, COMMITTED), body)


def _create_exclusive(fs: Any, path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists (then False), all or nothing."""
    if _is_local(fs):
        local = fs._strip_protocol(path)
        temp = posixpath.join(posixpath.dirname(local), f".tmp-{os.getpid()}-{uuid.uuid4().hex}")
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, local)
        except FileExistsError:
            return False
        finally:
            with suppress(OSError):
                os.unlink(temp)
        return True
    try:
        with fs.open(path, "xb") as handle:
            handle.write(data)
        return True
    except FileExistsError:
        return False
    except (ValueError, NotImplementedError, TypeError):
        pass  # no exclusive create on this filesystem: one writer at a time (docs/index.md)
    if fs.exists(path):
        return False
    with fs.open(path, "wb") as handle:
        handle.write(data)
    return True
