"""JSON request bodies are read into their route's model off the event loop, a piece and a
batch item at a time (``app.api.json_bodies``): the 422s are pydantic's, an unknown top-level
field is refused before its value is read, and MAX_JSON_VALUES / MAX_JSON_CONTAINERS are 413."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter, Response
from pydantic import ValidationError
from starlette.exceptions import StarletteDeprecationWarning

from neardup.app.api.bodies import THREAD_BYTES, StrictJSONRoute
from neardup.app.api.schemas import DocumentsRequest, QueryRequest
from neardup.app.config import Settings
from neardup.app.main import create_app

with warnings.catch_warnings():  # starlette would rather drive httpx2; httpx serves here
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

MAX_VALUES = 50_000
MAX_CONTAINERS = 5_000


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("data"), workers=1, allowed_hosts="testserver",
        max_json_values=MAX_VALUES, max_json_containers=MAX_CONTAINERS,
    )  # fmt: skip
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        deadline = time.monotonic() + 60
        while c.get("/readyz").json()["status"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.01)
        yield c


def _post(client: TestClient, path: str, body: Any) -> Any:
    raw = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def _pydantic_errors(model: Any, body: Any) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return [{"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in caught.value.errors()]  # fmt: skip


def _documents(count: int, pad: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"d{i}", "text": f"text {i}", "meta": {"p": "x" * pad}} for i in range(count)]


@pytest.mark.parametrize("pad", [0, THREAD_BYTES // 20], ids=["on-the-loop", "in-a-thread"])
def test_a_batch_is_validated_an_item_at_a_time_with_pydantic_errors(client: TestClient, pad: int):
    docs = _documents(30, pad)
    docs[3]["text"] = 5
    docs[7]["meta"] = []
    del docs[9]["id"]
    body = {"documents": docs, "if_new": "yes"}
    got = _post(client, "/v1/documents", body)
    assert got.status_code == 422
    assert got.json()["detail"] == _pydantic_errors(DocumentsRequest, body)
    assert got.json()["detail"][0]["loc"] == ["body", "documents", 3, "text"]


def test_a_valid_body_in_a_thread_is_registered(client: TestClient):
    body = {"documents": _documents(30, THREAD_BYTES // 20)}
    assert len(json.dumps(body)) > THREAD_BYTES
    got = _post(client, "/v1/documents", body)
    assert got.status_code == 200, got.text
    assert [r["status"] for r in got.json()["results"]] == ["created"] * 30


def test_texts_are_validated_strictly_item_by_item(client: TestClient):
    body = {"texts": ["a b c", 7, "d e f"], "limit": 0}
    got = _post(client, "/v1/query", body)
    assert got.status_code == 422
    assert got.json()["detail"] == _pydantic_errors(QueryRequest, body)


def test_an_unknown_top_level_field_is_refused_before_it_is_read(client: TestClient):
    """Its value is never read: not even valid JSON, and over every limit."""
    extra = {"loc": ["body", "junk"], "msg": "Extra inputs are not permitted"}
    for filler in ("[0],", ""):
        raw = '{"texts": ["a"], "junk": [' + filler * 100_000 + "}"
        got = _post(client, "/v1/query", raw)
        assert got.status_code == 422
        assert got.json()["detail"] == [{**extra, "type": "extra_forbidden"}]


def test_values_and_containers_over_their_settings_are_413(client: TestClient):
    many = {"documents": [{"id": "x", "text": "t", "meta": {"n": [1] * MAX_VALUES}}]}
    got = _post(client, "/v1/documents", many)
    assert got.status_code == 413
    assert "more than 50,000 JSON values (MAX_JSON_VALUES)" in got.json()["detail"]
    nested = {"documents": [{"id": "x", "text": "t", "meta": {"n": [[1]] * MAX_CONTAINERS}}]}
    got = _post(client, "/v1/documents", nested)
    assert got.status_code == 413
    assert "more than 5,000 JSON arrays and objects (MAX_JSON_CONTAINERS)" in got.json()["detail"]
    fits = {"documents": [{"id": "y", "text": "t", "meta": {"n": [1] * (MAX_VALUES - 10)}}]}
    assert _post(client, "/v1/documents", fits).status_code == 200


def test_a_body_that_is_not_one_model_is_refused_when_the_app_is_built():
    router = APIRouter(route_class=StrictJSONRoute)
    with pytest.raises(TypeError, match="ONE pydantic model"):

        @router.post("/x")
        async def two(a: DocumentsRequest, b: QueryRequest) -> Response:
            return Response()
