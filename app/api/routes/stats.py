"""``/v1/stats`` and ``/metrics``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from neardup.app.api.admission import Capacity
from neardup.app.api.answers import answer
from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import AnyServiceDep, require
from neardup.app.api.schemas import ERRORS
from neardup.app.service import Service

router = APIRouter(tags=["stats"], route_class=StrictJSONRoute, responses=ERRORS)


async def _stats(request: Request, service: Service) -> dict[str, Any]:
    """The service's counts (the clusters' read from the store's counts, on its read thread) and
    the admission's (requests admitted, bytes buffered, shed)."""
    capacity: Capacity = request.app.state.capacity
    return {**await service.read_stats(), **capacity.stats()}


@router.get("/v1/stats", dependencies=[require("read")], response_model=dict[str, Any])
async def stats(request: Request, service: AnyServiceDep) -> Response:
    """Documents, clusters (two or more members), duplicates, protected sets, and more."""
    counts = await _stats(request, service)
    return await answer(request, lambda _: counts)


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, service: AnyServiceDep) -> Response:
    """Prometheus text format."""
    counts = await _stats(request, service)
    return request.app.state.metrics.render(counts)  # type: ignore[no-any-return]
