"""The service writing its own documents into the index it serves (app/service/flush.py): a
service that flushed answers as one that did not (same documents: matches, counts, roots,
members, stats), the flushed documents are rows of the index a batch run reads (once each,
after a crash at any step too), deletes and replaces of flushed documents take their rows out
at the next flush (hidden meanwhile; a stale deletion never deletes a new row), and a commit
lost to another run is retried on its version."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from neardup.app.config import Settings
from neardup.app.service import NewDoc, Service
from neardup.app.service import compaction as compaction_module
from neardup.app.service import flush as flush_module
from neardup.app.service import operations as operations_module
from neardup.app.service.flush import Mark
from neardup.app.service.store import SQLiteStore
from neardup.core.engine import DocIndex, IndexConflictError, delete_ids, index_info, text_digest
from tests.app.service.cluster_reads import answers_as_memory
from tests.app.service.test_served import (
    IDS,
    PARAMS,
    WORDS,
    _apply,
    _state,
    deduplicated,
    threads,
    write_index,
)

__all__ = ["threads"]  # the fixture, imported for the tests below

#: Flushed only when asked (``Service.flush``) and at shutdown.
ON_DEMAND = {"flush_rows": 0, "flush_seconds": 1e9}
#: The index read only: no flush at all.
READ_ONLY = {"flush_rows": 0, "flush_seconds": 0}
#: Parts compacted two of a tier at a time (the flushing service of the comparisons below).
COMPACTING = {"compact_parts": 2}
#: What /v1/stats must say alike whether the service flushed or not.
COUNTS = ("documents", "indexed_documents", "indexed_linked", "clusters", "duplicates")


@pytest.fixture(autouse=True)
def compact_in_threads(monkeypatch):
    """A compaction's part written in a thread of the test process (the service's code, core's
    writer), not a child process."""

    async def in_thread(job: dict) -> dict | None:
        return await asyncio.to_thread(compaction_module.write_compacted, job)

    monkeypatch.setattr(compaction_module, "write_in_child", in_thread)


async def _compact(service: Service, every: bool = False) -> int:
    """Compact until the policy finds nothing (or the flush lock is taken); with ``every``, by
    a policy merging every part of the index into one (a compaction's worst case for the
    service: every part it knows dropped at once). How many compactions were committed."""
    real = compaction_module.compaction_group
    if every:
        compaction_module.compaction_group = lambda parts, *_: list(parts) if len(parts) > 1 else []
    done = 0
    try:
        while service.compactor is not None and await service.compactor.compact():
            done += 1
    finally:
        compaction_module.compaction_group = real
    return done


async def _start(data: Path, url: str, **more: Any) -> Service:
    return await Service.start(Settings(workers=1, data_dir=data, index=url, **PARAMS, **more))


async def _crash(service: Service) -> None:
    """Stop ``service`` as a kill would leave it: no flush at shutdown (the store and the pool
    are closed, the index is as the last flush left it)."""
    service.settings = service.settings.model_copy(update=READ_ONLY)
    await service.close()


def _rows(url: str) -> dict[str, int]:
    """How many live rows of each id the index holds, read as a batch run reads it."""
    index = DocIndex.open(url)
    counts: dict[str, int] = {}
    for ids, _ in index.signature_batches(index.parts):
        for doc_id in ids:
            counts[doc_id] = counts.get(doc_id, 0) + 1
    return counts


texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(" ".join)


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    """Indexed documents (deduplicated), then registrations, PUTs, DELETEs, queries, flushes,
    restarts, compactions and drops (``neardup index delete`` of several ids' rows: ``_drop``)."""
    ids = draw(st.permutations(IDS))
    indexed = deduplicated([(i, draw(texts)) for i in ids[: draw(st.integers(0, 6))]])
    ops: list[tuple] = []
    made: set[str] = set()
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["register", "register", "if_new", "put", "delete", "query",
                                     "flush", "flush", "restart", "compact", "drop",
                                     "drop"]))  # fmt: skip
        if kind == "drop":  # mostly ids registered before
            pool = sorted(made) or ids
            ops.append((kind, draw(st.lists(st.sampled_from(pool), min_size=1,
                                            max_size=len(pool), unique=True))))  # fmt: skip
        elif kind in ("register", "if_new"):
            chosen = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=4, unique=True))
            made.update(chosen)
            ops.append((kind, [(i, draw(texts)) for i in chosen]))
        elif kind == "put":
            ops.append((kind, draw(st.sampled_from(ids)), draw(texts)))
        elif kind == "delete":
            ops.append((kind, draw(st.sampled_from(ids))))
        elif kind == "query":
            ops.append((kind, [draw(texts)], draw(st.sampled_from([None, 0.5, 0.75]))))
        else:
            ops.append((kind,))
    return {"indexed": indexed, "ops": ops}


async def _drop(service: Service, url: str, ids: list[str], batch: int = 2) -> list[str]:
    """A flush, then ``neardup index delete`` of the rows of those of ``ids`` that are
    ``service``'s own flushed documents, then that version served: the service deletes them too
    (``_drop_overruled``, ``batch`` a store write, so one cluster's members may go in one
    write or in two), and a flush follows (awaited). The ids so deleted."""
    flusher = service.flusher
    assert flusher is not None
    await service.flush()  # flushed, and that version served: its documents are rows
    await service.refresh_index()
    numbered = service.store.numbered(ids)  # (flushed documents: memory may not hold them)
    own = [i for i in ids if i in numbered and numbered[i][0] <= flusher.served_through]
    if not own:
        return []
    for _ in range(50):  # a background compaction may commit first: as a user would, again
        try:
            await asyncio.to_thread(delete_ids, url, own)
            break
        except IndexConflictError:
            await asyncio.sleep(0.05)
    real = operations_module.OVERRULED_BATCH
    operations_module.OVERRULED_BATCH = batch
    try:
        assert await service.refresh_index()
    finally:
        operations_module.OVERRULED_BATCH = real
    if flusher._sized is not None:
        await flusher._sized
    return own


