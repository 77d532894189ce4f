"""The commit of an index's version (docs/index.md, "Committing a version"): the next version's
file created exclusively where the version log keeps it (``_index_log``), and the marker of each
part it committed.

Locally the file is written to a temporary file, flushed to disk, then hard-linked to its name
(``link`` fails when the name exists); elsewhere it is created with fsspec's ``"xb"`` (a
conditional write on S3, GCS and Azure); a filesystem without either, or one whose ``"xb"`` is
known not to be exclusive (``EXCLUSIVE_SINCE``), checks, then writes: one writer at a time
there.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import sys
import uuid
from collections.abc import Iterable
from contextlib import suppress
from typing import Any

from neardup.core._index_log import (
    COMMITTED,
    GROUPED,
    LOG,
    PARTS,
    forget_listings,
    grouped_file,
    manifest_problem,
    part_version,
    sealed_of,
    version_file,
    version_path,
)
from neardup.core._storage import _is_local

__all__ = ["create_version", "mark_committed"]

#: The first release of an fsspec backend whose ``"xb"`` is exclusive for every file: s3fs
#: 2024.12 to 2025.6 accept ``"xb"`` but send a file of one block (every version file) as a
#: plain ``PutObject``, without ``If-None-Match``, so a commit would overwrite a version another
#: run committed; before 2024.12 s3fs refuses ``"xb"``. (docs/index.md, "Object storage")
EXCLUSIVE_SINCE = {"s3fs": (2025, 7)}


def create_version(url: str, fs: Any, root: str, version: int, body: dict[str, Any]) -> bool:
    """Create version ``version`` holding ``body`` (checked first: ValueError naming what is
    wrong; nothing written) unless it exists (then False), all or nothing: in the flat log up
    to the seal (``body``'s ``sealed``; a version of format_version 3 or older has none), in the
    grouped log after it. The seal itself is then copied into the grouped log (best effort:
    without the copy the flat log is listed until the next version), which opens it."""
    problem = manifest_problem(body, version)
    if problem is not None:
        raise ValueError(f"{url}: {version_file(version)} would be malformed: it {problem}")
    data = (json.dumps(body, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    sealed = sealed_of(body)
    name = version_path(version, sealed)
    temp = posixpath.join(root, LOG) if name == version_file(version) else _grouped_dir(root)
    fs.makedirs(posixpath.dirname(posixpath.join(root, name)), exist_ok=True)
    forget_listings(fs, root)  # where a store has no exclusive create, a listing decides
    if not _create_exclusive(fs, posixpath.join(root, name), data, temp):
        return False
    if sealed == version:
        with suppress(OSError):
            copy = posixpath.join(root, grouped_file(version))
            fs.makedirs(posixpath.dirname(copy), exist_ok=True)
            _create_exclusive(fs, copy, data, _grouped_dir(root))
    return True


def _grouped_dir(root: str) -> str:
    return posixpath.join(root, LOG, GROUPED)


def mark_committed(fs: Any, root: str, names: Iterable[str], version: int) -> None:
    """Mark the parts ``names`` (those written for ``version``) committed as ``version``.

    Best effort: the version is committed already, and a part without its marker is still
    read; only a later loss of this version's file would then go unnoticed."""
    body = (json.dumps({"version": version}) + "\n").encode("utf-8")
    for name in names:
        if part_version(name) == version:
            with suppress(OSError):
                fs.pipe_file(posixpath.join(root, PARTS, name, COMMITTED), body)


def _create_exclusive(fs: Any, path: str, data: bytes, temp_dir: str | None = None) -> bool:
    """Create ``path`` holding ``data`` unless it exists (then False), all or nothing; locally
    through a temporary file in ``temp_dir`` (by default ``path``'s directory)."""
    if _is_local(fs):
        local = fs._strip_protocol(path)
        where = posixpath.dirname(local) if temp_dir is None else fs._strip_protocol(temp_dir)
        temp = posixpath.join(where, f".tmp-{os.getpid()}-{uuid.uuid4().hex}")
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
    if _exclusive(fs):
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


def _exclusive(fs: Any) -> bool:
    """Whether ``fs``'s ``"xb"`` may be trusted to fail when the file exists: not for a backend
    release older than ``EXCLUSIVE_SINCE`` says (its package's ``__version__``)."""
    package = type(fs).__module__.partition(".")[0]
    since = EXCLUSIVE_SINCE.get(package)
    if since is None:
        return True
    version = str(getattr(sys.modules.get(package), "__version__", ""))
    release = tuple(int(n) for n in re.findall(r"\d+", version)[:2])
    return release >= since
