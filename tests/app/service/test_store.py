"""The SQLite store: protected sets keep their format in a column (older data directories are
migrated once, on open); one open store per data directory."""

import json
import os
import socket
import sqlite3

import pytest

from app.service import DataDirLocked
from app.service.store import ProtectedSetRow, SQLiteStore
from core.engine import ProtectedFormat, parse_protected_set

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
