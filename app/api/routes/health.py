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
    """Recovered and serving; 503 with Retry-After while starting, and while the store's disk
    is full ("disk full", until a store write succeeds again)."""
    state = request.app.state
    reason = "starting"
    if getattr(state, "ready", False):
        found = await state.service.unready_reason()
        if found is None:
            return {"status": "ready"}
        reason = found
    response.status_code = 503
    response.headers["Retry-After"] = "1"
    return {"status": reason}
