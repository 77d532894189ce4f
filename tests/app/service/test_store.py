"""The SQLite store: protected sets keep their format in a column (older data directories are
migrated once, on open); WAL with full fsync; one open store per data directory; a damaged
file, missing parameters or other index parameters are refused; a full disk is StoreFull."""

import asyncio
import json
import os
import socket
import sqlite3

import pytest

from neardup.app.service import DamagedStore, DataDirLocked, ParameterMismatch, StoreFull
from neardup.app.service.store import ProtectedSetRow, SQLiteStore, StoredDoc
from neardup.core.engine import MinhashParams, ProtectedFormat, parse_protected_set

JSONL = '{"id": "q1", "question": "one two three four"}\n'
TEXT = "jsonl-looking text that is plain"


def test_a_protected_sets_format_is_a_column_not_part_of_its_body(tmp_path):
    store = SQLiteStore(tmp_path)
    store.put_protected_set(ProtectedSetRow("evals", 1, 1, ProtectedFormat.JSONL, JSONL))
    store.put_protected_set(ProtectedSetRow("notes", 1, 1, ProtectedFormat.TEXT, TEXT))
    store.close()
    store = SQLiteStore(tmp_path)
    rows = {r.name: r for r in store.protected_sets()}
    store.close()
    assert (rows["evals"].format, rows["evals"].body) == (ProtectedFormat.JSONL, JSONL)
    assert (rows["notes"].format, rows["notes"].body) == (ProtectedFormat.TEXT, TEXT)
    db = sqlite3.connect(tmp_path / "neardup.sqlite3")
    assert db.execute("SELECT body FROM protected_sets WHERE name = 'notes'").fetchone() == (TEXT,)


def test_an_older_data_directory_is_migrated_once(tmp_path):
    db = sqlite3.connect(tmp_path / "neardup.sqlite3")
    db.execute(
        "CREATE TABLE protected_sets (name TEXT PRIMARY KEY, items INTEGER NOT NULL, "
        "ngrams INTEGER NOT NULL, body TEXT NOT NULL)"
    )
    db.execute("INSERT INTO protected_sets VALUES ('evals', 1, 0, ?)", ("j" + JSONL,))
    db.execute("INSERT INTO protected_sets VALUES ('notes', 1, 0, ?)", ("t" + TEXT,))
    db.commit()
    db.close()
    for _ in range(2):  # a second open must not strip another character
        store = SQLiteStore(tmp_path)
        rows = {r.name: r for r in store.protected_sets()}
        store.close()
        assert (rows["evals"].format, rows["evals"].body) == (ProtectedFormat.JSONL, JSONL)
        assert (rows["notes"].format, rows["notes"].body) == (ProtectedFormat.TEXT, TEXT)
    parsed = parse_protected_set("evals", rows["evals"].body, rows["evals"].format, n=4)
    assert parsed.items == 1
    assert parsed.hits("say one two three four") == [("q1", "one two three four")]


def test_the_connection_is_wal_with_full_fsync(tmp_path):
    store = SQLiteStore(tmp_path)
    try:
        assert store._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert store._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    finally:
        store.close()


def test_the_data_directory_is_locked_while_the_store_is_open(tmp_path):
    store = SQLiteStore(tmp_path)
    try:
        holder = json.loads((tmp_path / "neardup.lock").read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(DataDirLocked, match=rf"in use by pid {os.getpid()} on host "):
            SQLiteStore(tmp_path)
    finally:
        store.close()
    SQLiteStore(tmp_path).close()  # released on close


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is 0 bytes"),
        (b"not a database at all " * 50, "damaged or not a neardup store: file is not a database"),
    ],
)
def test_an_empty_or_foreign_database_file_is_refused(tmp_path, content, message):
    (tmp_path / "neardup.sqlite3").write_bytes(content)
    with pytest.raises(DamagedStore, match=message):
        SQLiteStore(tmp_path)
    # The lock was released: a later open gets as far as the file again.
    with pytest.raises(DamagedStore):
        SQLiteStore(tmp_path)


