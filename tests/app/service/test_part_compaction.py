"""The service's background compaction of the index it serves (app/service/compaction.py), on a
real SQLite store (PostgreSQL for replicas) and a real index on disk: a refresh does not read
again the rows a compaction moved, the one rule for flushed ids and the hidden rows of deleted
flushed documents hold across it, a flush committed but not recorded is adopted though its
part was compacted, a commit lost to a batch run is retried (not a failure), a failure is
counted and the service goes on, a compaction under way is abandoned at close, its part is
written by a real child process, and of replicas on one store one compacts at a time and all
serve the new version."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from neardup.app.service import NewDoc, NotFound, Service
from neardup.app.service import compaction as compaction_module
from neardup.app.service.store import SQLiteStore
from neardup.core.engine import (
    DocIndex,
    compact_index,
    delete_ids,
    index_info,
    index_leftovers,
)
from tests.app.service.test_flush import (
    COMPACTING,
    ON_DEMAND,
    _compact,
    _crash,
    _replica,
    _rows,
    _settled,
    _start,
    compact_in_threads,
)
from tests.app.service.test_served import threads, write_index
from tests.procs import compaction_children

__all__ = ["compact_in_threads", "threads"]  # the fixtures, imported for the tests below


async def _flushing(tmp: Path, url: str, **more: Any) -> Service:
    return await _start(tmp / "data", url, **{**ON_DEMAND, **COMPACTING, **more})


def _spy_linked(monkeypatch) -> list[list[str]]:
    """The parts each refresh reads the rows of (``Service._matched_new_rows``), recorded."""
    seen: list[list[str]] = []
    real = Service._matched_new_rows

    async def spy(self, latest, added):
        seen.append([p.name for p in added])
        return await real(self, latest, added)

    monkeypatch.setattr(Service, "_matched_new_rows", spy)
    return seen


def test_a_refresh_reads_no_row_a_compaction_only_moved(tmp_path, threads, monkeypatch) -> None:
    """A compaction of parts the version served holds (`neardup index compact`) is served
    without reading its rows; one that merged a part the service never served (an append
    committed since) is read, and its rows a document here matches are linked."""
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee cat"), ("b", "dog eel fox")], parts=2)
    seen = _spy_linked(monkeypatch)

    async def run() -> list:
        service = await _flushing(tmp_path, url, compact_rows=0)
        out: list = []
        try:
            await service.register([NewDoc("s", "gnu eel ant dog", {})])
            compact_index(url, neardup="test")  # the two batch parts, known: one part
            assert await service.refresh_index()
            out.append((seen[-1], service.stats()["index_parts"], service.index.linked))
            write_index(url, [("c", "gnu eel ant dog cat")])  # an append, then compacted
            compact_index(url, neardup="test")
            assert await service.refresh_index()
            out.append((len(seen[-1]), service.stats()["index_parts"], service.index.linked))
            out.append(await service.query(["gnu eel ant dog"], None, None))
        finally:
            await service.close()
        return out

    out = asyncio.run(run())
    assert out[0] == ([], 1, 0)  # nothing read
    assert out[1] == (1, 1, 1)  # the part holding c read, c linked to s
    assert out[2] == [(2, [("s", 1.0, "c"), ("c", 0.75, "c")])]


@pytest.mark.parametrize("by", ["service", "neardup index compact"])
def test_the_one_rule_holds_for_a_flushed_row_deleted_then_compacted(tmp_path, threads, by) -> None:
    """A flushed document whose row `neardup index delete` deleted, the part then compacted
    (the deleted row dropped) before the service served either version: the service deletes
    its document at the refresh, as it does without the compaction. By the service's own
    compaction (the versions between read one by one), or by `neardup index compact`, which
    removes the deletion vector with its part at once (every own id checked by id then)."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        service = await _flushing(tmp_path, url)
        try:
            await service.register([NewDoc("x", "ant bee cat", {}), NewDoc("z", "dog", {})])
            await service.flush()
            delete_ids(url, ["x"])
            if by == "service":
                assert await _compact(service, every=True) == 1  # served by its refresh
            else:
                compact_index(url, neardup="test")
                assert await service.refresh_index()
            with pytest.raises(NotFound):
                await service.document("x")
            await service.flush()  # (the one the rule started: settled)
            stats = service.stats()
            own = sorted(i for _, ids, _ in service.store.iter_signatures(100) for i in ids)
            return [own, stats["documents"],
                    stats["indexed_documents"], stats["index_parts"]]  # fmt: skip
        finally:
            await service.close()

    assert asyncio.run(run()) == [["z"], 1, 1, 1]
    assert _rows(url) == {"y": 1, "z": 1}


