"""What schemathesis found the OpenAPI schema and the server disagreeing on, fixed."""

import pytest
from pydantic import ValidationError

from neardup.app.api.schemas import QueryRequest
from neardup.app.config import Settings
from neardup.app.main import create_app
from tests.app.api.asgi import call


@pytest.fixture
def app(tmp_path):
    return create_app(Settings(data_dir=tmp_path, workers=1, allowed_hosts="testserver"))


def test_schema_405_allow_lists_every_method_of_the_path(app):
    documents, sets, listing = call(
        app, ("OPTIONS", "/v1/documents/x"), ("OPTIONS", "/v1/protected-sets/x"),
        ("PATCH", "/v1/protected-sets"),
    )  # fmt: skip
    assert documents.status_code == 405 and documents.headers["allow"] == "DELETE, GET, PUT"
    assert sets.status_code == 405 and sets.headers["allow"] == "DELETE, GET, PUT"
    assert listing.status_code == 405 and listing.headers["allow"] == "GET"


def test_schema_integral_floats_are_integers(app):
    assert QueryRequest.model_validate({"texts": [], "limit": 2568.0}).limit == 2568
    for bad in (2.5, 0.0, True, "3"):
        with pytest.raises(ValidationError):
            QueryRequest.model_validate({"texts": [], "limit": bad})
    limit = app.openapi()["components"]["schemas"]["QueryRequest"]["properties"]["limit"]
    assert {"type": "integer", "minimum": 1} in limit["anyOf"]


def test_schema_describes_the_protected_set_upload_body(app):
    body = app.openapi()["paths"]["/v1/protected-sets/{name}"]["put"]["requestBody"]
    assert body["required"] is True
    assert set(body["content"]) == {
        "application/x-ndjson", "application/jsonl", "application/json", "text/csv",
        "text/plain", "multipart/form-data", "application/vnd.apache.parquet",
        "application/x-parquet",
    }  # fmt: skip
    assert body["content"]["multipart/form-data"]["schema"]["required"] == ["file"]
