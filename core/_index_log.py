"""The version log of an index: where each version is, which versions are committed, and the
newest read and checked (the commit itself is ``_index_commit``'s).

An index holds its versions V = 1 .. N (N, the newest, is the index) and part directories
``parts/p{V:08d}-{12 hex digits}/``, V being the version the part was written for: the one after
the version its run read, which it becomes if that run wins the commit. The versions are kept in
two logs (docs/index.md, "The version log")::

    _index/{V:08d}.json                       the flat log: every version of format_version 1
                                              to 3, then the first of format_version 4 (S, the
                                              seal, which says ``"sealed": S``)
    _index/log/{V // 1000:05d}/{V:08d}.json   the grouped log: the versions after S (and a copy
                                              of S, which opens it), 1,000 a directory

A neardup reading format_version 3 at most lists the flat log, takes S for the newest and
refuses its format_version (damage naming both): it never reads an older version. This module
decides from names, manifests and one marker file what is committed; it never looks at what a
part's files hold (``_index`` and ``_index_parts`` do), so a new part layout keeps it.

- Listings are never served from a cache: fsspec's object-store filesystems keep directory
  listings for the life of a process, so ``forget_listings`` drops them before every listing
  here (each open, each commit and its conflict check).
- The newest version is found in a number of filesystem calls that does not grow with the
  versions: ``_index/log/`` listed (a name per 1,000 versions), its newest group listed (1,000
  names at most), the version before that group's first checked (``read_latest``). Without a
  grouped log (an index of format_version 3 or older, or one whose newest version is S) the
  flat log is listed, as it always was.
- Versions are contiguous: one missing in the newest group, or before its first (the last of
  the group before it, or S), or a group missing between two, is damage; ``all_versions`` (what
  ``neardup index info`` lists) checks the whole log, 1 to N.
- A committed part holds ``parts/<part>/_committed`` (``COMMITTED``), written just after its
  version. A part marked committed as a version past N, or any part written for a version past
  N + 1 (its run read that version), proves a committed version is missing: damage
  (IndexDamagedError naming the version file), never the index rolled back to N, never a
  leftover to remove, never a new index when N = 0. A part of a killed run (written, never
  committed) has no marker: a leftover.
- Every manifest is validated whole (``_index_manifest.manifest_problem``) before it is used,
  and before it is written.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, MutableMapping
from typing import Any

from neardup.core._index_manifest import (
    FORMAT,
    FORMAT_VERSION,
    FORMAT_VERSIONS,
    PARTS,
    SEALED_SINCE,
    index_params,
    manifest_problem,
    part_name,
    part_version,
)
from neardup.core._json import read_json
from neardup.core.errors import IndexDamagedError

__all__ = [
    "COMMITTED",
    "FORMAT",
    "FORMAT_VERSION",
    "FORMAT_VERSIONS",
    "GROUP",
    "GROUPED",
    "LOG",
    "PARTS",
    "all_versions",
    "forget_listings",
    "grouped_file",
    "index_params",
    "manifest_problem",
    "part_name",
    "part_version",
    "read_latest",
    "read_version",
    "sealed_of",
    "version_file",
    "version_path",
    "versions",
]

#: The directory of the version files (the flat log), and the grouped log's inside it.
LOG = "_index"
GROUPED = "log"
#: Versions a directory of the grouped log holds: one page of an object store's listing.
GROUP = 1000
#: The marker a committed part holds (hidden: a leading ``_``, which directory inputs skip).
COMMITTED = "_committed"
_VERSION_FILE = re.compile(r"^(\d{8})\.json$")
_GROUP_NAME = re.compile(r"^\d{5}$")
#: Times ``read_latest`` reads the log again when versions were committed while it read.
_REREADS = 8
_GAP = "restore it: an index is never read without one of its versions"


def version_file(version: int) -> str:
    """A version's file in the flat log, relative to the index."""
    return f"{LOG}/{version:08d}.json"


def grouped_file(version: int) -> str:
    """A version's file in the grouped log, relative to the index (the seal's copy too)."""
    return f"{LOG}/{GROUPED}/{version // GROUP:05d}/{version:08d}.json"


def version_path(version: int, sealed: int | None) -> str:
    """Where version ``version`` of an index sealed at ``sealed`` (None: not sealed, every
    version flat) is, relative to the index: the flat log up to the seal, the grouped log
    after it."""
    return version_file(version) if sealed is None or version <= sealed else grouped_file(version)


