"""Bad input gets a clear 4xx, changes nothing, and the server keeps serving."""

import threading
import time

import httpx
import pytest

from tests.e2e.conftest import start_server, stop_server, wait_inflight
from tests.e2e.test_documents import api_clusters

DOC = b'{"documents": [{"id": "new", "text": "some words here"}]}'
DEEP = b'{"texts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"

# (path, body bytes, content type, expected status)
BAD = [
    ("/v1/documents", b'{"documents": [{"id": "new", "text": "x"}', "application/json", 400),
    ("/v1/documents", b"{documents: 1}", "application/json", 400),
    ("/v1/documents", b"", "application/json", 400),
    ("/v1/documents", b"   ", "application/json", 400),
    ("/v1/documents", b"null", "application/json", 422),
    ("/v1/documents", b"5", "application/json", 422),
    ("/v1/documents", b'"documents"', "application/json", 422),
    ("/v1/documents", b"[]", "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": 5, "text": "x"}]}', "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "new", "text": 5}]}', "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "new", "text": null}]}', "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "new"}]}', "application/json", 422),
    ("/v1/documents", b"{}", "application/json", 422),
    ("/v1/documents", b'{"documents": [], "extra": 1}', "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "new", "text": "x", "x": 1}]}',
     "application/json", 422),
    ("/v1/query", b'{"texts": ["a"], "threshold": NaN}', "application/json", 400),
    ("/v1/query", b'{"texts": ["a"], "threshold": Infinity}', "application/json", 400),
    ("/v1/query", b'{"texts": ["a"], "threshold": -Infinity}', "application/json", 400),
    ("/v1/documents", b'{"documents": [], "documents": []}', "application/json", 400),
    ("/v1/documents", b'{"documents": [{"id": "new", "id": "b", "text": "x"}]}',
     "application/json", 400),
    ("/v1/signatures", b'{"texts": ["\xff"]}', "application/json", 400),
    ("/v1/signatures", b'{"texts": ["\xc0\xaf"]}', "application/json", 400),
    ("/v1/signatures", b'{"texts": ["\xed\xa0\x80"]}', "application/json", 400),
    ("/v1/documents", b'{"documents": [{"id": "new", "text": "a \\ud800 b"}]}',
     "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "n\\udfffw", "text": "a b"}]}',
     "application/json", 422),
    ("/v1/documents", '{"documents": []}'.encode("utf-16"), "application/json", 400),
    ("/v1/documents", '{"documents": []}'.encode("utf-16"), "application/json; charset=utf-16",
     415),
    ("/v1/documents", DOC, "text/plain", 415),
    ("/v1/documents", DOC, "", 415),
    ("/v1/documents", b'{"documents": [{"id": "", "text": "x"}]}', "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "' + b"a" * 257 + b'", "text": "x"}]}',
     "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "a\\u0001b", "text": "x"}]}', "application/json",
     422),
    ("/v1/documents", b'{"documents": [{"id": "a\\u0000b", "text": "x"}]}', "application/json",
     422),
    ("/v1/documents", b'{"documents": [{"id": "a\\nb", "text": "x"}]}', "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "d", "text": "x"}, {"id": "d", "text": "y"}]}',
     "application/json", 422),
    ("/v1/signatures", DEEP, "application/json", 400),
    ("/v1/query", b'{"texts": ["a"], "limit": 1' + b"0" * 5000 + b"}", "application/json", 400),
    ("/v1/query", b'{"texts": ["a"], "limit": 0}', "application/json", 422),
    ("/v1/query", b'{"texts": ["a"], "threshold": 1.5}', "application/json", 422),
    ("/v1/contamination", b'{"texts": ["a"], "sets": ["missing"]}', "application/json", 404),
    ("/v1/protected-sets/empty", b"", "application/x-ndjson", 422),
    ("/v1/protected-sets/badline", b'{"q": "ok"}\n\nnot json\n', "application/x-ndjson", 422),
    ("/v1/protected-sets/bad%20name", b"some text", "text/plain", 422),
    ("/v1/protected-sets/" + "n" * 129, b"some text", "text/plain", 422),
    # Stored, then a 500 on every read: refused at the door instead.
    ("/v1/documents", b'{"documents": [{"id": "m", "text": "x", "meta": {"k": "\\ud800"}}]}',
     "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "m", "text": "x", "meta": {"\\udfff": 1}}]}',
     "application/json", 422),
    ("/v1/documents",
     b'{"documents": [{"id": "m", "text": "x", "meta": {"a": [{"b": "\\ud83d"}]}}]}',
     "application/json", 422),
    ("/v1/documents", b'{"documents": [{"id": "m", "text": "x", "meta": {"k": ' + b"[" * 40
     + b"]" * 40 + b"}}]}", "application/json", 422),
    ("/v1/protected-sets/sur", b'{"id": "\\ud800", "q": "one two three"}\n',
     "application/x-ndjson", 422),
]  # fmt: skip


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("hardening"), "--workers", "1")
    text = "the cat sat on the mat today " * 5
    seed = {"documents": [{"id": "base-1", "text": text}, {"id": "base-2", "text": text}]}
    assert httpx.post(f"{server.url}/v1/documents", json=seed).status_code == 200
    yield server
    stop_server(server)


