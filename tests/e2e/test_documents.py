"""Registering, querying, clustering and deleting through a real server, on either store
(SQLite in its data directory, PostgreSQL at a STORE_URL)."""

import httpx
import pytest

from neardup.core.minhash import clusters as core_clusters
from tests.e2e.conftest import start_server, stop_server
from tests.fixtures import planted_corpus


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def srv(request, tmp_path_factory):
    args = ["--workers", "2", "--max-batch", "500"]
    if request.param == "postgres":
        args += ["--store-url", request.getfixturevalue("postgres").database()]
    server = start_server(tmp_path_factory.mktemp("docs"), *args)
    yield server
    stop_server(server)


def post(srv, path, body):
    return httpx.post(f"{srv.url}{path}", json=body, timeout=60)


def get(srv, path):
    return httpx.get(f"{srv.url}{path}", timeout=60)


def api_clusters(srv, min_size=1):
    out, after = [], None
    while True:
        query = f"/v1/clusters?min_size={min_size}&limit=7" + (f"&after={after}" if after else "")
        body = get(srv, query).json()
        out += [set(c["members"]) for c in body["clusters"]]
        if body["next"] is None:
            return out
        after = body["next"]


def register(srv, docs, batch=40):
    items = list(docs.items())
    results = []
    for lo in range(0, len(items), batch):
        chunk = [{"id": i, "text": t} for i, t in items[lo : lo + batch]]
        response = post(srv, "/v1/documents", {"documents": chunk})
        assert response.status_code == 200, response.text
        results += response.json()["results"]
    return results


def test_registered_clusters_equal_core_clusters(srv):
    corpus = planted_corpus(0)
    results = register(srv, corpus.docs)
    assert [r["id"] for r in results] == list(corpus.docs)
    assert all(r["status"] == "created" for r in results)
    expected = core_clusters(corpus.docs)
    assert api_clusters(srv) == expected
    assert api_clusters(srv, min_size=2) == [g for g in expected if len(g) > 1]
    root_of = {m: min(g) for g in expected for m in g}
    again = [{"id": i, "text": corpus.docs[i]} for i in list(corpus.docs)[:30]]
    final = post(srv, "/v1/documents", {"documents": again})
    for r in final.json()["results"]:
        assert r["status"] == "unchanged"
        assert r["cluster"] == root_of[r["id"]]
    stats = get(srv, "/v1/stats").json()
    assert stats["documents"] == len(corpus.docs)
    assert stats["clusters"] == sum(1 for g in expected if len(g) > 1)
    assert stats["duplicates"] == sum(len(g) - 1 for g in expected)
    one = sorted(expected, key=len)[-1]
    body = get(srv, f"/v1/clusters/{min(one)}").json()
    assert body == {
        "root": min(one), "size": len(one), "members": sorted(one), "members_next": None
    }  # fmt: skip
    if len(one) > 1:
        assert get(srv, f"/v1/clusters/{max(one)}").status_code == 404


def test_matches_include_earlier_docs_of_the_batch_sorted(srv):
    base = " ".join(f"m{i}" for i in range(60))
    near = base.replace("m30", "zz")
    docs = [
        {"id": "match-c", "text": base},
        {"id": "match-b", "text": base, "meta": {"lang": "en"}},
        {"id": "match-a", "text": near},
    ]
    results = post(srv, "/v1/documents", {"documents": docs}).json()["results"]
    assert results[0]["matches"] == []
    assert results[1]["matches"] == [{"id": "match-c", "estimate": 1.0}]
    third = results[2]["matches"]
    assert [m["id"] for m in third] == ["match-b", "match-c"]  # equal estimates: by id
    assert third[0]["estimate"] == third[1]["estimate"] >= 0.8
    assert all(r["cluster"] == "match-a" for r in results)
    assert get(srv, "/v1/documents/match-b").json() == {
        "id": "match-b", "cluster": "match-a", "meta": {"lang": "en"}, "indexed": False,
    }  # fmt: skip


def test_a_changed_text_is_409_and_the_batch_stores_nothing(srv):
    before = get(srv, "/v1/stats").json()
    docs = [{"id": "fresh-1", "text": "brand new words here"}, {"id": "match-c", "text": "changed"}]
    response = post(srv, "/v1/documents", {"documents": docs})
    assert response.status_code == 409
    assert "match-c" in response.json()["detail"]
    assert response.json()["conflicts"] == ["match-c"]  # every such id, for a client to act on
    assert get(srv, "/v1/documents/fresh-1").status_code == 404
    after = get(srv, "/v1/stats").json()
    # Everything as it was (but the seconds since this replica last read the store's log).
    assert {**after, "log_lag_seconds": None} == {**before, "log_lag_seconds": None}