async def _counts(service: Service, linked: bool = True) -> dict[str, int]:
    """The counts; ``linked`` False: those both services of ``_compared`` give alike (not
    ``indexed_linked``, the indexed documents memory holds, which a flushing service lets go
    with the flushed documents they are linked to)."""
    stats = await service.read_stats()
    return {k: stats[k] for k in COUNTS if linked or k != "indexed_linked"}


async def _compared(tmp: Path, spec: dict, flush: dict[str, Any]) -> tuple[list, list]:
    """Run ``spec`` on a service flushing with the settings ``flush`` (index ``tmp/a``) and on
    a read-only one (a copy, ``tmp/b``): every answer and the counts after each operation,
    then the state of every id, of each. A "flush" step flushes on demand (or, flushing in the
    background, lets a background flush go on); "restart" restarts the flushing service;
    "drop" (flushing on demand) deletes some of its flushed documents' rows from the index
    (``_drop``), which the read-only one deletes by DELETE;
    "compact" compacts its index (parts merged two of a tier at a time: ``COMPACTING``, in the
    background too, after every version served). Once both are closed, every document is in
    index ``a`` once, and the index is readable (``neardup index info``)."""
    write_index(str(tmp / "a"), [*spec["indexed"], ("zz", "unused words here")], parts=2)
    shutil.copytree(tmp / "a", tmp / "b")
    names = {i for i, _ in spec["indexed"]} | {"zz"}
    got: list[Any] = []
    want: list[Any] = []
    flush = {**flush, **COMPACTING}
    flushing = await _start(tmp / "fa", str(tmp / "a"), **flush)
    reading = await _start(tmp / "fb", str(tmp / "b"), **READ_ONLY)
    try:
        for op in spec["ops"]:
            if op[0] == "flush" and flush["flush_rows"] == 0:
                await flushing.flush()
            elif op[0] == "compact":
                event(f"compacted: {await _compact(flushing, every=True) > 0}")
            elif op[0] == "flush":
                await asyncio.sleep(0)  # let a background flush go on
            elif op[0] == "restart":
                await flushing.close()
                flushing = await _start(tmp / "fa", str(tmp / "a"), **flush)
            elif op[0] == "drop":  # flushed rows deleted by the index: as DELETEs here
                dropped = (
                    [] if flush["flush_rows"] else await _drop(flushing, str(tmp / "a"), op[1])
                )
                for doc_id in dropped:
                    await reading.delete(doc_id)
                event(f"dropped: {len(dropped)}")
            else:
                got.append(await _apply(flushing, op, names))
                want.append(await _apply(reading, op, names))
            got.append(await _counts(flushing, linked=False))
            want.append(await _counts(reading, linked=False))
            # Each one's cluster answers, read from its store's tables, are the memory's of
            # the one holding every document (the flushing one's let them go).
            await answers_as_memory(flushing, [*IDS, "zz"], reading)
            await answers_as_memory(reading, [*IDS, "zz"])
        got.append(await _state(flushing, [*IDS, "zz"]))
        want.append(await _state(reading, [*IDS, "zz"]))
    finally:
        await flushing.close()
        await reading.close()
    assert all(n == 1 for n in _rows(str(tmp / "a")).values())
    index_info(str(tmp / "a"))  # every listed file there and whole
    return got, want


@given(spec=scenarios())
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_service_that_flushed_answers_as_one_that_did_not(
    tmp_path_factory, threads, spec
) -> None:
    tmp = tmp_path_factory.mktemp("flush")

    async def run() -> tuple[list, list]:
        got, want = await _compared(tmp, spec, ON_DEMAND)
        # Closed: everything is flushed, and what was deleted is not in the index.
        rows = _rows(str(tmp / "a"))
        reopened = await _start(tmp / "fa", str(tmp / "a"), **READ_ONLY)
        try:
            own = {i for _, ids, _ in reopened.store.iter_signatures(1000) for i in ids}
        finally:
            await reopened.close()
        assert set(rows) - {i for i, _ in spec["indexed"]} - {"zz"} == own
        return got, want

    got, want = asyncio.run(run())
    assert got == want


#: Flushed in the background after every write: flushes overlap the operations that follow.
EVERY_WRITE = {"flush_rows": 1, "flush_seconds": 0}


@given(spec=scenarios())
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_service_flushing_in_the_background_answers_as_one_that_did_not(
    tmp_path_factory, threads, spec
) -> None:
    """Every answer and count between operations, whatever a background flush is doing then
    (taking its batch, writing, committed but not served yet): those of the read-only one."""
    tmp = tmp_path_factory.mktemp("background")
    got, want = asyncio.run(_compared(tmp, spec, EVERY_WRITE))
    assert got == want


def test_a_flush_writes_a_part_a_batch_run_reads(tmp_path, threads) -> None:
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        try:
            await service.register([NewDoc("b", "ant bee cat dog", {}), NewDoc("c", "cat", {})])
            before = (service.unflushed(), service.stats()["indexed_documents"])
            version = await service.flush()
            after = service.stats()
            again = await service.flush()  # nothing new
            [(count, best)] = await service.query(["ant bee cat dog"], None, None)
            return [before, version, again, after["unflushed"], after["index_version"],
                    after["indexed_documents"], after["documents"], (count, best)]  # fmt: skip
        finally:
            await service.close()

    assert asyncio.run(run()) == [(2, 1), 2, None, 0, 2, 1, 2, (1, [("b", 1.0, "b")])]
    index = DocIndex.open(url)
    [own] = [p for p in index.parts if p.run.get("engine") == "service"]
    assert (own.run["from"], own.run["through"], own.run["deletes_through"]) == (0, 1, 0)
    assert len(own.run["store"]) == 32 and own.rows == 2
    assert _rows(url) == {"b": 1, "c": 1, "y": 1}
    assert sorted(index.id_digests(["b", "c"])) == ["b", "c"]


