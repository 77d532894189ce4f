"""``/v1/clusters``: clusters ordered by root, with paging; a cluster's members, with paging;
answered from the store's cluster tables (app/service/cluster_reads.py)."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from neardup.app.api.answers import Budget, answer, budget_bytes, json_bytes
from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import ServiceDep, require
from neardup.app.api.schemas import ERRORS, ClusterOut, ClustersResponse
from neardup.app.service.cluster_reads import ClusterSlice

router = APIRouter(prefix="/v1", tags=["clusters"], route_class=StrictJSONRoute, responses=ERRORS)

#: A listed cluster's JSON besides its root and members (``{"root":,"size":,"members":[],
#: "members_next":null},``).
_FIXED_CLUSTER = 80
#: The most members one answer lists (and the default ``limit`` of a cluster's members).
MAX_MEMBERS = 10_000
#: What an answer holds besides its clusters' members, roots and keys: a page's ``next`` and
#: one ``members_next`` (an answer ends where one is set), ids of up to 256 characters of 4
#: bytes, and the JSON around them; taken from the budget first, so the answer is within it.
_CURSORS = 2 * (4 * 256 + 3) + 64
#: The fewest bytes a listed member takes (``json_bytes`` of a one-character id).
_LEAST_MEMBER = 4


@router.get("/clusters", dependencies=[require("read")], response_model=ClustersResponse)
async def clusters(
    request: Request,
    service: ServiceDep,
    min_size: Annotated[int, Query(ge=1)] = 2,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    after: str | None = None,
) -> Response:
    """Clusters of at least ``min_size`` members, by root, after the root ``after``; the page
    ends early where the answer's budget is spent (``next`` goes on from there), and a cluster
    too large for it lists its first members (``members_next`` goes on)."""
    most = budget_bytes(request) // _LEAST_MEMBER + 1  # more than the answer can hold
    groups, next_root = await service.clusters_page(min_size, limit, after, most, MAX_MEMBERS)
    return await answer(request, partial(_page, groups, next_root))


def _page(groups: list[ClusterSlice], next_root: str | None, budget: Budget) -> ClustersResponse:
    budget.take(_CURSORS)
    listed: list[ClusterOut] = []
    for group in groups:
        # Listed only with its first member (its root again): a cluster listed with no member
        # and no ``members_next`` would have its members on no page (``next`` goes past it).
        if listed and budget.left < _FIXED_CLUSTER + 2 * json_bytes(group.root):
            budget.truncated = True
            return ClustersResponse(clusters=listed, next=listed[-1].root, truncated=True)
        budget.take(_FIXED_CLUSTER + json_bytes(group.root))
        out = _cluster(group, None, budget)
        listed.append(out)
        if out.members_next is not None:  # the budget is spent: the page ends here
            more = len(listed) < len(groups) or next_root is not None
            return ClustersResponse(
                clusters=listed, next=out.root if more else None, truncated=True
            )
    return ClustersResponse(clusters=listed, next=next_root, truncated=budget.truncated)


def _cluster(group: ClusterSlice, after: str | None, budget: Budget) -> ClusterOut:
    """``group``'s members (those after ``after``, at most the limit asked) as many as fit."""
    shown = budget.prefix(group.members, json_bytes)
    more = len(shown) < len(group.members) or group.more
    return ClusterOut(
        root=group.root, size=group.size, members=shown,
        members_next=shown[-1] if more and shown else (after if more else None),
    )  # fmt: skip


@router.get("/clusters/{root:path}", dependencies=[require("read")], response_model=ClusterOut)
async def cluster(
    request: Request,
    root: str,
    service: ServiceDep,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_MEMBERS)] = MAX_MEMBERS,
) -> Response:
    """One cluster by its root (404 if ``root`` is not a root): its size and its sorted members
    after ``after``, at most ``limit`` and as many as the answer's budget holds
    (``members_next`` goes on)."""
    group = await service.cluster_slice(root, after, limit)
    return await answer(request, partial(_cluster_answer, group, after))


def _cluster_answer(group: ClusterSlice, after: str | None, budget: Budget) -> ClusterOut:
    """``_cluster`` as one cluster's answer: its cursor and keys taken from the budget first."""
    budget.take(_CURSORS)
    return _cluster(group, after, budget)