def test_a_deleted_flushed_document_stays_hidden_when_its_row_is_compacted(
    tmp_path, threads
) -> None:
    """A flushed document deleted (its row hidden until the next flush) whose row the service's
    compaction moves into a new part: still never answered, counted once; the next flush
    deletes the row from the compacted part."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        service = await _flushing(tmp_path, url)
        out: list = []
        try:
            await service.register([NewDoc("x", "ant bee cat dog", {}), NewDoc("z", "one", {})])
            await service.flush()
            await service.delete("x")
            assert await _compact(service, every=True) == 1
            out.append((sorted(service.served.hidden), service.stats()["index_parts"]))
            out.append(await service.query(["ant bee cat dog"], None, None))
            stats = service.stats()
            out.append((stats["documents"], stats["indexed_documents"]))
            await service.flush()
            out.append((sorted(service.served.hidden), service.stats()["part_compactions"]))
        finally:
            await service.close()
        return out

    out = asyncio.run(run())
    assert out == [(["x"], 1), [(0, [])], (1, 1), ([], 1)]
    assert _rows(url) == {"y": 1, "z": 1}


def test_a_flush_committed_not_recorded_then_compacted_is_adopted(
    tmp_path, threads, monkeypatch
) -> None:
    """The service commits a flush and dies before recording it; its part is then compacted
    away (`neardup index compact`): the next start still adopts the commit (the version it
    names lists its file: versions never change), so nothing is written twice."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    real = SQLiteStore.set_flush_state

    def dies(self, values, clear_deletes=0):
        if "committed" in values:
            raise OSError("killed")
        return real(self, values, clear_deletes)

    async def run() -> list:
        service = await _flushing(tmp_path, url, compact_rows=0)
        await service.register([NewDoc("p", "ant bee cat", {}), NewDoc("q", "dog", {})])
        with monkeypatch.context() as patched:
            patched.setattr(SQLiteStore, "set_flush_state", dies)
            with pytest.raises(OSError):
                await service.flush()
        await _crash(service)
        compact_index(url, neardup="test")
        service = await _flushing(tmp_path, url)
        try:
            stats = service.stats()
            return [await service.flush(), stats["unflushed"], stats["documents"],
                    stats["indexed_documents"]]  # fmt: skip
        finally:
            await service.close()

    assert asyncio.run(run()) == [None, 0, 2, 1]
    assert _rows(url) == {"p": 1, "q": 1, "y": 1}


def test_a_compaction_losing_the_commit_race_is_tried_again_not_failed(
    tmp_path, threads, monkeypatch
) -> None:
    """A batch append commits while the compaction's part is written: the compaction's commit
    loses, its part is removed (no leftover), nothing is counted as failed, and the next try
    compacts on the new version."""
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee"), ("b", "cat dog")], parts=2)

    async def run() -> list:
        service = await _flushing(tmp_path, url, compact_rows=0)
        out: list = []
        try:
            compactor = compaction_module.Compactor(service, service.flusher)
            real = compactor.write

            async def racing(job: dict) -> Any:
                written = await real(job)
                write_index(url, [("c", "eel fox")])  # commits the version it wrote against
                return written

            compactor.write = racing
            out.append(await _compact_with(compactor))
            out.append((compactor.done, compactor.failed, DocIndex.open(url).version))
            out.append([x.path for x in index_leftovers(DocIndex.open(url))])
            compactor.write = real
            out.append(await _compact_with(compactor))
            out.append((compactor.done, compactor.failed, len(DocIndex.open(url).parts)))
        finally:
            await service.close()
        return out

    out = asyncio.run(run())
    assert out == [False, (0, 0, 3), [], True, (1, 0, 1)]
    assert _rows(url) == {"a": 1, "b": 1, "c": 1}


