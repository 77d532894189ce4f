"""``/ui`` pages of documents: a pasted text's near duplicates ("query before storing", by hand,
through the call behind ``POST /v1/query``), a registered document's page (text, meta, cluster,
best matches), and a cluster's members as a JSON Lines or CSV download. Behind ``read``, as the
API's document and cluster reads are.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, StreamingResponse

from neardup.app.api.bodies import OffLoopFormRoute
from neardup.app.api.deps import ServiceDep
from neardup.app.api.ui.render import Reader, download_headers, render_page, service_error
from neardup.app.service import NotFound
from neardup.app.service.exports import FORMATS, cluster_export
from neardup.app.service.lookups import META_CHARS, TEXT_CHARS, document_view, query_view
from neardup.core.engine import NeardupError

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=OffLoopFormRoute)


@router.get("/query", response_class=HTMLResponse, dependencies=[Reader])
async def query_form(request: Request, service: ServiceDep) -> HTMLResponse:
    """Paste a text to see what it near-duplicates before storing it."""
    return render_page(request, "query.html", result=None, error=None, text="",
                       threshold="", floor=service.params.query_floor)  # fmt: skip


@router.post("/query", response_class=HTMLResponse, dependencies=[Reader])
async def query(
    request: Request,
    service: ServiceDep,
    text: Annotated[str, Form()] = "",
    threshold: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """The registered documents the text near-duplicates: counted, the best listed, each
    linked to its page; an empty text is not checked."""
    # The text is shown back up to TEXT_CHARS (it is checked whole).
    form: dict[str, Any] = {
        "text": text[:TEXT_CHARS],
        "not_shown": max(0, len(text) - TEXT_CHARS),
        "threshold": threshold,
        "floor": service.params.query_floor,
    }
    try:
        result = await query_view(service, text, _threshold(threshold))
    except (ValueError, NeardupError) as exc:
        status, headers, message = service_error(exc, "/ui/query")
        response = render_page(request, "query.html", status, result=None, error=message, **form)
        response.headers.update(headers)
        return response
    return render_page(request, "query.html", result=result, error=None, **form)


def _threshold(value: str) -> float | None:
    """The form's threshold: empty for the service's; else a number in (0, 1]."""
    if not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"the threshold must be a number in (0, 1], not {value!r}") from None
    if not 0.0 < number <= 1.0:
        raise ValueError(f"the threshold must be in (0, 1], not {value!r}")
    return number


@router.get("/documents/{doc_id:path}", response_class=HTMLResponse, dependencies=[Reader])
async def document(request: Request, doc_id: str, service: ServiceDep) -> HTMLResponse:
    """A registered document: its text, meta, cluster and best matches; 404 page if unknown."""
    try:
        view = await document_view(service, doc_id)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    return render_page(request, "document.html", doc=view, text_chars=TEXT_CHARS,
                       meta_chars=META_CHARS, store_text=service.settings.store_text)  # fmt: skip


@router.get("/export/clusters/{root:path}", dependencies=[Reader])
async def export_cluster(root: str, service: ServiceDep, format: str = "jsonl") -> Response:
    """Every member of a cluster (id, root, estimate to the root, the id it is an exact copy
    of, text), streamed as JSON Lines or CSV; 404 page if ``root`` is not a root."""
    if format not in FORMATS:
        raise HTTPException(422, f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    try:
        export = await cluster_export(service, root, format)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    media, extension = FORMATS[format]
    headers = download_headers(f"cluster-{root}", extension)
    headers["x-neardup-rows"] = str(export.rows)
    return StreamingResponse(export.body, media_type=media, headers=headers)
