"""The service's own documents flushed into its index, then let go of memory (issue 30, parts
3-4): start-up and memory of ``neardup serve --index`` over a data directory whose documents
were all registered through the service and flushed, before (``--before REPO``: a checkout
whose service holds every document in memory) and after (this checkout: the memtable and the
clusters holding one of its documents only), on copies of the same data, in one run.

Built straight through the store's and the index's own writers (``build``;
``--through-service``: in process through the service itself, ``Service.register`` in batches
of 10,000, then one ``flush``, about 3 ms a document): synthetic texts ("document I" and 60
words of 50,000, drawn a block of 1,000 documents at a time), every tenth a near copy of the
one nine before it (its last word changed), so a fifth of the documents are in clusters of
two. The fast build leaves what a service registering them and flushing every
``--flush-docs`` documents leaves (tests/bench/test_index_memtable.py checks it against the
service at a small size: the store's rows, clusters, counts and marks, the index's parts, a
query): signatures computed in bulk (``batch_signatures``, in ``--jobs`` processes), rows
written by ``SQLiteStore.add_documents`` with their clusters (each near copy with its
original, when the service's rule confirms the pair: a band in common and an estimate at
least the threshold; unrelated texts are taken to match nothing, which the test checks), each
flush written and committed by the service's own ``write_flush``/``commit_flush`` and its
marks recorded as the flusher records them. With ``--real-docs N`` only the last N documents
are signed from their texts; those before get synthetic signatures (random; a near copy's is
its original's with 3 of 128 entries changed, so the pairs still cluster), stated in the
table's heading: their texts are stored but are not what their signatures were made from.

Measured per server (``--workers 1``, ``--flush-rows 10000``): seconds to ``/readyz``, RssAnon,
VmRSS and VmHWM once ready, single-text ``POST /v1/query`` p50/p99 (half near copies of the
last flushed documents, half new texts), then one registration of 1,000 new documents (a
tenth near copies of others of the same batch) and RssAnon after it.

Run from the repository root::

    python -m bench.index.memtable [--docs 100000] [--before ../main] [--markdown] [--quick]
        [--flush-docs 1000000] [--jobs 2] [--real-docs N] [--through-service] [--keep DIR]

Without ``--before`` (as ``make bench`` runs it) only this checkout's server is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
from numpy.typing import NDArray

from bench.common.latency import summarize
from bench.common.machine import now
from bench.common.memory import MIB, proc_memory
from bench.common.server import start_server, stop_server
from bench.index.lookups import _text

if TYPE_CHECKING:
    from neardup.app.service.clusters import ClusterRow
    from neardup.app.service.flush import Mark
    from neardup.app.service.store import SQLiteStore
    from neardup.core.engine import MinhashParams

__all__ = ["main", "measure"]

BATCH = 10_000
#: Documents signed (and stored) per task of the fast build.
CHUNK = 50_000
#: Seeds the synthetic signatures (``--real-docs``).
SYNTHETIC_SEED = 10**12
PARAMS: dict[str, Any] = {}  # the defaults (128 permutations, 16 bands of 8, 0.8)


#: Documents whose words are drawn together (from one generator seeded by their block's number).
BLOCK = 1_000
#: The vocabulary of the synthetic texts (``bench.index.lookups._text``'s: 50,000 words).
_WORDS = np.array([f"w{w}" for w in range(50_000)], dtype=object)


def _block(b: int) -> NDArray[Any]:
    """The 60 words of each document of block ``b`` (documents ``b * BLOCK`` onward), as the
    vocabulary's strings: one generator a block, so any range of documents is cheap to make."""
    return _WORDS[np.random.default_rng(b).integers(0, 50_000, size=(BLOCK, 60))]


