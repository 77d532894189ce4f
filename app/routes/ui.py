"""``/ui``: server-rendered pages to look at clusters, contamination and the parameters.

Behind the same access rules as the API (``read``); a key entered once on /ui/login is kept in
a session cookie (HttpOnly, SameSite=Strict) for the browser session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from app.charts import s_curve, size_histogram
from app.deps import ServiceDep, bearer_token
from app.diffs import highlight_ngrams, word_diff
from app.service import NotFound, Service
from core.sketch import estimate
from core.text import jaccard, ngrams, shingles, words

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).resolve().parent.parent / "templates")
COOKIE = "neardup_key"
PAGE = 50
MATRIX_LIMIT = 20


class LoginRequired(Exception):
    """Not signed in (or the key lacks ``read``): send the browser to /ui/login."""


def _presented_key(request: Request) -> str | None:
    return bearer_token(request) or request.cookies.get(COOKIE)


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
    members = service.index.clusters.members
    sizes = [len(m) for m in members.values()]
    ranked = sorted(members, key=lambda r: (-len(members[r]), service.index.ids[r]))
    page = max(1, page)
    shown = ranked[(page - 1) * PAGE : page * PAGE]
    rows = [(service.index.ids[r], len(members[r])) for r in shown]
    return _page(
        request, "overview.html", stats=service.stats(), bars=size_histogram(sizes), rows=rows,
        page=page, pages=max(1, -(-len(ranked) // PAGE)), sets=sorted(service.protected),
    )  # fmt: skip


@router.get("/clusters/{root}", response_class=HTMLResponse, dependencies=[Reader])
async def cluster(request: Request, root: str, service: ServiceDep) -> HTMLResponse:
    """Members beside the root, with word differences, estimates and exact Jaccard."""
    try:
        member_ids = service.cluster(root)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    index = service.index
    nums = [index.num_of[m] for m in member_ids]
    sigs = index.signatures(nums)
    texts = await service.texts(nums)
    k = service.settings.k
    root_text = texts.get(nums[0])
    root_shingles = shingles(root_text, k) if root_text is not None else None
    members = []
    for i, (member, num) in enumerate(zip(member_ids, nums, strict=True)):
        text = texts.get(num)
        exact = None
        if root_shingles is not None and text is not None:
            exact = jaccard(root_shingles, shingles(text, k))
        diff = word_diff(root_text, text) if (root_text is not None and text is not None) else []
        members.append({"id": member, "estimate": estimate(sigs[0], sigs[i]), "jaccard": exact,
                        "text": text, "diff": diff})  # fmt: skip
    matrix = _matrix(sigs) if len(nums) <= MATRIX_LIMIT else None
    return _page(request, "cluster.html", root=root, root_text=root_text, members=members,
                 matrix=matrix, ids=member_ids, store_text=service.settings.store_text)  # fmt: skip


def _matrix(sigs: np.ndarray[Any, Any]) -> list[list[float]]:
    equal = sigs[:, None, :] == sigs[None, :, :]
    return (equal.mean(axis=2)).tolist()  # type: ignore[no-any-return]


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
    if doc_id:
        text = await _registered_text(service, doc_id)
    [hits] = await service.contamination([text], chosen)
    n = service.settings.ngram
    picked = [service.protected_set(name) for name in chosen]
    shared = {g for g in ngrams(words(text), n) if any(g in p.grams for p in picked)}
    result = {"pieces": highlight_ngrams(text, shared, n), "hits": hits}
    return _page(request, "contamination.html", sets=sorted(service.protected), result=result,
                 text=text, doc_id=doc_id, chosen=chosen)  # fmt: skip


async def _registered_text(service: Service, doc_id: str) -> str:
    num = service.index.num_of.get(doc_id)
    texts = await service.texts([num]) if num is not None else {}
    if num is None or num not in texts:
        raise HTTPException(404, f"no stored text for document {doc_id!r}")
    return texts[num]


@router.get("/parameters", response_class=HTMLResponse, dependencies=[Reader])
async def parameters(request: Request, service: ServiceDep) -> HTMLResponse:
    """The S-curve of the running configuration and what other (bands, rows) would do."""
    settings = service.settings
    curve = s_curve(settings.num_perm, settings.bands, settings.threshold)
    return _page(request, "parameters.html", curve=curve, settings=settings)
