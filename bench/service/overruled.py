"""Flushed documents overruled by the index: what deleting them here costs.

A service on SQLite serving an index (``--index``) registers N documents (a share of them near
copies, so clusters regroup), flushes them into the index, then ``neardup index delete`` (core's
``delete_ids``) deletes every one of their rows; the refresh that serves that version deletes
them from the service too (``Service._drop_overruled``). Measured: the seconds of that refresh,
and the store transactions it committed (SQLite's ``total_changes`` is not a count of
transactions: the commits are counted by wrapping the store's transaction).

Run from the repository root::

    python -m bench.service.overruled [--docs 10000] [--dup-rate 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common.corpus import doc_id
from bench.service.store_clusters import corpus
from neardup.app.config import Settings
from neardup.app.service import NewDoc, Service
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


async def measure(tmp: Path, texts: list[str]) -> dict[str, Any]:
    """Register ``texts``, flush them, delete their rows from the index, and time the refresh
    that deletes them from the service (and count its store transactions)."""
    url = str(tmp / "idx")
    settings = Settings(data_dir=tmp / "data", workers=1, index=url, index_refresh=0,
                        flush_rows=0, flush_seconds=1e9)  # fmt: skip
    _seed_index(url, settings.params)
    service = await Service.start(settings)
    try:
        await service.warm_up()
        for lo in range(0, len(texts), 1000):
            chunk = texts[lo : lo + 1000]
            await service.register([NewDoc(doc_id(lo + k), t, {}) for k, t in enumerate(chunk)])
        await service.flush()
        await service.refresh_index()
        clusters = service.stats()["clusters"]
        deleted = await asyncio.to_thread(delete_ids, url, [doc_id(i) for i in range(len(texts))])
        store = service.store
        assert isinstance(store, SQLiteStore)
        commits = [0]
        real = store._transaction

        @contextlib.contextmanager
        def counted() -> Iterator[None]:
            with real():
                yield
            commits[0] += 1

        store._transaction = counted  # type: ignore[method-assign]
        started = time.perf_counter()
        await service.refresh_index()
        seconds = time.perf_counter() - started
        return {
            "docs": len(texts),
            "clusters_before": clusters,
            "rows_deleted": len(deleted.deleted),
            "documents_after": len(service.index),
            "seconds": round(seconds, 2),
            "transactions": commits[0],
        }
    finally:
        await service.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--dup-rate", type=float, default=0.2)
    args = parser.parse_args(argv)
    texts = corpus(args.docs, args.dup_rate)
    with tempfile.TemporaryDirectory() as tmp:
        print(asyncio.run(measure(Path(tmp), texts)))


if __name__ == "__main__":
    main()