async def _flush_killed_before_recording(service: Service, monkeypatch) -> None:
    """A flush that commits, then dies before the store records it (the attempt recorded
    before the commit is all the store knows)."""
    real = SQLiteStore.set_flush_state

    def dies(self, values, clear_deletes=0):
        if "committed" in values:
            raise OSError("killed")
        return real(self, values, clear_deletes)

    with monkeypatch.context() as patched:
        patched.setattr(SQLiteStore, "set_flush_state", dies)
        with pytest.raises(OSError):
            await service.flush()
    await _crash(service)


def test_a_flush_committed_but_not_recorded_is_not_written_again(
    tmp_path, threads, monkeypatch
) -> None:
    """Killed between the commit and recording it: the attempt recorded before the commit is
    adopted at the next start (the index lists its file), so nothing is written twice."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> tuple:
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        await service.register([NewDoc("b", "ant bee cat dog", {})])
        await service.delete("b")  # not flushed yet: nothing for the index to delete
        await service.register([NewDoc("b", "ant bee cat dog", {}), NewDoc("c", "cat", {})])
        await _flush_killed_before_recording(service, monkeypatch)
        versions = DocIndex.open(url).version
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        try:
            return versions, await service.flush(), service.unflushed()
        finally:
            await service.close()

    assert asyncio.run(run()) == (2, None, 0)
    assert _rows(url) == {"b": 1, "c": 1, "y": 1}


def test_numbers_flushed_are_never_given_again(tmp_path, threads) -> None:
    """The store's largest number deleted, then a restart: the next document is numbered after
    every flushed one, so it is flushed too."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> int | None:
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        await service.register([NewDoc("b", "ant bee cat dog", {}), NewDoc("c", "cat", {})])
        await service.flush()
        await service.delete("c")
        await service.close()
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        try:
            await service.register([NewDoc("d", "one two three", {})])
            return await service.flush()
        finally:
            await service.close()

    assert asyncio.run(run()) == 4
    assert _rows(url) == {"b": 1, "d": 1, "y": 1}


def test_a_part_written_but_not_committed_is_written_again(tmp_path, threads, monkeypatch):
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    real = flush_module.commit_flush
    calls: list[int] = []

    def fails_once(written, params):
        calls.append(1)
        if len(calls) == 1:
            raise OSError("killed before the commit")
        return real(written, params)

    monkeypatch.setattr(flush_module, "commit_flush", fails_once)

    async def run() -> tuple:
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        await service.register([NewDoc("b", "ant bee cat dog", {})])
        with pytest.raises(OSError):
            await service.flush()
        await _crash(service)
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        try:
            return service.unflushed(), await service.flush(), service.unflushed()
        finally:
            await service.close()

    assert asyncio.run(run()) == (1, 2, 0)
    assert _rows(url) == {"b": 1, "y": 1}


def test_deleted_and_replaced_flushed_documents_leave_the_index(
    tmp_path, threads, monkeypatch
) -> None:
    """Until the next flush their rows are hidden (not matched, not found by id, never linked
    as indexed documents); the flush deletes them; an id deleted and registered again keeps
    its new row, also when the deletion is replayed after a crash."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        out: list[Any] = []
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        docs = [("b", "ant bee cat dog"), ("c", "one two three four"), ("d", "five six seven")]
        await service.register([NewDoc(i, t, {}) for i, t in docs])
        await service.flush()
        await service.register([NewDoc("e", "ant bee cat dog", {})])  # b's copy, not flushed
        await service.delete("b")  # its row must not come back, linked to e
        await service.replace(NewDoc("c", "cat dog eel fox", {}))
        await service.delete("d")
        await service.register([NewDoc("d", "five six seven", {})])  # again, the same text
        out.append(await service.query(["ant bee cat dog", "one two three four"], None, None))
        out.append(await service.digests(["b"]))
        [again] = await service.register([NewDoc("b", "other words", {})])
        out.append(again.status)
        await service.delete("b")
        out.append(service.index.linked)
        out.append(service.stats()["indexed_documents"])
        await _flush_killed_before_recording(service, monkeypatch)
        service = await _start(tmp_path / "data", url, **ON_DEMAND)  # the deletes replayed
        try:
            out.append(await service.flush())
        finally:
            await service.close()
        return out

    assert asyncio.run(run()) == [
        [(1, [("e", 1.0, "e")]), (0, [])], {}, "created", 0, 1, None,
    ]  # fmt: skip
    index = DocIndex.open(url)
    assert _rows(url) == {"c": 1, "d": 1, "e": 1, "y": 1}
    assert index.id_digests(["c"]) == {"c": _digest("cat dog eel fox")}


def _digest(text: str) -> bytes:
    from neardup.core.engine import text_digest

    return text_digest(text)[:16]


def test_a_flushed_document_replaced_by_a_near_copy_never_matches_its_old_row(
    tmp_path, threads
) -> None:
    """PUT of a flushed document with a text near its old one: its old row (hidden from
    then on, but looked up before) is never linked as an indexed document of the same id."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        try:
            await service.register([NewDoc("p", "ant bee cat dog eel", {})])
            await service.flush()
            replaced = await service.replace(NewDoc("p", "ant bee cat dog", {}))
            out = [replaced.matches, await service.query(["ant bee cat dog"], None, None)]
            out.append(await _counts(service))
            await service.flush()
            out.append(await _counts(service))
            return out
        finally:
            await service.close()

    found, query, before, after = asyncio.run(run())
    assert (found.count, query) == (0, [(1, [("p", 1.0, "p")])])
    assert before == after == {"documents": 1, "indexed_documents": 1, "indexed_linked": 0,
                               "clusters": 0, "duplicates": 0}  # fmt: skip
    assert _rows(url) == {"p": 1, "y": 1}


