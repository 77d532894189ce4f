"""What every ``/ui`` page shares: the templates, who is signed in (the ``read`` gate), pages
rendered with their status, and errors under ``/ui`` as HTML pages (a browser gets a page that
says what is wrong, never raw JSON).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Depends, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from neardup.app.api.deps import Caller, bearer_token, caller_of
from neardup.app.api.errors import detail_for, status_for
from neardup.app.api.ui.security import Sessions
from neardup.app.service import RateLimited
from neardup.core.engine import NeardupError

__all__ = [
    "COOKIE",
    "LoginRequired",
    "Reader",
    "download_headers",
    "html_error",
    "login_redirect",
    "render_page",
    "service_error",
    "sessions",
    "templates",
    "ui_caller",
]

templates = Jinja2Templates(directory=Path(__file__).resolve().parent / "templates")
#: An id as one path segment or query value: every reserved character percent-encoded, ``/``
#: too (Jinja's ``urlencode`` keeps ``/``).
templates.env.filters["id_url"] = lambda value: quote(str(value), safe="")
COOKIE = "neardup_session"


class LoginRequired(Exception):
    """Not signed in (or the key lacks ``read``): send the browser to /ui/login."""


def sessions(request: Request) -> Sessions:
    """The app's sign-in sessions."""
    found: Sessions = request.app.state.sessions
    return found


def _presented_scopes(request: Request) -> frozenset[str] | None:
    """The scopes of a Bearer key, else of the session in the cookie."""
    key = bearer_token(request)
    if key is not None:
        scopes: frozenset[str] | None = request.app.state.keyring.scopes(key)
        return scopes
    session = request.cookies.get(COOKIE)
    return sessions(request).scopes(session) if session else None


def ui_caller(request: Request) -> Caller:
    """Who is signed in (``Reader`` has admitted them already), as the API names callers."""
    keyring = request.app.state.keyring
    key = bearer_token(request)
    session = request.cookies.get(COOKIE)
    if keyring is None or key is not None or session is None:
        return caller_of(keyring, key)
    name = sessions(request).name(session)
    return Caller(name or "unknown", sessions(request).scopes(session) or frozenset())


async def _reader(request: Request) -> None:
    if request.app.state.keyring is None:
        return
    scopes = _presented_scopes(request)
    if scopes is None or "read" not in scopes:
        raise LoginRequired


#: The gate of every page but the sign-in page: a key (Bearer, or a session) with ``read``.
Reader = Depends(_reader)


def login_redirect(request: Request, exc: Exception) -> Response:
    """The handler of LoginRequired: a redirect to the login page."""
    return RedirectResponse("/ui/login", status_code=303)


def render_page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page; "Sign out" shows only to a browser signed in (``signed_in``: a live session,
    and keys to sign in with): not on the sign-in page, nor with open access."""
    context.setdefault("open_access", request.app.state.keyring is None)
    context.setdefault("signed_in", not context["open_access"] and _session_live(request))
    response = templates.TemplateResponse(request, name, context)
    response.status_code = status
    return response


def _session_live(request: Request) -> bool:
    session = request.cookies.get(COOKIE)
    return session is not None and sessions(request).scopes(session) is not None


def download_headers(stem: str, extension: str) -> dict[str, str]:
    """``Content-Disposition`` of a download named after ``stem`` (an id: any Unicode): an ASCII
    ``filename`` with every other character as ``_``, and the exact name as ``filename*``."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", stem)[:100] or "export"
    exact = quote(f"{stem}.{extension}", safe="")
    disposition = f"attachment; filename=\"{plain}.{extension}\"; filename*=UTF-8''{exact}"
    return {"content-disposition": disposition, "cache-control": "no-store"}


def service_error(exc: Exception, where: str) -> tuple[int, dict[str, str], str]:
    """The status (app.api.errors' mapping; 422 for a ValueError of a form), headers and message
    of an error shown on a page (``where``: the page, for the log)."""
    if not isinstance(exc, NeardupError):
        return 422, {}, str(exc)
    status = status_for(exc)
    message = detail_for(exc, where)
    if isinstance(exc, RateLimited):
        return status, {"retry-after": str(exc.retry_after)}, message
    return status, {"retry-after": "1"} if status == 503 else {}, message


async def html_error(request: Request, exc: Exception) -> Response:
    """HTTP errors (404, 422, 503 while starting, ...) under /ui as an HTML page with the same
    status and headers; elsewhere the API's JSON."""
    if not isinstance(exc, StarletteHTTPException):
        raise exc
    path = request.url.path
    if not (path == "/ui" or path.startswith("/ui/")):
        return await http_exception_handler(request, exc)
    titles = {404: "Not found", 422: "Not understood", 503: "Not ready"}
    response = render_page(request, "error.html", exc.status_code, title=titles.get(exc.status_code,
                    "Error"), detail=exc.detail)  # fmt: skip
    response.headers.update(exc.headers or {})
    return response
