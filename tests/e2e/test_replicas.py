"""Three ``neardup serve`` replicas on one PostgreSQL behave as one service, end to end: four
writers spread over them, near-duplicates raced onto two replicas, one replica killed with
SIGKILL mid-ingest and restarted, the database stopped and started mid-ingest; afterwards every
acknowledged document is on every replica and every replica's clusters equal core's. A replica
with other index parameters, or a database it cannot reach, is refused at start (exit 2)."""

import os
import signal
import subprocess
import sys
import threading
import time

import httpx

from bench.common.machine import REPO_ROOT
from bench.common.server import free_port, serving
from neardup.app.api.errors import STORE_AWAY
from neardup.core.minhash import clusters as core_clusters
from tests.e2e.conftest import start_server, stop_server
from tests.e2e.test_documents import api_clusters
from tests.fixtures import planted_corpus


def _writer(urls, slot, batches, acked, stop):
    """Send batches to replica ``urls[slot]`` (which may move), each until answered 200."""
    with httpx.Client(timeout=30) as client:
        for batch in batches:
            while not stop.is_set():
                try:
                    response = client.post(f"{urls[slot]}/v1/documents", json={"documents": batch})
                except httpx.TransportError:
                    time.sleep(0.05)
                    continue
                if response.status_code == 200:
                    acked.update(d["id"] for d in batch)
                    time.sleep(0.05)  # spread the ingest over the kill and the restart
                    break
                assert response.status_code == 503, response.text  # never a 500
                assert response.headers["retry-after"] == "1"
                time.sleep(0.05)


def _converged(servers, timeout=20.0):
    deadline = time.monotonic() + timeout
    positions = []
    while time.monotonic() < deadline:
        positions = [httpx.get(f"{s.url}/v1/stats").json()["log_position"] for s in servers]
        if len(set(positions)) == 1:
            return positions[0]
        time.sleep(0.05)
    raise AssertionError(f"replicas did not converge: {positions}")


def _race(a, b, n):
    """Register two near-duplicates on two replicas at the same moment; both results."""
    text = " ".join(f"race{n}w{i}" for i in range(150))
    results = {}
    gate = threading.Barrier(2)

    def send(url, doc_id, suffix):
        gate.wait()
        body = {"documents": [{"id": doc_id, "text": f"{text} {suffix}"}]}
        results[doc_id] = httpx.post(f"{url}/v1/documents", json=body, timeout=30).json()

    threads = [
        threading.Thread(target=send, args=(a.url, f"race{n}-a", "left")),
        threading.Thread(target=send, args=(b.url, f"race{n}-b", "right")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[f"race{n}-a"]["results"][0], results[f"race{n}-b"]["results"][0]]


def test_three_replicas_under_kill_and_database_restart_behave_as_one(tmp_path, postgres):
    url = postgres.database()
    args = ("--workers", "1", "--store-url", url)
    servers = [start_server(tmp_path / f"r{i}", *args) for i in range(3)]
    corpus = planted_corpus(21, n_clusters=12, n_singletons=300)
    items = [{"id": i, "text": t} for i, t in corpus.docs.items()]
    batches = [items[lo : lo + 2] for lo in range(0, len(items), 2)]
    urls = [s.url for s in servers] + [servers[0].url]  # four writers over three replicas
    acked: set[str] = set()
    stop = threading.Event()
    writers = [
        threading.Thread(target=_writer, args=(urls, w, batches[w::4], acked, stop))
        for w in range(4)
    ]
    try:
        for n in range(4):  # racing near-duplicates: one finds the other, never neither
            got = _race(servers[0], servers[1], n)
            counts = sorted(r["match_count"] for r in got)
            assert counts == [0, 1], got
        for w in writers:
            w.start()
        time.sleep(0.4)
        postgres.stop()  # the database goes away mid-ingest
        try:
            assert len(acked) < len(items)
            query = {"texts": [items[0]["text"]]}
            answered = httpx.post(f"{servers[1].url}/v1/query", json=query, timeout=10)
            assert answered.status_code == 200  # reads from memory keep working
            write = {"documents": [{"id": "while-down", "text": "the database is away now"}]}
            refused = httpx.post(f"{servers[0].url}/v1/documents", json=write, timeout=10)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            # Where the database is and what it said go to the log, not to every client.
            assert refused.json()["detail"] == STORE_AWAY
            stored = httpx.get(f"{servers[2].url}/v1/documents/race0-a", timeout=10)
            assert stored.status_code == 503  # it reads the store; so do the clusters
            assert stored.json()["detail"] == STORE_AWAY
            assert f":{postgres.port}/" in servers[0].log.read_text()  # the operator's log says
            cluster = httpx.get(f"{servers[2].url}/v1/clusters/race0-a", timeout=10)
            assert cluster.status_code == 503 and cluster.json()["detail"] == STORE_AWAY
            stats = httpx.get(f"{servers[2].url}/v1/stats", timeout=10)
            assert stats.status_code == 200 and stats.json()["store_up"] == 0  # counts kept
            time.sleep(1.0)
        finally:
            postgres.start()  # the writers resume by themselves
        time.sleep(0.3)
        assert len(acked) < len(items)
        os.kill(servers[2].pid, signal.SIGKILL)  # a replica dies mid-ingest
        servers[2].process.wait()
        servers[2] = start_server(tmp_path / "r2", *args)
        urls[2] = servers[2].url
        for w in writers:
            w.join(timeout=180)
        assert not any(w.is_alive() for w in writers)
        assert len(acked) == len(items)  # every batch was acknowledged in the end
        position = _converged(servers)
        metrics = httpx.get(f"{servers[2].url}/metrics").text
        assert f"neardup_log_position {float(position)}" in metrics
        views = [api_clusters(s) for s in servers]
        present = {m for group in views[0] for m in group}
        assert acked <= present
        races = {f"race{n}-{s}" for n in range(4) for s in "ab"}
        assert present == set(corpus.docs) | races
        assert views[0] == views[1] == views[2]
        assert [g for g in views[0] if not g & races] == core_clusters(corpus.docs)
        assert [g for g in views[0] if g & races] == [
            {f"race{n}-a", f"race{n}-b"} for n in range(4)
        ]
    finally:
        stop.set()
        for s in servers:
            stop_server(s)


def _serve(*args):
    cmd = [sys.executable, "-m", "neardup", "serve", "--port", str(free_port()), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)


def test_a_replica_with_other_parameters_or_no_database_is_refused(tmp_path, postgres):
    url = postgres.database()
    server = start_server(tmp_path / "first", "--workers", "1", "--store-url", url)
    stop_server(server)
    other = _serve(
        "--workers", "1", "--store-url", url, "--num-perm", "64", "--seed", "2",
        "--tokenizer", "multilingual",
    )  # fmt: skip
    assert other.returncode == 2
    assert "NUM_PERM is 64 but the store was created with 128" in other.stderr
    assert "SEED is 2 but the store was created with 0" in other.stderr
    assert "TOKENIZER is multilingual-3@17.0.0 but the store was created with words" in other.stderr
    away = f"postgresql://postgres:hunter2@127.0.0.1:{free_port()}/nowhere"
    missing = _serve("--workers", "1", "--store-url", away)
    assert missing.returncode == 2
    assert "refusing to start" in missing.stderr and "unavailable" in missing.stderr
    assert "hunter2" not in missing.stderr
    bad = _serve("--store-url", "mysql://somewhere/db")
    assert bad.returncode == 2 and "postgresql://" in bad.stderr


def _one_line_refusal(done, *expected):
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("neardup serve: refusing to start: "), done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


def test_store_refusals_at_start_are_one_line_naming_the_fix(postgres):
    name = postgres.database().rsplit("/", 1)[1]  # the obvious CREATE DATABASE, as a superuser
    role = postgres.role(password="Corr3ct-Horse")  # the obvious CREATE ROLE
    url = postgres.url(name, role, "Corr3ct-Horse")
    privilege = _serve("--workers", "1", "--store-url", url)
    _one_line_refusal(privilege, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}")
    wrong = _serve("--workers", "1", "--store-url", postgres.url(name, role, "Wr0ng-Horse"))
    _one_line_refusal(wrong, f"the server refused role {role}'s password", "PGPASSWORD")
    away = f"postgresql://{role}:Corr3ct-Horse@127.0.0.1:{free_port()}/{name}"
    unreachable = _serve("--workers", "1", "--store-url", away)
    _one_line_refusal(unreachable, "is unavailable", "Connection refused")
    spelled = url.replace("postgresql://", "postgresql+psycopg://")  # SQLAlchemy's spelling
    sqlalchemy = _serve("--workers", "1", "--store-url", spelled)
    _one_line_refusal(sqlalchemy, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}")
    for done in (privilege, wrong, unreachable, sqlalchemy):
        assert "Horse" not in done.stderr + done.stdout


def _poll(get, want, timeout=60.0):
    """``get()`` until it returns ``want`` (its last value otherwise, for the assertion)."""
    deadline = time.monotonic() + timeout
    got = get()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.1)
        got = get()
    return got


