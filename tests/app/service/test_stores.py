"""Both stores behind the ``Store`` interface (SQLite in a data directory, PostgreSQL at a URL):
the same documents, deletions, protected sets and parameter checks; and the shared store's log
of changes, which orders the writes of every replica."""

import threading
import time

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.common.server import free_port
from neardup.app.service import (
    DamagedStore,
    LogPruned,
    ParameterMismatch,
    SettingsChanged,
    SettingsMismatch,
    StoreUnavailable,
    pgstore,
)
from neardup.app.service.pgstore import WRITE_LOCK, PostgresStore
from neardup.app.service.store import ProtectedSetRow, SQLiteStore, StoredDoc
from neardup.core.engine import MinhashParams, ProtectedFormat

PARAMS = MinhashParams().index_params()


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request, tmp_path):
    """A function opening (again) one store of the parametrised kind."""
    if request.param == "sqlite":
        target = tmp_path / "data"
        kind = SQLiteStore
    else:
        target = request.getfixturevalue("pg_url")
        kind = PostgresStore
    opened = []

    def open_store():
        store = kind(target)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def _doc(num, doc_id, text="some text", meta=None):
    sig = bytes([num % 256]) * 512
    return StoredDoc(num, doc_id, f"digest-{doc_id}".encode(), sig, meta or {"n": num}, text)


def _write(store, fn, *args):
    """A write as the service makes it: between lock_writes and unlock_writes."""
    store.lock_writes()
    try:
        return fn(*args)
    finally:
        store.unlock_writes()


def test_a_store_records_the_window_definition_and_refuses_another_naming_both(opener):
    """A store made before windows were recorded (index parameters only) records the running
    definition on its next start; a replica of another definition is then refused."""
    store = opener()
    store.ensure_params(PARAMS)  # as a store made before window_version existed
    params = MinhashParams().store_params()
    assert params == {**PARAMS, "windows": "words"}
    store.ensure_params(params)
    store.close()
    store = opener()
    try:
        store.ensure_params(params)  # reopened by the same definition
        with pytest.raises(ParameterMismatch) as caught:
            store.ensure_params({**params, "windows": "weighted-0"})
    finally:
        store.close()
    assert ": WINDOWS is weighted-0 but the " in str(caught.value)
    assert " was created with words (the store's replicas would flag other texts" in str(
        caught.value
    )


def test_a_store_of_weighted_2_windows_refuses_a_weighted_3_replica(opener):
    """Issue 31: a store a multilingual service made under ``weighted-2`` is refused by one
    running ``weighted-3`` (longer windows, whole items), naming both."""
    params = MinhashParams(tokenizer="multilingual").store_params()
    assert params["windows"] == "weighted-3"
    store = opener()
    try:
        store.ensure_params({**params, "windows": "weighted-2"})
        with pytest.raises(ParameterMismatch) as caught:
            store.ensure_params(params)
    finally:
        store.close()
    assert ": WINDOWS is weighted-3 but the " in str(caught.value)
    assert " was created with weighted-2 " in str(caught.value)


def test_documents_round_trip_through_either_store(opener):
    store = opener()
    store.ensure_params(PARAMS)
    texts = ["plain", "ünïcode ✓ and a NUL \x00 inside", "", None]
    docs = [_doc(n, f"id/{n} ?#%", t, {"k": [n, "x"]}) for n, t in enumerate(texts)]
    _write(store, store.add_documents, docs)
    store.close()
    store = opener()
    assert store.document("id/1 ?#%") == docs[1]
    assert store.document("nope") is None
    assert store.texts([0, 1, 2, 3, 99]) == {0: "plain", 1: texts[1], 2: ""}
    assert store.digests(["id/0 ?#%", "nope"]) == {"id/0 ?#%": b"digest-id/0 ?#%"}
    assert store.extent() == 4
    with store.recovering():
        chunks = list(store.iter_signatures(3))
    assert [c[0] for c in chunks] == [[0, 1, 2], [3]]
    assert b"".join(c[2] for c in chunks) == b"".join(d.sig for d in docs)


