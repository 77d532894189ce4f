"""Service behaviour a pipeline relies on, through a real server: register-only-if-new under
real concurrent requests, a query threshold the bands cannot reach, a contamination check with
nothing to check, replacing a text on purpose (durable across a kill -9), and the API key from
the environment."""

import json
import os
import signal
import threading

import httpx
import pytest

from neardup.app.client import Client, ClientError
from neardup.core.engine import lsh_probability
from tests.app.cli.test_cli import neardup
from tests.e2e.conftest import start_server, stop_server


def text(n: int, words: int = 80) -> str:
    return " ".join(f"t{n}w{i}" for i in range(words))


def post(server, path, body):
    return httpx.post(f"{server.url}{path}", json=body, timeout=60)


# --- register only if new ---------------------------------------------------------------------


def test_if_new_leaves_out_documents_with_a_match(server):
    first = post(server, "/v1/documents", {"documents": [{"id": "n-a", "text": text(1)}]})
    assert first.json()["results"][0]["status"] == "created"
    near = text(1, 80) + " one more"
    batch = [
        {"id": "n-b", "text": near},  # matches the registered n-a
        {"id": "n-c", "text": text(2)},  # new
        {"id": "n-d", "text": text(2)},  # a copy of n-c, earlier in this batch
        {"id": "n-e", "text": text(3)},  # new
        {"id": "n-a", "text": text(1)},  # itself again: unchanged, as without if_new
    ]
    body = post(server, "/v1/documents", {"documents": batch, "if_new": True}).json()
    got = {r["id"]: r for r in body["results"]}
    assert [r["status"] for r in body["results"]] == [
        "duplicate", "created", "duplicate", "created", "unchanged",
    ]  # fmt: skip
    assert [m["id"] for m in got["n-b"]["matches"]] == ["n-a"] and got["n-b"]["cluster"] == "n-a"
    assert got["n-d"]["matches"] == [{"id": "n-c", "estimate": 1.0}]
    assert got["n-d"]["match_count"] == 1 and got["n-d"]["cluster"] == "n-c"
    for left_out in ("n-b", "n-d"):
        missing = httpx.get(f"{server.url}/v1/documents/{left_out}", timeout=60)
        assert missing.status_code == 404
    assert httpx.get(f"{server.url}/v1/clusters/n-c", timeout=60).json()["members"] == ["n-c"]


