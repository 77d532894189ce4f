"""``/v1/clusters``: clusters ordered by root, with paging; a cluster's members, with paging."""

from __future__ import annotations

from bisect import bisect_right
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from neardup.app.api.answers import Budget, answer, json_bytes
from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.deps import ServiceDep, require
from neardup.app.api.schemas import ERRORS, ClusterOut, ClustersResponse

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
    groups, next_root = await service.clusters_page(min_size, limit, after)
    return await answer(request, partial(_page, groups, next_root))


def _page(groups: list[list[str]], next_root: str | None, budget: Budget) -> ClustersResponse:
    budget.take(_CURSORS)
    listed: list[ClusterOut] = []
    for members in groups:
        # Listed only with its first member (its root again): a cluster listed with no member
        # and no ``members_next`` would have its members on no page (``next`` goes past it).
        if listed and budget.left < _FIXED_CLUSTER + 2 * json_bytes(members[0]):
            budget.truncated = True
            return ClustersResponse(clusters=listed, next=listed[-1].root, truncated=True)
        budget.take(_FIXED_CLUSTER + json_bytes(members[0]))
        out = _cluster(members[0], members, None, MAX_MEMBERS, budget)
        listed.append(out)
        if out.members_next is not None:  # the budget is spent: the page ends here
            more = len(listed) < len(groups) or next_root is not None
            return ClustersResponse(
                clusters=listed, next=out.root if more else None, truncated=True
            )
    return ClustersResponse(clusters=listed, next=next_root, truncated=budget.truncated)


def _cluster(
    root: str, members: list[str], after: str | None, limit: int, budget: Budget
) -> ClusterOut:
    """``members`` after ``after``, at most ``limit`` and as many as fit."""
    start = 0 if after is None else bisect_right(members, after)
    wanted = members[start : start + min(limit, MAX_MEMBERS)]
    shown = budget.prefix(wanted, json_bytes)
    more = start + len(shown) < len(members)
    return ClusterOut(
        root=root, size=len(members), members=shown,
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
    members = await service.read_index(partial(service.cluster_or_indexed, root))
    return await answer(request, partial(_cluster_answer, root, members, after, limit))


def _cluster_answer(
    root: str, members: list[str], after: str | None, limit: int, budget: Budget
) -> ClusterOut:
    """``_cluster`` as one cluster's answer: its cursor and keys taken from the budget first."""
    budget.take(_CURSORS)
    return _cluster(root, members, after, limit, budget)