def test_a_deleted_document_is_gone_but_its_number_is_never_reused(opener):
    store = opener()
    store.ensure_params(PARAMS)
    _write(store, store.add_documents, [_doc(0, "a"), _doc(1, "b"), _doc(2, "c")])
    _write(store, store.delete_document, 1)
    assert store.document("b") is None
    assert store.digests(["a", "b"]).keys() == {"a"}
    assert store.texts([1]) == {}
    with store.recovering():
        assert [c[0] for c in store.iter_signatures(10)] == [[0, 2]]
    assert store.extent() == 3
    _write(store, store.add_documents, [_doc(3, "b", "again")])  # an id can come back
    assert store.document("b").text == "again"


def test_protected_sets_are_created_replaced_and_deleted(opener):
    store = opener()
    store.ensure_params(PARAMS)
    row = ProtectedSetRow("evals", 1, 2, ProtectedFormat.JSONL, '{"id": "q"}\n')
    _write(store, store.put_protected_set, row)
    newer = ProtectedSetRow("evals", 2, 3, ProtectedFormat.TEXT, "a\nb \x00 ✓\n")
    _write(store, store.put_protected_set, newer)
    assert store.protected_sets() == [newer]
    assert _write(store, store.delete_protected_set, "evals") is True
    assert _write(store, store.delete_protected_set, "evals") is False
    assert store.protected_sets() == []


def test_other_index_parameters_are_refused_naming_them(opener):
    store = opener()
    store.ensure_params(PARAMS)
    other = {**PARAMS, "num_perm": 64, "seed": 3}
    with pytest.raises(ParameterMismatch, match=r"NUM_PERM is 64 .* with 128; SEED is 3"):
        store.ensure_params(other)
    store.ensure_params(PARAMS)  # the same ones are fine


def test_documents_without_parameters_are_refused(opener):
    store = opener()
    _write(store, store.add_documents, [_doc(0, "a")])
    with pytest.raises(DamagedStore, match="no index parameters"):
        store.ensure_params(PARAMS)


# --- the shared store's log -------------------------------------------------------------------


def test_each_replica_reads_the_others_changes_in_commit_order(pg_url):
    a, b = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        a.ensure_params(PARAMS)
        b.ensure_params(PARAMS)
        assert a.position() == b.position() == 0
        _write(a, a.add_documents, [_doc(0, "x"), _doc(1, "y")])
        assert a.position() == 1
        row = ProtectedSetRow("s", 1, 1, ProtectedFormat.TEXT, "t\n")
        assert b.lock_writes()[0].ids == ["x", "y"]  # caught up under the lock
        b.put_protected_set(row)
        assert b.position() == 2
        _write(a, a.delete_document, 0)
        _write(a, a.delete_protected_set, "s")
        seen = b.changes()
        assert [(c.seq, c.kind, c.name) for c in seen] == [
            (3, "delete", "x"),
            (4, "delete_set", "s"),
        ]
        assert seen[0].nums == [0]
        assert b.changes() == []
        assert b.position() == a.position() == 4
        assert [(c.kind, c.row) for c in a.changes()] == []  # a wrote them all itself
    finally:
        a.close()
        b.close()


def test_many_documents_deleted_in_one_write(opener):
    """``delete_documents``: one transaction; the ones flushed noted for the index; on the
    shared store one ``delete`` log entry per document deleted (an unknown number none), in
    number order, as that many deletes would log them."""
    store = opener()
    store.ensure_params(PARAMS)
    _write(store, store.add_documents, [_doc(n, f"d{n}") for n in range(5)])
    _write(store, store.take_flush, 2)  # documents up to 2 flushed
    before = store.position()
    _write(store, store.delete_documents, [3, 0, 1, 9])
    assert store.digests([f"d{n}" for n in range(5)]).keys() == {"d2", "d4"}
    assert [(i, n) for _, i, _, n in store.index_deletes()] == [("d0", 0), ("d1", 1)]
    if isinstance(store, PostgresStore):
        follower = opener()
        follower._applied = before
        seen = follower.changes()
        assert [(c.seq - before, c.kind, c.name, c.nums) for c in seen] == [
            (1, "delete", "d0", [0]),
            (2, "delete", "d1", [1]),
            (3, "delete", "d3", [3]),
        ]
        assert store.position() == before + 3