def sealed_of(manifest: dict[str, Any]) -> int | None:
    """The version that sealed the flat log, as a (checked) manifest says; None before
    format_version 4."""
    if manifest.get("format_version", 0) < SEALED_SINCE:
        return None
    return int(manifest["sealed"])


def forget_listings(fs: Any, root: str) -> None:
    """Drop ``fs``'s cached listings of ``root`` and everything under it (s3fs, gcsfs and adlfs
    keep them per process: a stale one hides versions and files committed since)."""
    fs.invalidate_cache(root)  # root and its parents, on every filesystem
    cache = getattr(fs, "dircache", None)
    if isinstance(cache, MutableMapping):
        inside = root.rstrip("/") + "/"
        for key in [k for k in cache if str(k) == root or str(k).startswith(inside)]:
            cache.pop(key, None)


def _names(fs: Any, directory: str) -> list[str]:
    """The base names in ``directory`` (none if it is missing), from a listing."""
    try:
        found = fs.ls(directory, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [posixpath.basename(str(name).rstrip("/")) for name in found]


def _numbers(names: Iterable[str]) -> list[int]:
    found = (_VERSION_FILE.match(n) for n in names)
    return sorted({int(m.group(1)) for m in found if m and int(m.group(1)) > 0})


def versions(fs: Any, root: str) -> list[int]:
    """The version numbers of the flat log at ``root``, ascending, from a fresh listing."""
    forget_listings(fs, root)
    return _numbers(_names(fs, posixpath.join(root, LOG)))


def _groups(fs: Any, root: str) -> list[int]:
    """The group numbers of the grouped log, ascending (none before the seal)."""
    names = _names(fs, posixpath.join(root, LOG, GROUPED))
    return sorted(int(n) for n in names if _GROUP_NAME.match(n))


def _in_group(fs: Any, root: str, group: int) -> list[int]:
    names = _names(fs, posixpath.join(root, LOG, GROUPED, f"{group:05d}"))
    return [v for v in _numbers(names) if v // GROUP == group]


def _missing(url: str, path: str, first: int, newest: int) -> IndexDamagedError:
    return IndexDamagedError(
        url, path, f"is missing (versions {first} to {newest} must all be there); {_GAP}"
    )


def _newest(url: str, fs: Any, root: str) -> tuple[int, list[int]]:
    """The newest version and the versions listed beside it: those of the newest group of the
    grouped log, or (none) the whole flat log, checked 1 to the newest. Groups must run
    without a gap; the newest one may hold no version (made by a commit killed before its
    file), and is then passed over."""
    forget_listings(fs, root)
    groups = _groups(fs, root)
    found = _in_group(fs, root, groups[-1]) if groups else []
    if groups and not found:
        groups.pop()
        found = _in_group(fs, root, groups[-1]) if groups else []
        if groups and not found:
            raise IndexDamagedError(
                url, f"{LOG}/{GROUPED}/{groups[-1]:05d}/", f"holds no version; {_GAP}"
            )
    gap = sorted(set(range(groups[0], groups[-1] + 1)) - set(groups)) if groups else []
    if gap:
        raise IndexDamagedError(
            url, f"{LOG}/{GROUPED}/{gap[0]:05d}/", f"is missing (groups {groups[0]:05d} to "
            f"{groups[-1]:05d} must all be there); {_GAP}"
        )  # fmt: skip
    if found:
        return found[-1], found
    flat = _numbers(_names(fs, posixpath.join(root, LOG)))
    newest = flat[-1] if flat else 0
    if len(flat) != newest:
        gap = sorted(set(range(1, newest + 1)) - set(flat))
        raise _missing(url, version_file(gap[0]), 1, newest)
    return newest, []


def _present(fs: Any, path: str) -> bool:
    """Whether the file ``path`` is there, asked of the file itself (a HEAD on an object store),
    never of a cached listing."""
    try:
        fs.info(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def _read(url: str, fs: Any, root: str, name: str, version: int) -> dict[str, Any]:
    """The manifest at ``name``, checked whole: IndexDamagedError naming it otherwise."""
    try:
        with fs.open(posixpath.join(root, name), "rb") as handle:
            manifest = read_json(handle.read().decode("utf-8"))
    except (OSError, ValueError) as exc:  # JSONError included: deep nesting, huge integers
        raise IndexDamagedError(url, name, f"cannot be read ({exc})") from None
    problem = manifest_problem(manifest, version)
    if problem is not None:
        raise IndexDamagedError(url, name, problem)
    return manifest  # type: ignore[no-any-return]


def _read_newest(url: str, fs: Any, root: str, newest: int, listed: list[int]) -> dict[str, Any]:
    """The newest version's manifest, and its window checked: in the grouped log, every
    version of its group from the first after the seal to the newest, and the one before."""
    if not listed:  # the flat log: checked whole by ``_newest``
        manifest = _read(url, fs, root, version_file(newest), newest)
        sealed = sealed_of(manifest)
        if sealed is not None and sealed != newest:
            raise IndexDamagedError(
                url, version_file(newest), f"is in the flat log but sealed it at {sealed}: "
                "later versions are in the grouped log"
            )  # fmt: skip
        return manifest
    name = grouped_file(newest)
    manifest = _read(url, fs, root, name, newest)
    sealed = sealed_of(manifest)
    if sealed is None:
        raise IndexDamagedError(
            url, name, f"is in the grouped log but of format_version {manifest['format_version']}"
        )
    if sealed == newest:  # the seal's copy: the version is its flat file, as older neardups read
        if not _present(fs, posixpath.join(root, version_file(newest))):
            raise _missing(url, version_file(newest), newest, newest)
        return _read_newest(url, fs, root, newest, [])
    first = max(newest // GROUP * GROUP, sealed + 1)
    gap = sorted(set(range(first, newest + 1)) - set(listed))
    if gap:
        raise _missing(url, grouped_file(gap[0]), first - 1, newest)
    before = version_path(first - 1, sealed)
    if first > 1 and not _present(fs, posixpath.join(root, before)):
        raise _missing(url, before, first - 1, newest)
    return manifest


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
    is committed. IndexDamagedError when a version is missing (in the window ``_newest`` and
    ``_read_newest`` check, or past the newest as a part proves) or the newest manifest is
    unreadable or malformed. Its filesystem calls do not grow with the versions (module doc)."""
    newest, manifest = 0, {}
    for _ in range(_REREADS):
        newest, listed = _newest(url, fs, root)
        manifest = _read_newest(url, fs, root, newest, listed) if newest else {}
        proof = _past(fs, root, newest)
        if proof is None:
            break
        if _newest(url, fs, root)[0] >= proof[0]:
            continue  # committed while this was read: read the newer log
        missing, how = proof
        raise IndexDamagedError(
            url, version_path(missing, sealed_of(manifest) if manifest else None),
            f"is missing but {how}; restore it: an index is never read as an older version, "
            "nor started again over committed parts",
        )  # fmt: skip
    return newest, manifest


def read_version(
    url: str, fs: Any, root: str, version: int, sealed: int | None
) -> dict[str, Any] | None:
    """Version ``version``'s manifest, checked whole, in an index last seen sealed at
    ``sealed`` (None: not sealed then, so a later version may be in either log); None when
    there is no such version."""
    names = [version_path(version, sealed)]
    if sealed is None:
        names.append(grouped_file(version))
    for name in names:
        if _present(fs, posixpath.join(root, name)):
            return _read(url, fs, root, name, version)
    return None


def all_versions(url: str, fs: Any, root: str, sealed: int | None) -> list[int]:
    """Every committed version, ascending, from listings of the whole log (a listing per 1,000
    versions) of an index sealed at ``sealed`` (None: not sealed): the flat log up to the seal,
    the grouped log after it. IndexDamagedError naming the first version missing between 1 and
    the newest (what an open checks only from the newest group's first version)."""
    forget_listings(fs, root)
    flat = _numbers(_names(fs, posixpath.join(root, LOG)))
    found = set(flat)
    for group in _groups(fs, root):  # (the seal's copy is no version: its flat file is)
        found.update(v for v in _in_group(fs, root, group) if sealed is None or v > sealed)
    listed = sorted(found)
    newest = listed[-1] if listed else 0
    if len(listed) != newest:
        gap = min(set(range(1, newest + 1)) - found)
        raise _missing(url, version_path(gap, sealed), 1, newest)
    return listed
