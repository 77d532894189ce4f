"""The index a service serves when none is named (issue 30, part 2): the data directory's,
created by the first start, flushed into, and read back by a restart and by the batch engines;
none on a shared store, where every replica must name the same one."""

from __future__ import annotations

import asyncio
import logging

import pytest

from neardup.app.config import Settings
from neardup.app.service import NewDoc
from neardup.app.service.served import ServedIndex, created
from neardup.core.engine import DocIndex, IndexMissingError, MinhashParams, index_params
from tests.app.service.cluster_reads import every_cluster

TEXT = "the quick brown fox jumps over the lazy dog near the river bank today and"


def _docs() -> list[NewDoc]:
    """Five documents: a pair of near copies, and three texts of their own."""
    docs = [NewDoc("a", TEXT, {}), NewDoc("b", f"{TEXT} again", {})]
    docs += [
        NewDoc(f"s{i}", f"a text of its own number {i} with words {i * 13}", {}) for i in range(3)
    ]
    return docs


def test_a_service_with_no_index_serves_its_data_directorys(service_in, tmp_path):
    """No INDEX on the embedded store: ``DATA_DIR/index`` is created empty (version 1) at the
    first start, the documents are flushed into it (a batch run reads them there), and a
    restart holds none of them in memory yet answers for all of them."""
    url = str(tmp_path / "data" / "index")

    async def run():
        async with service_in() as service:
            created_version = service.served.version
            await service.register(_docs())
            flushed = await service.flush()
        async with service_in() as again:
            query = await again.query([TEXT], None, None)
            return (created_version, flushed, again.index.held, len(again.index),
                    await every_cluster(again), query, again.settings.index)  # fmt: skip

    created_version, flushed, held, count, clusters, query, setting = asyncio.run(run())
    assert setting is None  # the default, not a setting written back
    assert created_version == 1 and flushed == 2
    assert held == 0 and count == 5
    assert clusters["a"] == ["a", "b"] and len(clusters) == 4
    assert query[0][0] == 2 and {m[0] for m in query[0][1]} == {"a", "b"}
    index = DocIndex.open(url)
    assert index.rows == 5 and index.params == index_params(MinhashParams())


def test_the_default_index_is_created_once_and_a_named_one_never(tmp_path):
    """``created`` commits the empty index once (a second call finds it); a named index that
    does not exist is refused, not created."""
    params = MinhashParams()
    url = str(tmp_path / "idx")
    assert created(url, params) is True
    assert created(url, params) is False
    assert DocIndex.open(url).version == 1
    with pytest.raises(IndexMissingError):
        ServedIndex.open(str(tmp_path / "missing"), params)
    assert not (tmp_path / "missing").exists()


def test_a_shared_store_has_no_default_index(tmp_path):
    """Replicas must read one index: on a shared store no data directory's index is taken
    (each replica's would differ), and nothing flushes without INDEX."""
    shared = Settings(data_dir=tmp_path, store_url="postgresql://u@localhost:5432/db")
    assert shared.index_url is None and not shared.flushes
    named = Settings(data_dir=tmp_path, store_url="postgresql://u@h:5432/db", index="s3://b/i")
    assert named.index_url == "s3://b/i" and named.flushes
    embedded = Settings(data_dir=tmp_path)
    assert embedded.index_url == str(tmp_path / "index") and embedded.flushes
    assert not Settings(data_dir=tmp_path, flush_rows=0, flush_seconds=0).flushes


def test_a_replica_without_index_says_it_holds_everything(tmp_path, pg_url, caplog):
    """A shared store's replica started without INDEX warns that it holds every document."""
    from neardup.app.service import Service

    caplog.set_level(logging.WARNING, logger="neardup")

    async def run():
        service = await Service.start(Settings(data_dir=tmp_path, store_url=pg_url, workers=1))
        try:
            return service.served, service.flusher
        finally:
            await service.close()

    served, flusher = asyncio.run(run())
    assert served is None and flusher is None
    assert any("no index (NEARDUP_INDEX)" in r.getMessage() for r in caplog.records)


def test_a_data_directory_from_before_the_default_moves_into_its_index(service_in, tmp_path):
    """A data directory whose documents were never flushed (made before the default index:
    its index removed here) starts with every document unflushed, answers as before, and its
    first flush writes them all into the new index; after a restart memory holds none."""
    import shutil

    async def run():
        async with service_in(flush_rows=0, flush_seconds=0) as old:
            await old.register(_docs())
            before = await every_cluster(old)
        shutil.rmtree(tmp_path / "data" / "index")
        async with service_in() as moved:
            waiting, held = moved.unflushed(), moved.index.held
            same = await every_cluster(moved) == before
            version = await moved.flush()
        async with service_in() as again:
            return (
                waiting,
                held,
                same,
                version,
                again.index.held,
                await every_cluster(again),
                before,
            )

    waiting, held, same, version, held_after, after, before = asyncio.run(run())
    assert waiting == 5 and held == 5 and same
    assert version == 2 and DocIndex.open(str(tmp_path / "data" / "index")).rows == 5
    assert held_after == 0 and after == before
