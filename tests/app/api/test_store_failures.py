"""Store writes that fail, block or run out of room, seen through the HTTP app: a batch is in
memory only after its transaction committed, a full disk is a 507 that stores nothing and makes
/readyz 503 "disk full" until a write fits again."""

from __future__ import annotations

import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.exceptions import StarletteDeprecationWarning

from neardup.app.config import Settings
from neardup.app.main import create_app
from neardup.app.service.store import SQLiteStore, StoredDoc

with warnings.catch_warnings():  # starlette would rather drive httpx2; httpx serves here
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

SEED = {"id": "seed", "text": " ".join(f"seed{i}" for i in range(40))}
BATCH = [{"id": f"new-{n}", "text": " ".join(f"w{n}x{i}" for i in range(40))} for n in range(3)]
# 200 KB of text: more pages than the store may add while its "disk" is full.
BIG = [{"id": "big", "text": " ".join(f"word{i}" for i in range(30_000))}]


class FailingStore(SQLiteStore):
    """A store whose batch writes raise."""

    def add_documents(self, docs: Sequence[StoredDoc], clusters: Any = None) -> None:
        raise RuntimeError("the write failed")


class BlockingStore(SQLiteStore):
    """A store whose batch writes wait until released."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.entered = threading.Event()
        self.release = threading.Event()

    def add_documents(self, docs: Sequence[StoredDoc], clusters: Any = None) -> None:
        self.entered.set()
        if not self.release.wait(timeout=60):
            raise RuntimeError("never released")
        super().add_documents(docs, clusters)


@contextmanager
def client(tmp_path: Path, store: SQLiteStore | None = None) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path / "data", workers=1, allowed_hosts="testserver")
    app = create_app(settings, store)
    with TestClient(app, raise_server_exceptions=False) as c:
        deadline = time.monotonic() + 60  # the server listens while it recovers
        while c.get("/readyz").json()["status"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.01)
        yield c


def post_docs(c: TestClient, docs: list[dict[str, str]]) -> int:
    return c.post("/v1/documents", json={"documents": docs}).status_code


def visible(c: TestClient) -> dict[str, object]:
    """What readers can see of BATCH: documents, lookups, query matches, cluster members."""
    query = c.post("/v1/query", json={"texts": [d["text"] for d in BATCH]}).json()
    clusters = c.get("/v1/clusters?min_size=1&limit=1000").json()["clusters"]
    return {
        "documents": c.get("/v1/stats").json()["documents"],
        "found": [c.get(f"/v1/documents/{d['id']}").status_code for d in BATCH],
        "matches": [r["match_count"] for r in query["results"]],
        "members": sorted(m for cl in clusters for m in cl["members"]),
    }


BEFORE = {"documents": 1, "found": [404] * 3, "matches": [0] * 3, "members": ["seed"]}
AFTER = {"documents": 4, "found": [200] * 3, "matches": [1] * 3,
         "members": sorted(["seed", *(d["id"] for d in BATCH)])}  # fmt: skip


def test_a_batch_whose_write_failed_is_never_seen(tmp_path):
    with client(tmp_path) as c:
        assert post_docs(c, [SEED]) == 200
    with client(tmp_path, FailingStore(tmp_path / "data")) as c:
        assert post_docs(c, BATCH) == 500
        assert visible(c) == BEFORE
    with client(tmp_path) as c:
        assert visible(c) == BEFORE


def test_readers_do_not_see_a_batch_until_its_write_committed(tmp_path):
    store = BlockingStore(tmp_path / "data")
    with client(tmp_path, store) as c:
        store.release.set()
        assert post_docs(c, [SEED]) == 200
        store.release.clear()
        store.entered.clear()
        answer: list[int] = []
        writer = threading.Thread(target=lambda: answer.append(post_docs(c, BATCH)))
        writer.start()
        try:
            assert store.entered.wait(timeout=60)
            for _ in range(3):  # readers keep being answered while the write is held
                assert visible(c) == BEFORE
        finally:
            store.release.set()
            writer.join(timeout=60)
        assert answer == [200]
        assert visible(c) == AFTER


def _fill_the_disk(c: TestClient) -> sqlite3.Connection:
    """Let the store's database grow no more (SQLite then fails writes with SQLITE_FULL)."""
    db: sqlite3.Connection = c.app.state.service.store._db  # type: ignore[attr-defined]
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages}")
    return db


