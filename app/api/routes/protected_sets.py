"""``/v1/protected-sets``: upload, replace, list and delete protected eval sets;
``/v1/contamination``: check texts against them; ``/v1/decontamination``: documents through a
mode (drop, cut, annotate) with a per-item and per-set report."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from neardup.app.api.answers import Budget, JSONObject, answer, json_bytes
from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import CallerDep, ServiceDep, require
from neardup.app.api.schemas import (
    ERRORS,
    ContaminationRequest,
    ContaminationResponse,
    DecontaminatedDoc,
    DecontaminationRequest,
    DecontaminationResponse,
    DroppedDoc,
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
    openapi_extra=_UPLOAD_BODY, response_model=ProtectedSetOut,
)  # fmt: skip
async def put_set(
    name: SetName,
    request: Request,
    service: ServiceDep,
    format: FormatQuery = None,
    allow_no_ngrams: AllowEmptyQuery = False,
) -> Response:
    """Create or atomically replace a protected set."""
    upload = await read_upload(request, format)
    await store_upload(service, name, upload, allow_no_ngrams=allow_no_ngrams)
    found = _out(service, name)
    return await answer(request, lambda _: found, status_code=201)


@router.get("/protected-sets", dependencies=[require("read")], response_model=list[ProtectedSetOut])
async def list_sets(request: Request, service: ServiceDep) -> Response:
    """Every protected set's name and counts (at most MAX_PROTECTED_SETS)."""
    found = [_out(service, name) for name in sorted(service.protected)]
    return await answer(request, lambda _: found)


@router.get(
    "/protected-sets/{name}", dependencies=[require("read")], response_model=ProtectedSetOut
)
async def get_set(request: Request, name: SetName, service: ServiceDep) -> Response:
    """One protected set's name and counts."""
    found = _out(service, name)
    return await answer(request, lambda _: found)


@router.delete("/protected-sets/{name}", status_code=204, dependencies=[require("protect")])
async def delete_set(name: SetName, service: ServiceDep) -> Response:
    """Delete a protected set."""
    await service.delete_protected_set(name)
    return Response(status_code=204)


@router.post("/contamination", dependencies=[require("read")], response_model=ContaminationResponse)
async def contamination(
    request: Request, body: ContaminationRequest, service: ServiceDep, caller: CallerDep
) -> Response:
    """For each text, the protected items sharing a word n-gram with it: all counted, the first
    MAX_MATCHES listed, as many as the answer's budget holds. The shared n-gram is echoed only to
    keys with the protect scope (each once, hits naming it by position): it would tell a probing
    key which word of a protected text comes next."""
    echo = "protect" in caller.scopes
    found = await service.contamination(body.texts, body.sets, caller.name, protect=echo)
    checked = [s.name for s in service.chosen_sets(body.sets)]
    return await answer(request, partial(_contamination_answer, checked, found))


#: A listed hit's JSON besides its set, item and n-gram (``{"set":,"item":,"ngram":123456},``).
_FIXED_HIT = 40


def _contamination_answer(checked: list[str], found: list[Hits], budget: Budget) -> JSONObject:
    """The ``/v1/contamination`` answer (a ``ContaminationResponse``, as plain JSON values:
    models cost ~10 us a hit): hits listed while they fit ``budget``, each n-gram sent once (in
    ``ngrams``) and named by its position."""
    budget.take(sum(map(json_bytes, checked)))  # every stored set, when none were named
    ngrams: dict[str, int] = {}
    results = []
    for hits in found:
        listed = []
        for s, i, g in hits.listed:
            ref = None if g is None else ngrams.get(g)
            size = _FIXED_HIT + json_bytes(s) + json_bytes(i)
            new = g is not None and ref is None
            if g is not None and ref is None:  # its first hit sends it
                size += json_bytes(g)
            if not budget.take(size):
                break
            if g is not None and new:
                ref = ngrams[g] = len(ngrams)
            listed.append({"set": s, "item": i, "ngram": ref})
        status = "contaminated" if hits.total else "clean" if checked else "unchecked"
        results.append(
            {"status": status, "contaminated": bool(hits.total), "hit_count": hits.total,
             "hits": listed}
        )  # fmt: skip
    return {
        "checked_sets": checked, "results": results, "ngrams": list(ngrams),
        "truncated": budget.truncated,
    }  # fmt: skip


@router.post(
    "/decontamination", dependencies=[require("read")], response_model=DecontaminationResponse
)
async def decontamination(
    request: Request, body: DecontaminationRequest, service: ServiceDep, caller: CallerDep
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
    return await answer(request, lambda _: _decontamination_answer(checked, out, dropped, report))


def _decontamination_answer(
    checked: list[str], out: list[Doc], dropped: list[dict[str, str]], report: dict[str, Any]
) -> DecontaminationResponse:
    """The ``/v1/decontamination`` answer (every list already capped: docs/api.md)."""
    return DecontaminationResponse(
        checked_sets=checked,
        documents=[DecontaminatedDoc(id=d.id, text=d.text, meta=d.meta) for d in out],
        dropped=[DroppedDoc(**d) for d in dropped],
        report=report,
    )