def test_push_if_new_counts_what_it_left_out(server, tmp_path):
    corpus = tmp_path / "c.jsonl"
    lines = [{"id": "p/1", "text": text(80)}, {"id": "p/2", "text": text(80)},
             {"id": "p/3", "text": text(81)}]  # fmt: skip
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    pushed = neardup("push", corpus, "--url", server.url, "--if-new", cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    assert "created 2, unchanged 0, duplicate (not registered) 1" in pushed.stderr
    assert httpx.get(f"{server.url}/v1/documents/p%2F2", timeout=60).status_code == 404


def test_if_new_is_not_the_default(server):
    batch = [{"id": "d-a", "text": text(7)}, {"id": "d-b", "text": text(7)}]
    results = post(server, "/v1/documents", {"documents": batch}).json()["results"]
    assert [r["status"] for r in results] == ["created", "created"]
    bad = post(server, "/v1/documents", {"documents": batch, "if_new": "yes"})
    assert bad.status_code == 422


def _send(server, go, results, k, doc_id, body_text):
    go.wait()
    doc = {"id": doc_id, "text": body_text}
    results[k] = post(server, "/v1/documents", {"documents": [doc], "if_new": True})


def test_racing_copies_under_if_new_register_exactly_one(server):
    """Rounds of 4 concurrent requests, each a copy (or a near copy) of one text under its own
    id: exactly one is created each round, the others are answered duplicate naming it."""
    for round_ in range(12):
        base = text(100 + round_, 120)
        texts = [base, base, base + " tail", "head " + base]
        results: list = [None] * len(texts)
        go = threading.Barrier(len(texts))
        threads = [
            threading.Thread(target=_send, args=(server, go, results, k, f"race-{round_}-{k}", t))
            for k, t in enumerate(texts)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        answers = [r.json()["results"][0] for r in results]
        created = [a["id"] for a in answers if a["status"] == "created"]
        assert len(created) == 1, answers
        for answer in answers:
            if answer["status"] == "duplicate":
                assert [m["id"] for m in answer["matches"]] == created
                assert answer["cluster"] == created[0]
        stored = [
            httpx.get(f"{server.url}/v1/documents/race-{round_}-{k}", timeout=60).status_code
            for k in range(len(texts))
        ]
        assert sorted(stored) == [200, 404, 404, 404]


# --- query threshold within the bands' reach --------------------------------------------------


def test_query_threshold_below_the_reach_is_a_422_that_says_so(server):
    config = httpx.get(f"{server.url}/v1/config", timeout=60).json()
    floor = config["query_threshold_min"]
    bands, rows = config["bands"], config["rows"]
    assert lsh_probability(floor, bands, rows) == pytest.approx(0.5)
    assert floor < config["threshold"]
    post(server, "/v1/documents", {"documents": [{"id": "q-a", "text": text(40)}]})
    ok = post(server, "/v1/query", {"texts": [text(40)], "threshold": floor})
    assert ok.status_code == 200 and ok.json()["results"][0]["matches"][0]["id"] == "q-a"
    for low in (0.3, floor - 0.01):
        refused = post(server, "/v1/query", {"texts": [text(40)], "threshold": low})
        assert refused.status_code == 422
        detail = refused.json()["detail"]
        assert "below what the bands can find" in detail and "query_threshold_min" in detail


# --- contamination with nothing to check ------------------------------------------------------


def test_contamination_without_protected_sets_says_nothing_was_checked(server):
    listed = httpx.get(f"{server.url}/v1/protected-sets", timeout=60).json()
    assert listed == []
    body = post(server, "/v1/contamination", {"texts": ["any text at all"]}).json()
    assert body["checked_sets"] == []
    assert body["results"] == [
        {"status": "unchecked", "contaminated": False, "hit_count": 0, "hits": []}
    ]
    put = httpx.put(
        f"{server.url}/v1/protected-sets/evals",
        content=b"the quick brown fox jumps over the lazy dog again and again today\n",
        headers={"content-type": "text/plain"},
        timeout=60,
    )
    assert put.status_code == 201
    body = post(server, "/v1/contamination", {"texts": ["nothing protected"]}).json()
    assert body["checked_sets"] == ["evals"] and body["results"][0]["status"] == "clean"
    body = post(server, "/v1/contamination", {"texts": ["nothing"], "sets": []}).json()
    assert body["checked_sets"] == [] and body["results"][0]["status"] == "unchecked"
    httpx.delete(f"{server.url}/v1/protected-sets/evals", timeout=60)


# --- replacing a text on purpose --------------------------------------------------------------


def test_replace_a_text_is_durable_and_regroups_clusters(tmp_path):
    server = start_server(tmp_path, "--workers", "1")
    try:
        with Client(server.url) as client:
            client.register([
                {"id": "r/x", "text": text(50), "meta": {"v": 1}},
                {"id": "r/y", "text": text(50) + " extra"},
                {"id": "r/z", "text": text(60)},
            ])  # fmt: skip
            assert client.cluster("r/x")["members"] == ["r/x", "r/y"]
            conflict = httpx.post(
                f"{server.url}/v1/documents",
                json={"documents": [{"id": "r/x", "text": text(60)}]},
                timeout=60,
            )
            assert conflict.status_code == 409
            replaced = client.replace("r/x", text(60) + " changed")
            assert replaced["status"] == "replaced"
            assert [m["id"] for m in replaced["matches"]] == ["r/z"]
            assert replaced["cluster"] == "r/x"
            assert client.cluster("r/x")["members"] == ["r/x", "r/z"]
            assert client.cluster("r/y")["members"] == ["r/y"]
            assert client.document("r/x")["meta"] == {"v": 1}  # meta omitted: kept
            assert client.replace("r/x", text(60) + " changed")["status"] == "unchanged"
            assert client.replace("r/x", text(60) + " changed", meta={"v": 2})["status"] == (
                "replaced"
            )
            assert client.replace("r/new", text(70))["status"] == "created"
            [found] = client.query([text(50)])
            assert [m["id"] for m in found] == ["r/y"]
        os.kill(server.pid, signal.SIGKILL)
        server.process.wait(timeout=30)
        server.kill_group()
    finally:
        stop_server(server)
    again = start_server(tmp_path, "--workers", "1", data_dir=tmp_path / "data")
    try:
        with Client(again.url) as client:
            assert client.document("r/x")["meta"] == {"v": 2}
            assert client.cluster("r/x")["members"] == ["r/x", "r/z"]
            assert client.cluster("r/y")["members"] == ["r/y"]
            assert client.stats()["documents"] == 4
            with pytest.raises(ClientError) as info:
                client.replace("x" * 257, "a text")
            assert info.value.status == 422 and "at most 256" in str(info.value.detail)
    finally:
        stop_server(again)


# --- the API key from the environment ---------------------------------------------------------


def test_client_and_cli_take_the_key_from_neardup_api_key(tmp_path, monkeypatch):
    keys = tmp_path / "keys.txt"
    keys.write_text("k-env-0123456789abcdef read,write\n", encoding="utf-8")
    server = start_server(tmp_path, "--workers", "1", "--api-keys-file", str(keys))
    try:
        corpus = tmp_path / "c.jsonl"
        corpus.write_text('{"id": "e/1", "text": "some words to push here"}\n', encoding="utf-8")
        monkeypatch.delenv("NEARDUP_API_KEY", raising=False)
        with Client(server.url, retries=0) as client, pytest.raises(ClientError) as info:
            client.stats()
        assert info.value.status == 401
        refused = neardup("push", corpus, "--url", server.url, "--quiet", cwd=tmp_path)
        assert refused.returncode != 0 and "401" in refused.stderr
        monkeypatch.setenv("NEARDUP_API_KEY", "k-env-0123456789abcdef")
        with Client(server.url) as client:
            assert client.stats()["documents"] == 0
        pushed = neardup("push", corpus, "--url", server.url, "--quiet", cwd=tmp_path)
        assert pushed.returncode == 0, pushed.stderr
        monkeypatch.setenv("NEARDUP_API_KEY", "wrong-key")
        flag = neardup(
            "query", corpus, "--url", server.url, "--api-key", "k-env-0123456789abcdef",
            "--quiet", cwd=tmp_path,
        )  # fmt: skip
        assert flag.returncode == 0, flag.stderr  # the flag wins over the environment
        assert '"e/1"' in flag.stdout
    finally:
        stop_server(server)
