"""``neardup serve --index s3://...``: the service flushing into, compacting, refreshing from and
restarting on an index on a real S3 protocol (moto's server through s3fs: tests/s3.py), and
answering as the same service on a local directory."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from neardup.app.service import NewDoc
from neardup.core.engine import (
    DocIndex,
    batch_signatures,
    commit_index,
    run_info,
    text_digests,
    write_part,
)
from tests.app.service.test_flush import (
    ON_DEMAND,
    _compact,
    _rows,
    _start,
    _stats_of,
    compact_in_threads,
)
from tests.app.service.test_served import _params, threads, write_index
from tests.s3 import S3Server

__all__ = ["compact_in_threads", "threads"]  # the fixtures, imported for the test below


def _batch_run(url: str, fs: Any) -> None:
    """A batch run commits a part of one document to ``url`` through the client ``fs`` (on S3,
    another client than the service's: another process's view of the bucket)."""
    params = _params()
    opened = DocIndex.open(url)
    index = DocIndex(url, fs, opened.root, opened.version, opened.manifest)
    texts = ["ant bee cat dog elk"]
    sigs = batch_signatures(texts, params)
    part = write_part(index, params, ["x"], text_digests(texts), sigs, run_info("local", "t", []))
    commit_index(index, params, [part])


async def _lifetime(data: Path, url: str, fs: Any) -> list[Any]:
    """A service's life on the index at ``url``: registrations flushed, a delete of a flushed
    document, a batch run's commit (through ``fs``) picked up at a refresh, a restart, a
    compaction of every part: its answers and counts after each step."""
    said: list[Any] = []
    service = await _start(data, url, index_refresh=0, **ON_DEMAND)
    try:
        await service.register([NewDoc("b", "ant bee cat dog", {}), NewDoc("c", "cat", {})])
        said += [await service.flush(), await _stats_of(service)]
        await service.delete("c")  # flushed: a deletion vector at the next flush
        await service.register([NewDoc("d", "hen ibis jay kite", {})])
        said += [await service.flush(), await _stats_of(service)]
        _batch_run(url, fs)
        said += [await service.refresh_index(), await _stats_of(service)]
        said.append(await service.query(["ant bee cat dog", "hen ibis jay"], None, None))
    finally:
        await service.close()
    service = await _start(data, url, index_refresh=0, compact_parts=2, **ON_DEMAND)
    try:
        said.append(await _stats_of(service))
        said += [await _compact(service, every=True), await _stats_of(service)]
        said.append(await service.query(["ant bee cat dog", "hen ibis jay"], None, None))
    finally:
        await service.close()
    return said


def test_a_service_on_an_s3_index_flushes_compacts_and_restarts_as_on_a_local_one(
    s3_server: S3Server, s3, tmp_path: Path, threads
) -> None:
    url, local = f"{s3}/idx", str(tmp_path / "idx")
    for name in (url, local):
        write_index(name, [("y", "eel fox gnu"), ("z", "one two three four")], parts=2)
    got = asyncio.run(_lifetime(tmp_path / "s3-data", url, s3_server.filesystem()))
    want = asyncio.run(_lifetime(tmp_path / "local-data", local, DocIndex.open(local).fs))
    assert got == want
    assert _rows(url) == _rows(local) == {"b": 1, "d": 1, "x": 1, "y": 1, "z": 1}