def test_a_late_replica_replays_a_batch_whose_documents_were_deleted_since(pg_url):
    a = PostgresStore(pg_url)
    a.ensure_params(PARAMS)
    late = PostgresStore(pg_url)
    try:
        docs = [_doc(0, "x"), _doc(1, "y")]
        _write(a, a.add_documents, docs)
        _write(a, a.delete_document, 1)
        added, deleted = late.changes()
        assert added.nums == [0, 1] and added.ids == ["x", "y"]
        assert added.sigs == docs[0].sig + docs[1].sig
        assert (deleted.kind, deleted.name, deleted.nums) == ("delete", "y", [1])
        fresh = PostgresStore(pg_url)  # recovery from a snapshot: its log head is the position
        with fresh.recovering():
            assert [c[1] for c in fresh.iter_signatures(10)] == [["x"]]
        assert fresh.position() == 2
        assert fresh.changes() == []
        fresh.close()
    finally:
        a.close()
        late.close()


def test_writes_on_two_replicas_are_serialised_by_the_store_lock(pg_url):
    a, b = PostgresStore(pg_url), PostgresStore(pg_url)
    a.ensure_params(PARAMS)
    order = []
    try:
        a.lock_writes()

        def other():
            b.lock_writes()  # waits for a's commit, then sees it
            order.append(("b locked", b.position()))
            b.add_documents([_doc(1, "late")])

        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(0.3)
        order.append(("a writes", None))
        a.add_documents([_doc(0, "first")])
        thread.join(timeout=10)
        assert order == [("a writes", None), ("b locked", 1)]
        assert b.position() == 2
    finally:
        a.close()
        b.close()


def test_a_batch_numbered_out_of_turn_is_refused_and_nothing_is_stored(pg_url):
    store = PostgresStore(pg_url)
    try:
        store.ensure_params(PARAMS)
        with pytest.raises(RuntimeError, match="the store's next is"):
            _write(store, store.add_documents, [_doc(5, "x")])
        assert store.extent() == 0 and store.changes() == []
        with pytest.raises(RuntimeError, match="outside lock_writes"):
            store.add_documents([_doc(0, "x")])
    finally:
        store.close()


def test_a_database_that_goes_away_is_unavailable_then_used_again(postgres):
    url = postgres.database()
    store = PostgresStore(url)
    try:
        store.ensure_params(PARAMS)
        _write(store, store.add_documents, [_doc(0, "x")])
        postgres.stop()
        with pytest.raises(StoreUnavailable, match="is unavailable"):
            store.document("x")
        with pytest.raises(StoreUnavailable):
            store.lock_writes()
        postgres.start()
        time.sleep(0.6)  # past the fail-fast window
        assert store.document("x").id == "x"  # reconnected by itself
        _write(store, store.add_documents, [_doc(1, "y")])
        assert store.extent() == 2
    finally:
        store.close()


