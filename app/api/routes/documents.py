"""``/v1/documents``: register, read and delete documents; ``/v1/query``: check without storing."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import ServiceDep, require
from neardup.app.api.schemas import (
    ERRORS,
    DocumentOut,
    DocumentResult,
    DocumentsRequest,
    DocumentsResponse,
    Match,
    QueryMatch,
    QueryRequest,
    QueryResponse,
    QueryResult,
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

router = APIRouter(prefix="/v1", tags=["documents"], route_class=StrictJSONRoute, responses=ERRORS)


@router.post("/documents", dependencies=[require("write")])
async def register(body: DocumentsRequest, service: ServiceDep) -> DocumentsResponse:
    """Register a batch; answered only once it is durable. With ``if_new``, documents that have a
    confirmed match are answered ``duplicate`` and not registered."""
    docs = [NewDoc(d.id, d.text, d.meta) for d in body.documents]
    results = await service.register(docs, if_new=body.if_new)
    return DocumentsResponse(results=[_result(r) for r in results])


def _result(r: Registered) -> DocumentResult:
    return DocumentResult(
        id=r.id,
        cluster=r.cluster,
        status=r.status,
        match_count=r.matches.count,
        matches=[Match(id=i, estimate=e) for i, e in r.matches.best],
    )


@router.put("/documents/{doc_id:path}", dependencies=[require("write")])
async def replace(doc_id: PathId, body: ReplaceRequest, service: ServiceDep) -> DocumentResult:
    """Replace a document's text on purpose (or register it if unknown): durable, its old
    cluster regrouped, its new matches among every other document. ``replaced``, ``created``
    or ``unchanged`` (same text and meta)."""
    meta = body.meta if body.meta is not None else {}
    doc = NewDoc(doc_id, body.text, meta)
    return _result(await service.replace(doc, meta_given=body.meta is not None))


@router.post("/query", dependencies=[require("read")])
async def query(body: QueryRequest, service: ServiceDep) -> QueryResponse:
    """The matches registering would report, without registering anything."""
    found = await service.query(body.texts, body.threshold, body.limit)
    return QueryResponse(
        results=[
            QueryResult(
                match_count=count,
                matches=[QueryMatch(id=i, estimate=e, cluster=c) for i, e, c in best],
            )
            for count, best in found
        ]
    )


@router.get("/documents/{doc_id:path}", dependencies=[require("read")])
async def document(doc_id: str, service: ServiceDep) -> DocumentOut:
    """A registered document's cluster and meta."""
    found_id, cluster, meta = await service.document(doc_id)
    return DocumentOut(id=found_id, cluster=cluster, meta=meta)


@router.delete("/documents/{doc_id:path}", status_code=204, dependencies=[require("write")])
async def delete(doc_id: str, service: ServiceDep) -> Response:
    """Delete a document; its cluster is recomputed."""
    await service.delete(doc_id)
    return Response(status_code=204)