def test_a_commit_lost_to_a_batch_run_is_written_again_on_its_version(
    tmp_path, threads, monkeypatch
) -> None:
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    real = flush_module.write_flush
    raced: list[int] = []

    def racing(*args):
        written = real(*args)
        if not raced:  # a batch run commits while the flush writes
            raced.append(1)
            write_index(url, [("x", "gnu gnu gnu")])
        return written

    monkeypatch.setattr(flush_module, "write_flush", racing)

    async def run() -> tuple:
        async with asyncio.timeout(120):
            service = await _start(tmp_path / "data", url, **ON_DEMAND)
            try:
                await service.register([NewDoc("b", "ant bee cat dog", {})])
                return await service.flush(), service.stats()["index_version"]
            finally:
                await service.close()

    assert asyncio.run(run()) == (3, 3)
    assert _rows(url) == {"b": 1, "x": 1, "y": 1}
    assert not [p for p in (Path(url) / "parts").iterdir() if not (p / "_committed").exists()]


def test_flushing_by_size_runs_in_the_background(tmp_path, threads) -> None:
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> int:
        service = await _start(tmp_path / "data", url, flush_rows=2, flush_seconds=0)
        try:
            await service.register([NewDoc("b", "ant bee cat dog", {}), NewDoc("c", "cat", {})])
            for _ in range(1200):
                if service.flushes:
                    break
                await asyncio.sleep(0.05)
            return service.unflushed()
        finally:
            await service.close()

    assert asyncio.run(run()) == 0
    assert _rows(url) == {"b": 1, "c": 1, "y": 1}


def test_a_shared_store_flushes_one_replica_at_a_time_by_the_same_settings() -> None:
    shared = Settings(store_url="postgresql://u@h/db", index="idx", flush_rows=5)
    assert shared.flushes and Settings(store_url="postgresql://u@h/db", index="idx").flushes
    assert not Settings(store_url="postgresql://u@h/db", index="idx", **READ_ONLY).flushes
    assert Settings(index="idx").flushes and not Settings(index="idx", **READ_ONLY).flushes


def test_the_store_records_deletes_of_flushed_documents_only(tmp_path) -> None:
    store = SQLiteStore(tmp_path)
    try:
        from neardup.app.service.store import StoredDoc

        store.add_documents([StoredDoc(n, f"d{n}", b"x" * 32, b"s", {}, None) for n in range(3)])
        store.delete_document(0)  # nothing flushed: nothing recorded
        store.index_deletes_through = 1
        store.delete_document(1)
        store.delete_document(2)  # numbered after the flush: not in the index
        assert store.index_deletes() == [(1, "d1", b"x" * 32, 1)]
        store.set_flush_state({"k": "v"}, clear_deletes=1)
        assert store.index_deletes() == [] and store.flush_state() == {"k": "v"}
    finally:
        store.close()
    assert flush_module.Mark.from_json(flush_module.Mark(2, "t", 5, 1).as_json()) == (
        flush_module.Mark(2, "t", 5, 1)
    )


def _hold_writes(store: Any) -> tuple[threading.Event, threading.Event]:
    """Make the next write transaction of ``store`` wait, on the service's write thread and
    holding the store's write lock (SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's write lock),
    until the second event is set; the first is set once it waits."""
    holding, release = threading.Event(), threading.Event()
    name = "_transaction" if isinstance(store, SQLiteStore) else "_write"
    real = getattr(store, name)

    @contextmanager
    def held() -> Iterator[Any]:
        with real() as opened:
            if not holding.is_set():
                holding.set()
                release.wait(120)
            yield opened

    setattr(store, name, held)
    return holding, release


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_flushed_document_is_read_while_a_write_holds_the_store(
    tmp_path, threads, kind, request
) -> None:
    """A flushed document memory let go is answered (``GET /v1/documents/{id}``: meta,
    cluster; its web page: text, matches) while a registration's write holds the store's
    write thread and lock: read on the read connection, never queued behind the write."""
    from neardup.app.service.lookups import document_view

    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        if kind == "sqlite":
            service = await _start(tmp_path / "data", url, **ON_DEMAND)
        else:
            service = await _replica(request.getfixturevalue("pg_url"), url)
        out: list = []
        release = threading.Event()
        try:
            docs = [NewDoc("p", "ant bee cat dog", {"m": 1}), NewDoc("q", "ant bee cat", {})]
            await service.register(docs)
            await service.flush()
            while service._evicting is None or not service._evicting.done():
                await asyncio.sleep(0.01)
            out.append(("p" in service.index, "q" in service.index))
            holding, release = _hold_writes(service.store)
            writing = asyncio.create_task(service.register([NewDoc("r", "one two three", {})]))
            while not holding.is_set():
                await asyncio.sleep(0.01)
            out.append(await asyncio.wait_for(service.document("p"), 60))
            out.append(await asyncio.wait_for(service.texts(["p", "q"]), 60))
            view = await asyncio.wait_for(document_view(service, "p"), 60)
            out.append((view.cluster, view.cluster_size, view.text, [m.id for m in view.matches]))
            out.append(writing.done())  # the write still held while all of that was answered
            release.set()
            out.append((await writing)[0].status)
            out.append(await service.document("r"))
        finally:
            release.set()
            await service.close()
        return out

    assert asyncio.run(run()) == [
        (False, False),
        ("p", "p", {"m": 1}, False),
        {"p": "ant bee cat dog", "q": "ant bee cat"},
        ("p", 2, "ant bee cat dog", ["q"]),
        False,
        "created",
        ("r", "r", {}, False),
    ]


