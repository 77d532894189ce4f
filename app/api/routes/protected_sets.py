"""``/v1/protected-sets``: upload, replace, list and delete protected eval sets;
``/v1/contamination``: check texts against them; ``/v1/decontamination``: documents through a
mode (drop, cut, annotate) with a per-item and per-set report."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import CallerDep, ServiceDep, require
from neardup.app.api.schemas import (
    ERRORS,
    ContaminationRequest,
    ContaminationResponse,
    ContaminationResult,
    DecontaminatedDoc,
    DecontaminationRequest,
    DecontaminationResponse,
    DroppedDoc,
    Hit,
    ProtectedSetOut,
)
from neardup.app.api.uploads import RAW_TYPES, UploadFormat, read_upload, store_upload
from neardup.app.service import DecontRequest, Hits, Service
from neardup.core.engine import DecontMode, DecontParams, Doc, Thresholds

router = APIRouter(
    prefix="/v1", tags=["protected sets"], route_class=StrictJSONRoute, responses=ERRORS
)

SetName = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,128}$")]
_FILE_TEXT = {"type": "string", "pattern": r"\S"}
#: A file picker in /docs (Swagger UI shows one for a binary string).
_FILE = {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
#: The upload's body in the OpenAPI schema (the handler reads it raw, so FastAPI cannot say).
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "description": "the set's file, raw or as multipart 'file' (named .jsonl, .ndjson, "
        ".json, .csv, .txt or .parquet): JSON Lines, a JSON array of objects, CSV rows (a "
        "header row when its cells are column names), Parquet rows, or one plain text. A text "
        "sent as one plain text that is plainly JSON Lines, a JSON array or CSV is refused "
        "(422) unless format=text",
        "content": {
            # First: what /docs shows by default (a file picker).
            "multipart/form-data": {
                "schema": {"type": "object", "required": ["file"], "properties": {"file": _FILE}}
            },
            **{
                media: {"schema": _FILE if fmt == "parquet" else _FILE_TEXT}
                for media, fmt in sorted(RAW_TYPES.items())
            },
            # A raw JSON body is the array itself (JSON Lines go as application/x-ndjson).
            "application/json": {
                "schema": {"type": "array", "minItems": 1, "items": {"type": "object"}}
            },
        },
    }
}
#: ``?format=``: how to read the file, whatever its content type or name.
FormatQuery = Annotated[
    UploadFormat | None,
    Query(
        description="how to read the file, whatever its content type or file name: jsonl, "
        "json (an array, or JSON Lines), csv, text (ONE item: also what stores a text that "
        "looks like JSON Lines or CSV as one text) or parquet",
    ),
]
#: ``?allow_no_ngrams=``: store a set that protects nothing.
AllowEmptyQuery = Annotated[
    bool,
    Query(
        description="store the set even if it yields no n-gram (no text, or every text under "
        "NGRAM words): checks against it then always say clean. Without it such a set is 422",
    ),
]


def _out(service: Service, name: str) -> ProtectedSetOut:
    found = service.protected_set(name)
    return ProtectedSetOut(name=found.name, items=found.items, ngrams=found.ngrams)


@router.put(
    "/protected-sets/{name}", status_code=201, dependencies=[require("protect")],
    openapi_extra=_UPLOAD_BODY,
)  # fmt: skip
async def put_set(
    name: SetName,
    request: Request,
    service: ServiceDep,
    format: FormatQuery = None,
    allow_no_ngrams: AllowEmptyQuery = False,
) -> ProtectedSetOut:
    """Create or atomically replace a protected set."""
    upload = await read_upload(request, format)
    await store_upload(service, name, upload, allow_no_ngrams=allow_no_ngrams)
    return _out(service, name)


@router.get("/protected-sets", dependencies=[require("read")])
async def list_sets(service: ServiceDep) -> list[ProtectedSetOut]:
    """Every protected set's name and counts."""
    return [_out(service, name) for name in sorted(service.protected)]


@router.get("/protected-sets/{name}", dependencies=[require("read")])
async def get_set(name: SetName, service: ServiceDep) -> ProtectedSetOut:
    """One protected set's name and counts."""
    return _out(service, name)


@router.delete("/protected-sets/{name}", status_code=204, dependencies=[require("protect")])
async def delete_set(name: SetName, service: ServiceDep) -> Response:
    """Delete a protected set."""
    await service.delete_protected_set(name)
    return Response(status_code=204)


@router.post("/contamination", dependencies=[require("read")], response_model=ContaminationResponse)
async def contamination(
    body: ContaminationRequest, service: ServiceDep, caller: CallerDep
) -> Response:
    """For each text, the protected items sharing a word n-gram with it: all counted, the first
    MAX_MATCHES listed. The shared n-gram is echoed only to keys with the protect scope: it
    would tell a probing key which word of a protected text comes next. The answer is built and
    serialised off the event loop."""
    echo = "protect" in caller.scopes
    found = await service.contamination(body.texts, body.sets, caller.name, protect=echo)
    checked = [s.name for s in service.chosen_sets(body.sets)]
    answer = await asyncio.to_thread(_contamination_json, checked, found)
    return Response(answer, media_type="application/json")


def _contamination_json(checked: list[str], found: list[Hits]) -> bytes:
    """The ``/v1/contamination`` answer, serialised (it grows with the request: off the loop)."""
    return (
        ContaminationResponse(
            checked_sets=checked,
            results=[
                ContaminationResult(
                    status="contaminated" if hits.total else "clean" if checked else "unchecked",
                    contaminated=bool(hits.total),
                    hit_count=hits.total,
                    hits=[Hit(set=s, item=i, ngram=g) for s, i, g in hits.listed],
                )
                for hits in found
            ],
        )
        .model_dump_json()
        .encode("utf-8")
    )


@router.post(
    "/decontamination", dependencies=[require("read")], response_model=DecontaminationResponse
)
async def decontamination(
    body: DecontaminationRequest, service: ServiceDep, caller: CallerDep
) -> Response:
    """Documents through a decontamination mode, and the contamination report (items by id;
    n-grams only to keys with the protect scope; kept documents' meta names none). Bounded as
    ``/v1/contamination`` is; every list is capped and counted, and the answer is built and
    serialised off the event loop."""
    ask = DecontRequest(
        params=DecontParams(DecontMode(body.mode), body.window, body.min_piece, body.max_pieces),
        item_cap=body.item_cap,
        thresholds=Thresholds(body.clean_below, body.dirty_from),
        top=body.top,
        protect="protect" in caller.scopes,
    )
    docs = [Doc(d.id, d.text, d.meta) for d in body.documents]
    out, dropped, report = await service.decontamination(docs, body.sets, ask, caller.name)
    checked = [s.name for s in service.chosen_sets(body.sets)]
    answer = await asyncio.to_thread(_decontamination_json, checked, out, dropped, report)
    return Response(answer, media_type="application/json")


def _decontamination_json(
    checked: list[str], out: list[Doc], dropped: list[dict[str, str]], report: dict[str, Any]
) -> bytes:
    """The ``/v1/decontamination`` answer, serialised (it grows with the request: off the loop)."""
    return (
        DecontaminationResponse(
            checked_sets=checked,
            documents=[DecontaminatedDoc(id=d.id, text=d.text, meta=d.meta) for d in out],
            dropped=[DroppedDoc(**d) for d in dropped],
            report=report,
        )
        .model_dump_json()
        .encode("utf-8")
    )
