"""``/ui``: server-rendered pages to look at clusters, contamination (a text; a batch of
documents through a decontamination mode, with the per-set and per-item report) and the
parameters.

Behind the same access rules as the API (``read``); a key entered once on /ui/login opens a
server-side session whose random id is kept in a cookie (HttpOnly, SameSite=Strict) for the
browser session (see ``security``). Sign-in forms posted from another site are refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from neardup.app.api.deps import Caller, ServiceDep, bearer_token, caller_of
from neardup.app.api.ui.charts import s_curve, size_histogram
from neardup.app.api.ui.security import Sessions, same_origin
from neardup.app.service import DecontRequest, NotFound
from neardup.app.service.views import (
    CHAIN_LIMIT,
    DIFF_WORDS,
    HIGHLIGHT_CHARS,
    cluster_view,
    contamination_view,
    registered_text,
)
from neardup.core.engine import DecontMode, DecontParams, Doc, ParameterError, Thresholds

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).resolve().parent / "templates")
#: An id as one path segment or query value: every reserved character percent-encoded, ``/``
#: too (Jinja's ``urlencode`` keeps ``/``).
templates.env.filters["id_url"] = lambda value: quote(str(value), safe="")
STYLE = (Path(__file__).resolve().parent / "static" / "style.css").read_bytes()
COOKIE = "neardup_session"
PAGE = 50


class LoginRequired(Exception):
    """Not signed in (or the key lacks ``read``): send the browser to /ui/login."""


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.sessions
    return sessions


def _presented_scopes(request: Request) -> frozenset[str] | None:
    """The scopes of a Bearer key, else of the session in the cookie."""
    key = bearer_token(request)
    if key is not None:
        scopes: frozenset[str] | None = request.app.state.keyring.scopes(key)
        return scopes
    session = request.cookies.get(COOKIE)
    return _sessions(request).scopes(session) if session else None


def _ui_caller(request: Request) -> Caller:
    """Who is signed in (``_reader`` has admitted them already), as the API names callers."""
    keyring = request.app.state.keyring
    key = bearer_token(request)
    session = request.cookies.get(COOKIE)
    if keyring is None or key is not None or session is None:
        return caller_of(keyring, key)
    name = _sessions(request).name(session)
    return Caller(name or "unknown", _sessions(request).scopes(session) or frozenset())


async def _reader(request: Request) -> None:
    if request.app.state.keyring is None:
        return
    scopes = _presented_scopes(request)
    if scopes is None or "read" not in scopes:
        raise LoginRequired


Reader = Depends(_reader)


def login_redirect(request: Request, exc: Exception) -> Response:
    """The handler of LoginRequired: a redirect to the login page."""
    return RedirectResponse("/ui/login", status_code=303)


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    """A page; ``open_access`` (no keys file) hides "Sign out", there being no sign-in."""
    context.setdefault("open_access", request.app.state.keyring is None)
    return templates.TemplateResponse(request, name, context)


def _login_error(request: Request, status: int, error: str) -> HTMLResponse:
    page = _page(request, "login.html", error=error)
    page.status_code = status
    return page


@router.get("/style.css")
async def style() -> Response:
    """The pages' stylesheet (open: the sign-in page needs it too)."""
    return Response(STYLE, media_type="text/css", headers={"cache-control": "max-age=3600"})


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request) -> HTMLResponse:
    """Ask for an API key with the read scope."""
    return _page(request, "login.html", error=None)


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
        COOKIE, _sessions(request).open(scopes, caller_of(keyring, key).name), httponly=True,
        samesite="strict", path="/ui",
        secure=request.url.scheme == "https",
    )  # fmt: skip
    return response


@router.get("/logout")
async def logout(request: Request) -> Response:
    """Close the session."""
    session = request.cookies.get(COOKIE)
    if session:
        _sessions(request).close(session)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@router.get("", response_class=HTMLResponse, dependencies=[Reader])