def _store_up(server):
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return next(line for line in text.splitlines() if line.startswith("neardup_store_up "))


def _ready(server):
    response = httpx.get(f"{server.url}/readyz", timeout=10)
    return response.status_code, response.json()


def test_a_replica_says_the_store_is_away_and_back(tmp_path, postgres):
    role = postgres.role(password="Sw0rdfish-Pw")
    name = postgres.database(owner=role).rsplit("/", 1)[1]
    url = postgres.url(name, role, "Sw0rdfish-Pw").replace("postgresql:", "postgres:")
    with serving(tmp_path, "--workers", "1", "--store-url", url) as server:
        doc = {"documents": [{"id": "a", "text": "a text stored while the store is up"}]}
        assert httpx.post(f"{server.url}/v1/documents", json=doc, timeout=30).status_code == 200
        assert _ready(server) == (200, {"status": "ready", "store": "up"})
        assert _store_up(server) == "neardup_store_up 1.0"
        postgres.stop()
        try:
            assert _poll(lambda: _store_up(server), "neardup_store_up 0.0") == (
                "neardup_store_up 0.0"
            )
            down = (503, {"status": "store unavailable", "store": "down"})
            assert _poll(lambda: _ready(server), down) == down
            assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
            query = {"texts": ["a text stored while the store is up"]}
            assert httpx.post(f"{server.url}/v1/query", json=query, timeout=10).status_code == 200
            write = {"documents": [{"id": "b", "text": "refused while the store is away"}]}
            refused = httpx.post(f"{server.url}/v1/documents", json=write, timeout=30)
            assert refused.status_code == 503 and "unavailable" in refused.json()["detail"]
            said = refused.text + str(_ready(server)) + httpx.get(f"{server.url}/metrics").text
        finally:
            postgres.start()
        assert _poll(lambda: _store_up(server), "neardup_store_up 1.0") == "neardup_store_up 1.0"
        up = (200, {"status": "ready", "store": "up"})
        assert _poll(lambda: _ready(server), up) == up
        assert httpx.post(f"{server.url}/v1/documents", json=write, timeout=30).status_code == 200
        said += server.log.read_text()
        assert "store unavailable, answering 503" in said  # the log says it, once
        assert "Sw0rdfish" not in said
