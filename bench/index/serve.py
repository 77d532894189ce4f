"""The service on a persistent index (issue 30): ``neardup serve --index IDX`` against the same
service without ``--index``, on one machine in one run.

The index is built straight through the index writer (``bench.index.lookups.build``: synthetic
signatures in parts of ``--part-docs``, plus one small part of real texts). Each server starts
on an empty data directory (``--workers 1``); measured: seconds to ``/readyz``, RssAnon and
VmHWM after start (once ready and warmed up by ``--warmup`` queries), and the latency of
single-text ``POST /v1/query`` requests, one at a time (half of them near copies of the real
part's texts, which the served index matches, half new texts), p50 and p99; then the seconds of
one registration of 1,000 and one of 10,000 new documents whose ids fall between indexed ids
(the id checks' worst case). Served read only (``--flush-rows 0 --flush-seconds 0``), as
before the service wrote its documents into the index; then once more writing them
(``--flush-rows 10000``): the 10,000-document registration starts a flush of the 11,000
registered, and the seconds until ``/v1/stats`` counts it (``index_flushes``), the part
written and committed and its version served, are measured, with the latency of single-text
queries sent meanwhile (reads never wait for a flush) and the seconds of the SIGTERM stop.

Run from the repository root::

    python -m bench.index.serve [--docs 1000000] [--queries 400] [--markdown] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
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
from bench.index.lookups import REAL_DOCS, _text, build

__all__ = ["main", "measure"]


def _queries(n: int, seed: int = 10**6) -> list[str]:
    """Half near copies of the real part's texts (a word changed), half new texts (from a
    generator seeded apart from every real text's)."""
    rng = np.random.default_rng(seed)
    real = [_text(i, np.random.default_rng(i)) for i in range(REAL_DOCS)]
    out = []
    for q in range(n):
        if q % 2 == 0:
            words = real[int(rng.integers(0, REAL_DOCS))].split()
            words[-1] = "changed"
            out.append(" ".join(words))
        else:
            out.append(_text(10**9 + q, rng))
    return out


#: Registration batches timed after the queries: new ids spread over the index's id range (each
#: between two indexed ids, the id checks' worst case: every row group's range may hold one).
BATCHES = (1_000, 10_000)


def _batch(n: int, docs: int, seed: int) -> list[dict[str, str]]:
    """``n`` new documents whose ids fall between the indexed ``dump-000/doc...`` ids."""
    rng = np.random.default_rng(seed)
    # An index smaller than the batch holds some ids' neighbour twice: ``k`` keeps them apart.
    at = rng.integers(0, min(docs, 10**9), size=n)
    return [
        {
            "id": f"dump-{a // 1_000_000:03d}/doc{a % 1_000_000:09d}.new-{seed}-{k}",
            "text": _text(seed + k, rng),
        }
        for k, a in enumerate(at.tolist())
    ]


def _registered(client: httpx.Client, docs: int) -> dict[str, float]:
    """Seconds of one ``POST /v1/documents`` of each batch size of ``BATCHES``."""
    out = {}
    for n in BATCHES:
        body = {"documents": _batch(n, docs, 3 * 10**9 + n)}
        start = time.perf_counter()
        client.post("/v1/documents", json=body).raise_for_status()
        out[f"register_{n}_s"] = round(time.perf_counter() - start, 2)
    return out


#: What the flushing run sets: a flush once the registrations reach this many documents.
FLUSH_ROWS = 10_000


def _flushed(client: httpx.Client, queries: list[str]) -> dict[str, Any]:
    """Seconds until the flush the registrations started is served, and the latency of the
    single-text queries sent one at a time meanwhile."""
    start = time.perf_counter()
    took: list[float] = []
    while client.get("/v1/stats").json().get("index_flushes", 0) < 1:
        text = queries[len(took) % len(queries)]
        sent = time.perf_counter()
        client.post("/v1/query", json={"texts": [text]}).raise_for_status()
        took.append(time.perf_counter() - sent)
        if time.perf_counter() - start > 600:
            raise RuntimeError("no flush served in 600 s")
    seconds = time.perf_counter() - start
    latency = summarize(took) if took else None
    return {
        "flush_s": round(seconds, 2), "queries_meanwhile": len(took),
        "p99_meanwhile_ms": None if latency is None else round(latency.p99, 2),
    }  # fmt: skip