def test_writes_while_a_flush_is_written_are_exact(tmp_path, threads, monkeypatch) -> None:
    """A registration, a deletion and a replace of documents of a flush being written (off the
    write lock): the registration waits for no flush and is flushed next; the deleted and
    replaced documents' rows, written by the flush, are hidden once it commits and deleted by
    the next flush."""
    import threading

    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    real = flush_module.write_flush
    writing, release = threading.Event(), threading.Event()

    def paused(*args):
        writing.set()
        release.wait(120)
        return real(*args)

    monkeypatch.setattr(flush_module, "write_flush", paused)

    async def run() -> list:
        out: list[Any] = []
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        try:
            docs = [("b", "ant bee cat dog"), ("c", "one two three four")]
            await service.register([NewDoc(i, t, {}) for i, t in docs])
            flushing = asyncio.create_task(service.flush())
            while not writing.is_set():
                await asyncio.sleep(0.01)
            await asyncio.wait_for(service.register([NewDoc("e", "ant bee cat dog", {})]), 60)
            await asyncio.wait_for(service.delete("b"), 60)
            await asyncio.wait_for(service.replace(NewDoc("c", "five six seven", {})), 60)
            out.append(service.stats()["indexed_documents"])  # b and c have no row yet: y's
            release.set()
            out.append(await flushing)
            out.append(sorted(_rows(url)))  # b and c's old rows written, hidden
            out.append(await service.query(["ant bee cat dog", "one two three four"], None, None))
            out.append((service.index.linked, service.unflushed()))
            out.append(service.stats()["indexed_documents"])
            out.append(await service.flush())
        finally:
            release.set()
            await service.close()
        return out

    assert asyncio.run(run()) == [
        1, 2, ["b", "c", "y"], [(1, [("e", 1.0, "e")]), (0, [])], (0, 2), 1, 3,
    ]  # fmt: skip
    assert _rows(url) == {"c": 1, "e": 1, "y": 1}
    assert DocIndex.open(url).id_digests(["c"]) == {"c": _digest("five six seven")}


def test_a_service_restarted_read_only_keeps_its_flushed_rows_its_own(tmp_path, threads) -> None:
    """Flushed, then restarted with both flush settings 0: the flushed rows are still the
    service's (counted once), a DELETE of a flushed document hides its row and is recorded,
    so the flush after flushing is turned on again deletes the row."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        out: list = []
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        await service.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "one two", {})])
        await service.flush()
        await service.close()
        service = await _start(tmp_path / "data", url, **READ_ONLY)
        try:
            out.append(await _stats_of(service))
            await service.register([NewDoc("r", "five six seven", {})])
            await service.delete("p")
            out.append((await _stats_of(service), sorted(service.served.hidden)))
            out.append(await service.query(["ant bee cat dog"], None, None))
        finally:
            await service.close()
        out.append(_rows(url))  # read only: nothing written
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        try:
            out.append(await service.flush())
        finally:
            await service.close()
        return out

    assert asyncio.run(run()) == [
        (2, 1, 0, 0, 0, 0, 2),
        ((2, 1, 0, 0, 0, 1, 2), ["p"]),
        [(0, [])],
        {"p": 1, "q": 1, "y": 1},
        3,
    ]
    assert _rows(url) == {"q": 1, "r": 1, "y": 1}


# --- replicas on one PostgreSQL store, serving (and flushing into) one index ---------------------


async def _replica(pg_url: str, url: str, **more: Any) -> Service:
    settings = Settings(workers=1, store_url=pg_url, index=url, **PARAMS, **{**ON_DEMAND, **more})
    return await Service.start(settings)


async def _settled(*services: Service, version: int) -> None:
    """Wait (generously: a loaded machine) until every replica applied the store's whole log
    and serves ``version`` of the index with nothing left to settle."""
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        heads = [s.store.position() for s in services]
        done = all(
            s.served is not None
            and s.served.version >= version
            and s.flusher is not None
            and s.flusher._settling is None
            for s in services
        )
        if done and len(set(heads)) == 1:
            async with services[0]._writing():  # the head of the log, as the store holds it
                pass
            if all(s.store.position() == services[0].store.position() for s in services):
                return
        assert asyncio.get_running_loop().time() < deadline, "replicas never caught up"
        await asyncio.sleep(0.05)


async def _stats_of(service: Service) -> tuple:
    stats = await service.read_stats()
    return tuple(stats[k] for k in (*COUNTS, "unflushed", "index_version"))


@pytest.mark.parametrize("where", ["local", "s3"])
def test_replicas_on_one_store_flush_each_document_once(
    tmp_path, threads, pg_url, where, request
) -> None:
    """Two replicas on one PostgreSQL store and one index (a local directory, or on S3: moto's
    server, tests/s3.py): one flush commits each batch (the other finds the flush lock taken,
    or nothing left), every document is a row once, and both count the flushed rows as their
    own; a delete of a flushed document on one replica hides its row on the other until
    whichever flushes next commits it; a batch run then reads exactly the live documents."""
    url = str(tmp_path / "idx") if where == "local" else f"{request.getfixturevalue('s3')}/idx"
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        a = await _replica(pg_url, url)
        b = await _replica(pg_url, url)
        out: list = []
        try:
            await a.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "cat", {})])
            await b.register([NewDoc("r", "one two three", {}), NewDoc("s", "ant bee cat", {})])
            versions = await asyncio.gather(a.flush(), b.flush())
            out.append(sorted(v is None for v in versions))
            [version] = [v for v in versions if v is not None]
            await _settled(a, b, version=version)
            out.append(_rows(url))
            out.append((await _stats_of(a), await _stats_of(b)))
            # A delete and a replace of flushed documents, each on one replica.
            await a.delete("p")
            await b.replace(NewDoc("r", "five six seven", {}))
            await _settled(a, b, version=version)
            out.append((sorted(a.served.hidden), sorted(b.served.hidden)))
            out.append(
                [await s.query(["ant bee cat dog", "one two three"], None, None) for s in (a, b)]
            )
            out.append((await _stats_of(a), await _stats_of(b)))
            # The replica that did not delete p flushes: it commits p's deletion too.
            flusher = b if versions[0] is not None else a
            after = await flusher.flush()
            await _settled(a, b, version=after)
            out.append((sorted(a.served.hidden), sorted(b.served.hidden)))
            out.append((await _stats_of(a), await _stats_of(b)))
        finally:
            await a.close()
            await b.close()
        return out

    out = asyncio.run(run())
    assert out[0] == [False, True]  # one flush committed, the other none
    assert out[1] == {"p": 1, "q": 1, "r": 1, "s": 1, "y": 1}
    # documents, indexed_documents, indexed_linked, clusters, duplicates, unflushed, version
    assert out[2] == ((4, 1, 0, 1, 1, 0, 2), (4, 1, 0, 1, 1, 0, 2))
    assert out[3] == (["p", "r"], ["p", "r"])
    neither = [(1, [("s", 0.6875, "s")]), (0, [])]  # p's row hidden, r's old text gone
    assert out[4] == [neither, neither]
    assert out[5] == ((3, 1, 0, 0, 0, 1, 2), (3, 1, 0, 0, 0, 1, 2))
    assert out[6] == ([], [])
    assert out[7] == ((3, 1, 0, 0, 0, 0, 3), (3, 1, 0, 0, 0, 0, 3))
    assert _rows(url) == {"q": 1, "r": 1, "s": 1, "y": 1}
    index = DocIndex.open(url)
    assert index.id_digests(["r"])["r"] == text_digest("five six seven")[:16]


def test_while_one_replica_flushes_another_skips_and_its_deletes_wait(
    tmp_path, threads, pg_url, monkeypatch
) -> None:
    """While replica A writes a flush (paused in the middle), replica B's flush skips at once
    (A holds the flush lock) and writes nothing; B's delete of a document in A's batch is
    recorded by the store: hidden on both once A's flush is served, and its row deleted by
    the next flush (B's)."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    real = flush_module.write_flush
    started, go = threading.Event(), threading.Event()

    def paused(*args):
        started.set()
        assert go.wait(60)
        return real(*args)

    monkeypatch.setattr(flush_module, "write_flush", paused)

    async def run() -> list:
        a = await _replica(pg_url, url)
        b = await _replica(pg_url, url)
        c: Service | None = None
        out: list = []
        try:
            await a.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "one two", {})])
            flushing = asyncio.create_task(a.flush())
            assert await asyncio.to_thread(started.wait, 60)
            out.append(await asyncio.wait_for(b.flush(), 30))  # A holds the lock: skipped
            await asyncio.wait_for(b.delete("q"), 60)  # q is in A's batch
            go.set()
            version = await flushing
            await _settled(a, b, version=version)
            out.append(_rows(url))
            out.append((sorted(a.served.hidden), sorted(b.served.hidden)))
            out.append((await _stats_of(a), await _stats_of(b)))
            c = await _replica(pg_url, url, **READ_ONLY)  # reads the same from the store
            out.append((sorted(c.served.hidden), await _stats_of(c)))
            after = await b.flush()
            await _settled(a, b, c, version=after)
            out.append((version, after))
            out.append((sorted(a.served.hidden), sorted(b.served.hidden), sorted(c.served.hidden)))
            out.append((await _stats_of(a), await _stats_of(b), await _stats_of(c)))
        finally:
            go.set()
            await a.close()
            await b.close()
            if c is not None:
                await c.close()
        return out

    out = asyncio.run(run())
    assert out[0] is None
    assert out[1] == {"p": 1, "q": 1, "y": 1}
    assert out[2] == (["q"], ["q"])
    assert out[3] == ((1, 1, 0, 0, 0, 0, 2), (1, 1, 0, 0, 0, 0, 2))
    assert out[4] == (["q"], (1, 1, 0, 0, 0, 0, 2))  # a replica started now: the same
    assert out[5] == (2, 3)
    assert out[6] == ([], [], [])
    assert out[7] == ((1, 1, 0, 0, 0, 0, 3),) * 3
    assert _rows(url) == {"p": 1, "y": 1}


