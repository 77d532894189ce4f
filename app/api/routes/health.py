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
    """Recovered and serving, with the store's state (``up``, or ``down`` while the shared
    store cannot be reached); 503 with Retry-After while starting, while the store is down
    ("store unavailable": writes would fail, so a load balancer should send them elsewhere),
    while the store's disk is full ("disk full", until a store write succeeds again), and while
    the served index's storage cannot be read ("index unavailable", with ``"index": "down"``,
    until a read of it succeeds: probed at most once a second)."""
    state = request.app.state
    if not getattr(state, "ready", False):
        response.status_code = 503
        response.headers["Retry-After"] = "1"
        return {"status": "starting"}
    service = state.service
    reason = await service.unready_reason()
    body = {"status": reason or "ready", "store": service.store_state()}
    index = service.index_state()
    if index is not None:  # serving an index (--index): whether its storage answers
        body["index"] = index
    if reason is not None:
        response.status_code = 503
        response.headers["Retry-After"] = "1"
    return body
