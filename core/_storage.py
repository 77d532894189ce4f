"""Where corpora live: local paths, directories, globs, ``-`` (standard input or output) and
fsspec URLs (``s3://``, ``gs://``, ``hf://``, ``memory://``, ``file://``), as bytes.

Inputs expand in a fixed order (the arguments as given; the files of a directory or a glob
sorted by path; in a directory, names starting with ``_`` or ``.`` are skipped, as Hadoop and
Spark hide them), so a run reads the same documents in the same order every time. Standard input
is spooled to a temporary file (a batch run reads its inputs twice). Outputs are written under a
temporary name and renamed over the target only when complete; ``-`` is written to a temporary
file and copied to standard output at the end: a failed run leaves nothing behind either way.
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
from collections.abc import Iterator, Sequence
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
from neardup.core.errors import CorpusError, ParameterError

__all__ = [
    "STDIO",
    "Output",
    "Source",
    "atomic_output",
    "check_apart",
    "check_output",
    "check_target",
    "expand_inputs",
    "filesystem",
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
    directory (``.git/``, ``_temporary/``), are not read; a file named on its own is, whatever
    its name.
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
            found = sorted(
                p for p in fs.find(path) if wanted(p) and not _hidden(posixpath.relpath(p, path))
            )
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


def check_apart(
    reads: Sequence[tuple[str, str]],
    writes: Sequence[tuple[str, str | None]],
    index: tuple[str, str] | None = None,
) -> None:
    """ParameterError, before any work, when a run would write over what it reads or write two
    outputs to one file, or mix its index (``index``: ``(flag, target)``) with its files.

    ``reads`` and ``writes`` are ``(flag, target)`` pairs (``("INPUT", "data/")``,
    ``("--removed", "x.jsonl")``; a None target is not written). Inputs are expanded the way
    they are read (a directory to every file below it, a glob to its matches), and local files
    compare by what they are (links, ``..`` and hard links resolved). An output may not be an
    input file, nor a directory holding one (an engine that writes a directory of parts would
    replace it), nor another output. No output may lie inside the index, and no input may be
    the index, lie inside it or hold it.
    """
    named = [(flag, t, _identity(t)) for flag, t in writes if t is not None and t != STDIO]
    for (flag_a, a, key_a), (flag_b, b, key_b) in itertools.combinations(named, 2):
        if _same(key_a, key_b):
            raise ParameterError(
                f"{flag_a} {a} and {flag_b} {b} are the same file: give each output its own name"
            )
    for read_flag, target in reads:
        if target == STDIO:
            continue
        for path, key in _read_identities(target):
            for flag, out, out_key in named:
                same = _same(key, out_key)
                if same or key[1].startswith(out_key[1].rstrip("/") + "/"):
                    what = "is" if same else "holds"
                    raise ParameterError(
                        f"{flag} {out} {what} {read_flag} {path}: neardup never writes over "
                        "its inputs; give the output another name"
                    )
    if index is not None:
        _check_index_apart(reads, named, index)


def _check_index_apart(
    reads: Sequence[tuple[str, str]],
    named: Sequence[tuple[str, str, tuple[object, str]]],
    index: tuple[str, str],
) -> None:
    """ParameterError for an output inside the index, or an input that is, holds or lies in it."""
    index_flag, target = index
    key = _identity(target)
    root = key[1].rstrip("/")

    def related(other: tuple[object, str]) -> bool:
        path = other[1].rstrip("/")
        return _same(key, other) or path.startswith(root + "/") or root.startswith(path + "/")

    for flag, out, out_key in named:
        if _same(key, out_key) or out_key[1].startswith(root + "/"):
            raise ParameterError(
                f"{flag} {out} is inside {index_flag} {target}: the index holds only its own "
                "files; write the output elsewhere"
            )
    for read_flag, read in reads:
        if read != STDIO and related(_identity(read)):
            raise ParameterError(
                f"{read_flag} {read} and {index_flag} {target} overlap: the index is not an "
                "input (its documents are deduped against, never read as new ones)"
            )


def _same(a: tuple[object, str], b: tuple[object, str]) -> bool:
    """Whether two identities name one file: the same path, or the same device and inode."""
    return a[1] == b[1] or (a[0] is not None and a[0] == b[0])


def _identity(target: str) -> tuple[object, str]:
    """What a path names: (device and inode, or None, real path) locally; (None, URL) else."""
    try:
        fs, path = filesystem(target)
    except CorpusError:
        return None, target  # a scheme only an engine of its own reads (Spark's s3a://, hdfs://)
    if not _is_local(fs):
        return None, str(fs.unstrip_protocol(path))
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return None, real
    return (st.st_dev, st.st_ino), real


def _read_identities(target: str) -> Iterator[tuple[str, tuple[object, str]]]:
    """Every file ``target`` reads (or, not found, the target itself), with its identity."""
    try:
        fs, path = filesystem(target)
    except CorpusError:
        yield target, (None, target)
        return
    if _MAGIC & set(path):
        found = [p for p in fs.glob(path) if fs.isfile(p)]
    elif fs.isdir(path):
        found = list(fs.find(path))
    else:
        found = [path]
    local = _is_local(fs)
    for p in found:
        yield p, _identity(p) if local else (None, str(fs.unstrip_protocol(p)))


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
