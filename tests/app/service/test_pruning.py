"""The shared store's history is pruned past LOG_RETENTION_SECONDS: after many replaces its
rows follow the live documents (as after a few), while another replica writes; a replica whose
position is older than the oldest entry kept notices, reloads from the live documents (never
missing a deletion) and ends equal to the others, whether its follower or a write finds out."""

import asyncio
import logging
import threading
import time

import psycopg
import pytest

from neardup.app.config import Settings
from neardup.app.service import NewDoc, NotFound, Service
from neardup.app.service import index as index_module
from neardup.app.service.pgstore import PostgresStore
from neardup.app.service.store import StoredDoc
from neardup.core.engine import text_digest

LIVE = [f"doc-{i:03d}" for i in range(60)]


def _settings(tmp_path, url, retention=3600.0):
    return Settings(
        data_dir=tmp_path / "data", workers=1, store_url=url, log_retention_seconds=retention
    )


def _text(doc_id: str, version: int) -> str:
    return f"{doc_id} version {version} " + " ".join(f"{doc_id}w{version}x{i}" for i in range(30))


def _rows(url: str) -> tuple[int, int, int]:
    """The store's document rows, deleted ones among them, and log entries."""
    with psycopg.connect(url) as c:
        docs, dead = c.execute(
            "SELECT count(*), count(*) FILTER (WHERE deleted) FROM documents"
        ).fetchone()
        [(entries,)] = c.execute("SELECT count(*) FROM changes").fetchall()
    return docs, dead, entries