def test_an_unreachable_store_url_is_refused_naming_it_without_a_password():
    url = f"postgresql://someone:secret@127.0.0.1:{free_port()}/neardup"
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:[0-9]+/neardup") as caught:
        PostgresStore(url)
    assert "secret" not in str(caught.value)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "delete", "put_set", "delete_set"]),
        st.integers(0, 1),  # which replica writes
        st.integers(0, 5),  # batch size, victim or set name
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=10, deadline=None)
@given(ops=_OPS)
def test_replaying_the_log_gives_the_store_s_state_whoever_wrote(postgres, ops):
    url = postgres.database()
    writers = [PostgresStore(url), PostgresStore(url)]
    follower = PostgresStore(url)
    writers[0].ensure_params(PARAMS)
    try:
        alive: list[int] = []
        for kind, who, arg in ops:
            store = writers[who]
            store.lock_writes()
            try:
                if kind == "add" and arg:
                    head = store.extent()
                    store.add_documents([_doc(head + k, f"d{head + k}") for k in range(arg)])
                    alive += range(head, head + arg)
                elif kind == "delete" and alive:
                    store.delete_document(alive.pop(arg % len(alive)))
                elif kind == "put_set":
                    store.put_protected_set(
                        ProtectedSetRow(f"s{arg % 3}", 1, 1, ProtectedFormat.TEXT, f"v{arg}\n")
                    )
                elif kind == "delete_set":
                    store.delete_protected_set(f"s{arg % 3}")
            finally:
                store.unlock_writes()
        docs: dict[int, str] = {}
        sets: dict[str, ProtectedSetRow] = {}
        next_num = 0
        changes = follower.changes()
        assert [c.seq for c in changes] == list(range(1, len(changes) + 1))
        for change in changes:  # replayed in order, as a replica's index does
            if change.kind == "add":
                assert change.nums == list(range(next_num, next_num + len(change.ids)))
                next_num += len(change.ids)
                docs.update(zip(change.nums, change.ids, strict=True))
            elif change.kind == "delete":
                assert docs.pop(change.nums[0]) == change.name
            elif change.kind == "put_set" and change.row is not None:
                sets[change.name] = change.row
            elif change.kind == "delete_set":
                sets.pop(change.name, None)
        with follower.recovering():
            stored = {
                n: i for c in follower.iter_signatures(100) for n, i in zip(*c[:2], strict=True)
            }
        assert docs == stored == {n: f"d{n}" for n in alive}
        assert sorted(sets.values(), key=lambda r: r.name) == follower.protected_sets()
    finally:
        for store in (*writers, follower):
            store.close()


# --- the shared store's replace, settings, pruning, wake-ups and deadline ---------------------


def _log_of(store):
    """A store's whole log as (seq, kind, lo, hi, name), read apart from any replica."""
    with psycopg.connect(store._url) as c:
        return c.execute("SELECT seq, kind, lo, hi, name FROM changes ORDER BY seq").fetchall()


def test_a_replace_is_a_delete_then_an_add_that_another_replica_replays(pg_url):
    store, other = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        store.ensure_params(PARAMS)
        _write(store, store.add_documents, [_doc(0, "a"), _doc(1, "b")])
        new = _doc(2, "a", "new text", {"v": 2})
        _write(store, store.replace_document, 0, new)
        assert store.document("a") == new and store.texts([0, 2]) == {2: "new text"}
        assert store.extent() == 3 and store.document_count() == 2
        assert store.position() == 3 and _log_of(store)[1:] == [
            (2, "delete", 0, 1, "a"),
            (3, "add", 2, 3, ""),
        ]
        _, deleted, added = other.changes()
        assert (deleted.kind, deleted.name, deleted.nums) == ("delete", "a", [0])
        assert (added.kind, added.nums, added.ids, added.sigs) == ("add", [2], ["a"], new.sig)
        with pytest.raises(RuntimeError, match="document 0 to replace is not in the store"):
            _write(store, store.replace_document, 0, _doc(3, "a"))
        with pytest.raises(RuntimeError, match="numbered from 7, the store's next is"):
            _write(store, store.replace_document, 1, _doc(7, "b"))
        assert store.document("b") == _doc(1, "b")  # rolled back: b still alive, nothing added
        assert store.extent() == 3 and store.document_count() == 2 and len(_log_of(store)) == 3
    finally:
        store.close()
        other.close()


def test_answer_settings_are_recorded_once_refused_if_other_and_changed_for_every_replica(pg_url):
    a, b = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        a.ensure_params(PARAMS)
        a.ensure_settings({"threshold": "0.8", "max_matches": "100"})
        with pytest.raises(
            SettingsMismatch, match=r"THRESHOLD is 0\.7 but the store's replicas answer with 0\.8"
        ):
            b.ensure_settings({"threshold": "0.7"})
        b.ensure_settings({"threshold": "0.8", "protect": "true"})  # the missing one recorded
        stored = {k: str(v) for k, v in PARAMS.items()}
        stored |= {"threshold": "0.8", "max_matches": "100", "protect": "true"}
        assert b.set_settings({}) == stored  # nothing changed
        b.changes()  # nothing changed: b still answers
        assert a.set_settings({"threshold": "0.9"}) == stored  # the values before
        assert b.set_settings({}) == stored | {"threshold": "0.9"}
        for replica in (a, b):  # both served 0.8: neither answers nor writes any more
            with pytest.raises(SettingsChanged, match=r"\(THRESHOLD 0\.8 -> 0\.9\): this"):
                replica.changes()
            with pytest.raises(SettingsChanged):
                replica.lock_writes()
        late = PostgresStore(pg_url)
        late.ensure_settings({"threshold": "0.9"})  # the write lock was not left held
        _write(late, late.add_documents, [_doc(0, "x")])
        late.close()
    finally:
        a.close()
        b.close()


