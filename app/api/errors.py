"""Errors mapped to HTTP status codes, in one place: core's tree and the service's."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute, Match

from neardup.app.service import (
    Conflict,
    DamagedStore,
    DataDirLocked,
    IndexUnavailable,
    NotFound,
    OutOfReach,
    Overloaded,
    ParameterMismatch,
    ProtectScopeNeeded,
    QuotaExceeded,
    RateLimited,
    SettingsChanged,
    StoreFull,
    StoreUnavailable,
    TooLarge,
)
from neardup.core.engine import (
    CorpusError,
    DuplicateIdError,
    IndexDamagedError,
    IndexLayoutError,
    NeardupError,
    ParameterError,
    SignatureError,
    WorkerError,
)

__all__ = ["install_error_handlers", "status_for"]

log = logging.getLogger("neardup")

_STATUS: list[tuple[type[Exception], int]] = [
    (NotFound, 404),
    (Conflict, 409),
    (TooLarge, 413),
    (Overloaded, 503),
    (QuotaExceeded, 507),
    (RateLimited, 429),
    (ProtectScopeNeeded, 403),
    (WorkerError, 503),
    (StoreFull, 507),
    (StoreUnavailable, 503),
    (IndexUnavailable, 503),
    (SettingsChanged, 503),
    (DuplicateIdError, 422),
    (OutOfReach, 422),
    (CorpusError, 422),
    (ParameterError, 422),
    (SignatureError, 422),
    (ParameterMismatch, 500),
    (DamagedStore, 500),
    # The served index's state, not the request's (and its message names the index's URL,
    # which may hold credentials): logged, never told.
    (IndexDamagedError, 500),
    (IndexLayoutError, 500),
    (DataDirLocked, 500),
]

#: Server-side statuses that are the client's to know about: their message is answered as is,
#: without a traceback in the log (503: retry after Retry-After, the database may be away;
#: 507: the disk is full).
_TOLD = {503, 507}


def status_for(exc: Exception) -> int:
    """The status code of an error (422 for anything core rejects as invalid input)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 422 if isinstance(exc, NeardupError) else 500


#: What a client is told when the store is away: where it is and what the database said go to
#: the log only (a key that may read should not learn the database's host, name or messages).
STORE_AWAY = (
    "the store is unavailable; retry after Retry-After seconds (a write answered 503 may have "
    "been stored: sending it again is safe)"
)


#: What a client is told when the served index cannot be read: what its storage said (and its
#: URL, which may hold credentials) goes to the log only. A write reads the index before it
#: stores anything, so one answered this is not stored (but for a failure in the moment after
#: its commit): sending it again is safe either way.
INDEX_AWAY = (
    "the index is unavailable (its storage cannot be read); retry after Retry-After seconds "
    "(sending a write again is safe)"
)


def detail_for(exc: Exception, where: str) -> str:
    """What a client is told of ``exc`` (raised while serving ``where``): its message, but a
    generic one for a store or an index that is away, whose message is logged instead."""
    if isinstance(exc, StoreUnavailable):
        log.warning("store unavailable on %s: %s", where, exc)
        return STORE_AWAY
    if isinstance(exc, IndexUnavailable):
        log.warning("index unavailable on %s: %s", where, exc)
        return INDEX_AWAY
    return str(exc)


async def _error(request: Request, exc: Exception) -> JSONResponse:
    status = status_for(exc)
    if status >= 500 and status not in _TOLD:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"detail": "internal error"}, status_code=status)
    headers = {"Retry-After": "1"} if status == 503 else None
    if isinstance(exc, RateLimited):
        headers = {"Retry-After": str(exc.retry_after)}
    body: dict[str, object] = {"detail": detail_for(exc, f"{request.method} {request.url.path}")}
    if isinstance(exc, Conflict):
        body["conflicts"] = exc.ids  # every such id of the batch (at most MAX_BATCH)
    return JSONResponse(body, status_code=status, headers=headers)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    """422 listing where and why, without echoing the input (it may be huge, or hold lone
    surrogates that cannot even be encoded)."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
              for e in errors]  # fmt: skip
    return JSONResponse({"detail": detail or "invalid request"}, status_code=422)


def _leaves(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, through included routers (FastAPI keeps them nested)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        yield from _leaves(inner.routes) if inner is not None else (route,)


async def _method_not_allowed(request: Request, exc: Exception) -> JSONResponse:
    """405 whose ``Allow`` lists every method of the path (Starlette lists only those of the
    first route matching it, e.g. GET but not DELETE for ``/v1/documents/{doc_id}``)."""
    methods: set[str] = set()
    for route in _leaves(request.app.routes):
        if route.matches(request.scope)[0] is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    allow = ", ".join(sorted(methods))
    return JSONResponse({"detail": "Method Not Allowed"}, status_code=405, headers={"Allow": allow})


def install_error_handlers(app: FastAPI) -> None:
    """Register the mapping on ``app``."""
    app.add_exception_handler(405, _method_not_allowed)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(NeardupError, _error)
    app.add_exception_handler(Exception, _error)
