"""The service's own documents flushed into its index, then let go of memory (issue 30, parts
3-4): start-up and memory of ``neardup serve --index`` over a data directory whose documents
were all registered through the service and flushed, before (``--before REPO``: a checkout
whose service holds every document in memory) and after (this checkout: the memtable and the
clusters holding one of its documents only), on copies of the same data, in one run.

Built in process through the service itself (``Service.register`` in batches of 10,000, then
``flush``): synthetic texts (``bench.index.lookups._text``: ASCII words), every tenth a near
copy of an earlier one (one word changed), so a tenth of the documents are in clusters.
Measured per server (``--workers 1``, ``--flush-rows 10000``): seconds to ``/readyz``, RssAnon
and VmHWM once ready, single-text ``POST /v1/query`` p50/p99 (half near copies of registered
texts, half new), then one registration of 1,000 new documents (a tenth near copies of
flushed ones: their clusters brought back) and RssAnon after it.

Run from the repository root::

    python -m bench.index.memtable [--docs 100000] [--before ../main] [--markdown] [--quick]

Without ``--before`` (as ``make bench`` runs it) only this checkout's server is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common.latency import summarize
from bench.common.machine import now
from bench.common.memory import MIB, proc_memory
from bench.common.server import start_server, stop_server
from bench.index.lookups import _text

__all__ = ["main", "measure"]

BATCH = 10_000
PARAMS: dict[str, Any] = {}  # the defaults (128 permutations, 16 bands of 8, 0.8)


def _texts(start: int, n: int) -> list[tuple[str, str]]:
    """Documents ``start`` to ``start + n - 1``: every tenth a near copy of an earlier one."""
    out = []
    for i in range(start, start + n):
        if i % 10 == 9:
            words = _text(i - 9, np.random.default_rng(i - 9)).split()
            words[-1] = f"changed{i}"
            out.append((f"doc{i:09d}", " ".join(words)))
        else:
            out.append((f"doc{i:09d}", _text(i, np.random.default_rng(i))))
    return out


async def _build(data: Path, index: Path, docs: int) -> None:
    from neardup.app.config import Settings
    from neardup.app.service import NewDoc, Service
    from neardup.core.engine import (
        DocIndex,
        batch_signatures,
        commit_index,
        run_info,
        text_digests,
        write_part,
    )

    settings = Settings(
        workers=2, data_dir=data, index=str(index), flush_rows=0, flush_seconds=1e9, **PARAMS
    )
    seed = ["a seed document the service's documents are flushed after"]
    empty, params = DocIndex.open(str(index), missing_ok=True), settings.params
    part = write_part(
        empty, params, ["seed"], text_digests(seed), batch_signatures(seed, params),
        run_info("local", "bench", []),
    )  # fmt: skip
    commit_index(empty, params, [part])
    service = await Service.start(settings)
    try:
        for lo in range(0, docs, BATCH):
            batch = _texts(lo, min(BATCH, docs - lo))
            await service.register([NewDoc(i, t, {}) for i, t in batch])
        await service.flush()
    finally:
        await service.close()


def _serve(name: str, work: Path, built: Path, docs: int, repo: Path | None) -> dict[str, Any]:
    copy = work / name
    shutil.copytree(built, copy)
    args = ("--workers", "1", "--index", str(copy / "idx"), "--flush-rows", "10000")
    server = start_server(
        copy, *args, data_dir=copy / "data", timeout=3600, **({"repo": repo} if repo else {})
    )
    try:
        with httpx.Client(base_url=server.url, timeout=600) as client:
            ready = proc_memory(server.pid)
            queries = [t for _, t in _texts(docs - 100, 100)] + [
                _text(10**9 + q, np.random.default_rng(10**9 + q)) for q in range(100)
            ]
            took = []
            for text in queries:
                start = time.perf_counter()
                client.post("/v1/query", json={"texts": [text]}).raise_for_status()
                took.append(time.perf_counter() - start)
            new = _texts(docs, 1_000)
            start = time.perf_counter()
            client.post(
                "/v1/documents", json={"documents": [{"id": i, "text": t} for i, t in new]}
            ).raise_for_status()
            register_s = time.perf_counter() - start
            after = proc_memory(server.pid)
            stats = client.get("/v1/stats").json()
    finally:
        stop_server(server)
    latency = summarize(took)
    return {
        "name": name, "ready_s": round(server.ready_seconds, 2),
        "rss_anon_mib": round(ready.get("RssAnon", 0) / MIB, 1),
        "vm_hwm_mib": round(ready.get("VmHWM", 0) / MIB, 1),
        "rss_anon_per_doc_b": round(ready.get("RssAnon", 0) / docs, 1),
        "p50_ms": round(latency.p50, 2), "p99_ms": round(latency.p99, 2),
        "register_1000_s": round(register_s, 2),
        "rss_anon_after_mib": round(after.get("RssAnon", 0) / MIB, 1),
        "documents": stats.get("documents"), "clusters": stats.get("clusters"),
    }  # fmt: skip


def measure(docs: int, work: Path, before: Path | None) -> dict[str, Any]:
    """Build ``docs`` flushed documents under ``work``, then serve them before and after."""
    built = work / "built"
    started = time.perf_counter()
    asyncio.run(_build(built / "data", built / "idx", docs))
    build_s = time.perf_counter() - started
    runs = [] if before is None else [_serve("before", work, built, docs, before)]
    runs.append(_serve("after", work, built, docs, None))
    return {"docs": docs, "build_s": round(build_s, 1), "runs": runs}


def markdown(result: dict[str, Any], command: str) -> str:
    head = (
        "| service | documents | ready (s) | RssAnon (MiB) | B/doc | VmHWM (MiB) | query p50 / "
        "p99 (ms) | register 1,000 (s) | RssAnon after (MiB) |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    rows = [
        f"| {r['name']} | {result['docs']:,} | {r['ready_s']} | {r['rss_anon_mib']} | "
        f"{r['rss_anon_per_doc_b']} | {r['vm_hwm_mib']} | {r['p50_ms']} / {r['p99_ms']} | "
        f"{r['register_1000_s']} | {r['rss_anon_after_mib']} |"
        for r in result["runs"]
    ]
    return "\n".join([f"`{command}` ({now()}, build {result['build_s']} s)", "", head, *rows])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--before", type=Path, help="a checkout to serve the 'before' from")
    parser.add_argument("--work", type=Path, help="where to build (default: a temporary dir)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--quick", action="store_true", help="20,000 documents")
    args = parser.parse_args(argv)
    docs = 20_000 if args.quick else args.docs
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        result = measure(docs, Path(tmp), args.before)
    command = "python -m bench.index.memtable " + " ".join(sys.argv[1:] if argv is None else argv)
    print(markdown(result, command) if args.markdown else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
