"""``/v1/documents``: register, read and delete documents; ``/v1/query``: check without storing."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from neardup.app.api.answers import Budget, JSONObject, answer, json_bytes
from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import ServiceDep, require
from neardup.app.api.schemas import (
    ERRORS,
    DocumentOut,
    DocumentResult,
    DocumentsRequest,
    DocumentsResponse,
    QueryRequest,
    QueryResponse,
    ReplaceRequest,
)
from neardup.app.service import NewDoc, Registered

_C = r"\x00-\x1F\x7F-\x9F"
#: A DocId (schemas.DocId) as a path parameter, stated in the schema: 1 to 256 characters, no
#: control character, not "." or "..".
PathId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=256,
        pattern=rf"^(?:[^{_C}.][^{_C}]*|\.[^{_C}.][^{_C}]*|\.\.[^{_C}]+)$",
        description="percent-encoded in the path, `/` included",
    ),
]

#: A listed match's JSON besides its id (``{"id":,"estimate":},``, a float of up to 24 digits).
_FIXED_MATCH = 48
#: ... and a query match's besides its id and cluster (``,"cluster":``).
_FIXED_QUERY_MATCH = 60

router = APIRouter(prefix="/v1", tags=["documents"], route_class=StrictJSONRoute, responses=ERRORS)


@router.post("/documents", dependencies=[require("write")], response_model=DocumentsResponse)
async def register(request: Request, body: DocumentsRequest, service: ServiceDep) -> Response:
    """Register a batch; answered only once it is durable. With ``if_new``, documents that have a
    confirmed match are answered ``duplicate`` and not registered."""
    docs = [NewDoc(d.id, d.text, d.meta) for d in body.documents]
    results = await service.register(docs, if_new=body.if_new)
    return await answer(request, lambda budget: _results(results, budget))


def _results(results: list[Registered], budget: Budget) -> JSONObject:
    """A ``DocumentsResponse`` as plain JSON values, matches listed while they fit."""
    return {"results": [_result(r, budget) for r in results], "truncated": budget.truncated}


def _match_bytes(match: tuple[str, float]) -> int:
    return json_bytes(match[0]) + _FIXED_MATCH


def _result(r: Registered, budget: Budget) -> JSONObject:
    """A ``DocumentResult`` as plain JSON values."""
    listed = budget.prefix(r.matches.best, _match_bytes)
    return {
        "id": r.id, "cluster": r.cluster, "status": r.status, "match_count": r.matches.count,
        "matches": [{"id": i, "estimate": e} for i, e in listed],
    }  # fmt: skip


@router.put(
    "/documents/{doc_id:path}", dependencies=[require("write")], response_model=DocumentResult
)
async def replace(
    request: Request, doc_id: PathId, body: ReplaceRequest, service: ServiceDep
) -> Response:
    """Replace a document's text on purpose (or register it if unknown): durable, its old
    cluster regrouped, its new matches among every other document. ``replaced``, ``created``
    or ``unchanged`` (same text and meta)."""
    meta = body.meta if body.meta is not None else {}
    doc = NewDoc(doc_id, body.text, meta)
    result = await service.replace(doc, meta_given=body.meta is not None)
    return await answer(request, lambda budget: _result(result, budget))


@router.post("/query", dependencies=[require("read")], response_model=QueryResponse)
async def query(request: Request, body: QueryRequest, service: ServiceDep) -> Response:
    """The matches registering would report, without registering anything (looked up, built
    and serialised off the event loop; copies of one text are looked up once)."""
    found = await service.query(body.texts, body.threshold, body.limit)
    return await answer(request, lambda budget: _query_results(found, budget))


def _query_match_bytes(match: tuple[str, float, str]) -> int:
    return json_bytes(match[0]) + json_bytes(match[2]) + _FIXED_QUERY_MATCH


def _query_results(
    found: list[tuple[int, list[tuple[str, float, str]]]], budget: Budget
) -> JSONObject:
    """A ``QueryResponse`` as plain JSON values, matches listed while they fit."""
    results = [
        {
            "match_count": count,
            "matches": [
                {"id": i, "estimate": e, "cluster": c}
                for i, e, c in budget.prefix(best, _query_match_bytes)
            ],
        }
        for count, best in found
    ]
    return {"results": results, "truncated": budget.truncated}


@router.get("/documents/{doc_id:path}", dependencies=[require("read")], response_model=DocumentOut)
async def document(request: Request, doc_id: str, service: ServiceDep) -> Response:
    """A registered document's cluster and meta (a served index's: no meta, ``indexed``)."""
    found_id, cluster, meta, indexed = await service.document(doc_id)
    return await answer(
        request, lambda _: DocumentOut(id=found_id, cluster=cluster, meta=meta, indexed=indexed)
    )


@router.delete("/documents/{doc_id:path}", status_code=204, dependencies=[require("write")])
async def delete(doc_id: str, service: ServiceDep) -> Response:
    """Delete a document; its cluster is recomputed."""
    await service.delete(doc_id)
    return Response(status_code=204)
