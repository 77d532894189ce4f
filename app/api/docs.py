"""``/docs``: Swagger UI served from the ``swagger-ui-bundle`` package, not a CDN (FastAPI's
self-hosting recipe), so the page works without internet; and what the OpenAPI schema adds to
FastAPI's: the Bearer security scheme on every operation but health, and the running service's
smallest query threshold.

``/redoc`` is not served: ReDoc would need a CDN (or another bundled package) too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

__all__ = ["ASSETS", "DESCRIPTION", "TAGS", "install_docs"]

#: Where Swagger UI's files are served from.
ASSETS = "/docs/assets"

DESCRIPTION = """\
Near-duplicate detection and decontamination for LLM training data.

Register documents and ask whether a new one is a near duplicate of anything registered (MinHash
LSH, confirmed on the signature estimate); upload protected eval sets and check texts against
them (shared word n-grams).

**Access**: with a keys file, send `Authorization: Bearer KEY` (the *Authorize* button). Scopes:
`read` (queries, signatures, contamination, GETs), `write` (register, replace, delete documents),
`protect` (protected sets). Without a keys file the service is open.

**Ids** may hold `/`, `%`, `?`, `#`, spaces and any non-control Unicode (1 to 256 characters,
not `.` or `..`): percent-encode them in paths, `/` included (`deb%2Flibfontenc1`).
"""

TAGS = [
    {"name": "documents", "description": "register, replace, read and delete; query read-only"},
    {"name": "clusters", "description": "clusters of near duplicates, by their root (smallest id)"},
    {"name": "protected sets", "description": "eval sets to protect, and contamination checks"},
    {"name": "signatures", "description": "the index parameters, and MinHash signatures"},
    {"name": "stats", "description": "counts of documents, clusters and sets"},
    {"name": "health", "description": "liveness and readiness (open)"},
]

#: Operations answered without a key (health and metrics).
_OPEN = {"/healthz", "/readyz", "/metrics"}


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` from the bundled assets and add the security scheme to ``app.openapi``.
    ``app`` must be created with ``docs_url=None`` and ``redoc_url=None``."""
    app.mount(ASSETS, StaticFiles(directory=Path(str(swagger_ui_path))), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} · API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
            # No badge from validator.swagger.io: nothing leaves the machine.
            swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": False},
        )

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=app.openapi_tags,
            )
            floor = app.state.settings.params.query_floor
            app.openapi_schema = _with_query_floor(_with_security(schema), floor)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _with_query_floor(schema: dict[str, Any], floor: float) -> dict[str, Any]:
    """``QueryRequest.threshold``'s minimum: this service's floor (the bands' reach)."""
    threshold = schema["components"]["schemas"]["QueryRequest"]["properties"]["threshold"]
    for branch in threshold.get("anyOf", [threshold]):
        if branch.get("type") == "number":
            branch.pop("exclusiveMinimum", None)
            branch["minimum"] = floor
    return schema


def _with_security(schema: dict[str, Any]) -> dict[str, Any]:
    """The Bearer scheme on every operation but the open ones."""
    schema.setdefault("components", {})["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "an API key from NEARDUP_API_KEYS_FILE (none needed when open)",
        }
    }
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            operation["security"] = [] if path in _OPEN else [{"bearer": []}]
    return schema
