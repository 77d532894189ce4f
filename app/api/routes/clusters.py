"""``/v1/clusters``: clusters ordered by root, with paging."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import ServiceDep, require
from neardup.app.api.schemas import ERRORS, ClusterOut, ClustersResponse

router = APIRouter(prefix="/v1", tags=["clusters"], route_class=StrictJSONRoute, responses=ERRORS)


@router.get("/clusters", dependencies=[require("read")])
async def clusters(
    service: ServiceDep,
    min_size: Annotated[int, Query(ge=1)] = 2,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    after: str | None = None,
) -> ClustersResponse:
    """Clusters of at least ``min_size`` members, by root, after the root ``after``."""
    groups, next_root = service.clusters(min_size, limit, after)
    return ClustersResponse(
        clusters=[ClusterOut(root=g[0], size=len(g), members=g) for g in groups], next=next_root
    )


@router.get("/clusters/{root:path}", dependencies=[require("read")])
async def cluster(root: str, service: ServiceDep) -> ClusterOut:
    """One cluster by its root; 404 if ``root`` is not a root."""
    members = service.cluster(root)
    return ClusterOut(root=root, size=len(members), members=members)