async def _until(check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


async def _converged(services):
    positions = lambda: {s.stats()["log_position"] for s in services}  # noqa: E731
    await _until(lambda: len(positions()) == 1)


def _state(service: Service) -> tuple:
    ids = sorted(i for i in service.index._num_of)
    groups = sorted(service.index.members(r) for r in service.index.roots())
    return ids, groups, service.index.signatures_of(ids).tobytes()


async def _replaces(tmp_path, url, updates: int) -> dict:
    """Replica ``w`` registers LIVE and replaces their texts ``updates`` times; replica ``p``
    (retention 0.05 s) follows and prunes meanwhile. Rows once pruning caught up."""
    writer = await Service.start(_settings(tmp_path / "w", url))
    pruner = await Service.start(_settings(tmp_path / "p", url, retention=0.05))
    try:
        await writer.register([NewDoc(i, _text(i, 0), {}) for i in LIVE])
        latest = dict.fromkeys(LIVE, 0)
        for u in range(updates):
            doc_id = LIVE[u % len(LIVE)]
            latest[doc_id] = 1 + u // len(LIVE)
            await writer.replace(NewDoc(doc_id, _text(doc_id, latest[doc_id]), {}))
        await _converged([writer, pruner])
        await _until(lambda: _rows(url)[1] == 0 and _rows(url)[2] == 1)  # all pruned
        for doc_id, version in latest.items():  # every acknowledged text is the stored one
            stored = await writer._io_call(writer.store.document, doc_id)
            assert stored is not None and stored.digest == text_digest(_text(doc_id, version))
        assert _state(pruner) == _state(writer)
        if pruner._compacting is not None:
            await pruner._compacting
        pruned = {**pruner.stats(), "reloads": pruner.reloads}
        return {"rows": _rows(url), "pruner": pruned, "writer": writer.stats()}
    finally:
        await pruner.close()
        await writer.close()


def test_many_replaces_leave_rows_and_index_bounded_by_the_live_documents(
    tmp_path, postgres, monkeypatch
):
    """300 replaces of 60 documents leave as many rows (documents and log) as 6 replaces do,
    and index_bytes within 10 % on both replicas; the pruning replica follows throughout."""
    monkeypatch.setattr(index_module, "COMPACT_AFTER", 32)
    few = asyncio.run(_replaces(tmp_path / "few", postgres.database(), 6))
    many = asyncio.run(_replaces(tmp_path / "many", postgres.database(), 300))
    assert many["rows"] == few["rows"] == (len(LIVE), 0, 1)
    for replica in ("writer", "pruner"):
        assert many[replica]["documents"] == len(LIVE)
        assert many[replica]["index_bytes"] <= 1.1 * few[replica]["index_bytes"]
    # Removed slots dropped: by a compaction, or by a reload (on a loaded machine the pruner,
    # retention 0.05 s, falls behind its own pruned log and rebuilds from the live documents).
    assert many["pruner"]["index_compactions"] + many["pruner"]["reloads"] >= 1


def test_a_follower_behind_the_kept_log_reloads_and_agrees(tmp_path, pg_url, caplog):
    """A follower stopped while the other replica replaces, deletes and adds, and prunes past
    its position: once it follows again it reloads (logged; not ready meanwhile) and holds
    exactly what the other holds: the deleted documents gone, the new texts in."""

    async def run():
        leader = await Service.start(_settings(tmp_path / "a", pg_url, retention=0.05))
        follower = await Service.start(_settings(tmp_path / "b", pg_url))
        try:
            await leader.register([NewDoc(i, _text(i, 0), {}) for i in LIVE])
            await _converged([leader, follower])
            assert follower._follower is not None
            follower._follower.cancel()  # stopped: it reads the log no more
            behind = follower.stats()["log_position"]
            for doc_id in LIVE[:20]:
                await leader.replace(NewDoc(doc_id, _text(doc_id, 1), {}))
            for doc_id in LIVE[20:30]:
                await leader.delete(doc_id)
            await leader.register([NewDoc(f"new-{i}", _text(f"new-{i}", 0), {}) for i in range(5)])
            with psycopg.connect(pg_url) as c:  # pruned past the follower's position
                oldest = lambda: c.execute("SELECT min(seq) FROM changes").fetchone()[0]  # noqa: E731
                await _until(lambda: oldest() > behind + 1)
            readiness = []
            follower._follower = asyncio.create_task(follower._follow())
            deadline = time.monotonic() + 30
            while follower.stats()["log_reloads"] == 0:
                assert time.monotonic() < deadline, "the follower never reloaded"
                readiness.append(await follower.unready_reason())
                await asyncio.sleep(0)
            await _converged([leader, follower])
            assert _state(follower) == _state(leader)
            with pytest.raises(NotFound):
                await follower.document(LIVE[20])
            assert "reloading" in readiness
            assert await follower.unready_reason() is None
        finally:
            await follower.close()
            await leader.close()

    with caplog.at_level(logging.INFO, logger="neardup"):
        asyncio.run(run())
    said = [r.getMessage() for r in caplog.records]
    assert any("older than its oldest entry kept" in m and "reloading" in m for m in said)


def test_a_write_on_a_replica_behind_the_kept_log_reloads_first(tmp_path, pg_url):
    """A replica whose follower stopped takes a write after the log was pruned past it: the
    write reloads the replica first, then is planned against everything acknowledged."""

    async def run():
        leader = await Service.start(_settings(tmp_path / "a", pg_url, retention=0.05))
        stale = await Service.start(_settings(tmp_path / "b", pg_url))
        try:
            assert stale._follower is not None
            stale._follower.cancel()
            await leader.register([NewDoc(i, _text(i, 0), {}) for i in LIVE[:10]])
            await leader.delete(LIVE[0])
            with psycopg.connect(pg_url) as c:
                oldest = lambda: c.execute("SELECT min(seq) FROM changes").fetchone()[0]  # noqa: E731
                await _until(lambda: oldest() >= 2)
            [copy] = await stale.register([NewDoc("copy", _text(LIVE[1], 0), {})])
            assert copy.matches.best[0][0] == LIVE[1]  # it saw the leader's documents
            assert stale.stats()["log_reloads"] == 1
            await _converged([leader, stale])
            assert _state(stale) == _state(leader)
        finally:
            await stale.close()
            await leader.close()

    asyncio.run(run())


def test_an_interrupted_pruning_step_removes_nothing(pg_url):
    """A pruning step whose connection dies mid-step (as under kill -9) is rolled back whole;
    the next step prunes, and no live document is ever touched."""
    store = PostgresStore(pg_url)
    try:
        sig = bytes(512)
        store.lock_writes()
        store.add_documents([StoredDoc(n, f"d{n}", b"x" * 32, sig, {}, None) for n in range(40)])
        for n in range(0, 39, 2):
            store.lock_writes()
            store.delete_document(n)
        before = _rows(pg_url)
        with psycopg.connect(pg_url) as holder, psycopg.connect(pg_url, autocommit=True) as killer:
            # A deleted row locked elsewhere: the step deletes the log entries, then waits on it.
            holder.execute("SELECT num FROM documents WHERE num = 0 FOR UPDATE")
            done: list[BaseException | int] = []

            def prune():
                try:
                    done.append(store.prune(1e-6))
                except BaseException as exc:  # the test reads it
                    done.append(exc)

            thread = threading.Thread(target=prune)
            thread.start()
            waiting = "SELECT pid, query FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            deadline = time.monotonic() + 30
            while not (pids := killer.execute(waiting).fetchall()):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            assert "DELETE FROM documents" in pids[0][1]  # past the log entries' deletion
            killer.execute("SELECT pg_terminate_backend(%s)", (pids[0][0],))
            # The store tries once more on a fresh connection, which waits on the same row:
            # killed too (else it waits out STORE_TIMEOUT, 10 s, to fail the same way).
            while thread.is_alive() and time.monotonic() < deadline:
                for pid, query in killer.execute(waiting).fetchall():
                    assert "DELETE FROM documents" in query
                    killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
                thread.join(0.01)
            thread.join(30)
            holder.rollback()
        assert done and not isinstance(done[0], int)  # the step failed ...
        assert _rows(pg_url) == before  # ... and removed nothing
        time.sleep(0.6)  # FAIL_FAST: after a failure, calls fail at once for 0.5 s
        while store.prune(1e-6):  # the next steps prune (reconnecting)
            pass
        assert _rows(pg_url) == (20, 0, 1)  # the live ones; the log's last entry
        assert next(c[1] for c in store.iter_signatures(100)) == [f"d{n}" for n in range(1, 40, 2)]
    finally:
        store.close()