def _dies_before_recording(real: Any) -> Any:
    """``PostgresStore.set_flush_state`` (``real``) failing to record a commit, as a replica
    killed between its commit and recording it would."""

    def dies(self, values, clear_deletes=0):
        if "committed" in values:
            raise OSError("killed")
        return real(self, values, clear_deletes)

    return dies


def _first_waits(real: Any, started: threading.Event, go: threading.Event, *, after: bool) -> Any:
    """``real`` whose first call waits for ``go`` (``started`` set then): before calling
    ``real``, or ``after`` it returned. Later calls (another replica's) go straight on."""

    def paused(*args):
        first = not started.is_set()
        if first and not after:
            started.set()
            assert go.wait(60)
        result = real(*args)
        if first and after:
            started.set()
            assert go.wait(60)
        return result

    return paused


def test_a_replica_dying_between_its_commit_and_recording_it_is_adopted_by_the_next(
    tmp_path, threads, pg_url, monkeypatch
) -> None:
    """Replica A commits a flush and dies before the store records it: the next flush (B's)
    finds the attempt's file in the version it names, records it, and writes nothing twice."""
    from neardup.app.service.pgstore import PostgresStore

    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    dies = _dies_before_recording(PostgresStore.set_flush_state)

    async def run() -> list:
        a = await _replica(pg_url, url)
        b = await _replica(pg_url, url)
        try:
            await a.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "one two", {})])
            with monkeypatch.context() as patched:
                patched.setattr(PostgresStore, "set_flush_state", dies)
                with pytest.raises(OSError):
                    await a.flush()
            await _crash(a)
            await b.register([NewDoc("r", "five six", {})])
            version = await b.flush()
            await _settled(b, version=version)
            return [version, await _stats_of(b)]
        finally:
            await b.close()

    assert asyncio.run(run()) == [3, (3, 1, 0, 0, 0, 0, 3)]
    assert _rows(url) == {"p": 1, "q": 1, "r": 1, "y": 1}
    index = DocIndex.open(url)
    assert [p.run.get("from") for p in index.parts if p.run.get("engine") == "service"] == [0, 2]