def test_repeated_ids_in_a_batch_are_422_naming_them(srv):
    docs = [
        {"id": "dup-x", "text": "a"},
        {"id": "dup-y", "text": "b"},
        {"id": "dup-x", "text": "c"},
    ]
    response = post(srv, "/v1/documents", {"documents": docs})
    assert response.status_code == 422
    assert "dup-x" in response.json()["detail"] and "dup-y" not in response.json()["detail"]
    assert get(srv, "/v1/documents/dup-y").status_code == 404


def test_batch_limits(srv):
    too_many = [{"id": f"lim-{i}", "text": "x"} for i in range(501)]
    assert post(srv, "/v1/documents", {"documents": too_many}).status_code == 413
    assert post(srv, "/v1/query", {"texts": ["x"] * 501}).status_code == 413
    empty = post(srv, "/v1/documents", {"documents": []}).json()
    assert empty == {"results": [], "truncated": False}


@pytest.mark.parametrize(
    "doc",
    [
        {"id": "", "text": "x"},
        {"id": "a" * 257, "text": "x"},
        {"id": "ctl\x01", "text": "x"},
        {"id": 5, "text": "x"},
        {"id": "ok", "text": 5},
        {"id": "ok"},
        {"id": "ok", "text": "x", "z": 1},
    ],
)
def test_invalid_documents_are_422(srv, doc):
    response = post(srv, "/v1/documents", {"documents": [doc]})
    assert response.status_code == 422
    assert get(srv, "/v1/documents/ok").status_code == 404


def test_query_registers_nothing_and_honours_threshold_and_limit(srv):
    base = " ".join(f"q{i}" for i in range(80))
    post(srv, "/v1/documents", {"documents": [{"id": f"qd-{i}", "text": base} for i in range(3)]})
    before = get(srv, "/v1/stats").json()["documents"]
    body = post(srv, "/v1/query", {"texts": [base, "nothing like it at all here"], "limit": 2})
    results = body.json()["results"]
    assert [m["id"] for m in results[0]["matches"]] == ["qd-0", "qd-1"]
    assert all(m["cluster"] == "qd-0" and m["estimate"] == 1.0 for m in results[0]["matches"])
    assert results[1]["matches"] == []
    assert get(srv, "/v1/stats").json()["documents"] == before


def test_delete_recomputes_the_cluster_so_a_chain_splits(srv):
    words = [f"c{i}" for i in range(400)]
    docs = [
        {"id": "chain-x", "text": " ".join(words[:300])},
        {"id": "chain-y", "text": " ".join(words[20:320])},
        {"id": "chain-z", "text": " ".join(words[40:340])},
    ]
    results = post(srv, "/v1/documents", {"documents": docs}).json()["results"]
    assert {r["cluster"] for r in results} == {"chain-x"}
    assert results[2]["matches"][0]["id"] == "chain-y"
    assert httpx.delete(f"{srv.url}/v1/documents/chain-y").status_code == 204
    assert get(srv, "/v1/documents/chain-y").status_code == 404
    assert get(srv, "/v1/documents/chain-x").json()["cluster"] == "chain-x"
    assert get(srv, "/v1/documents/chain-z").json()["cluster"] == "chain-z"
    assert httpx.delete(f"{srv.url}/v1/documents/chain-y").status_code == 404
    listed = api_clusters(srv)  # the listing follows the deletion (no stale page cache)
    assert {"chain-x"} in listed and {"chain-z"} in listed
    assert all("chain-y" not in group for group in listed)


def test_metrics_and_health(srv):
    text = get(srv, "/metrics").text
    assert 'neardup_requests_total{method="POST",route="/v1/documents",status="200"}' in text
    assert "neardup_documents " in text and "neardup_pool_restarts 0.0" in text
    assert get(srv, "/healthz").json() == {"status": "ok"}


def test_query_threshold_just_above_and_below_a_known_estimate(srv):
    """The request's threshold is used, not the service's: a pair whose estimate is e is found
    at e and not a hair above, and the service's 0.8 does not find it at all."""
    words = [f"t{i}" for i in range(400)]
    post(srv, "/v1/documents", {"documents": [{"id": "thr-a", "text": " ".join(words[:200])}]})
    found = None
    floor = get(srv, "/v1/config").json()["query_threshold_min"]
    for shift in (24, 28, 32, 36):  # shingle Jaccard 0.78 down to 0.69: candidates, mostly
        probe = " ".join(words[shift : shift + 200])
        body = post(srv, "/v1/query", {"texts": [probe], "threshold": floor}).json()
        matches = body["results"][0]["matches"]
        if matches and matches[0]["estimate"] < 0.8:
            found = probe, matches[0]["estimate"]
            break
    assert found is not None
    probe, estimate = found

    def ids(threshold=None):
        body = {"texts": [probe]} | ({} if threshold is None else {"threshold": threshold})
        return [m["id"] for m in post(srv, "/v1/query", body).json()["results"][0]["matches"]]

    assert ids(estimate) == ["thr-a"]
    assert ids(estimate + 1 / 256) == []
    assert ids() == []