def test_stored_documents_without_parameters_are_refused(tmp_path):
    params = MinhashParams().index_params()
    store = SQLiteStore(tmp_path)
    store.add_documents([StoredDoc(0, "a", b"d", b"\0" * 512, {}, "text")])
    with pytest.raises(DamagedStore, match="holds documents or protected sets but no index"):
        store.ensure_params(params)
    store._db.execute("INSERT INTO params VALUES ('num_perm', '128')")
    with pytest.raises(DamagedStore, match="its params table lacks BANDS, K, SEED"):
        store.ensure_params(params)
    store.close()


def test_a_new_store_records_its_parameters_and_refuses_each_changed_one(tmp_path):
    params = MinhashParams().index_params()
    assert set(params) == {"num_perm", "bands", "k", "seed", "tokenizer"}
    store = SQLiteStore(tmp_path)
    store.ensure_params(params)
    changed = [
        ("num_perm", 64),
        ("bands", 32),
        ("k", 4),
        ("seed", 1),
        ("tokenizer", "multilingual"),
    ]
    for key, value in changed:
        with pytest.raises(ParameterMismatch, match=rf"^[^;]*{key.upper()} is {value} but"):
            store.ensure_params({**params, key: value})
    store.ensure_params(params)
    store.close()


def test_a_failed_commit_is_rolled_back_and_a_full_disk_is_store_full(tmp_path):
    store = SQLiteStore(tmp_path)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count={pages}")
    doc = StoredDoc(0, "a", b"d", b"\0" * 512, {}, "x" * 100_000)
    with pytest.raises(StoreFull, match="database or disk is full; nothing was stored"):
        store.add_documents([doc])
    with pytest.raises(StoreFull):
        store.probe()
    assert not store._db.in_transaction
    store._db.execute("PRAGMA max_page_count=4294967294")
    store.probe()
    store.add_documents([doc])
    assert store.extent() == 1
    store.close()


QUESTION = "what is the capital city of the country that lies north of the river in the story"


def test_a_set_stored_with_nan_before_it_was_refused_loads_reading_it_as_null(tmp_path, caplog):
    """Uploads with NaN or Infinity are refused now, but a store written before holds them:
    such a set failed to parse at start and was left out (it protected nothing). It loads,
    NaN as null, with a warning naming it; a set broken otherwise stays left out."""
    from neardup.app.config import Settings
    from neardup.app.service import Service

    old = (
        f'{{"id": "q1", "score": NaN, "question": "{QUESTION}"}}\n'
        '{"id": "q2", "weights": [1.5, Infinity, -Infinity], "question": "another one"}\n'
    )
    settings = Settings(data_dir=tmp_path, workers=1)
    store = SQLiteStore(tmp_path)  # as the service stored an upload before: its body as sent
    store.ensure_params(settings.params.index_params())
    store.put_protected_set(ProtectedSetRow("old", 2, 5, ProtectedFormat.JSONL, old))
    store.put_protected_set(ProtectedSetRow("bad", 1, 0, ProtectedFormat.JSONL, '{"id": \n'))
    store.close()

    async def started() -> tuple:
        service = await Service.start(settings)
        try:
            hits = await service.contamination([f"so {QUESTION}"], None, "t", protect=True)
            return sorted(service.protected), sorted(service.broken_sets), hits
        finally:
            await service.close()

    loaded, broken, [hits] = asyncio.run(started())
    assert loaded == ["old"] and broken == ["bad"]
    assert hits.total == 1 and hits.listed[0][:2] == ("old", "q1")
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith("protected set 'old': old:1: NaN is not JSON (field 'score')")
    assert "stored before NaN and Infinity were refused: read as null" in warning
    parsed = parse_protected_set("old", old, ProtectedFormat.JSONL, nan_as_null=True)
    assert parsed.items == 2
    with pytest.raises(ValueError, match="NaN is not JSON"):
        parse_protected_set("old", old, ProtectedFormat.JSONL)
