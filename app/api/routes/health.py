"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, response: Response) -> dict[str, str]:
    """Recovered and serving; 503 with Retry-After until then."""
    if not getattr(request.app.state, "ready", False):
        response.status_code = 503
        response.headers["Retry-After"] = "1"
        return {"status": "starting"}
    return {"status": "ready"}