def _serve(
    work: Path, name: str, queries: list[str], warmup: int, docs: int, *args: str
) -> dict[str, Any]:
    server = start_server(work / name, "--workers", "1", *args, timeout=600)
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for text in queries[:warmup]:
                client.post("/v1/query", json={"texts": [text]}).raise_for_status()
            memory = proc_memory(server.pid)
            took, matched = [], 0
            for text in queries:
                start = time.perf_counter()
                response = client.post("/v1/query", json={"texts": [text]})
                took.append(time.perf_counter() - start)
                response.raise_for_status()
                matched += response.json()["results"][0]["match_count"] > 0
            registered = _registered(client, docs)
            if name == "flushing":
                registered.update(_flushed(client, queries))
            stats = client.get("/v1/stats").json()
    finally:
        stopping = time.perf_counter()
        stop_server(server)
        registered["stop_s"] = round(time.perf_counter() - stopping, 2)
    latency = summarize(took)
    return {
        "name": name, "ready_seconds": round(server.ready_seconds, 2),
        "rss_anon_mib": round(memory.get("RssAnon", 0) / MIB, 1),
        "vm_hwm_mib": round(memory.get("VmHWM", 0) / MIB, 1),
        "p50_ms": round(latency.p50, 2), "p99_ms": round(latency.p99, 2),
        "queries": len(queries), "matched": matched,
        "indexed_documents": stats.get("indexed_documents", 0), **registered,
    }  # fmt: skip


def measure(docs: int, part_docs: int, work: Path, queries: int, warmup: int) -> dict[str, Any]:
    """Build an index of ``docs`` documents under ``work``, then serve without and with it."""
    url = work / "idx"
    texts = [_text(i, np.random.default_rng(i)) for i in range(REAL_DOCS)]
    build_seconds = build(str(url), docs, part_docs, texts)
    asked = _queries(queries)
    without = _serve(work, "without", asked, warmup, docs)
    read_only = ("--flush-rows", "0", "--flush-seconds", "0")
    with_index = _serve(work, "with", asked, warmup, docs, "--index", str(url), *read_only)
    flushing = _serve(
        work, "flushing", asked, warmup, docs, "--index", str(url),
        "--flush-rows", str(FLUSH_ROWS), "--flush-seconds", "0",
    )  # fmt: skip
    runs = [without, with_index, flushing]
    return {"docs": docs, "build_seconds": round(build_seconds, 1), "runs": runs}


def markdown(result: dict[str, Any], command: str) -> str:
    rows = [
        "| service | indexed documents | ready (s) | RssAnon after start (MiB) | VmHWM (MiB) "
        "| /v1/query p50 (ms) | p99 (ms) | queries matched "
        + "".join(f"| POST of {n:,} new (s) " for n in BATCHES)
        + "| flush of 11,000 served (s) | queries meanwhile, p99 (ms) | SIGTERM stop (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + " ---: |" * (len(BATCHES) + 3),
    ]
    labels = {
        "without": "`neardup serve`",
        "with": "`neardup serve --index IDX`, read only",
        "flushing": f"`neardup serve --index IDX --flush-rows {FLUSH_ROWS}`",
    }
    for run in result["runs"]:
        meanwhile = (
            f"{run['queries_meanwhile']}, {run['p99_meanwhile_ms']}" if "flush_s" in run else "-"
        )
        rows.append(
            f"| {labels[run['name']]} | {run['indexed_documents']:,} | {run['ready_seconds']} | "
            f"{run['rss_anon_mib']} | {run['vm_hwm_mib']} | {run['p50_ms']} | {run['p99_ms']} "
            f"| {run['matched']} of {run['queries']} | "
            + "".join(f"{run[f'register_{n}_s']} | " for n in BATCHES)
            + f"{run.get('flush_s', '-')} | {meanwhile} | {run['stop_s']} |"
        )
    return "\n".join([
        f"### The service on a persistent index ({result['docs']:,} indexed documents)", "",
        f"{now()}; `{command}`; index built in {result['build_seconds']} s.", "", *rows, "",
    ])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index.serve")
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--part-docs", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--work", type=Path, default=None, help="where the index is built")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--quick", action="store_true", help="100,000 documents, 100 queries")
    args = parser.parse_args(argv)
    docs, queries = (100_000, 100) if args.quick else (args.docs, args.queries)
    with tempfile.TemporaryDirectory(prefix="neardup-bench-serve-", dir=args.work) as work:
        result = measure(docs, args.part_docs, Path(work), queries, args.warmup)
    print(json.dumps(result), file=sys.stderr, flush=True)
    command = "python -m bench.index.serve " + " ".join(argv or sys.argv[1:])
    print(markdown(result, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