def snapshot(server):
    stats = httpx.get(f"{server.url}/v1/stats").json()
    counts = {k: stats[k] for k in ("documents", "clusters", "duplicates", "protected_sets")}
    sets = httpx.get(f"{server.url}/v1/protected-sets").json()
    return counts, api_clusters(server), sets


@pytest.mark.parametrize(("path", "body", "content_type", "status"), BAD)
def test_bad_input_is_a_clear_4xx_that_changes_nothing(srv, path, body, content_type, status):
    before = snapshot(srv)
    headers = {"content-type": content_type} if content_type else {}
    method = "PUT" if "protected-sets" in path else "POST"
    response = httpx.request(method, f"{srv.url}{path}", content=body, headers=headers, timeout=60)
    assert response.status_code == status, response.text
    assert response.json()["detail"]
    assert httpx.get(f"{srv.url}/healthz").status_code == 200
    assert snapshot(srv) == before


def test_bad_line_names_its_line_number(srv):
    response = httpx.put(f"{srv.url}/v1/protected-sets/bl", content=b'{"a": "b"}\n[1]\n',
                         headers={"content-type": "application/jsonl"})  # fmt: skip
    assert ":2:" in response.json()["detail"]


def test_odd_but_valid_texts_are_accepted_as_data(srv):
    docs = [
        {"id": "empty", "text": ""},
        {"id": "spaces", "text": "   \t\n  "},
        {"id": "punct", "text": "!!! ??? ... ---"},
        {"id": "controls", "text": "nul \u0000 bell \u0007 bidi \u202e reversed \u2066 x"},
        {"id": "é", "text": "precomposed e acute"},
        {"id": "e\u0301", "text": "decomposed e acute"},
    ]
    response = httpx.post(f"{srv.url}/v1/documents", json={"documents": docs})
    assert response.status_code == 200
    assert [r["status"] for r in response.json()["results"]] == ["created"] * 6
    # Ids are exact strings: the two spellings of é are two documents.
    assert httpx.get(f"{srv.url}/v1/documents/%C3%A9").json()["id"] == "é"
    assert httpx.get(f"{srv.url}/v1/documents/e%CC%81").json()["id"] == "e\u0301"
    # Texts without words are nobody's near duplicate.
    again = [{"id": "empty-2", "text": ""}, {"id": "punct-2", "text": "!!! ??? ... ---"}]
    results = httpx.post(f"{srv.url}/v1/documents", json={"documents": again}).json()["results"]
    assert all(r["matches"] == [] and r["cluster"] == r["id"] for r in results)
    echoed = httpx.post(f"{srv.url}/v1/query", json={"texts": ["nul \u0000 bell"]})
    assert echoed.status_code == 200


def test_huge_tokens_and_repeated_words_finish_quickly(srv):
    started = time.monotonic()
    docs = [{"id": "token-10mb", "text": "x" * 10_000_000},
            {"id": "million-words", "text": "word " * 1_000_000}]  # fmt: skip
    response = httpx.post(f"{srv.url}/v1/documents", json={"documents": docs}, timeout=120)
    assert response.status_code == 200
    assert time.monotonic() - started < 60


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    server = start_server(
        tmp_path_factory.mktemp("limited"), "--workers", "1", "--max-batch", "50",
        "--max-body-bytes", "200000", "--max-text-chars", "20000",
        "--max-batch-memory", "4000000",
    )  # fmt: skip
    yield server
    stop_server(server)


