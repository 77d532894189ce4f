"""``/v1/documents``: register, read and delete documents; ``/v1/query``: check without storing."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.bodies import StrictJSONRoute
from app.api.deps import ServiceDep, require
from app.api.schemas import (
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
)
from app.service import NewDoc

router = APIRouter(prefix="/v1", tags=["documents"], route_class=StrictJSONRoute, responses=ERRORS)


@router.post("/documents", dependencies=[require("write")])
async def register(body: DocumentsRequest, service: ServiceDep) -> DocumentsResponse:
    """Register a batch; answered only once it is durable."""
    results = await service.register([NewDoc(d.id, d.text, d.meta) for d in body.documents])
    return DocumentsResponse(
        results=[
            DocumentResult(
                id=r.id,
                cluster=r.cluster,
                status=r.status,
                match_count=r.matches.count,
                matches=[Match(id=i, estimate=e) for i, e in r.matches.best],
            )
            for r in results
        ]
    )


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


@router.get("/documents/{doc_id}", dependencies=[require("read")])
async def document(doc_id: str, service: ServiceDep) -> DocumentOut:
    """A registered document's cluster and meta."""
    found_id, cluster, meta = await service.document(doc_id)
    return DocumentOut(id=found_id, cluster=cluster, meta=meta)


@router.delete("/documents/{doc_id}", status_code=204, dependencies=[require("write")])
async def delete(doc_id: str, service: ServiceDep) -> Response:
    """Delete a document; its cluster is recomputed."""
    await service.delete(doc_id)
    return Response(status_code=204)