def _free_the_disk(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA max_page_count=4294967294")


def _ready(c: TestClient, within: float = 0.0) -> tuple[int, dict[str, str]]:
    deadline = time.monotonic() + within
    while True:
        response = c.get("/readyz")
        if response.status_code == 200 or time.monotonic() >= deadline:
            return response.status_code, response.json()
        time.sleep(0.1)


def test_a_full_disk_is_507_stores_nothing_and_makes_the_service_unready(tmp_path):
    with client(tmp_path) as c:
        assert post_docs(c, [SEED]) == 200
        db = _fill_the_disk(c)
        response = c.post("/v1/documents", json={"documents": BATCH + BIG})
        assert response.status_code == 507, response.text
        assert "full" in response.json()["detail"]
        assert _ready(c) == (503, {"status": "disk full", "store": "up", "index": "up"})
        assert c.get("/readyz").headers["Retry-After"] == "1"
        assert c.get("/healthz").status_code == 200
        assert c.get("/v1/stats").json()["documents"] == 1
        assert c.get("/v1/documents/big").status_code == 404
        # Space returns: the next write succeeds and readiness follows at once.
        _free_the_disk(db)
        assert post_docs(c, BATCH + BIG) == 200
        assert _ready(c) == (200, {"status": "ready", "store": "up", "index": "up"})
        # Full again; this time readiness comes back by itself (its probe write fits).
        _fill_the_disk(c)
        assert post_docs(c, [{"id": "big-2", "text": BIG[0]["text"] + " more"}]) == 507
        assert _ready(c) == (503, {"status": "disk full", "store": "up", "index": "up"})
        _free_the_disk(db)
        assert _ready(c, within=10.0) == (200, {"status": "ready", "store": "up", "index": "up"})
    with client(tmp_path) as c:  # exactly what was acknowledged, after a restart
        assert c.get("/v1/stats").json()["documents"] == 5
        assert c.get("/v1/documents/big-2").status_code == 404


@pytest.mark.parametrize("code", [sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR_WRITE])
def test_a_commit_failing_for_the_disk_is_507_and_rolled_back(tmp_path, monkeypatch, code):
    def execute_failing(self, sql, *args):
        if sql == "COMMIT":
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorcode = code
            raise error
        return sqlite3.Connection.execute(self, sql, *args)

    with client(tmp_path) as c:
        put = c.put("/v1/protected-sets/ev", content="one two three " * 5,
                    headers={"content-type": "text/plain"})  # fmt: skip
        assert put.status_code == 201
        store = c.app.state.service.store  # type: ignore[attr-defined]
        real = store._db
        monkeypatch.setattr(store, "_db", _Proxy(real, execute_failing))
        assert c.delete("/v1/protected-sets/ev").status_code == 507
        assert _ready(c) == (
            503,
            {"status": "disk full", "store": "up", "index": "up"},
        )  # the probe's commit fails too
        assert not real.in_transaction  # rolled back
        monkeypatch.setattr(store, "_db", real)
        assert c.get("/v1/protected-sets/ev").status_code == 200  # still there
        assert _ready(c, within=10.0) == (200, {"status": "ready", "store": "up", "index": "up"})
        assert c.delete("/v1/protected-sets/ev").status_code == 204


class _Proxy:
    """A connection whose ``execute`` is replaced (sqlite3.Connection's own cannot be)."""

    def __init__(self, real: sqlite3.Connection, execute: object) -> None:
        self._real = real
        self._execute = execute

    def execute(self, sql: str, *args: object) -> object:
        return self._execute(self._real, sql, *args)  # type: ignore[operator]

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


def test_a_replica_whose_settings_changed_shows_no_stale_config(tmp_path):
    """Once the store's answer settings differ from a replica's, /v1/config answers 503 with
    the change, as the answering routes do, not the replica's old threshold."""
    with client(tmp_path) as c:
        assert c.get("/v1/config").json()["threshold"] == 0.8
        c.app.state.service.settings_changed = "THRESHOLD changed from 0.8 to 0.9"  # type: ignore[attr-defined]
        for path in ("/v1/config", "/v1/clusters"):
            response = c.get(path)
            assert response.status_code == 503, (path, response.text)
            assert "THRESHOLD changed from 0.8 to 0.9" in response.json()["detail"]
        assert c.get("/healthz").status_code == 200
