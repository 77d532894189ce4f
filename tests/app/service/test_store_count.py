"""The stores' document count, kept by triggers (``document_count``): a start reads it instead
of counting every row, so it must stay the table's count of alive documents through every
write, on the embedded store (SQLite) and the shared one (PostgreSQL, layout 7)."""

from __future__ import annotations

import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.app.service import pgstore
from neardup.app.service.pgstore import PostgresStore
from neardup.app.service.store import SQLiteStore, Store, StoredDoc


def _doc(num: int, doc_id: str) -> StoredDoc:
    return StoredDoc(num, doc_id, b"d%d" % num, b"s%d" % num, {}, f"text {num}")


def _counted(path: Path) -> int:
    db = sqlite3.connect(path / "neardup.sqlite3")
    try:
        return int(db.execute("SELECT count(*) FROM documents").fetchone()[0])
    finally:
        db.close()


# add n new documents / delete the k-th live one / replace the k-th / delete several / reopen /
# prune the deleted rows (and the log) past a retention of 0 s
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 5)),
        st.tuples(st.just("delete"), st.integers(0, 50)),
        st.tuples(st.just("replace"), st.integers(0, 50)),
        st.tuples(st.just("delete_many"), st.integers(1, 4)),
        st.tuples(st.just("reopen"), st.just(0)),
        st.tuples(st.just("prune"), st.just(0)),
    ),
    max_size=25,
)


def _run_steps(
    ops: list[tuple[str, int]], open_store: Callable[[], Store], counted: Callable[[], int]
) -> None:
    """Apply ``ops`` to a new store, checking after each that the kept count is the live
    documents' and the table's (``counted``: a real COUNT of the alive rows)."""
    store = open_store()
    live: list[tuple[int, str]] = []  # (num, id) in number order
    made = 0
    try:
        for op, k in ops:
            if op == "add":
                new = [(made + j, f"id{made + j}") for j in range(k)]
                store.lock_writes()
                store.add_documents([_doc(n, i) for n, i in new])
                live += new
                made += k
            elif op == "delete" and live:
                store.lock_writes()
                store.delete_document(live.pop(k % len(live))[0])
            elif op == "replace" and live:
                old, doc_id = live.pop(k % len(live))
                store.lock_writes()
                store.replace_document(old, _doc(made, doc_id))
                live.append((made, doc_id))
                made += 1
            elif op == "delete_many" and live:
                gone, live = live[:k], live[k:]
                store.lock_writes()
                store.delete_documents([n for n, _ in gone])
            elif op == "reopen":
                store.close()
                store = open_store()
            elif op == "prune":
                while store.prune(0.0, 2) >= 2:
                    pass
            assert store.document_count() == len(live) == counted()
            if live:  # a range counted from the table
                assert store.document_count(live[0][0]) == len(live) - 1
    finally:
        store.close()


@settings(max_examples=40, deadline=None)
@given(_OPS)
def test_the_count_kept_is_the_tables_count_after_every_write(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        _run_steps(ops, lambda: SQLiteStore(path), lambda: _counted(path))


@contextmanager
def _pg(url: str, schema: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}") as conn:
        yield conn


def _pg_counted(url: str, schema: str) -> int:
    with _pg(url, schema) as c:
        row = c.execute("SELECT count(*) FROM documents WHERE NOT deleted").fetchone()
    assert row is not None
    return int(row[0])


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_OPS)
def test_the_count_kept_is_the_tables_count_after_every_write_on_postgres(
    pg_url: str, ops: list[tuple[str, int]]
) -> None:
    schema = f"c{uuid.uuid4().hex[:12]}"  # a new store each example
    _run_steps(
        ops, lambda: PostgresStore(pg_url, schema=schema), lambda: _pg_counted(pg_url, schema)
    )


def test_a_store_made_before_the_count_is_counted_once_at_open(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    store.add_documents([_doc(n, f"id{n}") for n in range(7)])
    store.close()
    db = sqlite3.connect(tmp_path / "neardup.sqlite3")
    db.executescript(
        "DROP TRIGGER documents_counted_insert; DROP TRIGGER documents_counted_delete; "
        "DROP TABLE document_count;"
    )
    db.close()
    store = SQLiteStore(tmp_path)  # counted here, then kept
    try:
        assert store.document_count() == 7
        store.delete_document(3)
        store.add_documents([_doc(7, "id7"), _doc(8, "id8")])
        assert store.document_count() == 8 == _counted(tmp_path)
    finally:
        store.close()
    store = SQLiteStore(tmp_path)  # not counted again (nor added to)
    try:
        assert store.document_count() == 8
    finally:
        store.close()


def test_a_postgres_store_of_layout_6_is_counted_once_in_its_migration(pg_url: str) -> None:
    """A store of layout 6 (no kept count) is counted in the migration to 7 (deleted rows not
    counted), then the count is kept."""
    store = PostgresStore(pg_url)
    store.lock_writes()
    store.add_documents([_doc(n, f"id{n}") for n in range(7)])
    store.lock_writes()
    store.delete_documents([2, 5])
    store.close()
    with _pg(pg_url, "public") as c:  # back to layout 6
        c.execute("DROP TABLE document_count")
        for name in ("insert", "update", "delete", "truncate"):
            c.execute(f"DROP TRIGGER documents_counted_{name} ON documents")
            c.execute(f"DROP FUNCTION documents_counted_{name}()")
        c.execute("DELETE FROM schema_versions WHERE version >= 7")
    store = PostgresStore(pg_url)  # migrated here: counted once
    try:
        assert store.document_count() == 5
        store.lock_writes()
        store.delete_document(3)
        store.lock_writes()
        store.add_documents([_doc(7, "id7"), _doc(8, "id8")])
        assert store.document_count() == 6 == _pg_counted(pg_url, "public")
    finally:
        store.close()
    with _pg(pg_url, "public") as c:
        versions = [r[0] for r in c.execute("SELECT version FROM schema_versions ORDER BY 1")]
        assert versions[-1] == pgstore.SCHEMA_VERSION == 7
        # not counted again at the next start: a count made wrong on purpose stays
        c.execute("UPDATE document_count SET documents = 100")
    store = PostgresStore(pg_url)
    try:
        assert store.document_count() == 100
    finally:
        store.close()
