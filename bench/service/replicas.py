"""Replicas benchmark: the service on one PostgreSQL store (1 and 2 replicas) against SQLite.

In one run, on a throwaway PostgreSQL started from the system's binaries (``bench.common.postgres``)
and the same corpus (``bench.common.corpora`` web-like (a)):

1. Ingest: DOCS documents POSTed in batches of 200 by two concurrent keep-alive clients, to one
   server on SQLite, to one replica on PostgreSQL, and to two replicas on PostgreSQL (one client
   each); documents per second and per-batch latency. Every server runs ``--workers 1``.
2. Query: sequential single-text ``POST /v1/query`` on one keep-alive client against each of
   them afterwards (near copies of ingested documents and fresh texts).
3. Lag (two replicas): LAG_DOCS single documents registered one by one on replica A; for each,
   the time from A's answer until replica B answers ``GET /v1/documents/{id}`` with 200.
4. Recovery: RECOVERY_DOCS synthetic documents (``bench.service.synthetic_index``: real
   signatures of a signed pool, perturbed) written into a SQLite data directory and into a
   PostgreSQL database; a server started on each, its recovery time (the server's own log line)
   and time to ready, index bytes per document, store bytes per document, and single-query
   latency at that size.
5. The next step on paper, costed: the same documents' band keys as a PostgreSQL table
   ``band_keys(band, key, num)`` (what a Citus cluster would shard by key), and per query
   signature the lookup of its 16 keys, then the fetch of the candidates' signatures and their
   confirmation: what a replica holding no index would pay per query, on one local database.

Run from the repository root::

    python -m bench.service.replicas [--docs N] [--recovery-docs R] [--quick] [--markdown]

Defaults (20,000 ingested, 1,000,000 recovered) take about 5 minutes on 2 cores; ``--quick``
(2,000 and 100,000) about a minute. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import options
from bench.common.corpora import web_documents
from bench.common.corpus import doc_id, near_copy
from bench.common.latency import Latency, summarize
from bench.common.machine import at_start, facts
from bench.common.memory import proc_memory
from bench.common.options import Size
from bench.common.postgres import PostgresServer
from bench.common.server import Server, recovered_from_log, serving, unwind_on_sigterm
from bench.service.client import document_bodies, get_stats, post, query_bodies, time_queries
from bench.service.synthetic_index import SynthParams, build_store, synthetic_rows
from neardup.core.engine import MinhashParams, band_digests
from neardup.core.minhash import signatures

MODULE = "bench.service.replicas"
BATCH = 200
CLIENTS = 2
PARAMS = MinhashParams()
INDEX_PARAMS = PARAMS.index_params()
SIZES = {
    "docs": Size("documents ingested", 20_000, 2_000),
    "queries": Size("timed single queries", 1_000, 200),
    "lag_docs": Size("documents timed to the other replica", 300, 50),
    "recovery_docs": Size("documents recovered", 1_000_000, 100_000),
    "pool": Size("signed pool documents of the recovery store", 5_000, 2_000),
}
_READY_TIMEOUT = 900.0
_SOURCES = {"app/": ["app"], "core/": ["core"]}
_DISTS = ("numpy", "psycopg", "fastapi", "uvicorn")


def _ingest(urls: Sequence[str], bodies: Sequence[bytes]) -> tuple[float, Latency]:
    """POST every body over CLIENTS keep-alive clients, client c to ``urls[c % len(urls)]``;
    (documents-independent wall seconds, per-batch latency)."""
    times: list[list[float]] = [[] for _ in range(CLIENTS)]
    errors: list[BaseException] = []
    gate = threading.Barrier(CLIENTS)

    def client(c: int) -> None:
        try:
            with httpx.Client(base_url=urls[c % len(urls)], timeout=600) as http:
                gate.wait()
                for body in bodies[c::CLIENTS]:
                    t0 = time.perf_counter()
                    post(http, "/v1/documents", body)
                    times[c].append(time.perf_counter() - t0)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0, summarize([x for ts in times for x in ts])


def _converged(urls: Sequence[str], documents: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = [get_stats(u) for u in urls]
        same = len({s["log_position"] for s in stats}) == 1
        if same and all(s["documents"] == documents for s in stats):
            return
        time.sleep(0.05)
    raise RuntimeError(f"replicas did not reach {documents} documents")


def _lag(a: str, b: str, texts: Sequence[str]) -> Latency:
    """Per document registered on ``a``: seconds from its answer until ``b`` knows it."""
    lags = []
    with httpx.Client(base_url=a, timeout=60) as ha, httpx.Client(base_url=b, timeout=60) as hb:
        for n, text in enumerate(texts):
            doc = f"lag-{n}"
            ha.post("/v1/documents", json={"documents": [{"id": doc, "text": text}]})
            acked = time.perf_counter()
            while hb.get(f"/v1/documents/{doc}").status_code != 200:
                if time.perf_counter() - acked > 30:
                    raise RuntimeError(f"{doc} never reached the other replica")
            lags.append(time.perf_counter() - acked)
    return summarize(lags)


@contextmanager
def _servers(tmp: Path, name: str, count: int, url: str | None) -> Iterator[list[Server]]:
    with ExitStack() as stack:
        args = ["--workers", "1"] + (["--store-url", url] if url else [])
        servers = []
        for i in range(count):
            where = tmp / f"{name}-{i}"
            servers.append(
                stack.enter_context(
                    serving(where, *args, data_dir=where / "data", timeout=_READY_TIMEOUT)
                )
            )
        yield servers


def run_ingest_and_queries(
    pg: PostgresServer, sizes: dict[str, int], tmp: Path
) -> tuple[list[dict[str, Any]], Latency]:
    """Ingest and queries on each setup; the lag between two replicas."""
    texts = web_documents(sizes["docs"], seed=1)
    bodies = document_bodies(texts, BATCH)
    rng = np.random.default_rng(5)
    near = [near_copy(texts[i], rng) for i in rng.integers(0, len(texts), sizes["queries"] // 4)]
    queries = query_bodies(near + web_documents(sizes["queries"] - len(near), seed=2))
    rows = []
    lag = None
    setups = [("SQLite, 1 server", 1, None), ("PostgreSQL, 1 replica", 1, pg.database("b")),
              ("PostgreSQL, 2 replicas", 2, pg.database("b"))]  # fmt: skip
    for label, count, url in setups:
        with _servers(tmp, label.split(",")[0].lower() + str(count), count, url) as servers:
            urls = [s.url for s in servers]
            seconds, batch = _ingest(urls, bodies)
            _converged(urls, len(texts))
            result = time_queries(urls[-1], queries, warm_up=20)
            if count == 2:
                lag = _lag(urls[0], urls[1], web_documents(sizes["lag_docs"], seed=3))
            rows.append({"setup": label, "docs_per_second": len(texts) / seconds,
                         "batch": batch, "query": result.latency})  # fmt: skip
        print(f"  {label}: {len(texts) / seconds:.0f} docs/s, query {result.latency.short()}",
              flush=True)  # fmt: skip
    assert lag is not None
    return rows, lag


def _digests(n: int) -> list[bytes]:
    return [hashlib.sha256(f"synthetic:{i}".encode()).digest() for i in range(n)]


def _write_postgres(url: str, sigs: np.ndarray[Any, Any], chunk: int = 50_000) -> None:
    """The synthetic rows into a PostgreSQL store, through ``PostgresStore`` (binary COPY)."""
    from neardup.app.service.pgstore import PostgresStore
    from neardup.app.service.store import StoredDoc

    store = PostgresStore(url)
    try:
        store.ensure_params(INDEX_PARAMS)
        little = sigs.astype("<u4", copy=False)
        digests = _digests(len(sigs))
        for lo in range(0, len(sigs), chunk):
            hi = min(lo + chunk, len(sigs))
            store.lock_writes()
            store.add_documents(
                [
                    StoredDoc(i, doc_id(i), digests[i], little[i].tobytes(), {}, None)
                    for i in range(lo, hi)
                ]
            )
    finally:
        store.close()


def run_recovery(
    pg: PostgresServer, sizes: dict[str, int], tmp: Path
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Recovery, memory and query latency at RECOVERY_DOCS on each store; the band table."""
    n = sizes["recovery_docs"]
    pool_texts = web_documents(sizes["pool"], seed=7)
    pool = signatures(pool_texts, num_perm=PARAMS.num_perm, seed=PARAMS.seed, k=PARAMS.k,
                      workers=2)  # fmt: skip
    rng = np.random.default_rng(9)
    near = [near_copy(pool_texts[i], rng) for i in rng.integers(0, len(pool_texts), 50)]
    queries = query_bodies(near + web_documents(150, seed=8))
    url = pg.database("r")
    t0 = time.perf_counter()
    sigs, _, _ = synthetic_rows(pool, SynthParams(n=n))
    _write_postgres(url, sigs)
    pg_write = time.perf_counter() - t0
    pg_bytes = _pg_bytes(url)  # before the band table, which is not part of the store
    band_table = run_band_table(url, sigs, near + web_documents(150, seed=8))
    del sigs
    t0 = time.perf_counter()
    built = build_store(tmp / "rec-sqlite", pool, pool_texts, SynthParams(n=n), INDEX_PARAMS)
    sqlite_write = time.perf_counter() - t0
    rows = []
    for label, store_url, data_dir, write, store_bytes in (
        ("SQLite", None, tmp / "rec-sqlite", sqlite_write, built.db_bytes),
        ("PostgreSQL", url, tmp / "rec-pg", pg_write, pg_bytes),
    ):
        args = ["--workers", "1"] + (["--store-url", store_url] if store_url else [])
        with serving(tmp / f"log-{label}", *args, data_dir=data_dir,
                     timeout=_READY_TIMEOUT) as server:  # fmt: skip
            stats = get_stats(server.url)
            result = time_queries(server.url, queries, warm_up=20)
            rss = proc_memory(server.pid).get("VmRSS", 0)
        logged = recovered_from_log(server.log)
        rows.append({"store": label, "documents": stats["documents"], "write_seconds": write,
                     "recovery_seconds": logged[1] if logged else float("nan"),
                     "ready_seconds": server.ready_seconds,
                     "index_bytes_per_doc": stats["index_bytes"] / max(1, stats["documents"]),
                     "rss_bytes_per_doc": rss / max(1, stats["documents"]),
                     "store_bytes_per_doc": store_bytes / max(1, stats["documents"]),
                     "query": result.latency})  # fmt: skip
        print(f"  recovery on {label}: {rows[-1]['recovery_seconds']:.1f} s", flush=True)
        shutil.rmtree(data_dir, ignore_errors=True)
    return rows, band_table


