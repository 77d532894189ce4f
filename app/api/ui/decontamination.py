"""``/ui/decontamination``: pasted documents (JSON Lines) through a decontamination mode (with
the cut settings: window, min piece, max pieces), with the per-set and per-item report; and the
same report as a JSON Lines or CSV download. Behind ``read``, as ``POST /v1/decontamination``
is; the report names n-grams only for keys with ``protect``, as the API's does.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import HTMLResponse

from neardup.app.api.bodies import OffLoopFormRoute, strict_json
from neardup.app.api.deps import ServiceDep
from neardup.app.api.ui.render import (
    Reader,
    download_headers,
    render_page,
    service_error,
    ui_caller,
)
from neardup.app.service import DecontRequest, Service
from neardup.app.service.exports import FORMATS, REPORT_COLUMNS, encode, report_records
from neardup.app.service.lookups import TEXT_CHARS
from neardup.core.engine import DecontMode, DecontParams, Doc, JSONError, NeardupError, Thresholds

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=OffLoopFormRoute)

_MODES = tuple(m.value for m in DecontMode)
_CUT = DecontParams()


@dataclass(frozen=True)
class _Form:
    """The page's form as posted (strings, shown back as typed)."""

    docs: str = ""
    mode: str = "drop"
    item_cap: str = ""
    window: str = str(_CUT.window)
    min_piece: str = str(_CUT.min_piece)
    max_pieces: str = str(_CUT.max_pieces)
    sets: tuple[str, ...] = ()


def _form(
    docs: Annotated[str, Form()] = "",
    mode: Annotated[str, Form()] = "drop",
    item_cap: Annotated[str, Form()] = "",
    window: Annotated[str, Form()] = str(_CUT.window),
    min_piece: Annotated[str, Form()] = str(_CUT.min_piece),
    max_pieces: Annotated[str, Form()] = str(_CUT.max_pieces),
    sets: Annotated[list[str] | None, Form()] = None,
) -> _Form:
    return _Form(docs, mode, item_cap, window, min_piece, max_pieces, tuple(sets or ()))


def _context(service: Service, form: _Form) -> dict[str, Any]:
    # The pasted documents are shown back up to TEXT_CHARS (a page echoing 40 MB would take
    # seconds to render, on the event loop); what was posted is what was checked.
    shown = replace(form, docs=form.docs[:TEXT_CHARS])
    return {"sets": sorted(service.protected), "chosen": list(form.sets), "form": shown,
            "not_shown": len(form.docs) - len(shown.docs), "modes": _MODES,
            "formats": list(FORMATS)}  # fmt: skip


@router.get("/decontamination", response_class=HTMLResponse, dependencies=[Reader])
async def decontamination_form(request: Request, service: ServiceDep) -> HTMLResponse:
    """Paste documents (JSON Lines), choose sets, a mode, the cut settings and a cap."""
    context = _context(service, _Form())
    return render_page(request, "decontamination.html", result=None, error=None, **context)


@router.post("/decontamination", response_class=HTMLResponse, dependencies=[Reader])
async def decontamination(
    request: Request, service: ServiceDep, form: Annotated[_Form, Depends(_form)]
) -> HTMLResponse:
    """The documents through the mode, and the report: per set and per matched item."""
    ran = await _run(request, service, form)
    if isinstance(ran, HTMLResponse):
        return ran
    out, dropped, report = ran
    result = {"documents": out, "dropped": dropped, "report": report,
              "params": _request(form, False).params}  # fmt: skip
    return render_page(request, "decontamination.html", result=result, error=None,
                       **_context(service, form))  # fmt: skip


@router.post("/decontamination/report", dependencies=[Reader])
async def report_download(
    request: Request,
    service: ServiceDep,
    form: Annotated[_Form, Depends(_form)],
    export: Annotated[str, Form(alias="format")] = "jsonl",
) -> Response:
    """The report of the same run as a download (``format``: jsonl or csv): its totals, each
    set and each matched item, one record each."""
    if export not in FORMATS:
        message = f"format must be one of {', '.join(FORMATS)}, not {export!r}"
        return render_page(request, "decontamination.html", 422, result=None, error=message,
                           **_context(service, form))  # fmt: skip
    ran = await _run(request, service, form)
    if isinstance(ran, HTMLResponse):
        return ran
    records = report_records(ran[2])
    body = await asyncio.to_thread(encode, records, export, REPORT_COLUMNS)
    media, extension = FORMATS[export]
    return Response(body, media_type=media, headers=download_headers("report", extension))