def _texts(start: int, n: int) -> list[tuple[str, str]]:
    """Documents ``start`` to ``start + n - 1`` (``bench.index.lookups._text``'s kind of text:
    "document I" then 60 words of 50,000): every tenth a near copy of the one nine before it
    (its last word changed)."""
    out = []
    for b in range(start // BLOCK, (start + n - 1) // BLOCK + 1):
        words = _block(b)
        for i in range(max(start, b * BLOCK), min(start + n, (b + 1) * BLOCK)):
            if i % 10 == 9:
                row = [*words[i - 9 - b * BLOCK, :59], f"changed{i}"]
                out.append((f"doc{i:09d}", f"document {i - 9} " + " ".join(row)))
            else:
                out.append((f"doc{i:09d}", f"document {i} " + " ".join(words[i - b * BLOCK])))
    return out


async def _build(
    data: Path, index: Path, docs: int, batch: int = BATCH, flush_docs: int | None = None
) -> None:
    """``docs`` documents registered through ``Service.register`` (``batch`` a call) and
    flushed every ``flush_docs`` (a multiple of ``batch``; default: once, at the end)."""
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
        for lo in range(0, docs, batch):
            texts = _texts(lo, min(batch, docs - lo))
            await service.register([NewDoc(i, t, {}) for i, t in texts])
            if flush_docs and (lo + len(texts)) % flush_docs == 0:
                await service.flush()
        await service.flush()
    finally:
        await service.close()


def _signed(lo: int, n: int, real: bool = True) -> tuple[list[str], list[str], list[bytes], bytes]:
    """Documents ``lo`` to ``lo + n - 1`` (a pool's task): ids, texts, 32-byte text digests
    and little-endian uint32 signatures (as bytes): their texts' (``real``), or synthetic (random,
    a near copy's its original's with 3 of its entries changed)."""
    from neardup.app.config import Settings
    from neardup.core.engine import batch_signatures, text_digest

    params = Settings(**PARAMS).params
    docs = _texts(lo, n)
    texts = [t for _, t in docs]
    if real:
        sigs = batch_signatures(texts, params).astype("<u4")
    else:
        rng = np.random.default_rng(SYNTHETIC_SEED + lo)
        sigs = rng.integers(0, 2**32, size=(n, params.num_perm), dtype="<u4")
        copies = np.arange(9 - lo % 10, n, 10)
        copies = copies[copies >= 9]
        sigs[copies] = sigs[copies - 9]
        changed = np.linspace(0, params.num_perm - 1, 3).astype(np.int64)
        sigs[np.ix_(copies, changed)] = rng.integers(0, 2**32, size=(len(copies), 3), dtype="<u4")
    return [i for i, _ in docs], texts, [text_digest(t) for t in texts], sigs.tobytes()


def _pair_rows(
    lo: int, ids: list[str], sigs: NDArray[np.uint32], bands: int, threshold: float
) -> list[ClusterRow]:
    """The clusters of two among documents ``lo`` to ``lo + len(ids) - 1`` (``lo`` a multiple
    of 10): each near copy with its original when the service's rule confirms them (they agree
    on every row of a band, and their estimate is at least ``threshold``)."""
    from neardup.app.service.clusters import ClusterRow

    copies = np.arange(9, len(ids), 10)
    same = sigs[copies] == sigs[copies - 9]
    banded = same.reshape(len(copies), bands, -1).all(axis=2).any(axis=1)
    confirmed = banded & (same.mean(axis=1) >= threshold)
    return [
        ClusterRow(ids[c - 9], [(ids[c - 9], True), (ids[c], True)])
        for c in copies[confirmed].tolist()
    ]


def _ahead(
    pool: Any, starts: range, docs: int, chunk: int, most: int, real_from: int
) -> Iterator[Any]:
    """``_signed`` of each start in order, at most ``most`` tasks submitted ahead (memory)."""
    pending: deque[Any] = deque()
    for lo in starts:
        pending.append(pool.submit(_signed, lo, min(chunk, docs - lo), lo >= real_from))
        if len(pending) >= most:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def build(
    data: Path,
    index: Path,
    docs: int,
    flush_docs: int = 1_000_000,
    jobs: int = 2,
    chunk: int = CHUNK,
    real_docs: int | None = None,
) -> None:
    """``docs`` documents registered and flushed every ``flush_docs``, straight through the
    writers (see the module's docstring): the store's rows and clusters, the index's parts,
    the flush marks; ``chunk`` documents signed a task and stored a transaction; the last
    ``real_docs`` (default: all) with their texts' signatures, those before with synthetic
    ones (``_signed``)."""
    from concurrent.futures import ProcessPoolExecutor

    from neardup.app.config import Settings
    from neardup.app.service.clusters import ClusterWrite
    from neardup.app.service.flush import Mark
    from neardup.app.service.store import SQLiteStore, StoredDoc

    if flush_docs % chunk or chunk % 10:
        raise ValueError(f"--flush-docs must be a multiple of {chunk} (a multiple of 10)")
    settings = Settings(
        workers=2, data_dir=data, index=str(index), flush_rows=0, flush_seconds=1e9, **PARAMS
    )
    asyncio.run(_build(data, index, 0))  # the seed part, the store made by a service start
    params = settings.params
    store = SQLiteStore(data)
    try:
        state = store.flush_state()
        store_id, mark = state["store"], Mark.from_json(state["committed"]) or Mark()
        with ProcessPoolExecutor(jobs) as pool:
            starts = range(0, docs, chunk)
            real_from = 0 if real_docs is None else max(0, docs - real_docs)
            if real_from % chunk:
                raise ValueError(f"--real-docs must leave a multiple of {chunk} before them")
            tasks = _ahead(pool, starts, docs, chunk, jobs + 1, real_from)
            ids: list[str] = []
            digests: dict[str, bytes] = {}
            sigs: list[NDArray[np.uint32]] = []
            for lo, (chunk_ids, texts, chunk_digests, raw) in zip(starts, tasks, strict=True):
                chunk_sigs = np.frombuffer(raw, dtype="<u4").reshape(len(chunk_ids), -1)
                rows = [
                    StoredDoc(lo + j, i, chunk_digests[j], chunk_sigs[j].tobytes(), {}, t)
                    for j, (i, t) in enumerate(zip(chunk_ids, texts, strict=True))
                ]
                clusters = _pair_rows(lo, chunk_ids, chunk_sigs, params.bands, params.threshold)
                store.add_documents(rows, ClusterWrite(rows=clusters))
                ids += chunk_ids
                digests.update(zip(chunk_ids, chunk_digests, strict=True))
                sigs.append(chunk_sigs.astype(np.uint32))
                del rows, texts
                through = lo + len(chunk_ids) - 1
                if len(ids) == flush_docs or through == docs - 1:
                    mark = _flush(store, str(index), params, store_id, mark, ids, digests, sigs)
                    ids, digests, sigs = [], {}, []
                    print(f"  built {through + 1:,} of {docs:,}", file=sys.stderr, flush=True)
    finally:
        store.close()


def _flush(
    store: SQLiteStore,
    url: str,
    params: MinhashParams,
    store_id: str,
    mark: Mark,
    ids: list[str],
    digests: dict[str, bytes],
    sigs: list[NDArray[np.uint32]],
) -> Mark:
    """One flush of ``ids`` as the service's flusher makes it: written, its attempt recorded,
    committed, its mark recorded as committed. The mark."""
    from neardup.app.service.flush import Batch, _digest_halves, commit_flush, write_flush

    through = mark.through + len(ids)
    batch = Batch(ids, _digest_halves(ids, digests), np.concatenate(sigs), through, [])
    written = write_flush(url, params, batch, store_id, mark)
    assert written is not None
    store.set_flush_state({"attempt": written.mark.as_json()})
    commit_flush(written, params)
    store.set_flush_state({"committed": written.mark.as_json()}, written.mark.deletes)
    return written.mark


def _serve(
    name: str, work: Path, built: Path, docs: int, repo: Path | None, copy: bool = True
) -> dict[str, Any]:
    if copy:
        shutil.copytree(built, work / name)
    copy_of = work / name if copy else built
    args = ("--workers", "1", "--index", str(copy_of / "idx"), "--flush-rows", "10000")
    server = start_server(
        copy_of, *args, data_dir=copy_of / "data", timeout=3600, **({"repo": repo} if repo else {})
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
        "vm_rss_mib": round(ready.get("VmRSS", 0) / MIB, 1),
        "vm_hwm_mib": round(ready.get("VmHWM", 0) / MIB, 1),
        "rss_anon_per_doc_b": round(ready.get("RssAnon", 0) / docs, 1),
        "vm_hwm_per_doc_b": round(ready.get("VmHWM", 0) / docs, 1),
        "p50_ms": round(latency.p50, 2), "p99_ms": round(latency.p99, 2),
        "register_1000_s": round(register_s, 2),
        "rss_anon_after_mib": round(after.get("RssAnon", 0) / MIB, 1),
        "documents": stats.get("documents"), "clusters": stats.get("clusters"),
    }  # fmt: skip


def measure(
    docs: int,
    work: Path,
    before: Path | None,
    flush_docs: int = 1_000_000,
    jobs: int = 2,
    through_service: bool = False,
    real_docs: int | None = None,
) -> dict[str, Any]:
    """Build ``docs`` flushed documents under ``work`` (straight through the writers, or
    ``through_service``), then serve them before and after (each on a copy when both)."""
    built = work / "built"
    started = time.perf_counter()
    if through_service:
        asyncio.run(_build(built / "data", built / "idx", docs))
    else:
        build(built / "data", built / "idx", docs, flush_docs, jobs, real_docs=real_docs)
    build_s = time.perf_counter() - started
    from neardup.core.engine import DocIndex

    parts = len(DocIndex.open(str(built / "idx")).parts)  # as served (the seed's included)
    runs = [] if before is None else [_serve("before", work, built, docs, before)]
    runs.append(_serve("after", work, built, docs, None, copy=before is not None))
    real = docs if through_service or real_docs is None else min(docs, real_docs)
    return {
        "docs": docs, "build_s": round(build_s, 1), "parts": parts, "real_docs": real, "runs": runs
    }  # fmt: skip


def markdown(result: dict[str, Any], command: str) -> str:
    head = (
        "| service | documents | ready (s) | RssAnon (MiB) | B/doc | VmRSS (MiB) | VmHWM (MiB) "
        "| B/doc | query p50 / p99 (ms) | register 1,000 (s) | RssAnon after (MiB) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = [
        f"| {r['name']} | {result['docs']:,} | {r['ready_s']} | {r['rss_anon_mib']} | "
        f"{r['rss_anon_per_doc_b']} | {r['vm_rss_mib']} | {r['vm_hwm_mib']} | "
        f"{r['vm_hwm_per_doc_b']} | {r['p50_ms']} / {r['p99_ms']} | {r['register_1000_s']} | "
        f"{r['rss_anon_after_mib']} |"
        for r in result["runs"]
    ]
    built = f"build {result['build_s']} s, {result['parts']} parts in the index"
    if result["real_docs"] < result["docs"]:
        built += f", the last {result['real_docs']:,} with their texts' signatures"
    return "\n".join([f"`{command}` ({now()}, {built})", "", head, *rows])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--before", type=Path, help="a checkout to serve the 'before' from")
    parser.add_argument("--work", type=Path, help="where to build (default: a temporary dir)")
    parser.add_argument("--keep", type=Path, help="build in this new directory, and keep it")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--quick", action="store_true", help="20,000 documents")
    parser.add_argument(
        "--flush-docs", type=int, default=1_000_000, help="documents a flush writes (fast build)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="processes signing (fast build)")
    parser.add_argument(
        "--real-docs", type=int, help="only the last N signed from their texts (fast build)"
    )
    parser.add_argument(
        "--through-service", action="store_true", help="build through Service.register (slow)"
    )
    args = parser.parse_args(argv)
    docs = 20_000 if args.quick else args.docs
    keep = contextlib.nullcontext(str(args.keep)) if args.keep else None
    with keep or tempfile.TemporaryDirectory(dir=args.work) as tmp:
        result = measure(
            docs, Path(tmp), args.before, args.flush_docs, args.jobs, args.through_service,
            args.real_docs,
        )  # fmt: skip
    command = "python -m bench.index.memtable " + " ".join(sys.argv[1:] if argv is None else argv)
    print(markdown(result, command) if args.markdown else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
