"""What an index's version file may hold: its names, format versions and the whole check.

Every manifest is validated whole (``manifest_problem``: format, version, a ``params`` object
with every parameter typed and valid, parts of unique names and files, tables and deletion
vectors where the format_version has them, rows adding up, and from format_version 4 the
version that sealed the flat log, ``sealed``) before it is used, and before it is written.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import fields
from typing import Any

from neardup.core._params import MinhashParams
from neardup.core._scripts import tokenizer_name
from neardup.core.errors import NeardupError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "FORMAT_VERSIONS",
    "PARTS",
    "SEALED_SINCE",
    "index_params",
    "manifest_problem",
    "part_name",
    "part_version",
]

FORMAT = "neardup-index"
#: The version this neardup writes: 2 lists a part's key table (``keys``, docs/index.md); a
#: part without one (every part of a version 1 file) is read by a scan. 3 lists its id table
#: (``ids``) too, and its deletion vector (``deleted``, while it has one: ``_index_deletes``). 4
#: keeps the versions after the first of its own in groups of 1,000 (``_index_log``), and says
#: which one that is (``sealed``): a neardup that reads 3 at most finds that first one, the
#: newest in the flat ``_index/`` it lists, and refuses it rather than read an older version.
FORMAT_VERSION = 4
#: The format versions this neardup reads.
FORMAT_VERSIONS = (1, 2, 3, 4)
#: The format_version from which a version says ``sealed`` (and the log is grouped after it).
SEALED_SINCE = 4
#: The directory of the parts.
PARTS = "parts"
_PART_NAME = re.compile(r"^p(\d{8})-[0-9a-f]{12}$")
_PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "num_perm": (int,), "bands": (int,), "k": (int,), "seed": (int,),
    "threshold": (int, float), "tokenizer": (str,),
}  # fmt: skip


def index_params(params: MinhashParams) -> dict[str, Any]:
    """The parameters an index is locked to: every ``MinhashParams`` field but ``ngram``, the
    tokenizer with its version (``multilingual-3@17.0.0``)."""
    locked = {f.name: getattr(params, f.name) for f in fields(params) if f.name != "ngram"}
    return {**locked, "tokenizer": params.tokenizer_version}


def part_name(version: int) -> str:
    """A new part's name: ``p`` + the version it is written for + 12 random hex digits."""
    return f"p{version:08d}-{uuid.uuid4().hex[:12]}"


def part_version(name: str) -> int | None:
    """The version a part of this name was written for; None for a name no run gives."""
    match = _PART_NAME.match(name)
    return int(match.group(1)) if match else None


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


def _sealed_problem(body: dict[str, Any], version: int) -> str | None:
    """``sealed``: in a version of format_version 4 on, the first version of that format (which
    ends the flat log: ``_index_log``), 1 to this version; in an older one, absent."""
    sealed = body.get("sealed")
    if body["format_version"] < SEALED_SINCE:
        if "sealed" in body:
            return f"sealed is listed, which format_version {body['format_version']} has not"
        return None
    if not isinstance(sealed, int) or not _count(sealed) or not 1 <= sealed <= version:
        return f"sealed is {sealed!r}, not a version from 1 to {version}"
    return None


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
    problem = _sealed_problem(body, version)
    if problem is not None:
        return problem
    rows = body.get("rows")
    live = sum(p["rows"] - (p["deleted"]["rows"] if p.get("deleted") else 0) for p in parts)
    if not _count(rows) or rows != live:
        return f"rows is {rows!r}, its parts hold {live}"
    return None
