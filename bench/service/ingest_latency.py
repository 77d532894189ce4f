"""Single-query latency on a real service while one large batch registers.

Starts ``python -m neardup serve --workers 2`` on a fresh data directory (127.0.0.1 only),
registers a base of documents (default 20,000, batches of 1,000), then measures:

1. idle: sequential single-text ``POST /v1/query`` on one keep-alive client for ~5 s;
2. during ingest, three times: another thread POSTs ONE batch of new documents (default
   10,000, 20 % of them near copies of base documents) to ``/v1/documents``; until its answer
   arrives the query client keeps sending sequential single queries, and a third client sends
   ``GET /healthz`` every 0.25 s. Each request's latency is recorded.

Texts are ``bench.common.corpus`` documents, which are ASCII only; about 85 % of them get, from a
seeded RNG, a few non-ASCII touches (typographic quotes, accented names, dashes) so that the
tokeniser sees realistic text. Queries are near copies of base documents and fresh texts.

Run from the repository root::

    python -m bench.service.ingest_latency [--base-docs N] [--batch-docs M] [--quick] [--markdown]

Defaults (20,000 base documents, batches of 10,000) take under a minute on 2 cores; ``--quick``
(2,000 and 1,000) about 15 seconds.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import options
from bench.common.corpus import documents, near_copy
from bench.common.latency import Latency, summarize
from bench.common.machine import at_start, facts
from bench.common.options import Size
from bench.common.server import serving, unwind_on_sigterm
from bench.service.client import BATCH, document_bodies, post, query_bodies
from bench.service.report import DISTS, SOURCES

RUNS = 3
IDLE_SECONDS = 5.0
HEALTH_EVERY = 0.25
NEAR_SHARE = 0.2
QUERY_POOL = 2000
_TIMEOUT = 900.0
MODULE = "bench.service.ingest_latency"
#: The size options: documents registered first, documents in each batch.
SIZES = {
    "base_docs": Size("registered first", 20_000, 2_000),
    "batch_docs": Size("in each batch", 10_000, 1_000),
}
_NAMES = [
    "José",
    "Zoë",
    "Renée",
    "Müller",
    "François",
    "Ångström",
    "Dvořák",
    "Łukasz",
    "Søren",
    "Núñez",
    "Björk",
    "Chloé",
    "Gödel",
    "Ñandú",
    "Škoda",
    "café",
    "naïve",
    "façade",
]
_QUOTES = [("\u201c", "\u201d"), ("\u2018", "\u2019")]  # typographic double and single
_DASH = "\u2014"  # em dash


def decorate(texts: Sequence[str], seed: int, share: float = 0.85) -> list[str]:
    """``texts`` with, in about ``share`` of them, 2-6 accented names, quotes or dashes."""
    rng = np.random.default_rng([seed, 7])
    out = []
    for text in texts:
        if rng.random() >= share:
            out.append(text)
            continue
        words = text.split(" ")
        for pos in rng.integers(0, len(words), size=int(rng.integers(2, 7))).tolist():
            kind = int(rng.integers(3))
            if kind == 0:
                words[pos] = f"{words[pos]} {_NAMES[int(rng.integers(len(_NAMES)))]}"
            elif kind == 1:
                left, right = _QUOTES[int(rng.integers(2))]
                words[pos] = f"{left}{words[pos]}{right}"
            else:
                words[pos] = f"{words[pos]} {_DASH}"
        out.append(" ".join(words))
    return out


def query_loop(
    client: httpx.Client,
    queries: Sequence[bytes],
    stop: threading.Event,
    deadline: float = float("inf"),
) -> list[float]:
    """Sequential single queries (cycling) until ``stop`` is set or ``deadline`` passes."""
    times: list[float] = []
    while not stop.is_set() and time.perf_counter() < deadline:
        t0 = time.perf_counter()
        post(client, "/v1/query", queries[len(times) % len(queries)])
        times.append(time.perf_counter() - t0)
    return times


def health_loop(url: str, stop: threading.Event, out: list[float]) -> None:
    """``GET /healthz`` every 0.25 s until ``stop``; latencies into ``out``."""
    with httpx.Client(base_url=url, timeout=_TIMEOUT) as client:
        client.get("/healthz")
        while not stop.wait(HEALTH_EVERY):
            t0 = time.perf_counter()
            client.get("/healthz").raise_for_status()
            out.append(time.perf_counter() - t0)


def during_ingest(
    url: str, client: httpx.Client, body: bytes, queries: Sequence[bytes]
) -> tuple[Latency, Latency | None, float, int]:
    """(query latency, healthz latency, batch seconds, results with matches) of one run."""
    stop = threading.Event()
    health: list[float] = []
    outcome: dict[str, Any] = {}

    def ingest() -> None:
        try:
            with httpx.Client(base_url=url, timeout=_TIMEOUT) as ingest_client:
                t0 = time.perf_counter()
                outcome["result"] = post(ingest_client, "/v1/documents", body)
                outcome["seconds"] = time.perf_counter() - t0
        except BaseException as exc:  # reported by the caller
            outcome["error"] = exc
        finally:
            stop.set()

    threads = [
        threading.Thread(target=ingest),
        threading.Thread(target=health_loop, args=(url, stop, health)),
    ]
    for t in threads:
        t.start()
    try:
        times = query_loop(client, queries, stop)
    finally:
        stop.set()
        for t in threads:
            t.join()
    if "error" in outcome:
        raise RuntimeError(f"batch failed: {outcome['error']!r}")
    matched = sum(bool(r["matches"]) for r in outcome["result"]["results"])
    health_latency = summarize(health) if health else None
    return summarize(times), health_latency, float(outcome["seconds"]), matched


def table(rows: list[list[str]], markdown: bool) -> str:
    """Rows (the first is the header) as a markdown or a plain aligned table."""
    if markdown:
        lines = ["| " + " | ".join(r) + " |" for r in rows]
        lines.insert(1, "|" + "---|" * len(rows[0]))
        return "\n".join(lines)
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows)


HEADER = [
    "phase",
    "queries",
    "p50 ms",
    "p99 ms",
    "max ms",
    "healthz max ms",
    "batch s",
    "batch docs matched",
]


def row(
    phase: str, q: Latency, health: Latency | None = None, seconds: str = "-", matched: str = "-"
) -> list[str]:
    """One line of the table: the phase, its query latencies, healthz and the batch."""
    healthz = f"{health.max:.2f} (n={health.count})" if health else "-"
    return [
        phase,
        str(q.count),
        f"{q.p50:.2f}",
        f"{q.p99:.2f}",
        f"{q.max:.2f}",
        healthz,
        seconds,
        matched,
    ]


def texts_and_queries(n: int, m: int) -> tuple[list[str], list[bytes], list[bytes]]:
    """The base texts, the query bodies, and one body of ``m`` new documents per run."""
    base = decorate(documents(n, seed=11), seed=11)
    rng = np.random.default_rng(12)
    near = [near_copy(base[int(i)], rng) for i in rng.integers(0, n, QUERY_POOL // 2)]
    pool = near + decorate(documents(QUERY_POOL - len(near), seed=13), seed=13)
    queries = query_bodies([pool[i] for i in rng.permutation(len(pool))])
    batches = []
    for run in range(RUNS):
        texts = decorate(documents(m, seed=100 + run), seed=100 + run)
        for j in rng.choice(m, size=int(m * NEAR_SHARE), replace=False).tolist():
            texts[j] = near_copy(base[int(rng.integers(n))], rng)
        batches += document_bodies(texts, m, [f"r{run}-{i:07d}" for i in range(m)])
    return base, queries, batches


def measure(
    base: Sequence[str], queries: Sequence[bytes], batches: Sequence[bytes], m: int
) -> list[list[str]]:
    """Register the base, then time the queries idle and during each batch: the table's rows."""
    rows = [HEADER]
    with (
        tempfile.TemporaryDirectory(prefix="neardup-ingest-lat-") as tmp,
        serving(Path(tmp), "--workers", "2", timeout=_TIMEOUT) as server,
        httpx.Client(base_url=server.url, timeout=_TIMEOUT) as client,
    ):
        t0 = time.perf_counter()
        ids = [f"b{i:07d}" for i in range(len(base))]
        for body in document_bodies(base, BATCH, ids):
            post(client, "/v1/documents", body)
        print(f"base: {len(base):,} documents registered in {time.perf_counter() - t0:.1f} s")
        for body in queries[:20]:
            post(client, "/v1/query", body)  # warm-up
        deadline = time.perf_counter() + IDLE_SECONDS
        rows.append(
            row("idle", summarize(query_loop(client, queries, threading.Event(), deadline)))
        )
        for run, body in enumerate(batches, 1):
            q, h, seconds, matched = during_ingest(server.url, client, body, queries)
            rows.append(row(f"ingest {m:,} #{run}", q, h, f"{seconds:.2f}", f"{matched:,}"))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table and the facts of the run."""
    raw, command = options.command_line(MODULE, argv)
    parser = options.parser(MODULE, __doc__, SIZES, "markdown tables")
    args = parser.parse_args(raw)
    n, m = options.sizes(args, SIZES).values()
    if n < 1 or m < 1:
        parser.error("need --base-docs >= 1 and --batch-docs >= 1")
    unwind_on_sigterm()  # so that the server is stopped
    start = at_start(SOURCES)
    rows = measure(*texts_and_queries(n, m), m)
    print(table(rows, args.markdown))
    record = facts(start, DISTS) | {"command": command}
    print(table([["fact", "value"], *([k, v] for k, v in record.items())], args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
