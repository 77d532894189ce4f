"""Core's errors mapped to HTTP status codes, in one place."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from core.errors import (
    CorpusError,
    DuplicateIdError,
    NeardupError,
    ParameterError,
    SignatureError,
    WorkerError,
)

__all__ = ["install_error_handlers", "status_for"]

_STATUS: list[tuple[type[NeardupError], int]] = [
    (WorkerError, 503),
    (DuplicateIdError, 422),
    (CorpusError, 422),
    (ParameterError, 422),
    (SignatureError, 422),
]


def status_for(exc: NeardupError) -> int:
    """The status code of a core error (422 for anything core rejects as invalid input)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 422


async def _core_error(request: Request, exc: Exception) -> JSONResponse:
    status = status_for(exc) if isinstance(exc, NeardupError) else 500
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"detail": str(exc)}, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the mapping on ``app``."""
    app.add_exception_handler(NeardupError, _core_error)