def test_a_replica_that_never_flushes_adopts_a_dead_flushers_commit_at_its_refresh(
    tmp_path, threads, pg_url, monkeypatch
) -> None:
    """Replica A commits a flush and dies before the store records it; replica B never
    flushes (FLUSH_ROWS and FLUSH_SECONDS 0). A batch append then committed is served by B's
    next refresh (no flush needed): B takes the free flush lock, finds the attempt's file in
    the version it names, records the commit, and counts A's rows as the service's, once."""
    from neardup.app.service.pgstore import PostgresStore

    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    dies = _dies_before_recording(PostgresStore.set_flush_state)

    async def run() -> list:
        a = await _replica(pg_url, url)
        b = await _replica(pg_url, url, **READ_ONLY, index_refresh=0)
        out: list = []
        try:
            await a.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "one two", {})])
            with monkeypatch.context() as patched:
                patched.setattr(PostgresStore, "set_flush_state", dies)
                with pytest.raises(OSError):
                    await a.flush()
            await _crash(a)
            write_index(url, [("z", "five six seven")])  # a batch append: version 3
            async with b._writing():  # A's writes applied
                pass
            assert await b.refresh_index()  # at once: no flush needed
            await _settled(b, version=3)
            out.append(await _stats_of(b))
            out.append(Mark.from_json(b.store.flush_state().get("committed")).version)
            a = await _replica(pg_url, url)
            out.append(await a.flush())  # nothing left to write
            await _settled(a, b, version=3)
            out.append((await _stats_of(a), await _stats_of(b)))
        finally:
            await a.close()
            await b.close()
        return out

    assert asyncio.run(run()) == [
        (2, 2, 0, 0, 0, 0, 3), 2, None, ((2, 2, 0, 0, 0, 0, 3),) * 2,
    ]  # fmt: skip
    assert _rows(url) == {"p": 1, "q": 1, "y": 1, "z": 1}


@pytest.mark.parametrize("now", ["flushing", "read_only"])
def test_the_index_is_the_truth_for_flushed_documents(tmp_path, threads, now) -> None:
    """A flushed document whose row ``neardup index delete`` deleted, or a batch run's
    ``--recrawled replace`` replaced, is deleted from the service at the refresh that serves
    that version: its id is then answered by the index alone (not at all, or as the batch's
    new row, an indexed document the service reads only), the same after a restart. Also
    when the service flushed, then was restarted with both flush settings 0 (the rule is
    about the rows it flushed, whatever its settings now)."""
    from neardup.app.service import Conflict, NotFound
    from neardup.core.engine import delete_ids
    from tests.app.service.test_served_deletes import _replace

    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    later = READ_ONLY if now == "read_only" else ON_DEMAND

    async def answers(service: Service) -> list:
        out: list = []
        for doc_id in ("p", "q"):
            try:
                out.append((await service.document(doc_id))[3])  # indexed
            except NotFound:
                out.append("gone")
        texts = ["ant bee cat dog", "one two three", "gnu eel cat bee"]
        out.append(await service.query(texts, None, None))
        out.append(await _counts(service))
        out.append(sorted(service.served.hidden))
        return out

    async def run() -> list:
        service = await _start(tmp_path / "data", url, **ON_DEMAND)
        try:
            await service.register([NewDoc("p", "ant bee cat dog", {}),
                                    NewDoc("q", "one two three", {}),
                                    NewDoc("r", "five six seven", {})])  # fmt: skip
            await service.flush()
            if now == "read_only":
                await service.close()
                service = await _start(tmp_path / "data", url, **later)
            assert delete_ids(url, ["p"]).deleted == ("p",)
            _replace(url, [("q", "gnu eel cat bee")])
            assert await service.refresh_index()
            sized = None if service.flusher is None else service.flusher._sized
            if sized is not None:  # the flush started: the deletes settled
                await sized
            out = [await answers(service)]
            with pytest.raises(Conflict):
                await service.replace(NewDoc("q", "one two three", {}))
        finally:
            await service.close()
        service = await _start(tmp_path / "data", url, **later)
        try:
            out.append(await answers(service))
        finally:
            await service.close()
        return out

    now, restarted = asyncio.run(run())
    assert now == restarted
    assert now == [
        "gone", True,
        [(0, []), (0, []), (2, [("q", 1.0, "q"), ("y", 0.5625, "y")])],
        {"documents": 1, "indexed_documents": 2, "indexed_linked": 0, "clusters": 0,
         "duplicates": 0},
        [],
    ]  # fmt: skip
    assert _rows(url) == {"q": 1, "r": 1, "y": 1}
    assert DocIndex.open(url).id_digests(["q"])["q"] == text_digest("gnu eel cat bee")[:16]


def test_replicas_follow_the_index_for_flushed_documents(tmp_path, threads, pg_url) -> None:
    """``neardup index delete`` of a flushed document, served by two replicas at once: the
    document is deleted once (whichever replica comes first), and both answer alike."""
    from neardup.core.engine import delete_ids

    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        a = await _replica(pg_url, url)
        b = await _replica(pg_url, url)
        try:
            await a.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "one two", {})])
            version = await a.flush()
            await _settled(a, b, version=version)
            assert delete_ids(url, ["p"]).deleted == ("p",)
            assert await asyncio.gather(a.refresh_index(), b.refresh_index()) == [True, True]
            for s in (a, b):
                if s.flusher._sized is not None:
                    await s.flusher._sized
            await a.flush()
            await b.flush()
            await _settled(a, b, version=version + 1)
            texts = ["ant bee cat dog", "one two"]
            return [
                [(await s.query(texts, None, None), await _stats_of(s), sorted(s.served.hidden))
                 for s in (a, b)],
                await a.digests(["p", "q"]),
            ]  # fmt: skip
        finally:
            await a.close()
            await b.close()

    answers, stored = asyncio.run(run())
    assert answers[0] == answers[1]
    assert answers[0] == ([(0, []), (1, [("q", 1.0, "q")])], (1, 1, 0, 0, 0, 0, 3), [])
    assert sorted(stored) == ["q"]
    assert _rows(url) == {"q": 1, "y": 1}


