"""``/ui/protected-sets``: the protected sets listed (name, items, n-grams; behind ``read``, as
``GET /v1/protected-sets``), uploaded and deleted (behind ``protect``, as ``PUT`` and ``DELETE
/v1/protected-sets/{name}``: the same upload rules, through ``uploads``). Forms posted from
another site are refused (the session cookie is SameSite=Strict too).
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Path, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from neardup.app.api.bodies import OffLoopFormRoute
from neardup.app.api.deps import ServiceDep
from neardup.app.api.ui.render import Reader, render_page, service_error, ui_caller
from neardup.app.api.ui.security import same_origin
from neardup.app.api.uploads import UPLOAD_FORMATS, UploadFormat, form_upload, store_upload
from neardup.app.service import Service
from neardup.core.engine import NeardupError

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=OffLoopFormRoute)

#: A set's name, as the API takes it.
_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_PAGE = "protected.html"


def _page(request: Request, service: Service, status: int = 200, **context: object) -> HTMLResponse:
    sets = [service.protected_set(name) for name in sorted(service.protected)]
    context.setdefault("error", None)
    context.setdefault("stored", None)
    context.setdefault("form", {"name": "", "format": "", "allow_no_ngrams": False})
    return render_page(
        request, _PAGE, status, sets=sets, broken=sorted(service.broken_sets),
        formats=UPLOAD_FORMATS, may_protect="protect" in ui_caller(request).scopes,
        **context,
    )  # fmt: skip


def _protecting(request: Request) -> None:
    """403 unless the form comes from this site and the signed-in key has ``protect``."""
    if not same_origin(request):
        raise HTTPException(403, "a form posted from another site is refused")
    if "protect" not in ui_caller(request).scopes:
        raise HTTPException(403, "uploading and deleting protected sets needs the protect scope")


@router.get("/protected-sets", response_class=HTMLResponse, dependencies=[Reader])
async def protected_sets(
    request: Request, service: ServiceDep, stored: str | None = None
) -> HTMLResponse:
    """The sets with their counts; with ``protect``, the upload form and delete buttons."""
    return _page(request, service, stored=stored)


@router.post("/protected-sets", response_class=HTMLResponse, dependencies=[Reader])
async def upload(request: Request, service: ServiceDep) -> Response:
    """Store the posted file as the named set (a multipart form: name, file, format,
    allow_no_ngrams), then back to the list; or the form again saying what is wrong."""
    _protecting(request)
    async with request.form() as form:
        name = str(form.get("name") or "").strip()
        chosen = str(form.get("format") or "")
        allow = form.get("allow_no_ngrams") is not None
        typed = {"name": name, "format": chosen, "allow_no_ngrams": allow}
        try:
            if not _NAME.fullmatch(name):
                raise ValueError("name the set: 1 to 128 characters from A-Z a-z 0-9 . _ -")
            if chosen and chosen not in UPLOAD_FORMATS:
                raise ValueError(f"format must be one of {', '.join(UPLOAD_FORMATS)}")
            upload = await form_upload(form.get("file"), _format(chosen))
            await store_upload(service, name, upload, allow_no_ngrams=allow)
        except HTTPException as exc:
            return _page(request, service, exc.status_code, error=exc.detail, form=typed)
        except (ValueError, NeardupError) as exc:
            status, headers, message = service_error(exc, "/ui/protected-sets")
            page = _page(request, service, status, error=message, form=typed)
            page.headers.update(headers)
            return page
    return RedirectResponse(f"/ui/protected-sets?stored={quote(name)}", status_code=303)


def _format(chosen: str) -> UploadFormat | None:
    for fmt in UPLOAD_FORMATS:
        if fmt == chosen:
            return fmt
    return None


@router.post("/protected-sets/{name}/delete", dependencies=[Reader])
async def delete(
    request: Request,
    service: ServiceDep,
    name: Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,128}$")],
) -> Response:
    """Delete the set, then back to the list (404 page for an unknown one)."""
    _protecting(request)
    try:
        await service.delete_protected_set(name)
    except NeardupError as exc:
        status, headers, message = service_error(exc, "/ui/protected-sets")
        raise HTTPException(status, message, headers=headers or None) from None
    return RedirectResponse("/ui/protected-sets", status_code=303)
