"""``/docs`` works offline: Swagger UI's assets come from the service (the fastapi-offline
package), never a CDN; ``/redoc``, whose page would load a logo from a CDN, is not served. The
OpenAPI schema carries descriptions, examples, the Bearer security scheme and the protected-set
upload body."""

import re
from urllib.parse import urlsplit

import httpx


def test_docs_page_references_no_external_host_and_its_assets_are_served(server):
    assets = {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"}
    page = httpx.get(f"{server.url}/docs", timeout=60)
    assert page.status_code == 200
    assert "cdn" not in page.text.lower() and "fonts.googleapis" not in page.text
    refs = re.findall(r'(?:src|href|url)\s*[=:]\s*["\']([^"\']+)["\']', page.text)
    assert assets <= set(refs)
    for ref in refs:
        assert not urlsplit(ref).netloc, f"{ref} is on another host"
        asset = httpx.get(f"{server.url}{ref}", timeout=60)
        assert asset.status_code == 200, ref
    for asset in assets:
        js = httpx.get(f"{server.url}{asset}", timeout=60)
        kind = "javascript" if asset.endswith(".js") else "css"
        assert kind in js.headers["content-type"] and len(js.content) > 100_000
    assert httpx.get(f"{server.url}/redoc", timeout=60).status_code == 404


def test_schema_has_descriptions_examples_bearer_scheme_and_upload_body(server):
    schema = httpx.get(f"{server.url}/openapi.json", timeout=60).json()
    assert "Bearer" in schema["info"]["description"]
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer",
        "description": "an API key from NEARDUP_API_KEYS_FILE (none needed when open)",
    }  # fmt: skip
    paths = schema["paths"]
    assert paths["/v1/documents"]["post"]["security"] == [{"bearer": []}]
    assert paths["/healthz"]["get"]["security"] == []
    for path, operations in paths.items():
        for method, operation in operations.items():
            assert operation.get("description"), f"{method} {path} is undescribed"
    upload = paths["/v1/protected-sets/{name}"]["put"]["requestBody"]["content"]
    assert {"application/x-ndjson", "text/plain", "multipart/form-data"} <= set(upload)
    schemas = schema["components"]["schemas"]
    for name in ("DocumentsRequest", "QueryRequest", "ContaminationRequest", "ReplaceRequest"):
        assert schemas[name].get("examples"), f"{name} has no example"
    threshold = schemas["QueryRequest"]["properties"]["threshold"]["anyOf"][0]
    config = httpx.get(f"{server.url}/v1/config", timeout=60).json()
    assert threshold["minimum"] == config["query_threshold_min"]
    assert "/v1/documents/{doc_id}" in paths
    assert set(paths["/v1/documents/{doc_id}"]) == {"get", "put", "delete"}