def test_pruning_keeps_the_window_the_newest_entry_and_the_rows_kept_entries_name(pg_url):
    store, late = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        store.ensure_params(PARAMS)
        _write(store, store.add_documents, [_doc(n, f"d{n}") for n in range(6)])  # seq 1
        for num in (0, 1, 2, 5):  # seq 2 to 5
            _write(store, store.delete_document, num)
        _write(store, store.add_documents, [_doc(6, "d6")])  # seq 6
        assert store.prune(3600.0) == 0  # all within the window; the add at 0 names every row
        with psycopg.connect(pg_url, autocommit=True) as c:  # seq 1 to 5 out of the window
            c.execute("UPDATE changes SET at = at - interval '2 hours' WHERE seq <= 5")
        assert store.prune(3600.0, batch=2) == 4  # seq 1 and 2; rows 0 and 1 (below add 6)
        with pytest.raises(LogPruned, match="position 0 in the store's log is older than its"):
            late.changes()
        with pytest.raises(LogPruned, match="oldest entry kept, 3"):
            late.lock_writes()
        assert [e[0] for e in _log_of(store)] == [3, 4, 5, 6]
        assert store.prune(3600.0, batch=2) == 4  # seq 3 and 4; rows 2 and 5
        assert store.prune(3600.0, batch=2) == 1  # seq 5; seq 6 is in the window
        assert store.prune(3600.0) == 0
        _write(store, store.delete_document, 6)  # seq 7: the largest number, deleted
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute("UPDATE changes SET at = at - interval '2 hours'")
        assert store.prune(1.0) == 1  # seq 6 (the newest, 7, stays); row 6 stays: it numbers
        assert store.prune(1.0) == 0
        assert [e[0] for e in _log_of(store)] == [7] and store.extent() == 7
        with psycopg.connect(pg_url) as c:
            rows = c.execute("SELECT num, deleted FROM documents ORDER BY num").fetchall()
        assert rows == [(3, False), (4, False), (6, True)]
        _write(store, store.add_documents, [_doc(7, "d7")])  # the next number is still 7
    finally:
        store.close()
        late.close()


def _terminate(pg_url, query):
    """End the server processes of this database whose last statement starts with ``query``
    (an ILIKE pattern: the case of its SQL is not part of its behaviour)."""
    with psycopg.connect(pg_url, autocommit=True) as c:
        ended = c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query ILIKE %s AND pid <> pg_backend_pid()",
            (query + "%",),
        ).fetchall()
    assert ended


def _failing(call, failed):
    """``call()``, its StoreUnavailable appended to ``failed``."""
    try:
        call()
    except StoreUnavailable as exc:
        failed.append(exc)


def _returns(call, *args):
    """Whether ``call(*args)`` returns (in a thread, given a generous bound; never a hang)."""
    thread = threading.Thread(target=call, args=args, daemon=True)
    thread.start()
    thread.join(60)
    return not thread.is_alive()


def test_a_follower_wakes_on_each_commit_and_listens_again_after_its_listener_died(
    pg_url, monkeypatch
):
    writer, follower = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        writer.ensure_params(PARAMS)
        assert _returns(follower.wait_for_changes, 0.01)  # nothing: back after the timeout
        _write(writer, writer.add_documents, [_doc(0, "a")])
        assert _returns(follower.wait_for_changes, 3600.0)  # woken by the commit, at once
        writer.set_settings({"threshold": "0.9"})
        assert _returns(follower.wait_for_changes, 3600.0)  # and by a change of settings
        slept: list[float] = []
        for timeout in (30.0, 0.25):  # the listener fails: no error, it waits out the rest
            _terminate(pg_url, "LISTEN")
            monkeypatch.setattr(pgstore.time, "sleep", slept.append)
            follower.wait_for_changes(timeout)
            monkeypatch.undo()
            assert _returns(follower.wait_for_changes, 0.01)  # listening again
        assert 0 < slept[0] <= 30.0 and 0 <= slept[1] <= 0.25
        _write(writer, writer.add_documents, [_doc(1, "b")])
        assert _returns(follower.wait_for_changes, 3600.0)  # a new listener, woken again
        assert follower.changes()[-1].ids == ["b"]
    finally:
        writer.close()
        follower.close()