def _pg_bytes(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def _band_copy(digests: np.ndarray[Any, Any], lo: int) -> bytes:
    """Rows (band, key, num) of ``digests`` (documents ``lo``...) in COPY's binary format."""
    n, bands = digests.shape
    row = np.dtype([("fields", ">i2"), ("l1", ">i4"), ("band", ">i2"), ("l2", ">i4"),
                    ("key", ">i8"), ("l3", ">i4"), ("num", ">i4")])  # fmt: skip
    out = np.empty(n * bands, dtype=row)
    out["fields"], out["l1"], out["l2"], out["l3"] = 3, 2, 8, 4
    out["band"] = np.tile(np.arange(bands, dtype=np.int16), n)
    out["key"] = digests.reshape(-1).view(np.int64)
    out["num"] = np.repeat(np.arange(lo, lo + n, dtype=np.int32), bands)
    return out.tobytes()


def run_band_table(url: str, sigs: np.ndarray[Any, Any], texts: Sequence[str]) -> dict[str, Any]:
    """Band keys as a table; per query: the key lookup, then candidates' signatures confirmed."""
    import psycopg

    bands, threshold = PARAMS.bands, PARAMS.threshold
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE band_keys (band SMALLINT, key BIGINT, num INTEGER)")
        t0 = time.perf_counter()
        with conn.cursor().copy("COPY band_keys FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(b"PGCOPY\n\xff\r\n\x00" + bytes(8))
            for lo in range(0, len(sigs), 200_000):
                copy.write(_band_copy(band_digests(sigs[lo : lo + 200_000], bands), lo))
            copy.write(b"\xff\xff")
        conn.execute("CREATE INDEX ON band_keys (key)")
        conn.execute("ANALYZE band_keys")
        build = time.perf_counter() - t0
        row = conn.execute("SELECT pg_total_relation_size('band_keys')").fetchone()
        table_bytes = int(row[0]) if row else 0
        query_sigs = signatures(texts, num_perm=PARAMS.num_perm, seed=PARAMS.seed, k=PARAMS.k)
        lookups, totals, candidates, found = [], [], [], 0
        for sig in query_sigs:
            keys = band_digests(sig[None, :], bands)[0]
            t0 = time.perf_counter()
            hits = conn.execute(
                "SELECT band, key, num FROM band_keys WHERE key = ANY(%s)",
                (keys.view(np.int64).tolist(),),
            ).fetchall()
            nums = sorted({num for band, key, num in hits if keys.view(np.int64)[band] == key})
            lookups.append(time.perf_counter() - t0)
            got = conn.execute("SELECT sig FROM documents WHERE num = ANY(%s)", (nums,)).fetchall()
            if got:
                block = np.frombuffer(b"".join(r[0] for r in got), dtype="<u4").reshape(-1, 128)
                found += int(np.any(np.mean(block == sig, axis=1) >= threshold))
            totals.append(time.perf_counter() - t0)
            candidates.append(len(nums))
    return {"rows": len(sigs) * bands, "build_seconds": build,
            "table_bytes_per_doc": table_bytes / len(sigs), "lookup": summarize(lookups),
            "total": summarize(totals), "candidates": float(np.mean(candidates)),
            "with_matches": found, "queries": len(query_sigs)}  # fmt: skip


def markdown(
    command: str, start: Any, ingest: list[dict[str, Any]], lag: Latency,
    recovery: list[dict[str, Any]], band: dict[str, Any], sizes: dict[str, int],
) -> str:  # fmt: skip
    """The section for bench/RESULTS.md."""
    lines = ["## Service replicas on one PostgreSQL", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in facts(start, _DISTS).items()]
    lines += [f"| command | `{command}` |", ""]
    base = ingest[0]["docs_per_second"]
    lines += [f"Ingest of {sizes['docs']:,} web-like (a) documents, batches of {BATCH}, "
              f"{CLIENTS} clients; then single queries on the last server:", "",
              "| setup | docs/s | vs SQLite | batch p50 / p99 ms | query p50 / p99 ms |",
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in ingest:
        b, q = r["batch"], r["query"]
        lines.append(f"| {r['setup']} | {r['docs_per_second']:,.0f} | "
                     f"{r['docs_per_second'] / base:.2f}x | {b.p50:.1f} / {b.p99:.1f} | "
                     f"{q.p50:.2f} / {q.p99:.2f} |")  # fmt: skip
    lines += ["", f"Replica lag (registered on A, until B answers it; n={lag.count}): "
              f"p50 {lag.p50:.1f} ms, p99 {lag.p99:.1f} ms, max {lag.max:.1f} ms.", "",
              f"Recovery of {sizes['recovery_docs']:,} documents:", "",
              "| store | documents | written in s | recovery s | ready s | index B/doc | "
              "RSS B/doc | store B/doc | query p50 / p99 ms |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in recovery:
        q = r["query"]
        lines.append(f"| {r['store']} | {r['documents']:,} | {r['write_seconds']:.1f} | "
                     f"{r['recovery_seconds']:.1f} | {r['ready_seconds']:.1f} | "
                     f"{r['index_bytes_per_doc']:.0f} | {r['rss_bytes_per_doc']:.0f} | "
                     f"{r['store_bytes_per_doc']:.0f} | {q.p50:.2f} / {q.p99:.2f} |")  # fmt: skip
    lk, tot = band["lookup"], band["total"]
    lines += ["", f"Band keys as a PostgreSQL table ({band['rows']:,} rows, "
              f"{band['table_bytes_per_doc']:.0f} B/doc with its index, built in "
              f"{band['build_seconds']:.0f} s); {band['queries']} query signatures, "
              f"{band['candidates']:.1f} candidates each on average, {band['with_matches']} "
              "with a confirmed match:", "",
              "| per query | p50 ms | p99 ms |", "|---|---:|---:|",
              f"| 16 band keys looked up | {lk.p50:.2f} | {lk.p99:.2f} |",
              f"| + candidates' signatures fetched and confirmed | {tot.p50:.2f} | "
              f"{tot.p99:.2f} |"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run every step; print the results (and the markdown section with ``--markdown``)."""
    parser = options.parser(MODULE, __doc__, SIZES, "also print a markdown section")
    given, command = options.command_line(MODULE, argv)
    args = parser.parse_args(given)
    sizes = options.sizes(args, SIZES)
    unwind_on_sigterm()
    start = at_start(_SOURCES)
    tmp = Path(tempfile.mkdtemp(prefix="neardup-bench-replicas-"))
    pg = PostgresServer().start()
    try:
        ingest, lag = run_ingest_and_queries(pg, sizes, tmp)
        print(f"  lag: {lag.short()}", flush=True)
        recovery, band = run_recovery(pg, sizes, tmp)
    finally:
        pg.destroy()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.markdown:
        print()
        print(markdown(command, start, ingest, lag, recovery, band, sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
