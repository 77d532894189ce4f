"""``/v1/stats`` and ``/metrics``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from app.api.bodies import StrictJSONRoute
from app.api.deps import ServiceDep, require
from app.api.schemas import ERRORS

router = APIRouter(tags=["stats"], route_class=StrictJSONRoute, responses=ERRORS)


@router.get("/v1/stats", dependencies=[require("read")])
async def stats(service: ServiceDep) -> dict[str, Any]:
    """Documents, clusters (two or more members), duplicates, protected sets, and more."""
    return service.stats()


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, service: ServiceDep) -> Response:
    """Prometheus text format."""
    return request.app.state.metrics.render(service.stats())  # type: ignore[no-any-return]
