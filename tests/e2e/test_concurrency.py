"""Concurrent clients: clusters never depend on the order or concurrency of arrival."""

import random
import threading

import httpx

from neardup.core.minhash import clusters as core_clusters
from tests.e2e.conftest import start_server, stop_server
from tests.e2e.test_documents import api_clusters, register
from tests.fixtures import planted_corpus


def test_eight_concurrent_clients_give_the_serial_clusters(tmp_path):
    corpus = planted_corpus(11, n_clusters=15, n_borderline=8, n_singletons=80)
    items = [{"id": i, "text": t} for i, t in corpus.docs.items()]
    random.Random(5).shuffle(items)
    batches = [items[lo : lo + 6] for lo in range(0, len(items), 6)]
    concurrent = start_server(tmp_path / "a", "--workers", "2")
    errors = []
    reads = []

    def client(mine):
        with httpx.Client(timeout=60) as http:
            for batch in mine:
                response = http.post(f"{concurrent.url}/v1/documents", json={"documents": batch})
                if response.status_code != 200:
                    errors.append(response.text)
                # Reads interleave with writes: never half a batch (sizes only grow by batches).
                reads.append(http.get(f"{concurrent.url}/v1/stats").json()["documents"])

    threads = [threading.Thread(target=client, args=(batches[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    try:
        assert errors == []
        got = api_clusters(concurrent)
    finally:
        stop_server(concurrent)
    serial = start_server(tmp_path / "b", "--workers", "1")
    try:
        register(serial, dict(sorted(corpus.docs.items())), batch=25)
        assert api_clusters(serial) == got
    finally:
        stop_server(serial)
    assert got == core_clusters(corpus.docs)
    last = len(batches[-1])
    assert all(n % 6 == 0 or (n - last) % 6 == 0 for n in reads), reads