def _every(parts: list, *_: Any) -> list:
    """A policy merging every part of the index into one (the worst case for the service)."""
    return list(parts) if len(parts) > 1 else []


async def _compact_with(compactor: compaction_module.Compactor) -> bool:
    """One compaction by ``_every`` (patched while it runs: never nested)."""
    real = compaction_module.compaction_group
    compaction_module.compaction_group = _every
    try:
        return await compactor.compact()
    finally:
        compaction_module.compaction_group = real


def test_a_failing_compaction_is_counted_and_the_service_goes_on(
    tmp_path, threads, monkeypatch
) -> None:
    """The background compaction fails (its writer raises): logged and counted in
    ``part_compactions_failed``; registrations, queries and flushes go on."""
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee"), ("b", "cat dog")], parts=2)

    async def broken(job: dict) -> Any:
        raise compaction_module.CompactionFailed("exit 1: disk on fire")

    monkeypatch.setattr(compaction_module, "write_in_child", broken)

    async def run() -> list:
        service = await _flushing(tmp_path, url, compact_parts=2)  # the two parts: due
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while service.stats()["part_compactions_failed"] == 0:
                assert asyncio.get_running_loop().time() < deadline, "no compaction tried"
                await asyncio.sleep(0.05)
            await service.register([NewDoc("x", "eel fox gnu", {})])
            version = await service.flush()
            stats = service.stats()
            # (another try after RETRY_SECONDS fails too, on a slow machine)
            return [version, stats["part_compactions"], stats["part_compactions_failed"] >= 1,
                    stats["documents"], stats["index_parts"]]  # fmt: skip
        finally:
            await service.close()

    assert asyncio.run(run()) == [3, 0, True, 1, 3]


def test_close_abandons_a_compaction_under_way(tmp_path, threads, monkeypatch) -> None:
    """The service closes while a compaction's part is being written: it stops without
    waiting for it, commits nothing of it (the flush at shutdown commits), and the index is
    whole and readable."""
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee"), ("b", "cat dog")], parts=2)
    started, go = threading.Event(), threading.Event()

    def paused(job: dict) -> Any:
        started.set()
        go.wait(60)
        return compaction_module.write_compacted(job)

    async def in_thread(job: dict) -> Any:
        return await asyncio.to_thread(paused, job)

    monkeypatch.setattr(compaction_module, "write_in_child", in_thread)

    async def run() -> list:
        service = await _flushing(tmp_path, url, compact_parts=2)
        await service.register([NewDoc("x", "eel fox gnu", {})])
        assert await asyncio.to_thread(started.wait, 60)
        await asyncio.wait_for(service.close(), 30)
        return [service.compactor.done]

    try:
        assert asyncio.run(run()) == [0]
    finally:
        go.set()
    index = DocIndex.open(url)
    assert [p.run.get("mode") for p in index.parts] == ["append", "append", "append"]
    assert index_info(url)["rows"] == 3
    assert _rows(url) == {"a": 1, "b": 1, "x": 1}


def test_a_compaction_cancelled_while_it_commits_keeps_what_it_committed(
    tmp_path, threads, monkeypatch
) -> None:
    """The service closes while a compaction's commit runs: the close waits for the commit
    (never left running once the flush lock is released), and a commit that succeeded is
    never undone (its part's files stay: the version lists them)."""
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee"), ("b", "cat dog")], parts=2)
    started, go = threading.Event(), threading.Event()
    real = compaction_module.commit_compaction

    def paused(*args: Any, **kwargs: Any) -> int:
        started.set()
        go.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(compaction_module, "commit_compaction", paused)

    async def run() -> int:
        service = await _flushing(tmp_path, url, compact_parts=2)
        assert await asyncio.to_thread(started.wait, 60)
        closing = asyncio.create_task(service.close())
        await asyncio.sleep(0.2)  # the compaction cancelled while its commit waits
        go.set()
        await asyncio.wait_for(closing, 60)
        return service.compactor.done

    try:
        assert asyncio.run(run()) == 1
    finally:
        go.set()
    info = index_info(url)  # every listed file there
    assert (info["rows"], info["parts_total"]) == (2, 1)
    assert _rows(url) == {"a": 1, "b": 1}


