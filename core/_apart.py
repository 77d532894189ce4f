"""The guard every command that writes files runs before any work: no output over an input,
no two outputs on one file, no output inside the index, no input mixed with it, and no index
made in a directory that holds a corpus.

Files compare by what they are, however they are spelt: a local path and its ``file:`` or
``file://`` URL, ``..``, symbolic links and hard links (same device and inode) name one file;
a directory or a glob stands for every file it reads; a chained URL (``simplecache::file://x``)
for the file at its end. ``neardup``'s commands declare which flags read and which write
(``neardup.app.cli.paths``) and the CLI runs this check for every command from those
declarations, so a new command cannot skip it.
"""

from __future__ import annotations

import itertools
import os
import posixpath
from collections.abc import Iterator, Sequence

from neardup.core._storage import (
    _MAGIC,
    INDEX_DIRS,
    STDIO,
    _hidden,
    _in_corpus_dir,
    _is_local,
    filesystem,
)
from neardup.core.errors import CorpusError, ParameterError

__all__ = ["check_apart", "check_index_home"]

#: Corpus files named in a refusal at most.
_SHOWN = 3


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
    for flag, target in writes:
        if target is not None and target != STDIO:
            _check_not_pattern(flag, target)
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


def _check_not_pattern(flag: str, target: str) -> None:
    """ParameterError for an output spelt as a glob: an output is one file (or one directory
    of parts), and a ``*``, ``?`` or ``[`` would be written into its name literally."""
    _, path = filesystem(target)
    magic = sorted(_MAGIC & set(path))
    if magic:
        raise ParameterError(
            f"{flag} {target}: an output names one file, not a pattern "
            f"({' '.join(repr(c) for c in magic)} would be written into its name); "
            "give it a plain name"
        )


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
    """What a path names: (device and inode, or None, real path) locally; (None, URL) else; a
    chained URL (``simplecache::file:///x``) names the file at its end."""
    if "::" in target:
        return _identity(target.rsplit("::", 1)[1])
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
    if "::" in target:
        yield target, _identity(target)
        return
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


def check_index_home(flag: str, target: str) -> None:
    """ParameterError when the index ``target`` (given as ``flag``) is a directory that holds
    corpus files besides its own ``_index/`` and ``parts/``: an index gets a directory of its
    own, so that a directory input never mistakes one for the other."""
    try:
        fs, path = filesystem(target)
    except CorpusError:
        return  # a scheme only an engine of its own reads (Spark's s3a://, hdfs://)
    if not fs.isdir(path):
        return
    found: list[str] = []
    for entry in sorted(fs.ls(path, detail=False)):
        name = posixpath.basename(entry.rstrip("/"))
        if name in INDEX_DIRS or _hidden(name):
            continue
        below = fs.find(entry) if fs.isdir(entry) else [entry]
        found += [p for p in below if _in_corpus_dir(p) and not _hidden(posixpath.relpath(p, path))]
        if len(found) >= _SHOWN:
            break
    if found:
        shown = ", ".join(posixpath.relpath(p, path) for p in found[:_SHOWN])
        raise ParameterError(
            f"{flag} {target} holds corpus files ({shown}): an index directory holds only its "
            "own _index/ and parts/; give the index a directory of its own"
        )
