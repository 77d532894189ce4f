"""The contamination budgets in the store (``Store.take_budget``): a token bucket a caller and
unit, taken or refused in one atomic call, kept across a reopening (a restart), and on
PostgreSQL one bucket for every replica, whatever their number."""

import threading

import psycopg
import pytest

from neardup.app.service import pgstore
from neardup.app.service.pgstore import PostgresStore
from neardup.app.service.store import SQLiteStore


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request, tmp_path):
    """A function opening (again) one store of the parametrised kind."""
    if request.param == "sqlite":
        target, kind = tmp_path / "data", SQLiteStore
    else:
        target, kind = request.getfixturevalue("pg_url"), PostgresStore
    opened = []

    def open_store():
        store = kind(target)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def _rewind(store, seconds):
    """Move every bucket's last charge ``seconds`` into the past, as if that much time went by."""
    sql = "UPDATE budgets SET at = at - ?"
    if isinstance(store, SQLiteStore):
        store._budgets.execute(sql, (seconds,))
    else:
        with psycopg.connect(store._url, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), (seconds,))


def test_a_bucket_starts_full_takes_or_refuses_whole_and_keeps_callers_and_units_apart(opener):
    store = opener()
    assert store.take_budget("a", "words", 60, 60) is None  # a new bucket is full
    there = store.take_budget("a", "words", 2, 60)
    assert there is not None and there < 1  # refused: what is there, for Retry-After
    assert store.take_budget("b", "words", 60, 60) is None  # another caller's own bucket
    assert store.take_budget("a", "texts", 60, 60) is None  # another unit's own bucket
    _rewind(store, 1.5)  # 1.5 words back at 60 a minute
    there = store.take_budget("a", "words", 2, 60)
    assert there is not None and 1.5 <= there < 2.5  # the refusal took nothing ...
    assert store.take_budget("a", "words", 1, 60) is None  # ... so a smaller one still fits
    _rewind(store, 3600)
    assert store.take_budget("a", "words", 60, 60) is None  # a minute's worth at most
    assert store.take_budget("a", "words", 1, 60) is not None


def test_a_bucket_survives_the_store_being_reopened(opener):
    """A restart goes on from the buckets as they were: no full minute for the asking."""
    store = opener()
    assert store.take_budget("k", "words", 600, 600) is None
    store.close()
    again = opener()
    there = again.take_budget("k", "words", 100, 600)
    assert there is not None and there < 100


def test_sqlite_buckets_refill_on_the_wall_clock_and_a_clock_going_back_refills_nothing(tmp_path):
    store = SQLiteStore(tmp_path)
    try:
        now = [1000.0]
        store.clock = lambda: now[0]
        assert store.take_budget("k", "words", 120, 120) is None
        now[0] = 1010.0  # 20 words back at 2 a second
        assert store.take_budget("k", "words", 20, 120) is None
        assert store.take_budget("k", "words", 1, 120) == 0.0
        now[0] = 900.0  # the clock stepped back: nothing refills, nothing breaks
        assert store.take_budget("k", "words", 1, 120) == 0.0
        now[0] = 901.0
        assert store.take_budget("k", "words", 2, 120) is None
    finally:
        store.close()


def test_buckets_full_again_are_swept(opener):
    store = opener()
    store.take_budget("old", "words", 5, 60)
    store.take_budget("new", "words", 5, 60)
    _rewind(store, 120)
    store.take_budget("new", "words", 5, 60)
    store._swept = -1e12  # a sweep is due
    store.take_budget("new", "words", 1, 60)
    sql = "SELECT caller FROM budgets ORDER BY caller"
    if isinstance(store, SQLiteStore):
        rows = store._budgets.execute(sql).fetchall()
    else:
        with psycopg.connect(store._url) as conn:
            rows = conn.execute(sql).fetchall()
    assert rows == [("new",)]


def test_replicas_share_one_bucket_and_concurrent_takes_never_overspend(pg_url):
    """Eight replicas (stores) taking one word at a time from one bucket of 50, 200 tries at
    once: exactly 50 are taken (each take is one atomic upsert)."""
    stores = [PostgresStore(pg_url) for _ in range(8)]
    taken = []
    gate = threading.Barrier(len(stores))

    def spend(store):
        gate.wait()
        taken.extend(1 for _ in range(25) if store.take_budget("k", "words", 1, 50) is None)

    try:
        threads = [threading.Thread(target=spend, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        # 50 at the start, plus what 50 a minute refilled while they ran (well under one).
        assert 50 <= len(taken) <= 51
        there = stores[0].take_budget("k", "words", 50, 50)
        assert there is not None and there < 50
    finally:
        for s in stores:
            s.close()


def test_a_budget_check_is_not_part_of_an_open_write_transaction(pg_url):
    """A check charged while this replica holds the write lock (a registration between
    ``lock_writes`` and its commit) is on its own connection: kept when the write rolls back."""
    store = PostgresStore(pg_url)
    try:
        store.lock_writes()
        assert store.take_budget("k", "words", 10, 10) is None
        store.unlock_writes()  # rolled back: nothing stored
        there = store.take_budget("k", "words", 10, 10)
        assert there is not None and there < 10
    finally:
        store.close()


def test_the_budgets_table_comes_with_the_layout_and_its_privileges_are_checked(pg_url):
    store = PostgresStore(pg_url)
    store.close()
    assert "budgets" in pgstore.TABLES
    with psycopg.connect(pg_url) as conn:
        versions = conn.execute("SELECT max(version) FROM schema_versions").fetchone()
        found = conn.execute("SELECT to_regclass('budgets') IS NOT NULL").fetchone()
    assert versions == (pgstore.SCHEMA_VERSION,) and found == (True,)


def test_budget_charges_do_not_wait_for_the_wal_but_writes_do(pg_url):
    store = PostgresStore(pg_url)
    try:
        store.take_budget("k", "words", 1, 10)
        store.document_count()
        show = "SHOW synchronous_commit"
        assert store._budget_db.execute(show).fetchone() == ("off",)
        assert store._db.execute(show).fetchone() == ("on",)
    finally:
        store.close()