#: A kept document's record in the download: what ``neardup`` reads as a corpus line.
KEPT_COLUMNS = ("id", "text", "meta")


@router.post("/decontamination/documents", dependencies=[Reader])
async def kept_download(
    request: Request, service: ServiceDep, form: Annotated[_Form, Depends(_form)]
) -> Response:
    """The documents the same run keeps, as a JSON Lines download (``kept.jsonl``): one
    ``{"id", "text", "meta"}`` a line (cut pieces as their own documents, annotations in
    ``meta``), a corpus the CLI reads as it is."""
    ran = await _run(request, service, form)
    if isinstance(ran, HTMLResponse):
        return ran
    records = [{"id": d.id, "text": d.text, "meta": d.meta} for d in ran[0]]
    body = await asyncio.to_thread(encode, records, "jsonl", KEPT_COLUMNS)
    media, extension = FORMATS["jsonl"]
    return Response(body, media_type=media, headers=download_headers("kept", extension))


def _whole(name: str, value: str) -> int:
    if not value.strip().isdigit():
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    return int(value)


def _request(form: _Form, protect: bool) -> DecontRequest:
    """The form's mode, cut settings and cap; ValueError (or ParameterError) for a bad one."""
    if form.mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}, not {form.mode!r}")
    cap = _whole("the item cap", form.item_cap) if form.item_cap.strip() else None
    params = DecontParams(DecontMode(form.mode), _whole("the window", form.window),
                          _whole("the min piece", form.min_piece),
                          _whole("max pieces", form.max_pieces))  # fmt: skip
    return DecontRequest(params, cap, Thresholds(), 10, protect)


async def _run(
    request: Request, service: Service, form: _Form
) -> tuple[list[Doc], list[dict[str, str]], dict[str, Any]] | HTMLResponse:
    """The documents through the form's mode, those dropped (id and rule) and the report (as ``POST
    /v1/decontamination``); or the page saying what is wrong (422 for the form, the service's
    status for the rest)."""
    caller = ui_caller(request)
    try:
        ask = _request(form, "protect" in caller.scopes)
        docs = await asyncio.to_thread(_pasted_docs, form.docs)
        chosen = list(form.sets) or sorted(service.protected)
        return await service.decontamination(docs, chosen, ask, caller.name)
    except (ValueError, NeardupError) as exc:
        status, headers, message = service_error(exc, "/ui/decontamination")
        page = render_page(request, "decontamination.html", status, result=None, error=message,
                           **_context(service, form))  # fmt: skip
        page.headers.update(headers)
        return page


def _refuse_array(body: str) -> None:
    """ValueError saying what a pasted JSON array is, and what to paste instead."""
    if not body.lstrip().startswith("["):
        return
    try:
        value = strict_json(body)
    except json.JSONDecodeError:
        value = None  # an array cut short, or lines after it
    except (ValueError, RecursionError):
        return  # nested too deeply, a NaN, ...: the line's own error says which
    what = (
        f"a JSON array of {len(value)} value(s)" if isinstance(value, list)
        else "the start of a JSON array"
    )  # fmt: skip
    raise ValueError(
        f"this is {what}, not JSON Lines: paste one document a line, each an object such as "
        '{"id": "web-1", "text": "..."} (to convert a file: jq -c \'.[]\' FILE.json)'
    )


def _pasted_docs(body: str) -> list[Doc]:
    """JSON Lines of ``{"id", "text", "meta"?}``; ValueError naming the line of a bad one."""
    _refuse_array(body)
    out = []
    for line, raw in enumerate(body.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = strict_json(raw)
        except JSONError as exc:  # NaN/Infinity, a duplicate key, ...: what /v1 refuses
            what = f"not JSON ({exc.reason})" if exc.kind == "syntax" else exc.reason
            raise ValueError(f"line {line}: {what}") from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise ValueError(f'line {line}: give an object with a "text" string')
        meta = row.get("meta") or {}
        if not isinstance(meta, dict):
            raise ValueError(f'line {line}: "meta" must be an object')
        try:
            json.dumps(row, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"line {line}: not valid Unicode (a lone surrogate)") from None
        out.append(Doc(str(row.get("id", line)), row["text"], meta))
    if not out:
        raise ValueError("paste at least one document, one JSON object a line")
    return out
