"""Service benchmark: HTTP ingest, recovery, memory per document and query latency at 1M docs.

Against the issue's targets: ingest >= 5,000 docs/s over HTTP with 2 workers; single-document
query p99 <= 20 ms with 1M documents indexed; index memory <= 1 KiB per document at 1M,
compared with datasketch's in-memory ``MinHashLSH`` measured the same way in the same run;
recovery of 1M documents <= 30 s.

Steps:

1. Ingest: a real ``python -m neardup serve --workers 2`` on a fresh data directory; M
   documents POSTed in batches of 1000 by one keep-alive client, then again by two concurrent
   clients on another fresh data directory; once with texts of the chosen corpus (``--corpus``,
   by default ``bench.common.corpora``'s web-like (a): typographic punctuation, accented names,
   a little of other scripts) and once with the ASCII corpus (c), for comparison.
2. Build: N documents written straight into a fresh store through ``SQLiteStore`` (not over
   HTTP): real signatures of a pool of corpus documents, perturbed into N distinct rows with
   5 % planted near duplicates and their confirmed pairs (see ``bench.service.synthetic_index``).
3. Serve: the server started on that store (recovery), its RSS minus the RSS of the same
   server on an empty data directory, over N; then sequential single-text ``/v1/query``
   requests over one keep-alive client.
4. Peer: datasketch ``MinHashLSH`` built from the same rows in a separate process (clean RSS),
   and ``lsh.query`` timed in process (see ``bench.service.peer``).

Run from the repository root::

    python -m bench.service [--docs N] [--ingest-docs M] [--quick] [--markdown]

Defaults (N = 1,000,000, M = 20,000) take about 3-4 minutes on 2 cores; ``--quick``
(N = 100,000, M = 5,000) about half a minute. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.common import options
from bench.common.corpora import CORPORA, corpus
from bench.common.corpus import near_copy
from bench.common.machine import at_start
from bench.common.memory import peak_rss_bytes, proc_memory
from bench.common.options import Size
from bench.common.server import Server, recovered_from_log, serving, unwind_on_sigterm
from bench.service.client import (
    BATCH,
    document_bodies,
    get_stats,
    post_batches,
    query_bodies,
    time_queries,
)
from bench.service.peer import PeerResult, run_peer
from bench.service.report import SOURCES, markdown, print_text
from bench.service.results import BaselineResult, Report, ServedResult
from bench.service.synthetic_index import SynthParams, build_store
from neardup.core.engine import MinhashParams
from neardup.core.minhash import signatures

WORKERS = 2
#: The corpus ingest also runs on, for comparison: ASCII (c).
ASCII = "ascii"
PARAMS = MinhashParams(num_perm=128, bands=16, k=5, seed=0)
#: What the store records: the index parameters, as the server would.
INDEX_PARAMS = PARAMS.index_params()
_READY_TIMEOUT = 900.0
#: The size options: N, M, the signed pool, the timed queries.
SIZES = {
    "docs": Size("N, indexed docs", 1_000_000, 100_000),
    "ingest_docs": Size("M, POSTed docs", 20_000, 5_000),
    "pool": Size("signed pool docs", 20_000, 5_000),
    "queries": Size("timed queries", 2_000, 500),
}
_WARM_UP_QUERIES = 20


@dataclass(frozen=True)
class Config:
    """What to run.

    Attributes:
        docs: N, documents in the index for recovery, memory and queries.
        ingest_docs: M, documents POSTed in the ingest step (0 skips it).
        pool: documents actually signed; the index's first rows and the bases of the rest.
        queries: single-text queries timed.
        near_share: the share of queries that are near copies of pool documents.
        seed: the corpus seed.
        corpus: the corpus of every text (a key of ``bench.common.corpora.CORPORA``); ingest
            also runs on ``ascii`` for comparison.
        peer_max_seconds: datasketch insert time limit (it reports what it reached).
        peer_max_rss_gib: datasketch RSS limit.
        peer_16x8: also run datasketch with ``params=(16, 8)`` (neardup's banding).
    """

    docs: int
    ingest_docs: int
    pool: int
    queries: int
    near_share: float
    seed: int
    corpus: str
    peer_max_seconds: float
    peer_max_rss_gib: float
    peer_16x8: bool


# --- texts ------------------------------------------------------------------------------------


def query_texts(pool_texts: Sequence[str], config: Config) -> tuple[list[str], int]:
    """Fresh unregistered documents and near copies of pool documents, shuffled.

    Returns:
        The texts and how many are near copies.
    """
    rng = np.random.default_rng([config.seed, 3])
    near = round(config.queries * config.near_share) if pool_texts else 0
    picks = rng.integers(0, len(pool_texts), size=near).tolist() if near else []
    texts = [near_copy(pool_texts[i], rng) for i in picks]
    texts += corpus(config.corpus, config.queries - near, seed=config.seed + 1)
    order = rng.permutation(len(texts))
    return [texts[i] for i in order], near


# --- steps ------------------------------------------------------------------------------------


def _serving(data_dir: Path, tmp: Path) -> contextlib.AbstractContextManager[Server]:
    """The service with ``--workers 2`` on ``data_dir``, logging into ``tmp``; stopped on exit."""
    return serving(tmp, "--workers", str(WORKERS), data_dir=data_dir, timeout=_READY_TIMEOUT)


def run_ingest(report: Report, key: str, texts: Sequence[str], tmp: Path) -> None:
    """POST the texts in batches of 1000, with one client, then two, each on a fresh store."""
    bodies = document_bodies(texts, BATCH)
    for clients in (1, 2):
        where = tmp / f"ingest-{key}-{clients}"
        try:
            with _serving(where, tmp) as server:
                result = post_batches(server.url, bodies, clients)
                stats = get_stats(server.url)
                if stats["documents"] != len(texts):
                    raise RuntimeError(f"registered {stats['documents']}, sent {len(texts)}")
                report.ingest.append(replace(result, corpus=key))
                report.ingest_rss[key, clients] = proc_memory(server.pid).get("VmRSS", 0)
        finally:
            shutil.rmtree(where, ignore_errors=True)
        print(f"  ingest {key}, clients={clients}: {result.docs_per_second:.0f} docs/s", flush=True)


def run_baseline(report: Report, bodies: Sequence[bytes], tmp: Path) -> None:
    """The server on an empty data directory: memory after the same warm-up, then the queries.

    The queries on an empty index time everything but the index: HTTP, JSON and the signature
    on the worker pool.
    """
    with _serving(tmp / "empty", tmp) as server:
        time_queries(server.url, bodies[:_WARM_UP_QUERIES])
        memory = proc_memory(server.pid)
        queries = time_queries(server.url, bodies)
        report.baseline = BaselineResult(memory, server.ready_seconds, queries)


def run_served(report: Report, data_dir: Path, bodies: Sequence[bytes], tmp: Path) -> None:
    """Recovery, memory and query latency of the server on the built store."""
    with _serving(data_dir, tmp) as server:
        stats = get_stats(server.url)
        time_queries(server.url, bodies[:_WARM_UP_QUERIES])
        ready = proc_memory(server.pid)
        queries = time_queries(server.url, bodies)
        report.served = ServedResult(
            ready_seconds=server.ready_seconds,
            stats=stats,
            logged=recovered_from_log(server.log),
            memory_ready=ready,
            memory_after=proc_memory(server.pid),
            query=queries,
        )
    report.served_exit = server.exit_code


def run_peers(report: Report, db: Path, queries: Path, config: Config) -> None:
    """datasketch with the threshold's own banding, and optionally with (16, 8)."""
    settings: list[tuple[int, int] | None] = [None, (16, 8)] if config.peer_16x8 else [None]
    for params in settings:
        result: PeerResult = run_peer(
            db,
            config.docs,
            queries,
            params=params,
            max_seconds=config.peer_max_seconds,
            max_rss_gib=config.peer_max_rss_gib,
        )
        report.peers.append(result)
        print(f"  {result.label}: {result.bytes_per_doc:.0f} B/doc", flush=True)


def run(config: Config, command: str) -> Report:
    """Every step, in a temporary directory removed at the end."""
    report = Report(config=config, command=command, start=at_start(SOURCES))
    tmp = Path(tempfile.mkdtemp(prefix="neardup-bench-service-"))
    try:
        texts = corpus(config.corpus, max(config.pool, config.ingest_docs), seed=config.seed)
        if config.ingest_docs:
            run_ingest(report, config.corpus, texts[: config.ingest_docs], tmp)
            if config.corpus != ASCII:
                ascii_texts = corpus(ASCII, config.ingest_docs, seed=config.seed)
                run_ingest(report, ASCII, ascii_texts, tmp)
        pool_texts = texts[: config.pool]
        t0 = time.perf_counter()
        pool = _sign(pool_texts)
        report.pool_seconds = time.perf_counter() - t0
        qtexts, report.near_queries = query_texts(pool_texts, config)
        np.save(tmp / "queries.npy", _sign(qtexts))
        report.build = build_store(
            tmp / "index",
            pool,
            pool_texts,
            SynthParams(n=config.docs, seed=config.seed),
            INDEX_PARAMS,
        )
        del pool, texts
        print(f"  built {config.docs} documents", flush=True)
        bodies = query_bodies(qtexts)
        run_baseline(report, bodies, tmp)
        run_served(report, tmp / "index", bodies, tmp)
        print("  served", flush=True)
        run_peers(report, tmp / "index" / "neardup.sqlite3", tmp / "queries.npy", config)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report.peak_rss = peak_rss_bytes()
    return report


def _sign(texts: Sequence[str]) -> NDArray[np.uint32]:
    """The signatures of ``texts`` with the index's parameters, on ``WORKERS`` processes."""
    return signatures(
        texts, num_perm=PARAMS.num_perm, seed=PARAMS.seed, k=PARAMS.k, workers=WORKERS
    )


# --- main -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> tuple[Config, bool]:
    """The configuration and the ``--markdown`` flag from the command line."""
    parser = options.parser("bench.service", __doc__, SIZES, "also print a markdown section")
    parser.add_argument("--near-share", type=float, default=0.25, help="near-copy queries")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (0)")
    parser.add_argument(
        "--corpus",
        choices=sorted(CORPORA),
        default="web",
        help="the texts' corpus (web: (a), the default); ingest also runs on ascii (c)",
    )
    parser.add_argument("--peer-max-seconds", type=float, default=300.0)
    parser.add_argument("--peer-max-rss-gib", type=float, default=12.0)
    parser.add_argument("--no-peer-16x8", action="store_true", help="skip params=(16, 8)")
    args = parser.parse_args(argv)
    config = Config(
        **options.sizes(args, SIZES),
        near_share=args.near_share,
        seed=args.seed,
        corpus=args.corpus,
        peer_max_seconds=args.peer_max_seconds,
        peer_max_rss_gib=args.peer_max_rss_gib,
        peer_16x8=not args.no_peer_16x8,
    )
    if config.docs < 1 or config.pool < 1 or config.queries < 1 or config.ingest_docs < 0:
        parser.error("need --docs, --pool, --queries >= 1 and --ingest-docs >= 0")
    if not 0.0 <= config.near_share <= 1.0:
        parser.error("--near-share must be in [0, 1]")
    return config, args.markdown


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the report (and a markdown section with ``--markdown``)."""
    raw, command = options.command_line("bench.service", argv)
    config, as_markdown = parse_args(raw)
    unwind_on_sigterm()  # so that the finally blocks stop the servers
    report = run(config, command)
    print_text(report)
    if as_markdown:
        print()
        print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
