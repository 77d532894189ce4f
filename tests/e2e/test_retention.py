"""Two ``neardup serve`` replicas on one PostgreSQL with a short log retention: one is frozen
(SIGSTOP) while the other replaces, deletes and adds documents and prunes the log past the
frozen one's position; thawed, the frozen replica notices, says so in its log, reloads from the
live documents and ends equal to the other: the deleted documents 404, the new texts found.
The store then holds the live documents' rows and one log entry."""

import os
import signal
import time

import httpx
import psycopg

from tests.e2e.conftest import start_server, stop_server
from tests.e2e.test_documents import api_clusters

IDS = [f"doc{j:02d}" for j in range(30)]


def _text(doc_id, version):
    return " ".join(f"{doc_id}v{version}w{i}" for i in range(60))


def _poll(check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)
    return found


def _stats(server):
    return httpx.get(f"{server.url}/v1/stats", timeout=10).json()


def test_a_replica_frozen_past_the_retention_window_reloads_and_agrees(tmp_path, postgres):
    url = postgres.database()
    args = ("--workers", "1", "--store-url", url)
    # Only the leader prunes: frozen inside a pruning step, the other would hold the write lock.
    leader = start_server(tmp_path / "a", *args, "--log-retention-seconds", "0.5")
    frozen = start_server(tmp_path / "b", *args)
    try:
        with httpx.Client(base_url=leader.url, timeout=30) as client:
            docs = [{"id": i, "text": _text(i, 0)} for i in IDS]
            assert client.post("/v1/documents", json={"documents": docs}).status_code == 200
            _poll(lambda: _stats(frozen)["log_position"] == _stats(leader)["log_position"])
            behind = _stats(frozen)["log_position"]
            os.kill(frozen.process.pid, signal.SIGSTOP)
            try:
                for doc_id in IDS[:10]:
                    put = client.put(f"/v1/documents/{doc_id}", json={"text": _text(doc_id, 1)})
                    assert put.status_code == 200, put.text
                for doc_id in IDS[10:15]:
                    assert client.delete(f"/v1/documents/{doc_id}").status_code == 204
                new = [{"id": f"new{j}", "text": _text(f"new{j}", 0)} for j in range(3)]
                assert client.post("/v1/documents", json={"documents": new}).status_code == 200
                with psycopg.connect(url, autocommit=True) as db:
                    oldest = lambda: db.execute("SELECT min(seq) FROM changes").fetchone()[0]  # noqa: E731
                    _poll(lambda: oldest() > behind + 1)
            finally:
                os.kill(frozen.process.pid, signal.SIGCONT)
        _poll(lambda: _stats(frozen)["log_reloads"] >= 1)
        _poll(lambda: _stats(frozen)["log_position"] == _stats(leader)["log_position"])
        _poll(lambda: httpx.get(f"{frozen.url}/readyz", timeout=10).status_code == 200)
        assert "reloading every document from the store" in frozen.log.read_text()
        assert api_clusters(frozen) == api_clusters(leader)
        assert _stats(frozen)["documents"] == _stats(leader)["documents"] == 30 - 5 + 3
        with httpx.Client(base_url=frozen.url, timeout=30) as client:
            for doc_id in IDS[10:15]:
                assert client.get(f"/v1/documents/{doc_id}").status_code == 404
            asked = {"texts": [_text(i, 1) for i in IDS[:10]] + [_text("new0", 0)]}
            results = client.post("/v1/query", json=asked).json()["results"]
            assert [r["matches"][0]["id"] for r in results] == [*IDS[:10], "new0"]
        with psycopg.connect(url, autocommit=True) as db:
            _poll(lambda: db.execute("SELECT count(*) FROM changes").fetchone()[0] == 1)
            rows = db.execute("SELECT count(*), count(*) FILTER (WHERE deleted) FROM documents")
            assert rows.fetchone() == (28, 0)  # the live documents' rows only
    finally:
        stop_server(leader)
        stop_server(frozen)
