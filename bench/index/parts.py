"""The served index with many small parts, before and after the service's background compaction
(issue 30, part 5): a year of flushes is ~105,000 parts; this measures what ~300 cost.

An index of ``--docs`` synthetic documents in ``--parts`` parts (plus one small part of real
texts that the queries copy) is built through the index writer (``bench.index.lookups.build``).
Measured in this process on the index as it is, then once compacted: ``DocIndex.near`` of a
batch of 1,000 signatures and of one (median of ``--repeat``), an id's digest (``id_digests``
of one id), and a flush of 1,000 new documents (``write_flush`` + ``commit_flush``, the
service's code: its id checks against every part, its part and the version committed; undone
after). Between the two, ``neardup serve --index IDX`` (``--workers 1``): single-text
``POST /v1/query`` latency one at a time with compaction off (``--compact-rows 0``), then with
it on (defaults): the queries sent while the background compaction runs and after it, and the
compaction's child process (wall seconds, CPU seconds, peak RSS from ``/proc``).

Run from the repository root::

    python -m bench.index.parts [--docs 1000000] [--parts 300] [--quick] [--markdown] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common.latency import summarize
from bench.common.machine import now
from bench.common.memory import MIB
from bench.common.server import start_server, stop_server
from bench.index.lookups import REAL_DOCS, _latest, _text, _undo_append, build
from bench.index.serve import _queries

__all__ = ["main", "measure"]

#: Documents of the flush measured.
FLUSH_DOCS = 1_000
#: Signatures of the batch lookup measured.
BATCH = 1_000
#: Queries sent to a server before any is timed (its pool's start, compiled kernels).
WARM_UP = 5


def _median(fn: Callable[[], object], repeat: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeat`` runs after one warm-up."""
    fn()
    took = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        took.append(time.perf_counter() - start)
    return statistics.median(took)


