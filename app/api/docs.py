"""``/docs`` (Swagger UI) served from the ``fastapi-offline`` package's files, not a CDN
(FastAPI's self-hosting recipe, packaged), so it works without internet; and what the OpenAPI
schema adds to FastAPI's: the Bearer security scheme on every operation but health, and the
running service's smallest query threshold.

``/redoc`` is not served: ReDoc's page loads its logo from Redocly's CDN whatever its assets.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline

__all__ = ["ASSETS", "DESCRIPTION", "TAGS", "documented_app"]

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


def documented_app(**kwargs: Any) -> FastAPI:
    """``FastAPI(**kwargs)`` with ``/docs`` served from the bundled assets under ASSETS (no
    ``/redoc``), and the schema's additions (``app.state.settings`` must be set before the schema
    is first asked for)."""
    app = FastAPIOffline(
        title="neardup", description=DESCRIPTION, openapi_tags=TAGS, static_url=ASSETS,
        redoc_url=None,
        favicon_url=f"{ASSETS}/favicon.png",
        # No badge from validator.swagger.io: nothing leaves the machine.
        swagger_ui_parameters={"validatorUrl": None}, **kwargs,
    )  # fmt: skip

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
    return app


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
