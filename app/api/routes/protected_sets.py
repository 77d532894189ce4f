"""``/v1/protected-sets``: upload, replace, list and delete protected eval sets;
``/v1/contamination``: check texts against them; ``/v1/decontamination``: documents through a
mode (drop, cut, annotate) with a per-item and per-set report."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Request, Response
from starlette.datastructures import UploadFile

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
from neardup.app.service import DecontRequest, Hits, Service
from neardup.core.engine import (
    CorpusError,
    DecontMode,
    DecontParams,
    Doc,
    ProtectedFormat,
    Thresholds,
)

router = APIRouter(
    prefix="/v1", tags=["protected sets"], route_class=StrictJSONRoute, responses=ERRORS
)

SetName = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,128}$")]
_JSONL_TYPES = {"application/x-ndjson", "application/jsonl"}
#: Raw bodies by content type: how each is read (a multipart file: by its file name).
_RAW_TYPES = {
    **{media: ProtectedFormat.JSONL for media in _JSONL_TYPES},
    "application/json": ProtectedFormat.JSON,
    "text/csv": ProtectedFormat.CSV,
    "text/plain": ProtectedFormat.TEXT,
}
_FILE_TEXT = {"type": "string", "pattern": r"\S"}
#: The upload's body in the OpenAPI schema (the handler reads it raw, so FastAPI cannot say).
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "description": "the set's file, raw or as multipart 'file' (named .jsonl, .ndjson, "
        ".json, .csv or .txt): JSON Lines, a JSON array of objects, CSV rows (a header row when "
        "its cells are column names), or one plain text",
        "content": {
            **{media: {"schema": _FILE_TEXT} for media in sorted(_RAW_TYPES)},
            # A raw JSON body is the array itself (JSON Lines go as application/x-ndjson).
            "application/json": {
                "schema": {"type": "array", "minItems": 1, "items": {"type": "object"}}
            },
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": _FILE_TEXT},
                }
            },
        },
    }
}


async def _upload(request: Request) -> tuple[bytes, ProtectedFormat]:
    """The uploaded file's bytes and its format, from a raw or multipart body."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in _RAW_TYPES:
        return await request.body(), _RAW_TYPES[content_type]
    if content_type == "multipart/form-data":
        form = await request.form()
        upload = form.get("file")
        if isinstance(upload, str):  # a plain form field: the text itself
            return upload.encode("utf-8", "surrogatepass"), ProtectedFormat.TEXT
        if not isinstance(upload, UploadFile):
            raise HTTPException(422, "the multipart body needs a file field named 'file'")
        if not upload.filename:
            return await upload.read(), ProtectedFormat.TEXT
        try:
            fmt = ProtectedFormat.of(upload.filename)
        except CorpusError as exc:
            raise HTTPException(415, str(exc)) from None
        return await upload.read(), fmt
    raise HTTPException(
        415,
        f"send the file as {', '.join(sorted(_RAW_TYPES))}, or multipart/form-data with a "
        "field 'file'",
    )


def _out(service: Service, name: str) -> ProtectedSetOut:
    found = service.protected_set(name)
    return ProtectedSetOut(name=found.name, items=found.items, ngrams=found.ngrams)


@router.put(
    "/protected-sets/{name}", status_code=201, dependencies=[require("protect")],
    openapi_extra=_UPLOAD_BODY,
)  # fmt: skip
async def put_set(name: SetName, request: Request, service: ServiceDep) -> ProtectedSetOut:
    """Create or atomically replace a protected set."""
    raw, fmt = await _upload(request)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(400, f"the file is not UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise HTTPException(422, "the protected set is empty")
    await service.put_protected_set(name, text, fmt)
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
