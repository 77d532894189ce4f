"""Errors mapped to HTTP status codes, in one place: core's tree and the service's."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.service import (
    Conflict,
    DamagedStore,
    DataDirLocked,
    NotFound,
    Overloaded,
    ParameterMismatch,
    QuotaExceeded,
    RateLimited,
    StoreFull,
    TooLarge,
)
from core.engine import (
    CorpusError,
    DuplicateIdError,
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
    (WorkerError, 503),
    (StoreFull, 507),
    (DuplicateIdError, 422),
    (CorpusError, 422),
    (ParameterError, 422),
    (SignatureError, 422),
    (ParameterMismatch, 500),
    (DamagedStore, 500),
    (DataDirLocked, 500),
]

#: Server-side statuses that are the client's to know about: their message is answered as is,
#: without a traceback in the log (503: retry after Retry-After; 507: the disk is full).
_TOLD = {503, 507}


def status_for(exc: Exception) -> int:
    """The status code of an error (422 for anything core rejects as invalid input)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 422 if isinstance(exc, NeardupError) else 500


async def _error(request: Request, exc: Exception) -> JSONResponse:
    status = status_for(exc)
    if status >= 500 and status not in _TOLD:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"detail": "internal error"}, status_code=status)
    headers = {"Retry-After": "1"} if status == 503 else None
    if isinstance(exc, RateLimited):
        headers = {"Retry-After": str(exc.retry_after)}
    return JSONResponse({"detail": str(exc)}, status_code=status, headers=headers)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    """422 listing where and why, without echoing the input (it may be huge, or hold lone
    surrogates that cannot even be encoded)."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
              for e in errors]  # fmt: skip
    return JSONResponse({"detail": detail or "invalid request"}, status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    """Register the mapping on ``app``."""
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(NeardupError, _error)
    app.add_exception_handler(Exception, _error)