async def overview(
    request: Request, service: ServiceDep, page: int = 1, find_id: str | None = None
) -> HTMLResponse:
    """Counts, the cluster-size histogram, a search by id, and the largest clusters first."""
    ranked = service.largest_clusters()
    page = max(1, page)
    rows = ranked[(page - 1) * PAGE : page * PAGE]
    return _page(
        request, "overview.html", stats=service.stats(),
        bars=size_histogram([size for _, size in ranked]), rows=rows, page=page,
        pages=max(1, -(-len(ranked) // PAGE)), sets=sorted(service.protected), find_id=find_id,
    )  # fmt: skip


@router.get("/find", response_class=HTMLResponse, dependencies=[Reader])
async def find(request: Request, service: ServiceDep, id: str = "") -> Response:
    """A document by id: to its cluster's page, on the page holding its row; else the overview
    saying so (404)."""
    if id and id in service.index:
        root = service.index.root_of(id)
        target = f"/ui/clusters/{quote(root, safe='')}?find={quote(id, safe='')}"
        return RedirectResponse(target, status_code=303)
    response = await overview(request, service, find_id=id or None)
    response.status_code = 404 if id else 200
    return response


@router.get("/clusters/{root:path}", response_class=HTMLResponse, dependencies=[Reader])
async def cluster(
    request: Request, root: str, service: ServiceDep, page: int = 1, find: str | None = None
) -> HTMLResponse:
    """A page of the cluster's distinct texts (copies collapsed), borderline first, with the
    chain that joined each member below the threshold, word differences against the root,
    estimates, exact Jaccard and the page's matrix."""
    try:
        view = await cluster_view(service, root, page, find)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    return _page(request, "cluster.html", root=view.root, root_text=view.root_text,
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
    return _page(request, "contamination.html", sets=sorted(service.protected), result=None,
                 text="", doc_id=doc_id, chosen=[])  # fmt: skip


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


_MODES = ("drop", "cut", "annotate")


@router.get("/decontamination", response_class=HTMLResponse, dependencies=[Reader])
async def decontamination_form(request: Request, service: ServiceDep) -> HTMLResponse:
    """Paste documents (JSON Lines), choose sets, a mode and a cap."""
    form = {"sets": sorted(service.protected), "chosen": [], "docs": "", "mode": "drop",
            "item_cap": "", "modes": _MODES}  # fmt: skip
    return _page(request, "decontamination.html", result=None, error=None, **form)


@router.post("/decontamination", response_class=HTMLResponse, dependencies=[Reader])
async def decontamination(
    request: Request,
    service: ServiceDep,
    docs: Annotated[str, Form()] = "",
    mode: Annotated[str, Form()] = "drop",
    item_cap: Annotated[str, Form()] = "",
    sets: Annotated[list[str] | None, Form()] = None,
) -> HTMLResponse:
    """The documents through the mode, and the report: per set and per matched item."""
    chosen = sets or sorted(service.protected)
    caller = _ui_caller(request)
    form = {"sets": sorted(service.protected), "chosen": chosen, "docs": docs, "mode": mode,
            "item_cap": item_cap, "modes": _MODES}  # fmt: skip
    try:
        parsed = _pasted_docs(docs)
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(_MODES)}, not {mode!r}")
        if item_cap.strip() and not item_cap.strip().isdigit():
            raise ValueError(f"the item cap must be a whole number, not {item_cap!r}")
        cap = int(item_cap) if item_cap.strip() else None
        ask = DecontRequest(DecontParams(DecontMode(mode)), cap, Thresholds(), 10,
                            "protect" in caller.scopes)  # fmt: skip
        out, dropped, report = await service.decontamination(parsed, chosen, ask, caller.name)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except (ValueError, ParameterError) as exc:
        page = _page(request, "decontamination.html", result=None, error=str(exc), **form)
        page.status_code = 422
        return page
    result = {"documents": out, "dropped": [d["id"] for d in dropped], "report": report}
    return _page(request, "decontamination.html", result=result, error=None, **form)


def _pasted_docs(body: str) -> list[Doc]:
    """JSON Lines of ``{"id", "text", "meta"?}``; ValueError naming the line of a bad one."""
    out = []
    for line, raw in enumerate(body.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {line}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise ValueError(f'line {line}: give an object with a "text" string')
        meta = row.get("meta") or {}
        if not isinstance(meta, dict):
            raise ValueError(f'line {line}: "meta" must be an object')
        out.append(Doc(str(row.get("id", line)), row["text"], meta))
    if not out:
        raise ValueError("paste at least one document, one JSON object a line")
    return out


@router.get("/parameters", response_class=HTMLResponse, dependencies=[Reader])
async def parameters(request: Request, service: ServiceDep) -> HTMLResponse:
    """The S-curve of the running configuration and what other (bands, rows) would do."""
    params = service.params
    curve = s_curve(params.num_perm, params.bands, params.threshold)
    return _page(request, "parameters.html", curve=curve, settings=params)