def test_the_child_process_writes_the_part_the_thread_would(tmp_path) -> None:
    """``write_in_child`` (a real child process) writes the part ``write_compacted`` writes
    for a job, and its failure is CompactionFailed with the child's last line."""
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee"), ("b", "cat dog"), ("c", "eel")], parts=3)
    index = DocIndex.open(url)
    job = {"url": url, "version": index.version, "parts": [p.name for p in index.parts[:2]],
           "run": {"mode": "compact"}}  # fmt: skip
    part = asyncio.run(compaction_module.write_in_child(job))
    assert part is not None and part["rows"] == 2 and part["run"] == {"mode": "compact"}
    assert part["name"].startswith(f"p{index.version + 1:08d}-")
    with pytest.raises(compaction_module.CompactionFailed, match="no version 9"):
        asyncio.run(compaction_module.write_in_child({**job, "version": 9}))


def test_replicas_compact_one_at_a_time_and_all_serve_the_result(tmp_path, threads, pg_url) -> None:
    """Two replicas on one PostgreSQL store flushing into one index: asked to compact at once,
    one does (the flush lock), the other finds it taken or nothing left; both then serve the
    compacted version and answer alike; every document is a row once."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        a = await _replica(pg_url, url, **COMPACTING, compact_rows=0)
        b = await _replica(pg_url, url, **COMPACTING, compact_rows=0)
        out: list = []
        try:
            for name, text in (("p", "ant bee cat dog"), ("q", "one two"), ("r", "ant bee cat")):
                await a.register([NewDoc(name, text, {})])
                version = await a.flush()
            await _settled(a, b, version=version)
            both = [compaction_module.Compactor(s, s.flusher) for s in (a, b)]
            with pytest.MonkeyPatch.context() as patched:
                patched.setattr(compaction_module, "compaction_group", _every)
                out.append(sorted(await asyncio.gather(*(c.compact() for c in both))))
            latest = DocIndex.open(url).version
            await _settled(a, b, version=latest)
            out.append([(s.stats()["index_parts"], s.served.version == latest) for s in (a, b)])
            out.append([await s.query(["ant bee cat dog"], None, None) for s in (a, b)])
            out.append([(s.stats()["documents"], s.stats()["indexed_documents"]) for s in (a, b)])
        finally:
            await a.close()
            await b.close()
        return out

    out = asyncio.run(run())
    assert out[0] == [False, True]
    assert out[1] == [(1, True), (1, True)]
    assert out[2][0] == out[2][1]
    assert out[3] == [(3, 1), (3, 1)]
    assert _rows(url) == {"p": 1, "q": 1, "r": 1, "y": 1}


#: The server, reduced to what starts a compaction's child: its job's pipe is the test's
#: (``argv[1]``), which the test keeps open, so the child waits for its job after the server
#: is gone unless it dies with it.
_SERVER = (
    "import os, subprocess, sys, time\n"
    "from neardup.app.service.compaction import CHILD\n"
    "subprocess.Popen([sys.executable, '-c', CHILD, str(os.getpid())], stdin=int(sys.argv[1]))\n"
    "time.sleep(600)\n"
)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")  # (a zombie: dead, not reaped by whoever adopted it)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_compaction_child_dies_with_a_server_killed_alone(tmp_path) -> None:
    """SIGKILL to the server alone (not its process group) while its compaction's child
    runs: the child ends too (prctl's parent-death signal, or its own check if the server
    died before it asked for it), not left writing a part that nobody commits. Its job's
    pipe stays open here, so without either it would wait for ever."""
    read, write = os.pipe()
    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(read)], pass_fds=(read,))
    os.close(read)
    child = None
    try:
        deadline = time.monotonic() + 120  # (a loaded machine: generous)
        while not (found := compaction_children(server.pid)):
            assert time.monotonic() < deadline and server.poll() is None, "no child started"
            time.sleep(0.05)
        [child] = found
        server.kill()
        server.wait(60)
        deadline = time.monotonic() + 120
        while not _gone(child):
            assert time.monotonic() < deadline, "the compaction's child outlived its server"
            time.sleep(0.05)
    finally:
        if server.poll() is None:
            server.kill()
        if child is not None and not _gone(child):
            os.kill(child, signal.SIGKILL)
        os.close(write)
