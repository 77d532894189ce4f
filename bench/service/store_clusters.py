"""The store's clusters (app/service/clusters.py): what writing them costs a registration.

N synthetic documents (``bench.common.corpus``), a share of them near copies (one word in 100
changed: Jaccard about 0.9) of earlier ones, registered in batches of 1000 through
``Service.register`` in process (the real signature pool, 1 worker, SQLite store), once with
the cluster tables written and once with the cluster writes left out (the code before them),
interleaved rounds; then the cluster tables' bytes (SQLite's ``dbstat``) per document.

Run from the repository root::

    python -m bench.service.store_clusters [--docs N] [--dup-rate R] [--rounds K] [--postgres]

``--postgres``: the shared store instead, on a throwaway PostgreSQL server of the system's
binaries (``bench.common.postgres``, fsync on), a new database each run.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common.corpus import doc_id, documents, near_copy
from neardup.app.config import Settings
from neardup.app.service import NewDoc, Service
from neardup.app.service.clusters import ClusterWrite
from neardup.app.service.index import ServiceIndex

#: The tables (and their indexes) of the store's clusters.
TABLES = ("clusters", "clusters_by_size", "cluster_members", "cluster_members_by_label")


def corpus(n: int, rate: float, seed: int = 0) -> list[str]:
    """``n`` texts, about ``rate`` of them near copies of an earlier one."""
    rng = np.random.default_rng(seed)
    originals = documents(n, seed=seed, min_words=100, max_words=200)
    texts: list[str] = []
    for i, text in enumerate(originals):
        if i and rng.random() < rate:
            text = near_copy(texts[int(rng.integers(i))], rng)
        texts.append(text)
    return texts


async def ingest(data: Path, texts: list[str], url: str | None, batch: int = 1000) -> float:
    """Seconds to register ``texts`` in batches of ``batch`` (``url``: a PostgreSQL store)."""
    service = await Service.start(Settings(data_dir=data, workers=1, store_url=url))
    try:
        await service.warm_up()
        started = time.perf_counter()
        for lo in range(0, len(texts), batch):
            docs = [NewDoc(doc_id(lo + k), t, {}) for k, t in enumerate(texts[lo : lo + batch])]
            await service.register(docs)
        return time.perf_counter() - started
    finally:
        await service.close()


def table_bytes(data: Path, url: str | None) -> int:
    """The bytes of the cluster tables and their indexes in the store."""
    if url is not None:
        import psycopg

        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT pg_total_relation_size('clusters') "
                "+ pg_total_relation_size('cluster_members')"
            ).fetchone()
            return int(row[0]) if row is not None else 0
    with sqlite3.connect(data / "neardup.sqlite3") as db:
        marks = ",".join("?" * len(TABLES))
        row = db.execute(f"SELECT sum(pgsize) FROM dbstat WHERE name IN ({marks})", TABLES)
        return int(row.fetchone()[0] or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--dup-rate", type=float, default=0.3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    server = None
    if args.postgres:
        from bench.common.postgres import PostgresServer

        server = PostgresServer().start()
    texts = corpus(args.docs, args.dup_rate)
    writes, plain = ServiceIndex.cluster_write, ServiceIndex.removal_write
    rates: dict[str, list[float]] = {"with the cluster tables": [], "without (before)": []}
    stored = 0
    for _ in range(args.rounds):
        for mode in rates:
            if mode.startswith("without"):
                ServiceIndex.cluster_write = lambda self, plan, removal=None: ClusterWrite()  # type: ignore[method-assign]
            else:
                ServiceIndex.cluster_write, ServiceIndex.removal_write = writes, plain  # type: ignore[method-assign]
            url = None if server is None else server.database()
            with tempfile.TemporaryDirectory() as tmp:
                seconds = asyncio.run(ingest(Path(tmp), texts, url))
                rates[mode].append(len(texts) / seconds)
                if not mode.startswith("without"):
                    stored = table_bytes(Path(tmp), url)
    if server is not None:
        server.destroy()
    print(f"{args.docs:,} documents, near-copy rate {args.dup_rate}, batches of 1000, "
          f"{args.rounds} interleaved rounds")  # fmt: skip
    for mode, got in rates.items():
        print(f"| {mode} | {statistics.median(got):,.0f} docs/s (median; "
              f"{', '.join(f'{r:,.0f}' for r in got)}) |")  # fmt: skip
    print(f"cluster tables ({'PostgreSQL' if server else 'SQLite'}): {stored:,} bytes, "
          f"{stored / args.docs:.1f} B a document")  # fmt: skip


if __name__ == "__main__":
    main()