def test_limits_are_413(limited):
    url = limited.url
    too_long = {"documents": [{"id": "t", "text": "x " * 15_000}]}
    assert httpx.post(f"{url}/v1/documents", json=too_long).status_code == 413
    too_many = {"texts": ["a"] * 51}
    assert httpx.post(f"{url}/v1/signatures", json=too_many).status_code == 413
    # Counted before any item is validated: 413, not a 422 about the items.
    invalid_items = {"documents": [{"id": i} for i in range(51)]}
    refused = httpx.post(f"{url}/v1/documents", json=invalid_items)
    assert refused.status_code == 413 and "got 51 in 'documents'" in refused.json()["detail"]
    big = b'{"texts": ["' + b"a " * 150_000 + b'"]}'
    sized = httpx.post(f"{url}/v1/signatures", content=big,
                       headers={"content-type": "application/json"})  # fmt: skip
    assert sized.status_code == 413

    def chunks():
        for _ in range(100):
            yield b"a" * 4096

    streamed = httpx.post(f"{url}/v1/signatures", content=chunks(),
                          headers={"content-type": "application/json"})  # fmt: skip
    assert streamed.status_code == 413
    assert "limit" in streamed.json()["detail"]
    heavy = {"texts": ["word " * 1800] * 10}  # 90k characters, 4.4 MB estimated: over 4 MB
    response = httpx.post(f"{url}/v1/signatures", json=heavy)
    assert response.status_code == 413 and "working memory" in response.json()["detail"]
    assert httpx.get(f"{url}/v1/stats").json()["documents"] == 0


def test_overload_is_a_quick_503_with_retry_after(tmp_path):
    server = start_server(tmp_path, "--workers", "1", "--max-inflight", "1")
    # Seconds of work for the one worker: 15 M shingles (the compiled kernels take ~0.1 us
    # each, after tokenising 45 MB; an 8 MB word is one shingle, signed in a blink).
    slow = {"texts": [f"{i} " + "ab " * 2_500_000 for i in range(6)]}
    try:
        first = {}
        sender = threading.Thread(
            target=lambda: first.update(
                r=httpx.post(f"{server.url}/v1/signatures", json=slow, timeout=120)
            )
        )
        sender.start()
        wait_inflight(server)
        statuses = []
        deadline = time.monotonic() + 30
        while sender.is_alive() and time.monotonic() < deadline and 503 not in statuses:
            started = time.monotonic()
            response = httpx.post(f"{server.url}/v1/signatures", json={"texts": ["a b"]})
            statuses.append(response.status_code)
            if response.status_code == 503:
                assert response.headers["retry-after"]
                assert time.monotonic() - started < 1.0
            time.sleep(0.02)
        sender.join(timeout=120)
        assert 503 in statuses
        assert first["r"].status_code == 200
        assert httpx.post(f"{server.url}/v1/signatures", json={"texts": ["a b"]}).status_code == 200
    finally:
        stop_server(server)


@pytest.mark.parametrize(
    ("path", "body", "token", "field"),
    [
        ("/v1/documents", b'{"documents": [{"id": "n", "text": "x", "meta": {"s": NaN}}]}',
         "NaN", "documents[0].meta.s"),
        ("/v1/documents",
         b'{"documents": [{"id": "n", "text": "x", "meta": {"a": [1, -Infinity]}}]}',
         "-Infinity", "documents[0].meta.a[1]"),
        ("/v1/documents", b'{"documents": [{"id": "n", "text": "x", "meta": {"big": 1e999}}]}',
         "1e999", "documents[0].meta.big"),
        ("/v1/decontamination",
         b'{"documents": [{"id": "n", "text": "x", "meta": {"q": Infinity}}], "mode": "cut"}',
         "Infinity", "documents[0].meta.q"),
        ("/v1/query", b'{"texts": ["a"], "threshold": NaN}', "NaN", "threshold"),
    ],
)  # fmt: skip
def test_nan_and_infinity_are_a_400_naming_the_field(srv, path, body, token, field):
    """Python's json reads NaN, Infinity and 1e999 (as infinity); JSON has no such number, and
    a stored meta holding one would be written out as invalid JSON: refused, saying where."""
    before = snapshot(srv)
    response = httpx.post(f"{srv.url}{path}", content=body,
                          headers={"content-type": "application/json"})  # fmt: skip
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert detail.startswith(f"invalid JSON: {token} ") and f"(field '{field}')" in detail
    assert snapshot(srv) == before


def test_a_protected_set_with_nan_is_refused_naming_line_and_field(srv):
    body = b'{"id": "q1", "q": "one two three"}\n{"id": "q2", "q": "four", "w": NaN}\n'
    response = httpx.put(f"{srv.url}/v1/protected-sets/nan", content=body,
                         headers={"content-type": "application/x-ndjson"})  # fmt: skip
    assert response.status_code == 422
    assert ":2: NaN is not JSON (field 'w')" in response.json()["detail"]
