"""Flushed documents overruled by the index: what deleting them here costs.

A service serving an index (``--index``) registers N documents (a share of them near copies,
so clusters regroup), flushes them into the index, then ``neardup index delete`` (core's
``delete_ids``) deletes every one of their rows; the refresh that serves that version deletes
them from the service too (``Service._drop_overruled``). Measured: the seconds of that refresh,
and the store transactions it committed (counted by wrapping the store's transaction).

``--postgres``: the shared store instead (a throwaway server of the system's binaries,
``bench.common.postgres``, fsync on), with a second replica that never refreshes; also the
seconds that replica takes to apply the deletes from the log (its follower).

Run from the repository root::

    python -m bench.service.overruled [--docs 10000] [--dup-rate 0.2] [--postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.common.corpus import doc_id
from bench.service.store_clusters import corpus
from neardup.app.config import Settings
from neardup.app.service import NewDoc, Service
from neardup.app.service.pgstore import PostgresStore
from neardup.app.service.store import SQLiteStore
from neardup.core.engine import (
    DocIndex,
    MinhashParams,
    batch_signatures,
    commit_index,
    delete_ids,
    run_info,
    text_digests,
    write_part,
)

__all__ = ["main", "measure"]


def _seed_index(url: str, params: MinhashParams) -> None:
    """An index of one document (a batch run's), for the service to serve and flush into."""
    index = DocIndex.open(url, missing_ok=True)
    text = ["a document of the batch run"]
    part = write_part(index, params, ["batch-0"], text_digests(text),
                      batch_signatures(text, params), run_info("local", "bench", []))  # fmt: skip
    commit_index(index, params, [part])


def _count_commits(service: Service) -> list[int]:
    """A counter of the store transactions ``service`` commits from now on (its one element)."""
    store = service.store
    commits = [0]
    if isinstance(store, SQLiteStore):
        real: Callable[[], Any] = store._transaction

        @contextlib.contextmanager
        def counted() -> Iterator[None]:
            with real():
                yield
            commits[0] += 1

        store._transaction = counted  # type: ignore[method-assign]
    else:
        assert isinstance(store, PostgresStore)
        begin = store.lock_writes

        def locked() -> Any:
            commits[0] += 1
            return begin()

        store.lock_writes = locked  # type: ignore[method-assign]
    return commits


async def measure(tmp: Path, texts: list[str], store_url: str | None = None) -> dict[str, Any]:
    """Register ``texts``, flush them, delete their rows from the index, and time the refresh
    that deletes them from the service (and count its store transactions); with
    ``store_url``, also the seconds a second replica takes to follow."""
    url = str(tmp / "idx")
    settings = Settings(data_dir=tmp / "data", workers=1, index=url, index_refresh=0,
                        flush_rows=0, flush_seconds=1e9, store_url=store_url)  # fmt: skip
    _seed_index(url, settings.params)
    service = await Service.start(settings)
    other = None
    if store_url is not None:
        other = await Service.start(settings.model_copy(update={"data_dir": tmp / "other"}))
    try:
        await service.warm_up()
        for lo in range(0, len(texts), 1000):
            chunk = texts[lo : lo + 1000]
            await service.register([NewDoc(doc_id(lo + k), t, {}) for k, t in enumerate(chunk)])
        await service.flush()
        await service.refresh_index()
        while other is not None and other.log_position != service.log_position:
            await asyncio.sleep(0.05)
        clusters = service.stats()["clusters"]
        deleted = await asyncio.to_thread(delete_ids, url, [doc_id(i) for i in range(len(texts))])
        commits = _count_commits(service)
        started = time.perf_counter()
        await service.refresh_index()
        seconds = time.perf_counter() - started
        found: dict[str, Any] = {
            "docs": len(texts),
            "clusters_before": clusters,
            "rows_deleted": len(deleted.deleted),
            "documents_after": len(service.index),
            "seconds": round(seconds, 2),
            "transactions": commits[0],
        }
        if other is not None:
            while other.log_position != service.log_position:
                await asyncio.sleep(0.01)
            found["follower_seconds"] = round(time.perf_counter() - started, 2)
            found["follower_documents_after"] = len(other.index)
        return found
    finally:
        await service.close()
        if other is not None:
            await other.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--dup-rate", type=float, default=0.2)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args(argv)
    texts = corpus(args.docs, args.dup_rate)
    server = None
    if args.postgres:
        from bench.common.postgres import PostgresServer

        server = PostgresServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            url = None if server is None else server.database()
            print(asyncio.run(measure(Path(tmp), texts, url)))
    finally:
        if server is not None:
            server.destroy()


if __name__ == "__main__":
    main()