def test_a_call_the_database_does_not_answer_is_abandoned_then_the_store_is_used_again(
    pg_url, monkeypatch
):
    monkeypatch.setattr(pgstore, "FAIL_FAST", 0.0)  # no wait between the tries below
    before = set(threading.enumerate())
    store = PostgresStore(pg_url, timeout=0.2)
    try:
        store.ensure_params(PARAMS)
        assert store.available() is True
        [watchdog] = [t for t in threading.enumerate() if t not in before]
        assert watchdog.name == "store-deadline" and watchdog.daemon  # never keeps a process
        time.sleep(0.3)  # the watchdog idles past its last deadline, then watches again
        with psycopg.connect(pg_url, autocommit=True) as holder:  # a writer that never ends
            holder.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK,))
            assert store.prune(0.0) == 0  # nothing to prune: it never waits for the lock
            _terminate(pg_url, "%SELECT EXISTS")  # its connection dies: tried again, watched
            for _ in range(2):  # abandoned each time (on a new connection the second time)
                failed: list[BaseException] = []
                thread = threading.Thread(target=_failing, args=(store.lock_writes, failed))
                thread.start()
                thread.join(20)  # at 0.2 s, not at the server's statement_timeout (30 s)
                assert not thread.is_alive()
                [error] = failed
                assert "no answer within 0.2 s (STORE_TIMEOUT)" in str(error)
                assert store.available() is False
            holder.execute("SELECT pg_advisory_unlock(%s)", (WRITE_LOCK,))
        _write(store, store.add_documents, [_doc(0, "a")])  # on a new connection
        assert store.available() is True and store.document("a").id == "a"
    finally:
        store.close()


