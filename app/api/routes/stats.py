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


def _stats(request: Request, service: Service) -> dict[str, Any]:
    """The service's counts and the admission's (requests admitted, bytes buffered, shed)."""
    capacity: Capacity = request.app.state.capacity
    return {**service.stats(), **capacity.stats()}


@router.get("/v1/stats", dependencies=[require("read")], response_model=dict[str, Any])
async def stats(request: Request, service: AnyServiceDep) -> Response:
    """Documents, clusters (two or more members), duplicates, protected sets, and more."""
    counts = await service.read_index(lambda _: _stats(request, service))  # grows with clusters
    return await answer(request, lambda _: counts)


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, service: AnyServiceDep) -> Response:
    """Prometheus text format."""
    return request.app.state.metrics.render(_stats(request, service))  # type: ignore[no-any-return]
