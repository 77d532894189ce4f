"""What ``neardup serve`` refuses before listening: one server per data directory (the second
names the holder), damaged stores, and changed index parameters (each one, alone)."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from neardup.app.service.store import SQLiteStore, StoredDoc
from neardup.core.engine import MinhashParams
from tests.e2e.conftest import start_server, stop_server


def refused(data_dir: Path, *args: str) -> str:
    """Run ``neardup serve`` expecting exit 2 before it listens; its stderr, one line."""
    cmd = [sys.executable, "-m", "neardup", "serve", "--port", "0", "--workers", "1",
           "--data-dir", str(data_dir), *args]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"serve did not refuse to start: {exc.stderr!r}") from None
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("neardup serve: refusing to start: "), lines
    return lines[0]


def test_a_second_server_on_one_data_directory_refuses_naming_the_first(tmp_path):
    data = tmp_path / "data"
    first = start_server(tmp_path, "--workers", "1", data_dir=data)
    try:
        line = refused(data)
        host = socket.gethostname()
        assert f"{data} is in use by pid {first.process.pid} on host {host} since " in line
        assert str(data / "neardup.lock") in line
        assert httpx.get(f"{first.url}/readyz").status_code == 200  # the first is untouched
    finally:
        stop_server(first)
    second = start_server(tmp_path, "--workers", "1", data_dir=data)  # released on exit
    os.kill(second.process.pid, signal.SIGKILL)
    second.process.wait()
    third = start_server(tmp_path, "--workers", "1", data_dir=data)  # and by SIGKILL
    stop_server(third)


def _store_with_a_document(data: Path) -> sqlite3.Connection:
    store = SQLiteStore(data)
    store.ensure_params(MinhashParams().index_params())
    store.add_documents([StoredDoc(0, "a", b"d" * 32, b"\0" * 512, {}, "some text")])
    store.close()
    return sqlite3.connect(data / "neardup.sqlite3")


def test_a_damaged_store_is_refused_in_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "neardup.sqlite3").write_bytes(b"")
    assert "neardup.sqlite3 is 0 bytes" in refused(empty)
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "neardup.sqlite3").write_bytes(os.urandom(8192))
    assert "damaged or not a neardup store: file is not a database" in refused(garbage)
    unparameterised = tmp_path / "noparams"
    db = _store_with_a_document(unparameterised)
    with db:
        db.execute("DELETE FROM params")
    db.close()
    assert "holds documents or protected sets but no index parameters" in refused(unparameterised)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--num-perm", "64"), "NUM_PERM is 64 but the data directory was created with 128"),
        (("--bands", "32"), "BANDS is 32 but the data directory was created with 16"),
        (("--k", "4"), "K is 4 but the data directory was created with 5"),
        (("--seed", "1"), "SEED is 1 but the data directory was created with 0"),
        (
            ("--tokenizer", "multilingual"),
            "TOKENIZER is multilingual-3@17.0.0 but the data directory was created with words "
            "(a store is never extended under another tokenizer or version of it: start with the "
            "store's, or build a new store from the documents, docs/index.md)",
        ),
    ],
)
def test_each_changed_index_parameter_refuses_to_start(tmp_path, flags, named):
    _store_with_a_document(tmp_path / "data").close()
    line = refused(tmp_path / "data", *flags)
    assert line.endswith(named)
    assert ";" not in line  # that parameter alone


def test_a_store_from_before_the_tokenizer_was_made_with_words(tmp_path):
    db = _store_with_a_document(tmp_path / "data")
    with db:
        db.execute("DELETE FROM params WHERE key = 'tokenizer'")
    db.close()
    line = refused(tmp_path / "data", "--tokenizer", "multilingual")
    assert (
        "TOKENIZER is multilingual-3@17.0.0 but the data directory was created with words" in line
    )
    store = SQLiteStore(tmp_path / "data")  # and it opens with words, as it was made
    try:
        store.ensure_params(MinhashParams().index_params())
    finally:
        store.close()
