"""A PUT that replaces a document is one step on every replica: a follower never loses the
document between the old text's removal and the new text's arrival (no 404, no query finding
neither text), and its ``log_position`` names only states some replica acknowledged."""

import threading

import httpx

from tests.e2e.conftest import start_server, stop_server

IDS = [f"doc{j}" for j in range(6)]


def _text(doc_id, version):
    """Two texts per id, unrelated to each other and to the other ids' texts."""
    return " ".join(f"{doc_id}v{version}w{i}" for i in range(80))


def test_a_follower_never_loses_a_document_being_replaced(tmp_path, postgres):
    url = postgres.database()
    args = ("--workers", "1", "--store-url", url)
    leader, follower = (start_server(tmp_path / name, *args) for name in ("a", "b"))
    done = threading.Event()
    lost: list[str] = []
    reads = [0]
    try:
        docs = [{"id": i, "text": _text(i, 0)} for i in IDS]
        added = httpx.post(f"{leader.url}/v1/documents", json={"documents": docs}, timeout=30)
        assert added.status_code == 200

        def replace():
            with httpx.Client(base_url=leader.url, timeout=30) as client:
                for n in range(1, 41):
                    for doc_id in IDS:
                        put = client.put(
                            f"/v1/documents/{doc_id}", json={"text": _text(doc_id, n % 2)}
                        )
                        assert put.status_code == 200, put.text
            done.set()

        def read():
            with httpx.Client(base_url=follower.url, timeout=30) as client:
                while not done.is_set():
                    for doc_id in IDS:
                        got = client.get(f"/v1/documents/{doc_id}")
                        if got.status_code != 200:
                            lost.append(f"GET {doc_id}: {got.status_code}")
                        both = {"texts": [_text(doc_id, 0), _text(doc_id, 1)]}
                        results = client.post("/v1/query", json=both).json()["results"]
                        found = {m["id"] for r in results for m in r["matches"]}
                        if doc_id not in found:
                            lost.append(f"query {doc_id}: found neither text")
                        reads[0] += 1
                    # The log: 1 added the documents, then each PUT is a delete (even) and an
                    # add (odd) in one transaction: an even position was never acknowledged.
                    position = client.get("/v1/stats").json()["log_position"]
                    if position % 2 == 0:
                        lost.append(f"log_position {position}: half a replace")

        threads = [threading.Thread(target=replace)] + [
            threading.Thread(target=read) for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in threads)
        assert reads[0] > 0
        assert lost == [], f"{len(lost)} of {2 * reads[0]} reads lost it: {lost[:5]}"
    finally:
        done.set()
        stop_server(leader)
        stop_server(follower)
