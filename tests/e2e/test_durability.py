"""Durability: restarts, SIGKILL at random moments, SIGTERM mid-request, dead pool workers, and
no pool workers left behind by a SIGKILLed server."""

import os
import random
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from neardup.core.minhash import clusters as core_clusters
from tests.e2e.conftest import start_server, stop_server, wait_inflight
from tests.e2e.test_documents import api_clusters, register
from tests.fixtures import planted_corpus
from tests.procs import pool_workers, resource_trackers


def _batches(docs, size):
    items = [{"id": i, "text": t} for i, t in docs.items()]
    return [items[lo : lo + size] for lo in range(0, len(items), size)]


def test_restart_recovers_everything_and_refuses_other_parameters(tmp_path):
    corpus = planted_corpus(3)
    server = start_server(tmp_path, "--workers", "1")
    register(server, corpus.docs)
    httpx.put(f"{server.url}/v1/protected-sets/ev", content="one two " * 10,
              headers={"content-type": "text/plain"})  # fmt: skip
    before = api_clusters(server), httpx.get(f"{server.url}/v1/stats").json()
    stop_server(server)
    server = start_server(tmp_path, "--workers", "1")
    try:
        after = api_clusters(server), httpx.get(f"{server.url}/v1/stats").json()
        assert after[0] == before[0] == core_clusters(corpus.docs)
        for key in ("documents", "clusters", "duplicates", "protected_sets"):
            assert after[1][key] == before[1][key]
    finally:
        stop_server(server)
    with pytest.raises(RuntimeError, match="NUM_PERM is 64 but the data directory was created"):
        start_server(tmp_path, "--num-perm", "64", "--bands", "16")


def _client(url, batches, acked, stop):
    """Send batches in order, resending a batch until it is answered 2xx."""
    with httpx.Client(timeout=30) as client:
        for batch in batches:
            while not stop.is_set():
                try:
                    response = client.post(f"{url[0]}/v1/documents", json={"documents": batch})
                except httpx.TransportError:
                    time.sleep(0.05)
                    continue
                if response.status_code == 200:
                    acked.update(d["id"] for d in batch)
                    break
                time.sleep(0.05)


def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path):
    corpus = planted_corpus(7, n_clusters=12, n_singletons=150)
    batches = _batches(corpus.docs, 8)
    rng = random.Random(2024)
    url = [""]
    acked: set[str] = set()
    stop = threading.Event()
    server = start_server(tmp_path, "--workers", "1")
    url[0] = server.url
    halves = [batches[0::2], batches[1::2]]
    clients = [threading.Thread(target=_client, args=(url, h, acked, stop)) for h in halves]
    for c in clients:
        c.start()
    try:
        for _ in range(4):
            time.sleep(rng.uniform(0.2, 0.8))
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait()
            server = start_server(tmp_path, "--workers", "1", data_dir=tmp_path / "data")
            url[0] = server.url
        for c in clients:
            c.join(timeout=120)
        assert not any(c.is_alive() for c in clients)
        present = {m for group in api_clusters(server) for m in group}
        assert acked <= present
        assert present <= set(corpus.docs)
        assert len(acked) == len(corpus.docs)  # every batch was eventually acknowledged
        assert api_clusters(server) == core_clusters({i: corpus.docs[i] for i in present})
    finally:
        stop.set()
        stop_server(server)


def test_sigterm_finishes_the_request_in_flight(tmp_path):
    server = start_server(tmp_path, "--workers", "1")
    big = {f"t-{i}": " ".join(f"w{i}x{j}" for j in range(300)) for i in range(3000)}
    result = {}

    def send():
        batch = [{"id": i, "text": t} for i, t in big.items()]
        result["r"] = httpx.post(f"{server.url}/v1/documents", json={"documents": batch},
                                 timeout=120)  # fmt: skip

    sender = threading.Thread(target=send)
    sender.start()
    wait_inflight(server)  # the request is being hashed or stored
    server.process.send_signal(signal.SIGTERM)
    sender.join(timeout=120)
    assert result["r"].status_code == 200
    # uvicorn re-raises the signal after its graceful shutdown, so the exit is by SIGTERM.
    assert server.process.wait(timeout=60) in (0, -signal.SIGTERM)
    assert "stopped" in server.log.read_text()  # the lifespan ran to its end
    server = start_server(tmp_path, "--workers", "1")
    try:
        assert httpx.get(f"{server.url}/v1/stats").json()["documents"] == len(big)
    finally:
        stop_server(server)


def test_a_killed_pool_worker_is_replaced_and_nothing_hangs(tmp_path):
    server = start_server(tmp_path, "--workers", "2")
    try:
        workers = pool_workers(server.process.pid)
        assert len(workers) == 2
        texts = [" ".join(f"k{i}y{j}" for j in range(200)) for i in range(4000)]
        result = {}

        def send():
            body = {"documents": [{"id": f"p-{i}", "text": t} for i, t in enumerate(texts)]}
            result["r"] = httpx.post(f"{server.url}/v1/documents", json=body, timeout=120)

        sender = threading.Thread(target=send)
        sender.start()
        wait_inflight(server)
        os.kill(workers[0], signal.SIGKILL)
        sender.join(timeout=120)
        response = result["r"]
        assert response.status_code in (200, 503), response.text
        if response.status_code == 503:
            assert "Retry-After" in response.headers
            assert httpx.get(f"{server.url}/v1/stats").json()["documents"] == 0
        follow = httpx.post(f"{server.url}/v1/signatures", json={"texts": ["a b c"]}, timeout=60)
        assert follow.status_code == 200
        stats = httpx.get(f"{server.url}/v1/stats").json()
        assert stats["pool_restarts"] >= 1
        assert stats["documents"] in (0, len(texts))
        assert len(pool_workers(server.process.pid)) == 2
    finally:
        stop_server(server)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its new parent to reap it has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_pool_workers_do_not_outlive_a_killed_server(tmp_path):
    server = start_server(tmp_path, "--workers", "2")
    helpers = pool_workers(server.process.pid) + resource_trackers(server.process.pid)
    assert len(helpers) == 3
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait()
    deadline = time.monotonic() + 10
    while any(map(_alive, helpers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in helpers if _alive(pid)]
    for pid in left:  # do not leak them into the rest of the run
        os.kill(pid, signal.SIGKILL)
    assert not left, "pool processes outlived the killed server"
