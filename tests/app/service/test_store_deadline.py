"""A shared store call's STORE_TIMEOUT counts from when the call was queued for the store's
thread and covers connecting: a call queued behind others that took it all fails at once, and
a connection that does not come within what is left is given up (libpq counts whole seconds,
at least 2, so it cannot be told a shorter wait)."""

import threading
import time

import pytest

from neardup.app.service import StoreUnavailable, pgstore
from neardup.app.service.pgstore import PostgresStore
from neardup.app.service.store import queued_call


class _Made:
    """A stand-in for a connection: remembers being closed."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_connection_not_made_in_time_is_given_up_and_closed_when_it_comes():
    release, made = threading.Event(), _Made()

    def slow():
        release.wait(60)
        return made

    with pytest.raises(pgstore._Overdue, match="no connection within STORE_TIMEOUT"):
        pgstore._connect_within(slow, 0.05)
    release.set()  # the attempt finishes later: its connection is closed, not leaked
    deadline = time.monotonic() + 60
    while not made.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert made.closed


def test_a_connection_made_in_time_or_refused_is_passed_on():
    made = _Made()
    assert pgstore._connect_within(lambda: made, 60) is made and not made.closed

    def refused():
        raise OSError("refused")

    with pytest.raises(OSError, match="refused"):
        pgstore._connect_within(refused, 60)


def test_a_call_queued_longer_than_store_timeout_fails_at_once(pg_url):
    store = PostgresStore(pg_url, timeout=5)
    try:
        assert store.document_count() == 0
        conn = store._db
        queued = time.monotonic() - 6  # queued behind calls that took more than 5 s
        with pytest.raises(StoreUnavailable, match=r"no answer within 5 s \(STORE_TIMEOUT\)"):
            queued_call(queued, store.document_count)
        assert store._db is conn and not conn.broken  # the connection was not touched
        time.sleep(pgstore.FAIL_FAST)
        assert queued_call(time.monotonic(), store.document_count) == 0
        assert store.available()
    finally:
        store.close()


def test_a_reconnection_counts_against_the_calls_deadline(pg_url, monkeypatch):
    """A call that must reconnect (its connection died) connects within what is left of its
    STORE_TIMEOUT, not within libpq's connect_timeout on top of it."""
    store = PostgresStore(pg_url, timeout=5)
    waits = []
    real = pgstore._connect_within

    def spy(connect, seconds):
        waits.append(seconds)
        return real(connect, seconds)

    monkeypatch.setattr(pgstore, "_connect_within", spy)
    try:
        store.document_count()
        store._db.close()  # gone: the next call reconnects
        assert queued_call(time.monotonic() - 2, store.document_count) == 0
        assert len(waits) == 1 and 0 < waits[0] <= 3
    finally:
        store.close()


def test_a_write_ended_past_its_deadline_still_releases_the_write_lock(pg_url):
    """Ending a write transaction with no time left closes its connection (the server rolls
    it back and frees the write lock) rather than leaving it open and locked."""
    store, other = PostgresStore(pg_url, timeout=5), PostgresStore(pg_url, timeout=5)
    try:
        store.lock_writes()
        conn = store._tx
        queued_call(time.monotonic() - 6, store.unlock_writes)
        assert conn.closed
        assert other.lock_writes() == []  # not left waiting for the lock
        other.unlock_writes()
        assert store.document_count() == 0  # the next call reconnects
    finally:
        store.close()
        other.close()
