"""``/ui``: server-rendered pages to look at clusters, contamination (a text checked against
the protected sets) and the parameters; the sign-in pages. (Documents and the query page:
``documents``; decontamination and the report's export: ``decontamination``.)

Behind the same access rules as the API (``read``); a key entered once on /ui/login opens a
server-side session whose random id is kept in a cookie (HttpOnly, SameSite=Strict) for the
browser session (see ``security``). Sign-in forms posted from another site are refused.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from neardup.app.api.bodies import OffLoopFormRoute
from neardup.app.api.deps import ServiceDep, caller_of
from neardup.app.api.ui.charts import s_curve, size_histogram
from neardup.app.api.ui.render import (
    COOKIE,
    Reader,
    render_page,
    service_error,
    sessions,
    ui_caller,
)
from neardup.app.api.ui.security import same_origin
from neardup.app.service import NotFound
from neardup.app.service.views import (
    CHAIN_LIMIT,
    DIFF_WORDS,
    HIGHLIGHT_CHARS,
    cluster_view,
    contamination_view,
    registered_text,
)
from neardup.core.engine import NeardupError

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=OffLoopFormRoute)
STYLE = (Path(__file__).resolve().parent / "static" / "style.css").read_bytes()
PAGE = 50


def _login_error(request: Request, status: int, error: str) -> HTMLResponse:
    return render_page(request, "login.html", status, error=error, signed_in=False)


@router.get("/style.css")
async def style() -> Response:
    """The pages' stylesheet (open: the sign-in page needs it too)."""
    return Response(STYLE, media_type="text/css", headers={"cache-control": "max-age=3600"})


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request) -> HTMLResponse:
    """Ask for an API key with the read scope."""
    return render_page(request, "login.html", error=None, signed_in=False)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, key: Annotated[str, Form()]) -> Response:
    """Check the key; open a session whose id (not the key) goes in a session cookie."""
    if not same_origin(request):
        return _login_error(request, 403, "Sign-in from another site is refused.")
    keyring = request.app.state.keyring
    scopes = keyring.scopes(key) if keyring is not None else frozenset({"read"})
    if scopes is None or "read" not in scopes:
        return _login_error(request, 401, "That key is unknown or lacks the read scope.")
    response = RedirectResponse("/ui", status_code=303)
    response.set_cookie(
        COOKIE, sessions(request).open(scopes, caller_of(keyring, key).name), httponly=True,
        samesite="strict", path="/ui",
        secure=request.url.scheme == "https",
    )  # fmt: skip
    return response


@router.get("/logout")
async def logout(request: Request) -> Response:
    """Close the session."""
    session = request.cookies.get(COOKIE)
    if session:
        sessions(request).close(session)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@router.get("", response_class=HTMLResponse, dependencies=[Reader])
async def overview(
    request: Request, service: ServiceDep, page: int = 1, find_id: str | None = None
) -> HTMLResponse:
    """Counts, the cluster-size histogram, a search by id, and the largest clusters first."""
    page = max(1, page)
    rows, sizes = await service.largest_clusters((page - 1) * PAGE, PAGE)
    stats = await service.read_stats()
    return render_page(
        request, "overview.html", stats=stats, bars=size_histogram(sizes), rows=rows,
        page=page, pages=max(1, -(-stats["clusters"] // PAGE)), sets=sorted(service.protected),
        find_id=find_id,
    )  # fmt: skip


@router.get("/find", response_class=HTMLResponse, dependencies=[Reader])
async def find(request: Request, service: ServiceDep, id: str = "") -> Response:
    """A document by id: to its cluster's page, on the page holding its row; else the overview
    saying so (404)."""
    root, indexed = "", False
    if id:
        with suppress(NotFound):
            _, root, _, indexed = await service.document(id)
    alone = root == id and indexed
    if alone and (await service.root_and_size(id))[1] == 1:  # an indexed one: its page
        return RedirectResponse(f"/ui/documents/{quote(id, safe='')}", status_code=303)
    if root:
        target = f"/ui/clusters/{quote(root, safe='')}?find={quote(id, safe='')}"
        return RedirectResponse(target, status_code=303)
    response = await overview(request, service, find_id=id or None)
    response.status_code = 404 if id else 200
    return response


@router.get("/clusters/{root:path}", response_class=HTMLResponse, dependencies=[Reader])
async def cluster(
    request: Request, root: str, service: ServiceDep, page: int = 1, find: str | None = None
) -> Response:
    """A page of the cluster's distinct texts (copies collapsed), borderline first, with the
    chain that joined each member below the threshold, word differences against the root,
    estimates, exact Jaccard and the page's matrix."""
    try:
        view = await cluster_view(service, root, page, find)
    except NotFound as exc:
        if await service.indexed_signature(root) is not None:  # alone: its document's page
            return RedirectResponse(f"/ui/documents/{quote(root, safe='')}", status_code=303)
        raise HTTPException(404, str(exc)) from None
    return render_page(request, "cluster.html", root=view.root, root_text=view.root_text,
                       members=view.members, matrix=view.matrix, ids=view.ids, size=view.size,
                       distinct=view.distinct, page=view.page, pages=view.pages,
                       threshold=view.threshold, chains=view.chains, chain_limit=CHAIN_LIMIT,
                       found=view.found, diff_words=DIFF_WORDS,
                       store_text=service.settings.store_text)  # fmt: skip


@router.get("/contamination", response_class=HTMLResponse, dependencies=[Reader])
async def contamination_form(
    request: Request, service: ServiceDep, doc_id: str = ""
) -> HTMLResponse:
    """Paste a text (or name a registered document: ``doc_id`` fills it in) and choose sets."""
    return render_page(request, "contamination.html", sets=sorted(service.protected),
                       result=None, error=None, text="", doc_id=doc_id, chosen=[])  # fmt: skip


@router.post("/contamination", response_class=HTMLResponse, dependencies=[Reader])
async def contamination(
    request: Request,
    service: ServiceDep,
    text: Annotated[str, Form()] = "",
    doc_id: Annotated[str, Form()] = "",
    sets: Annotated[list[str] | None, Form()] = None,
) -> HTMLResponse:
    """The shared n-grams highlighted in the text, with the items they come from; an empty
    text is not checked (there is nothing to check: no verdict)."""
    chosen = sets or sorted(service.protected)
    caller = ui_caller(request)
    form: dict[str, Any] = {"sets": sorted(service.protected), "doc_id": doc_id, "chosen": chosen}
    try:
        if doc_id:
            text = await registered_text(service, doc_id)
        echo = "protect" in caller.scopes
        result = await contamination_view(service, text, chosen, caller.name, echo=echo)
    except NeardupError as exc:
        status, headers, message = service_error(exc, "/ui/contamination")
        response = render_page(request, "contamination.html", status, result=None,
                               error=message, text=text[:HIGHLIGHT_CHARS], **form)  # fmt: skip
        response.headers.update(headers)
        return response
    return render_page(request, "contamination.html", result=result, error=None,
                       text=text[:HIGHLIGHT_CHARS], highlight_chars=HIGHLIGHT_CHARS,
                       **form)  # fmt: skip


@router.get("/parameters", response_class=HTMLResponse, dependencies=[Reader])
async def parameters(request: Request, service: ServiceDep) -> HTMLResponse:
    """The S-curve of the running configuration and what other (bands, rows) would do."""
    params = service.params
    curve = s_curve(params.num_perm, params.bands, params.threshold)
    return render_page(request, "parameters.html", curve=curve, settings=params)
