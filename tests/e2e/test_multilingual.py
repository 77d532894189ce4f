"""``neardup serve --tokenizer multilingual`` over HTTP, on real translated text
(tests/catalogs.py): /v1/config names it, a Chinese near copy is a duplicate, a planted Japanese
eval item is contamination, and the service's clusters are core's."""

import json

import httpx
import pytest

from neardup.core.engine import MinhashParams, batch_signatures
from tests.app.cli.test_multilingual import one_percent_changed
from tests.catalogs import MESSAGES, document
from tests.e2e.conftest import start_server, stop_server

ZH = document("zh_CN", 0, 12)
JA_ITEM = MESSAGES["ja"][30]


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("multi"), "--workers", "1", "--tokenizer",
                          "multilingual")  # fmt: skip
    yield server
    stop_server(server)


def test_config_names_the_tokenizer_and_signatures_are_cores(srv):
    config = httpx.get(f"{srv.url}/v1/config").json()
    assert config["tokenizer"] == "multilingual"
    assert config["tokenizer_version"] == "multilingual-3@17.0.0"
    assert config["window_version"] == "weighted-3"
    got = httpx.post(f"{srv.url}/v1/signatures", json={"texts": [ZH]}).json()["signatures"]
    assert got == batch_signatures([ZH], MinhashParams(tokenizer="multilingual")).tolist()


def test_a_chinese_near_copy_is_a_duplicate(srv):
    copy = one_percent_changed(ZH)
    assert copy != ZH
    body = {"documents": [{"id": "zh", "text": ZH}, {"id": "zh~near", "text": copy}]}
    response = httpx.post(f"{srv.url}/v1/documents", json=body, timeout=60)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["cluster"] for r in results] == ["zh", "zh"]
    assert results[1]["matches"][0]["id"] == "zh"


def test_a_planted_japanese_item_is_contamination(srv):
    body = json.dumps({"id": "ja1", "question": JA_ITEM}, ensure_ascii=False) + "\n"
    put = httpx.put(f"{srv.url}/v1/protected-sets/evals.jsonl", content=body.encode(),
                    headers={"content-type": "application/x-ndjson"})  # fmt: skip
    assert put.status_code == 201, put.text
    planted = document("ja", 0, 6) + JA_ITEM + document("ja", 6, 6)
    texts = [planted, document("ja", 0, 12)]
    response = httpx.post(f"{srv.url}/v1/contamination", json={"texts": texts})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["contaminated", "clean"]
    assert results[0]["hits"][0]["item"] == "ja1"