def _in_process(url: Path, queries: list[str], repeat: int) -> dict[str, Any]:
    """Lookups and a flush against the index at ``url`` as it is (the flush undone after)."""
    from neardup.app.service.flush import Batch, Mark, commit_flush, write_flush
    from neardup.core.engine import DocIndex, MinhashParams, batch_signatures

    params = MinhashParams()
    index = DocIndex.open(str(url))
    sigs = batch_signatures(_queries(BATCH), params)
    one = sigs[:1]
    doc_id = "real/000007"
    out: dict[str, Any] = {"parts": len(index.parts), "rows": index.rows}
    out["near_batch_ms"] = round(1000 * _median(lambda: index.near(sigs, 0.8), repeat), 1)
    out["near_one_ms"] = round(1000 * _median(lambda: index.near(one, 0.8), repeat), 2)
    out["id_one_ms"] = round(1000 * _median(lambda: index.id_digests([doc_id]), repeat), 2)
    rng = np.random.default_rng(7)
    ids = [f"flush/{i:06d}" for i in range(FLUSH_DOCS)]
    batch = Batch(
        ids, rng.integers(0, 2**63, size=(FLUSH_DOCS, 2), dtype=np.uint64),
        rng.integers(0, 2**31 - 1, size=(FLUSH_DOCS, params.num_perm), dtype=np.uint32),
        FLUSH_DOCS - 1, [],
    )  # fmt: skip
    took = []
    for _ in range(max(repeat // 2, 1)):
        version = _latest(url)
        start = time.perf_counter()
        written = write_flush(str(url), params, batch, "bench", Mark())
        assert written is not None
        commit_flush(written, params)
        took.append(time.perf_counter() - start)
        _undo_append(url, version)
    out["flush_s"] = round(statistics.median(took), 3)
    return out


def _child(server_pid: int) -> int | None:
    """The pid of the server's compaction child process now, or None."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == server_pid and b"compaction import main" in cmdline:
            return int(proc.name)
    return None


def _watch(server_pid: int, seen: dict[str, float], stop: threading.Event) -> None:
    """Until ``stop``: the server's compaction child processes' peak RSS (VmHWM, the largest)
    and CPU seconds (summed), polled every 10 ms, into ``seen``."""
    cpu: dict[int, float] = {}
    while not stop.wait(0.01):
        pid = _child(server_pid)
        if pid is None:
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
                seen["peak_rss_mib"] = max(seen.get("peak_rss_mib", 0.0), peak)
        cpu[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        seen["cpu_s"] = sum(cpu.values())


def _latency(took: list[float]) -> str:
    if not took:
        return "-"
    s = summarize(took)
    return f"{s.p50:.1f} / {s.p99:.1f} ({len(took)})"


def _served(work: Path, url: Path, queries: list[str], compacting: bool) -> dict[str, Any]:
    """Query latency of a server on ``url`` (with compaction on: while and after it runs)."""
    flags = ("--index", str(url), "--flush-rows", "0", "--flush-seconds", "1000000")
    extra = () if compacting else ("--compact-rows", "0")
    server = start_server(work / f"serve-{compacting}", "--workers", "1", *flags, *extra,
                          timeout=600)  # fmt: skip
    out: dict[str, Any] = {}
    seen: dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(server.pid, seen, stop), daemon=True)
    watcher.start()
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            during: list[float] = []
            after: list[float] = []
            started = time.perf_counter()
            q = 0
            while True:
                stats = client.get("/v1/stats").json()
                done = not compacting or stats["part_compactions"] >= 1
                if done and "compaction_s" not in out:
                    out["compaction_s"] = round(time.perf_counter() - started, 1)
                if done and len(after) >= len(queries) // 2:
                    break
                sent = time.perf_counter()
                client.post("/v1/query", json={"texts": [queries[q % len(queries)]]})
                if q >= WARM_UP:
                    (after if done else during).append(time.perf_counter() - sent)
                q += 1
                if time.perf_counter() - started > 1800:
                    raise RuntimeError("no compaction in 1800 s")
            out["parts_after"] = client.get("/v1/stats").json()["index_parts"]
    finally:
        stop.set()
        watcher.join()
        stop_server(server)
    out.update(seen)
    out["during"], out["after"] = _latency(during), _latency(after)
    return out


def measure(docs: int, parts: int, work: Path, queries: int, repeat: int) -> dict[str, Any]:
    url = work / "idx"
    texts = [_text(i, np.random.default_rng(i)) for i in range(REAL_DOCS)]
    build_seconds = build(str(url), docs, -(-docs // parts), texts)
    asked = _queries(queries)
    before = _in_process(url, asked, repeat)
    off = _served(work, url, asked, compacting=False)
    on = _served(work, url, asked, compacting=True)
    after = _in_process(url, asked, repeat)
    return {"docs": docs, "build_seconds": round(build_seconds, 1), "before": before,
            "after": after, "off": off, "on": on}  # fmt: skip


def markdown(r: dict[str, Any], command: str) -> str:
    b, a, off, on = r["before"], r["after"], r["off"], r["on"]
    rows = [
        "| index | parts | near, batch of 1,000 (ms) | near, one (ms) | one id (ms) "
        "| flush of 1,000 (s) | /v1/query p50 / p99 ms (queries) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        f"| before compaction | {b['parts']} | {b['near_batch_ms']} | {b['near_one_ms']} | "
        f"{b['id_one_ms']} | {b['flush_s']} | {off['after']} |",
        f"| while compacting | {b['parts']} | | | | | {on['during']} |",
        f"| after compaction | {a['parts']} | {a['near_batch_ms']} | {a['near_one_ms']} | "
        f"{a['id_one_ms']} | {a['flush_s']} | {on['after']} |",
    ]
    child = (
        f"The compaction (one, {b['rows']:,} rows into {on['parts_after']} parts): "
        f"{on.get('compaction_s', '-')} s from the server's start to served; its child process "
        f"{on.get('cpu_s', 0):.1f} CPU-s, peak RSS {on.get('peak_rss_mib', 0):,.0f} MiB "
        f"({on.get('peak_rss_mib', 0) * MIB / max(b['rows'], 1):,.0f} bytes a row)."
    )
    return "\n".join([
        f"### Many small parts and the service's compaction ({r['docs']:,} indexed documents)",
        "", f"{now()}; `{command}`; index built in {r['build_seconds']} s.", "", *rows, "",
        child, "",
    ])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index.parts")
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--parts", type=int, default=300)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--quick", action="store_true", help="100,000 documents, 100 queries")
    parser.add_argument("--work", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.docs, args.queries = 100_000, 100
    command = "python -m bench.index.parts " + " ".join(argv or sys.argv[1:])
    work = args.work or Path(tempfile.mkdtemp(prefix="neardup-bench-parts-"))
    try:
        result = measure(args.docs, args.parts, work, args.queries, args.repeat)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(markdown(result, command.strip()) if args.markdown else json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
