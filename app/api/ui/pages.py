"""``/ui``: server-rendered pages to look at clusters, contamination and the parameters.

Behind the same access rules as the API (``read``); a key entered once on /ui/login is kept in
a session cookie (HttpOnly, SameSite=Strict) for the browser session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from app.api.deps import Caller, ServiceDep, bearer_token, caller_of
from app.api.ui.charts import s_curve, size_histogram
from app.service import NotFound
from app.service.views import (
    DIFF_WORDS,
    HIGHLIGHT_CHARS,
    cluster_view,
    contamination_view,
    registered_text,
)

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).resolve().parent / "templates")
COOKIE = "neardup_key"
PAGE = 50


class LoginRequired(Exception):
    """Not signed in (or the key lacks ``read``): send the browser to /ui/login."""


def _presented_key(request: Request) -> str | None:
    return bearer_token(request) or request.cookies.get(COOKIE)


def _ui_caller(request: Request) -> Caller:
    """Who is signed in (``_reader`` has admitted the key already), as the API names callers."""
    return caller_of(request.app.state.keyring, _presented_key(request))


async def _reader(request: Request) -> None:
    keyring = request.app.state.keyring
    if keyring is None:
        return
    key = _presented_key(request)
    scopes = keyring.scopes(key) if key else None
    if scopes is None or "read" not in scopes:
        raise LoginRequired


Reader = Depends(_reader)


def login_redirect(request: Request, exc: Exception) -> Response:
    """The handler of LoginRequired: a redirect to the login page."""
    return RedirectResponse("/ui/login", status_code=303)


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context)


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request) -> HTMLResponse:
    """Ask for an API key with the read scope."""
    return _page(request, "login.html", error=None)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, key: Annotated[str, Form()]) -> Response:
    """Check the key; keep it in a session cookie."""
    keyring = request.app.state.keyring
    scopes = keyring.scopes(key) if keyring is not None else frozenset({"read"})
    if scopes is None or "read" not in scopes:
        page = _page(request, "login.html", error="That key is unknown or lacks the read scope.")
        page.status_code = 401
        return page
    response = RedirectResponse("/ui", status_code=303)
    response.set_cookie(COOKIE, key, httponly=True, samesite="strict", path="/ui")
    return response


@router.get("/logout")
async def logout() -> Response:
    """Forget the key."""
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@router.get("", response_class=HTMLResponse, dependencies=[Reader])
async def overview(request: Request, service: ServiceDep, page: int = 1) -> HTMLResponse:
    """Counts, the cluster-size histogram, and the largest clusters first."""
    ranked = service.largest_clusters()
    page = max(1, page)
    rows = ranked[(page - 1) * PAGE : page * PAGE]
    return _page(
        request, "overview.html", stats=service.stats(),
        bars=size_histogram([size for _, size in ranked]), rows=rows, page=page,
        pages=max(1, -(-len(ranked) // PAGE)), sets=sorted(service.protected),
    )  # fmt: skip


@router.get("/clusters/{root}", response_class=HTMLResponse, dependencies=[Reader])
async def cluster(request: Request, root: str, service: ServiceDep) -> HTMLResponse:
    """Members beside the root, with word differences, estimates and exact Jaccard."""
    try:
        view = await cluster_view(service, root)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    return _page(request, "cluster.html", root=view.root, root_text=view.root_text,
                 members=view.members, matrix=view.matrix, ids=view.ids, hidden=view.hidden,
                 diff_words=DIFF_WORDS, store_text=service.settings.store_text)  # fmt: skip


@router.get("/contamination", response_class=HTMLResponse, dependencies=[Reader])
async def contamination_form(request: Request, service: ServiceDep) -> HTMLResponse:
    """Paste a text (or name a registered document) and choose protected sets."""
    return _page(request, "contamination.html", sets=sorted(service.protected), result=None,
                 text="", doc_id="", chosen=[])  # fmt: skip


@router.post("/contamination", response_class=HTMLResponse, dependencies=[Reader])
async def contamination(
    request: Request,
    service: ServiceDep,
    text: Annotated[str, Form()] = "",
    doc_id: Annotated[str, Form()] = "",
    sets: Annotated[list[str] | None, Form()] = None,
) -> HTMLResponse:
    """The shared n-grams highlighted in the text, with the items they come from."""
    chosen = sets or sorted(service.protected)
    caller = _ui_caller(request)
    try:
        if doc_id:
            text = await registered_text(service, doc_id)
        echo = "protect" in caller.scopes
        result = await contamination_view(service, text, chosen, caller.name, echo=echo)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    return _page(request, "contamination.html", sets=sorted(service.protected), result=result,
                 text=text[:HIGHLIGHT_CHARS], doc_id=doc_id, chosen=chosen,
                 highlight_chars=HIGHLIGHT_CHARS)  # fmt: skip


@router.get("/parameters", response_class=HTMLResponse, dependencies=[Reader])
async def parameters(request: Request, service: ServiceDep) -> HTMLResponse:
    """The S-curve of the running configuration and what other (bands, rows) would do."""
    params = service.params
    curve = s_curve(params.num_perm, params.bands, params.threshold)
    return _page(request, "parameters.html", curve=curve, settings=params)