def test_a_replica_that_never_flushes_started_first_counts_the_flushed_rows_as_its_own(
    tmp_path, threads, pg_url
) -> None:
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        c = await _replica(pg_url, url, **READ_ONLY)  # before any replica that flushes
        a = await _replica(pg_url, url)
        try:
            await a.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "ant bee cat", {})])
            version = await a.flush()
            await _settled(a, c, version=version)
            return [
                await _stats_of(a),
                await _stats_of(c),
                await c.query(["ant bee cat"], None, None),
            ]
        finally:
            await a.close()
            await c.close()

    own, other, found = asyncio.run(run())
    assert own == other == (2, 1, 0, 1, 1, 0, 2)
    assert found == [(2, [("q", 1.0, "p"), ("p", 0.6875, "p")])]


def _terminate(pg_url: str, pid: int) -> None:
    """End the PostgreSQL backend ``pid`` as a dropped connection would (the server releases
    its advisory locks)."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)


def test_a_flusher_whose_lock_connection_dies_mid_flush_writes_nothing_twice(
    tmp_path, threads, pg_url, monkeypatch
) -> None:
    """Replica A takes the flush lock and its batch, then its lock's connection dies while
    the part is written (the server releases the lock): replica B takes the lock and flushes
    the same documents. A, resumed, must neither commit them again nor move the store's mark
    back: every document is one row, both replicas (and one started later) answer alike, and
    the next flush writes nothing."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    started, go = threading.Event(), threading.Event()
    paused = _first_waits(flush_module.write_flush, started, go, after=False)  # A's flush

    async def run() -> list:
        a = await _replica(pg_url, url)
        b = await _replica(pg_url, url)
        c: Service | None = None
        out: list = []
        try:
            await a.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "one two", {})])
            with monkeypatch.context() as patched:
                patched.setattr(flush_module, "write_flush", paused)
                flushing = asyncio.create_task(a.flush())
                assert await asyncio.to_thread(started.wait, 60)
                await asyncio.to_thread(_terminate, pg_url, a.store._flusher.info.backend_pid)
                version = await asyncio.wait_for(b.flush(), 60)  # the lock is free again
                go.set()
                late = await asyncio.wait_for(flushing, 60)
            await _settled(a, b, version=max(version or 0, late or 0))
            out.append((version, late))
            out.append(_rows(url))
            out.append((await _stats_of(a), await _stats_of(b)))
            committed = Mark.from_json(b.store.flush_state().get("committed"))
            out.append(committed.version == DocIndex.open(url).version)
            c = await _replica(pg_url, url, **READ_ONLY)
            out.append(await _stats_of(c))
            out.append((await a.flush(), await b.flush()))
        finally:
            go.set()
            await a.close()
            await b.close()
            if c is not None:
                await c.close()
        return out

    out = asyncio.run(run())
    assert out[0] == (2, None)  # B committed; A found the lock lost and committed nothing
    assert out[1] == {"p": 1, "q": 1, "y": 1}
    assert out[2] == ((2, 1, 0, 0, 0, 0, 2), (2, 1, 0, 0, 0, 0, 2))
    assert out[3] is True
    assert out[4] == (2, 1, 0, 0, 0, 0, 2)
    assert out[5] == (None, None)
    index = DocIndex.open(url)
    assert [p.run.get("from") for p in index.parts if p.run.get("engine") == "service"] == [0]


def test_a_replica_started_between_a_commit_and_its_record_counts_each_document_once(
    tmp_path, threads, pg_url, monkeypatch
) -> None:
    """Replica A commits a flush into the index and is slow to record it in the store: a
    replica C starting meanwhile opens the index at the version holding A's part while the
    store's mark is still the one before. C must answer for each document once (its own,
    not again as an indexed one), before and after A records the commit."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    paused, go = threading.Event(), threading.Event()
    slow = _first_waits(flush_module.commit_flush, paused, go, after=True)  # A's commit

    async def run() -> list:
        a = await _replica(pg_url, url)
        c: Service | None = None
        out: list = []
        try:
            await a.register([NewDoc("p", "ant bee cat dog", {}), NewDoc("q", "one two", {})])
            with monkeypatch.context() as patched:
                patched.setattr(flush_module, "commit_flush", slow)
                flushing = asyncio.create_task(a.flush())
                assert await asyncio.to_thread(paused.wait, 60)
                assert DocIndex.open(url).version == 2  # committed, not recorded
                c = await _replica(pg_url, url, **READ_ONLY)
                out.append(await _stats_of(c))
                out.append(await c.query(["ant bee cat dog", "eel fox gnu"], None, None))
                go.set()
                version = await asyncio.wait_for(flushing, 60)
            await _settled(a, c, version=version)
            out.append((await _stats_of(a), await _stats_of(c)))
            out.append(await c.query(["ant bee cat dog", "eel fox gnu"], None, None))
        finally:
            go.set()
            await a.close()
            if c is not None:
                await c.close()
        return out

    out = asyncio.run(run())
    found = [(1, [("p", 1.0, "p")]), (1, [("y", 1.0, "y")])]
    assert out[0] == (2, 1, 0, 0, 0, 2, 1)  # A's part not served until recorded: unflushed
    assert out[1] == found
    assert out[2] == ((2, 1, 0, 0, 0, 0, 2), (2, 1, 0, 0, 0, 0, 2))
    assert out[3] == found
