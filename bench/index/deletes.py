"""Deletes and replaces by deletion vectors against the rewrite they replace (issue 30, part 5).

An index of ``--docs`` synthetic documents (``bench.index.lookups.build``: parts of
``--part-docs``, plus 2,000 real texts) gets, as whole ``neardup`` processes (wall and CPU
seconds, and the bytes of the files the run added under the index):

- ``neardup dedup NEW.jsonl --index IDX --recrawled replace`` of ``--ids`` re-crawled documents
  (ids of the indexed synthetic documents, evenly spread, with changed texts: every one is
  replaced), *before*: the parts holding them rewritten without them (``rewrite_without``, what
  this neardup did before deletion vectors: the same process with its commit swapped back,
  ``_rewrite_main``), and *after*: a deletion vector per part (the code as it is);
- ``neardup index delete IDX --ids IDS`` of the same ids (after only: it never rewrote).

Each run is undone afterwards (its versions and files removed), so every run sees the same index.

Run from the repository root::

    python -m bench.index.deletes [--docs 1000000] [--ids 1000] [--repeat 2] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.machine import now
from bench.index.lookups import REAL_DOCS, _latest, _text, _write_jsonl, build

__all__ = ["main", "measure"]

_REWRITE = "from bench.index.deletes import _rewrite_main; _rewrite_main()"


def _rewrite_main() -> None:
    """``neardup`` with ``--recrawled replace`` committing as before deletion vectors: the parts
    holding replaced documents rewritten without them and swapped in (``rewrite_without``)."""
    import neardup.app.cli.dedup as dedup
    from neardup.app.cli import main
    from neardup.core._recrawl import rewrite_without

    replaced: list[Any] = []
    real_commit = dedup.commit_index

    def no_vectors(index: Any, ids: Any) -> tuple[dict[str, Any], list[str]]:
        replaced[:] = [index, sorted(ids)]
        return {}, []

    def rewrite_commit(index: Any, params: Any, add: Any = (), drop: Any = (), **kw: Any) -> int:
        run = {"created": "", "engine": "local", "neardup": "bench", "inputs": [],
               "inputs_total": 0, "mode": "replace"}  # fmt: skip
        added, dropped = rewrite_without(index, params, replaced[1], run)
        return real_commit(index, params, [*add, *added], [*drop, *dropped])

    dedup.write_deletes = no_vectors  # type: ignore[assignment]
    dedup.commit_index = rewrite_commit  # type: ignore[assignment]
    sys.exit(main(sys.argv[1:]))


def _files(url: Path) -> dict[str, int]:
    return {str(p.relative_to(url)): p.stat().st_size for p in url.rglob("*") if p.is_file()}


def _run(url: Path, args: Sequence[str], rewrite: bool = False) -> dict[str, float]:
    """Wall and CPU seconds of one process, and the bytes of the files it added under ``url``;
    then undone (every file it added removed, so the index is the one before)."""
    before, version = _files(url), _latest(url)
    start_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-c", _REWRITE] if rewrite else [sys.executable, "-m", "neardup"]
    start = time.perf_counter()
    subprocess.run([*command, *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage.ru_utime - start_usage.ru_utime) + (usage.ru_stime - start_usage.ru_stime)
    after = _files(url)
    added = {k: v for k, v in after.items() if k not in before}
    if _latest(url) != version + 1:
        raise RuntimeError(f"{args}: expected one new version, found {_latest(url) - version}")
    for name in added:
        (url / name).unlink()
    for directory in sorted({p for p in url.rglob("*") if p.is_dir()}, reverse=True):
        if not any(directory.iterdir()):
            directory.rmdir()
    return {"wall": wall, "cpu": cpu, "bytes": float(sum(added.values())), "files": len(added)}


def measure(docs: int, part_docs: int, ids: int, repeat: int, work: Path) -> dict[str, Any]:
    """Build the index, then time the replace before and after, and ``index delete``."""
    rng = np.random.default_rng(3)
    url = work / "idx"
    build_s = build(str(url), docs, part_docs, [_text(i, rng) for i in range(REAL_DOCS)])
    step = max(docs // ids, 1)
    chosen = [f"dump-{i // part_docs:03d}/doc{i % part_docs:09d}" for i in range(0, docs, step)]
    chosen = chosen[:ids]
    _write_jsonl(work / "new.jsonl", [(i, _text(10**8 + k, rng)) for k, i in enumerate(chosen)])
    (work / "ids.txt").write_text("".join(i + "\n" for i in chosen))
    replace = ["dedup", str(work / "new.jsonl"), "--output", str(work / "out.jsonl"), "--index",
               str(url), "--recrawled", "replace", "--quiet"]  # fmt: skip
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": [], "delete": []}
    for _ in range(repeat):  # interleaved: the machine's load falls on both alike
        runs["before"].append(_run(url, replace, rewrite=True))
        runs["after"].append(_run(url, replace))
        runs["delete"].append(_run(url, ["index", "delete", str(url), "--ids",
                                         str(work / "ids.txt"), "--quiet"]))  # fmt: skip
        for extra in work.glob("out.jsonl*"):
            extra.unlink()
    shutil.rmtree(url)
    median = {
        name: {k: statistics.median(r[k] for r in got) for k in got[0]}
        for name, got in runs.items()
    }
    return {"docs": docs, "ids": len(chosen), "build_s": build_s, "runs": median}


def markdown(result: dict[str, Any], command: str) -> str:
    """The section bench/RESULTS.md holds."""
    runs = result["runs"]

    def row(label: str, run: dict[str, float]) -> str:
        return (
            f"| {label} | {run['cpu']:.2f} / {run['wall']:.2f} | {run['bytes']:,.0f} "
            f"| {run['files']:.0f} |"
        )

    before, after = runs["before"], runs["after"]
    return "\n".join(
        [
            "## Deletes by deletion vectors (`bench.index.deletes`)",
            "",
            f"{now()}; `{command}`; load average {os.getloadavg()[0]:.1f} at the end. A synthetic "
            f"index of {result['docs']:,} documents (128 permutations, 16 bands; parts of "
            "1,000,000, plus 2,000 real texts), then whole `neardup` processes on "
            f"{result['ids']:,} ids of indexed documents, evenly spread, each run undone "
            "afterwards (medians of the runs, interleaved). CPU seconds (user + system) / wall "
            "seconds; bytes written: the files the run added under the index (parts, key "
            "tables, vectors, the version file).",
            "",
            "| run | CPU s / wall s | bytes written to the index | files |",
            "|---|---:|---:|---:|",
            row(f"`dedup --recrawled replace`, {result['ids']:,} ids: before (rewrite)", before),
            row("the same: after (deletion vectors)", after),
            row(f"`index delete --ids`, {result['ids']:,} ids", runs["delete"]),
            "",
            f"- The replace: {before['wall'] / after['wall']:.1f}x less wall time and "
            f"{before['bytes'] / max(after['bytes'], 1):,.0f}x fewer bytes written with deletion "
            "vectors. Both runs also write the run's own part of the "
            f"{result['ids']:,} new documents (and its "
            "key table): the rest of *before* is the rewritten part of every indexed document but "
            "those replaced, and its key table; the rest of *after*, 4 bytes a replaced row.",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index.deletes")
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--part-docs", type=int, default=1_000_000)
    parser.add_argument("--ids", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None, help="where the index is built")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--quick", action="store_true", help="100,000 documents, 100 ids")
    args = parser.parse_args(argv)
    docs, ids = (100_000, 100) if args.quick else (args.docs, args.ids)
    with tempfile.TemporaryDirectory(prefix="neardup-bench-deletes-", dir=args.work) as work:
        result = measure(docs, args.part_docs, ids, args.repeat, Path(work))
    print(json.dumps(result), file=sys.stderr, flush=True)
    command = "python -m bench.index.deletes " + " ".join(argv or sys.argv[1:])
    print(markdown(result, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
