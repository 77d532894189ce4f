"""The service through HTTP against a real uvicorn process with a real spawn pool."""

import httpx

from neardup.core.minhash import signatures
from tests.core.test_signatures import EDGE_TEXTS


def test_health_and_readiness(server):
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz").status_code == 200


def test_config_reports_the_index_parameters(server):
    body = httpx.get(f"{server.url}/v1/config").json()
    assert body["num_perm"] == 128 and body["bands"] == 16 and body["rows"] == 8
    assert body["threshold"] == 0.8 and body["k"] == 5 and body["seed"] == 0
    assert body["ngram"] == 13 and round(body["lsh_threshold"], 4) == 0.7071
    assert body["window_version"] == "words"


def test_signatures_over_http_equal_core(server):
    texts = EDGE_TEXTS + [f"document {i} with a few more words than five" for i in range(9)]
    response = httpx.post(f"{server.url}/v1/signatures", json={"texts": texts}, timeout=30)
    assert response.status_code == 200
    assert response.json()["signatures"] == signatures(texts).tolist()


def test_signatures_of_no_texts(server):
    response = httpx.post(f"{server.url}/v1/signatures", json={"texts": []})
    assert response.json() == {"signatures": []}


def test_wrong_types_are_422_not_coerced(server):
    for body in [{"texts": [1]}, {"texts": "abc"}, {}, {"texts": ["a"], "extra": 1}]:
        response = httpx.post(f"{server.url}/v1/signatures", json=body)
        assert response.status_code == 422, body
        assert "detail" in response.json()
