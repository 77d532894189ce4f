"""Opening an index after a long history of versions (issue 30: a service flushes a version every
five minutes, ~105,000 a year): the seconds and the filesystem calls of one open.

An index of ``--versions`` versions is built straight from tiny version files (no part, as a
test fixture would: what is measured is the log, not the parts), on a local directory and on
fsspec's ``memory://``, in each layout this neardup reads: ``flat`` (today's, format_version 3:
every version ``_index/{V:08d}.json``) and, where this neardup writes it, ``grouped``
(format_version 4: the versions after the first in ``_index/log/{V // 1000:05d}/``). Measured
per size, layout and filesystem:

- ``DocIndex.open`` (what every append, compaction, deletion, ``index info`` and a service's
  refresh every ``NEARDUP_INDEX_REFRESH`` seconds do first): the median seconds of ``--repeat``
  opens, and in one open the calls neardup makes on the filesystem by method, the names its
  listings returned, and the listing requests an object store would make (S3 returns 1,000
  names a request);
- ``commit_index`` of one empty version on top (the commit path), then undone.

Run from the repository root::

    python -m bench.index.versions [--versions 1000 10000 100000] [--repeat 5] [--quick]
        [--fs file memory] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench.common.machine import now

__all__ = ["build", "main", "measure"]

#: Names an object store returns per listing request (S3's ListObjectsV2 page).
PAGE = 1000
PARAMS = {"bands": 4, "k": 2, "num_perm": 16, "seed": 0, "threshold": 0.5, "tokenizer": "words"}


class CountingFS:
    """A filesystem that counts the calls made on it (public methods) and the names listed."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs
        self.calls: Counter[str] = Counter()
        self.listed = 0
        self.requests = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._fs, name)
        if name.startswith("_") or not callable(value):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = value(*args, **kwargs)
            if name in ("ls", "find", "glob"):
                self.listed += len(result)
                self.requests += max(1, math.ceil(len(result) / PAGE))
            elif name in ("exists", "info", "isdir", "isfile", "size", "open", "cat", "pipe_file"):
                self.requests += 1
            return result

        return counted


def _layouts() -> tuple[str, ...]:
    from neardup.core import _index_log

    return ("flat", "grouped") if hasattr(_index_log, "version_path") else ("flat",)


def _body(version: int, format_version: int, sealed: int | None) -> bytes:
    body: dict[str, Any] = {
        "format": "neardup-index", "format_version": format_version, "version": version,
        "params": PARAMS, "parts": [], "rows": 0,
    }  # fmt: skip
    if sealed is not None:
        body["sealed"] = sealed
    return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()


def build(fs: Any, root: str, versions: int, layout: str) -> None:
    """``versions`` tiny version files at ``root`` in ``layout`` (``flat``: format 3, all in
    ``_index/``; ``grouped``: version 1 sealing the flat log, copied into the grouped log,
    the others there)."""
    fs.makedirs(f"{root}/_index", exist_ok=True)
    if layout == "flat":
        for v in range(1, versions + 1):
            fs.pipe_file(f"{root}/_index/{v:08d}.json", _body(v, 3, None))
        return
    from neardup.core._index_log import grouped_file, version_path

    made: set[str] = set()
    paths = [(1, grouped_file(1))]  # the seal's copy, as its commit writes it
    for v in range(1, versions + 1):
        paths.append((v, version_path(v, 1)))
    for v, relative in paths:
        path = f"{root}/{relative}"
        directory = path.rsplit("/", 1)[0]
        if directory not in made:
            fs.makedirs(directory, exist_ok=True)
            made.add(directory)
        fs.pipe_file(path, _body(v, 4, 1))


@contextmanager
def _counted(fs: Any) -> Iterator[CountingFS]:
    """Every ``DocIndex.open`` in the block uses a counting wrapper of ``fs``."""
    from neardup.core import _index

    counting = CountingFS(fs)
    real = _index.filesystem
    _index.filesystem = lambda url: (counting, real(url)[1])  # type: ignore[assignment]
    try:
        yield counting
    finally:
        _index.filesystem = real  # type: ignore[assignment]


