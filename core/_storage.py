"""Where corpora live: local paths, directories, globs, ``-`` (standard input or output) and
fsspec URLs (``s3://``, ``gs://``, ``hf://``, ``memory://``, ``file://``), as bytes.

Inputs expand in a fixed order (the arguments as given; the files of a directory or a glob
sorted by path; in a directory, names starting with ``_`` or ``.`` are skipped, as Hadoop and
Spark hide them, and so are the parts of a neardup index), so a run reads the same documents in
the same order every time. Standard input is spooled to a temporary file (a batch run reads its
inputs twice). Outputs are written under a temporary name and renamed over the target only when
complete; ``-`` is written to a temporary file and copied to standard output at the end: a
failed run leaves nothing behind either way.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import os
import posixpath
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import IO, Any

from neardup.core._formats import (
    FORMATS,
    INPUT_ALIASES,
    PROTECTED_ENDINGS,
    corpus_format,
    protected_format,
)
from neardup.core.errors import CorpusError, IndexBucketError

__all__ = [
    "INDEX_DIRS",
    "STDIO",
    "Output",
    "Source",
    "atomic_output",
    "check_bucket",
    "check_output",
    "check_target",
    "expand_inputs",
    "filesystem",
    "index_roots",
]

#: The name of standard input (as an input) and standard output (as an output).
STDIO = "-"
_MAGIC = frozenset("*?[")


@dataclass(frozen=True)
class Source:
    """One input file.

    Attributes:
        name: how errors and the manifest name it (the argument, or argument/relative path).
        label: what ``--id-prefix file`` puts before its ids: the path relative to the
            directory or glob it was found by, else the file's base name.
        path: the path on ``fs``.
        size: bytes, for progress totals.
        fmt: its format (one of FORMATS).
    """

    name: str
    label: str
    fs: Any
    path: str
    size: int
    fmt: str

    def url(self) -> str:
        """The file as a URL that ``filesystem`` opens again (``file://`` for a local one)."""
        return str(self.fs.unstrip_protocol(self.path))

    def open(self) -> IO[bytes]:
        """The file's bytes; CorpusError if it cannot be opened."""
        try:
            handle: IO[bytes] = self.fs.open(self.path, "rb")
        except OSError as exc:
            raise CorpusError(self.name, None, f"cannot read: {exc.strerror or exc}") from None
        return handle


def filesystem(target: str) -> tuple[Any, str]:
    """fsspec's filesystem and path for a local path or URL; CorpusError for an unknown scheme
    or a scheme whose package is not installed."""
    import fsspec.core

    try:
        fs, path = fsspec.core.url_to_fs(target)
    except ValueError as exc:
        raise CorpusError(target, None, f"unknown URL scheme ({exc})") from None
    except ImportError as exc:
        raise CorpusError(target, None, f"this URL scheme needs a package: {exc}") from None
    return fs, path


#: The protocols of object stores whose client creates a missing bucket when a file is written
#: under it (s3fs's ``makedirs``): a new index there is checked first (``check_bucket``).
_BUCKETED = frozenset({"s3", "s3a"})


def check_bucket(url: str, fs: Any, root: str) -> None:
    """IndexBucketError if ``root`` (a path of ``fs``, from ``url``) is on an object store
    (``s3://``) and its bucket does not exist: a write would create it. Asked of the bucket
    itself (``HeadBucket``); a bucket these credentials may not ask about (403) is taken to
    exist (a write will tell), and a store that does not answer raises its client's error."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if not _BUCKETED & set(protocols):
        return
    bucket = root.split("/", 1)[0]
    try:
        fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        raise IndexBucketError(url, bucket) from None
    except PermissionError:
        pass


def _static_root(path: str) -> str:
    """The part of a glob before its first component with a wildcard."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if _MAGIC & set(part):
            return "/".join(parts[:i])
    return path


def _joined(prefix: str, rel: str) -> str:
    return f"{prefix.rstrip('/')}/{rel}" if prefix else rel


def expand_inputs(targets: Sequence[str], *, corpus: bool = True) -> list[Source]:
    """Every input file of ``targets``, in order; CorpusError naming a target that holds none.

    With ``corpus`` (inputs), a directory gives its corpus files (FORMATS and INPUT_ALIASES
    but a plain ``.json``, which may be a manifest: name such a file itself) and every file must
    be one; without (protected sets), a directory gives its ``protected`` files and any name
    goes (the reader refuses one it cannot read as items). Either way a directory's hidden
    files (``_hidden``: a name starting with ``.`` or ``_``), and every file under a hidden
    directory (``.git/``, ``_temporary/``), are not read, nor the files of a neardup index found
    in it (a folder whose ``_index/`` holds a manifest: its ``parts/`` are the index's, read
    through ``--index``); a file named on its own is, whatever its name.
    """
    sources: list[Source] = []
    wanted = _in_corpus_dir if corpus else _in_protected_dir
    for target in targets:
        if target == STDIO:
            sources.append(_stdin())
            continue
        fs, path = filesystem(target)
        if _MAGIC & set(path):
            root, arg_root = _static_root(path), _static_root(target)
            found = sorted(p for p in fs.glob(path) if fs.isfile(p))
            if not found:
                raise CorpusError(target, None, "no file matches this pattern")
        elif fs.isdir(path):
            root, arg_root = path, target
            below = {p: posixpath.relpath(p, path) for p in fs.find(path)}
            indexes = index_roots(below.values())
            found = sorted(
                p for p, rel in below.items()
                if wanted(p) and not _hidden(rel) and not _in_index(rel, indexes)
            )  # fmt: skip
            if not found and "" in indexes:
                raise CorpusError(target, None, _INDEX_NOTE)
            if not found:
                kinds = _DIR_CORPUS if corpus else _DIR_PROTECTED
                what = "corpus" if corpus else "protected"
                what = f"{what} file ({', '.join(kinds)})"
                raise CorpusError(target, None, f"no {what} in this directory")
        elif fs.isfile(path):
            sources.append(_source(fs, path, target, posixpath.basename(path), corpus))
            continue
        else:
            raise CorpusError(target, None, "no such file or directory")
        for p in found:
            rel = posixpath.relpath(p, root) if root else p
            sources.append(_source(fs, p, _joined(arg_root, rel), rel, corpus))
    return sources


#: An index's own folders (``core._index``'s ``_LOG`` and ``_PARTS``): its manifests and parts.
INDEX_DIRS = ("_index", "parts")
_INDEX_NOTE = "a neardup index, not a corpus: its documents are read through --index only"


def index_roots(relative: Iterable[str]) -> set[str]:
    """The folders (relative paths, ``""`` for the top) that are neardup indexes, among the
    relative paths of the files below a directory: those with a manifest in ``_index/``."""
    roots = set()
    for rel in relative:
        head, name = posixpath.split(rel)
        folder, log = posixpath.split(head)
        if log == INDEX_DIRS[0] and name.endswith(".json"):
            roots.add(folder)
    return roots


def _in_index(relative: str, roots: set[str]) -> bool:
    """Whether a file found in a directory is an index's own (under ``ROOT/parts/`` of an index
    root; ``_index/`` is hidden anyway): a directory input never reads it as a corpus."""
    parts = relative.split("/")
    return any(
        "/".join(parts[:i]) in roots for i, part in enumerate(parts[:-1]) if part in INDEX_DIRS
    )


def _hidden(relative: str) -> bool:
    """Whether a file found in a directory is hidden, as Hadoop and Spark hide files: a name (of
    the file or of a folder on the way) starting with ``.`` (``.git/``, ``.env``, ``.crc``
    checksums) or ``_`` (``_SUCCESS``, ``_temporary/`` of an unfinished job), so a Spark output
    directory reads as its parts."""
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


#: What a directory of inputs gives: its corpus files (a plain .json only when named).
_DIR_CORPUS = (*FORMATS, *(a for a in INPUT_ALIASES if a != ".json"))
#: What a directory of protected sets gives: the files read as items (or as one text).
_DIR_PROTECTED = (*PROTECTED_ENDINGS, "(each also .gz or .zst)", ".parquet")


def _is_corpus(path: str) -> bool:
    return path.lower().endswith((*FORMATS, *INPUT_ALIASES))


def _in_corpus_dir(path: str) -> bool:
    return path.lower().endswith(_DIR_CORPUS)


def _in_protected_dir(path: str) -> bool:
    return protected_format(path) is not None


def _source(fs: Any, path: str, name: str, label: str, corpus: bool) -> Source:
    fmt = corpus_format(name) if corpus or _is_corpus(name) else ""
    return Source(name, label, fs, path, int(fs.size(path) or 0), fmt)


def _stdin() -> Source:
    """Standard input (JSON Lines) spooled to a temporary file removed at exit."""
    import fsspec

    fd, path = tempfile.mkstemp(prefix="neardup-stdin-", suffix=".jsonl")
    atexit.register(_remove, path)
    with os.fdopen(fd, "wb") as spool:
        shutil.copyfileobj(sys.stdin.buffer, spool, 1 << 20)
    return Source(STDIO, "stdin", fsspec.filesystem("file"), path, os.path.getsize(path), ".jsonl")


def _remove(path: str) -> None:
    with suppress(OSError):
        os.unlink(path)


def check_output(target: str) -> str:
    """The format ``target`` is written in (``-`` is JSON Lines); CorpusError, before any work,
    for an unknown format, a missing local directory, a directory as target or a bad URL."""
    if target == STDIO:
        return ".jsonl"
    fmt = corpus_format(target, output=True)
    check_target(target)
    return fmt


def check_target(target: str) -> None:
    """CorpusError for a file that cannot be written: a missing local directory, a directory
    as target, or an unknown URL scheme."""
    if target == STDIO:
        return
    fs, path = filesystem(target)
    if _is_local(fs):
        parent = os.path.dirname(path) or "."
        if not os.path.isdir(parent):
            raise CorpusError(target, None, f"no such directory: {parent}")
        if os.path.isdir(path):
            raise CorpusError(target, None, "is a directory; give a file name")


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocol or "local" in protocol


@dataclass
class Output:
    """What ``atomic_output`` wrote, once its block is done: bytes and SHA-256."""

    target: str
    bytes: int = 0
    sha256: str = ""


#: Numbers this process's writers, so that no two share a temporary name (one per output).
_WRITERS = itertools.count()


@contextmanager
def atomic_output(target: str) -> Iterator[tuple[IO[bytes], Output]]:
    """``(binary file, Output)`` to write ``target`` through: the target appears (renamed from a
    temporary name, or copied to standard output) only if the block completes."""
    check_target(target)
    done = Output(target)
    if target == STDIO:
        with tempfile.TemporaryFile(prefix="neardup-stdout-") as tmp:
            yield tmp, done
            _digest(tmp, done)
            tmp.seek(0)
            shutil.copyfileobj(tmp, sys.stdout.buffer, 1 << 20)
            sys.stdout.buffer.flush()
        return
    fs, path = filesystem(target)
    head, tail = posixpath.split(path)
    partial = posixpath.join(head, f".{tail}.partial-{os.getpid()}-{next(_WRITERS)}")
    try:
        with fs.open(partial, "wb") as handle:
            yield handle, done
        with fs.open(partial, "rb") as written:
            _digest(written, done)
        fs.mv(partial, path)
    except BaseException:
        with suppress(OSError, FileNotFoundError):
            fs.rm(partial)
        raise


def _digest(handle: IO[bytes], done: Output) -> None:
    handle.seek(0)
    sha = hashlib.sha256()
    while chunk := handle.read(1 << 20):
        sha.update(chunk)
        done.bytes += len(chunk)
    done.sha256 = sha.hexdigest()