def test_a_log_read_is_one_snapshot_while_another_transaction_removes_rows(pg_url):
    writer, follower = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        writer.ensure_params(PARAMS)
        _write(writer, writer.add_documents, [_doc(0, "a"), _doc(1, "b")])
        with psycopg.connect(pg_url) as holder, psycopg.connect(pg_url, autocommit=True) as seer:
            holder.execute("LOCK TABLE documents IN ACCESS EXCLUSIVE MODE")
            read: list = []
            thread = threading.Thread(target=lambda: read.append(follower.changes()))
            thread.start()  # reads the log, then waits for the documents
            waiting = (
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
            while not seer.execute(waiting).fetchall():
                assert thread.is_alive()
                time.sleep(0.01)
            holder.execute("DELETE FROM documents WHERE num = 1")  # as a pruning step might
            holder.commit()
            thread.join(60)
        [(added,)] = read
        assert added.nums == [0, 1] and added.ids == ["a", "b"]  # as of the log's read
    finally:
        writer.close()
        follower.close()


def test_reads_during_recovery_stay_in_its_snapshot_and_following_resumes_after_it(pg_url):
    writer, fresh = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        writer.ensure_params(PARAMS)
        docs = [_doc(n, f"d{n}", None) for n in range(5)]
        _write(writer, writer.add_documents, docs)
        with fresh.recovering():
            _write(writer, writer.delete_document, 4)  # after the snapshot began
            assert [c.seq for c in fresh.changes()] == [1]
            chunks = list(fresh.iter_signatures(3))
            assert fresh.document("d4") == docs[4]  # no text stored: None
        assert [c[0] for c in chunks] == [[0, 1, 2], [3, 4]]
        assert [c[2] for c in chunks] == [docs[0].sig + docs[1].sig + docs[2].sig,
                                          docs[3].sig + docs[4].sig]  # fmt: skip
        assert fresh.position() == 1
        assert [(c.seq, c.kind, c.name) for c in fresh.changes()] == [(2, "delete", "d4")]
        assert writer.position() == 2
        _write(fresh, fresh.delete_document, 3)
        assert [(c.seq, c.name) for c in writer.changes()] == [(3, "d3")]  # followed on
    finally:
        writer.close()
        fresh.close()


def test_other_index_parameters_are_refused_naming_the_store(pg_url):
    store = PostgresStore(pg_url)
    try:
        store.ensure_params(PARAMS)
        with pytest.raises(ParameterMismatch) as refused:
            store.ensure_params({**PARAMS, "num_perm": 64})
        assert str(refused.value) == (
            f"{store.where}: NUM_PERM is 64 but the store was created with 128"
        )
    finally:
        store.close()


def test_a_write_whose_connection_was_cut_ends_quietly_and_the_next_write_works(pg_url):
    store = PostgresStore(pg_url)
    try:
        store.ensure_params(PARAMS)
        store.lock_writes()
        _terminate(pg_url, "SELECT seq, kind")  # the server ends the write's connection
        store.unlock_writes()  # rolled back on a dead connection: no error
        _write(store, store.add_documents, [_doc(0, "a")])  # reconnected
        assert store.document("a") == _doc(0, "a") and store.position() == 1
    finally:
        store.close()


def test_a_cancelled_statement_is_unavailable_at_once_and_not_tried_again(pg_url):
    store = PostgresStore(pg_url, timeout=5.0)
    try:
        store.ensure_params(PARAMS)
        with psycopg.connect(pg_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK,))
            failed: list[BaseException] = []

            def write():
                try:
                    store.lock_writes()
                except StoreUnavailable as exc:
                    failed.append(exc)

            thread = threading.Thread(target=write)
            thread.start()
            waiting = (
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
            while not (pids := holder.execute(waiting).fetchall()):
                assert thread.is_alive()
                time.sleep(0.01)
            holder.execute("SELECT pg_cancel_backend(%s)", (pids[0][0],))
            thread.join(60)
        [error] = failed  # the connection is fine: the same error, not a second wait
        assert str(error).endswith("is unavailable: canceling statement due to user request")
    finally:
        store.close()


def test_a_replace_without_a_text_stores_none(pg_url):
    store = PostgresStore(pg_url)
    try:
        store.ensure_params(PARAMS)
        _write(store, store.add_documents, [_doc(0, "a", None)])
        _write(store, store.replace_document, 0, _doc(1, "a", None, {"v": 2}))
        assert store.document("a") == _doc(1, "a", None, {"v": 2}) and store.texts([1]) == {}
    finally:
        store.close()


def test_answer_settings_not_set_are_adopted_from_the_store_and_set_ones_still_refused(
    opener, caplog
):
    """After ``neardup store-settings``, a replica started without the new value serves with
    the store's (and says so); one that sets another value is refused as before."""
    from neardup.app.config import Settings
    from neardup.app.service.store import lock_settings

    first = opener()
    first.ensure_params(PARAMS)
    first.ensure_settings({"threshold": "0.8", "ngram": "13", "max_matches": "100"})
    first.set_settings({"threshold": "0.85", "max_matches": "7"})
    first.close()
    store = opener()
    settings = Settings(workers=1, ngram=13)  # THRESHOLD and MAX_MATCHES not set
    with caplog.at_level("INFO", logger="neardup"):
        locked = lock_settings(store, settings)
    assert (locked.threshold, locked.ngram, locked.max_matches) == (0.85, 13, 7)
    assert locked.params.threshold == 0.85
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("adopting")]
    assert said == [
        "adopting THRESHOLD=0.85 from the store (NEARDUP_THRESHOLD is not set; default 0.8)",
        "adopting MAX_MATCHES=7 from the store (NEARDUP_MAX_MATCHES is not set; default 100)",
    ]
    assert store.changes() == []  # it follows the values it adopted: they still hold
    assert lock_settings(store, locked) is locked  # nothing more to adopt
    with pytest.raises(SettingsMismatch, match=r"^[^;]*THRESHOLD is 0\.8 but .* 0\.85: start"):
        lock_settings(store, Settings(workers=1, threshold=0.8))
    assert store.ensure_settings({"threshold": "0.85"}, explicit=()) == {}