def measure(fs: Any, url: str, root: str, repeat: int) -> dict[str, Any]:
    """One size and layout: the open's seconds (median), calls and listings; a commit's."""
    from neardup.core.engine import DocIndex, MinhashParams, commit_index

    DocIndex.open(url)  # imports, first listings
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        index = DocIndex.open(url)
        seconds.append(time.perf_counter() - start)
    with _counted(fs) as counting:
        index = DocIndex.open(url)
    params = MinhashParams(num_perm=16, bands=4, threshold=0.5, k=2)
    with _counted(fs) as committing:
        start = time.perf_counter()
        version = commit_index(DocIndex.open(url), params)
        commit_s = time.perf_counter() - start
    for path in fs.find(f"{root}/_index"):  # undone: the version just committed
        if path.endswith(f"{version:08d}.json"):
            fs.rm_file(path)
    return {
        "version": index.version,
        "open_s": statistics.median(seconds),
        "calls": dict(sorted(counting.calls.items())),
        "listed": counting.listed,
        "requests": counting.requests,
        "commit_s": commit_s,
        "commit_calls": sum(committing.calls.values()),
        "commit_listed": committing.listed,
    }


def _forget(fs: Any, root: str) -> None:
    """Drop ``root`` from the memory filesystem (its ``rm`` is quadratic in the files)."""
    for key in [k for k in fs.store if k == root or k.startswith(root + "/")]:
        del fs.store[key]
    fs.pseudo_dirs[:] = [d for d in fs.pseudo_dirs if d != root and not d.startswith(root + "/")]


def run(sizes: Sequence[int], repeat: int, filesystems: Sequence[str]) -> list[dict[str, Any]]:
    """Every size, layout and filesystem."""
    import fsspec

    rows = []
    for name in filesystems:
        for layout in _layouts():
            for n in sizes:
                with tempfile.TemporaryDirectory(prefix="neardup-versions-") as work:
                    if name == "file":
                        fs, root = fsspec.filesystem("file"), f"{work}/idx"
                        url = root
                    else:
                        fs = fsspec.filesystem("memory")
                        root = f"/neardup-bench-{uuid.uuid4().hex}"
                        url = f"memory://{root}"
                    build(fs, root, n, layout)
                    try:
                        row = measure(fs, url, root, repeat)
                    finally:
                        if name == "memory":
                            _forget(fs, root)
                    rows.append({"fs": name, "layout": layout, "versions": n, **row})
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def markdown(rows: Sequence[dict[str, Any]], started: str, ended: str, command: str) -> str:
    """The section for bench/RESULTS.md."""
    lines = [
        "## Opening an index after a long history (`bench.index.versions`)",
        "",
        f"{started} - {ended}, `{command}`. One open: median seconds of the opens; the calls "
        "neardup made on the filesystem; the names its listings returned; the requests an "
        "object store would serve (a listing: one per 1,000 names; any other call: one). A "
        "commit: one empty version on top (then removed).",
        "",
        "| fs | layout | versions | open s | calls in one open | names listed | store requests "
        "| commit s | commit calls |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        calls = ", ".join(f"{k} {v}" for k, v in r["calls"].items())
        lines.append(
            f"| {r['fs']} | {r['layout']} | {r['versions']:,} | {r['open_s']:.4f} | {calls} "
            f"| {r['listed']:,} | {r['requests']:,} | {r['commit_s']:.4f} | {r['commit_calls']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print (``--markdown``: the RESULTS.md section)."""
    parser = argparse.ArgumentParser(prog="python -m bench.index.versions")
    parser.add_argument("--versions", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fs", nargs="+", default=["file", "memory"], choices=["file", "memory"])
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--quick", action="store_true", help="1,000 and 5,000 versions only")
    args = parser.parse_args(argv)
    started = now()
    sizes = [1_000, 5_000] if args.quick else args.versions
    rows = run(sizes, args.repeat, args.fs)
    command = "python -m bench.index.versions " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.markdown:
        print(markdown(rows, started, now(), command.strip()))
    else:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
