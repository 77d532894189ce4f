"""A service's clusters as the tests read them: from the store's cluster tables (what the
routes answer: ``Service.clusters_page``, ``cluster_slice``, ``read_stats``) and from memory
(the oracle: the ``ServiceIndex`` the service still keeps up to date, read as the service read
it before its answers came from the tables). Used only by tests."""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections import Counter
from typing import Any

from neardup.app.service import Service
from neardup.app.service.errors import NotFound
from neardup.app.service.index import ServiceIndex

#: No bound: a test's clusters are listed whole.
EVERY = 10**9

Page = tuple[list[list[str]], str | None]


async def page(service: Service, min_size: int, limit: int, after: str | None) -> Page:
    """A page of ``GET /v1/clusters`` from the tables: each cluster's sorted members (whole),
    and the next cursor."""
    slices, cursor = await service.clusters_page(min_size, limit, after, EVERY, EVERY)
    assert not any(s.more for s in slices), slices
    assert all(s.size == len(s.members) for s in slices), slices
    return [s.members for s in slices], cursor


async def cluster_or_indexed(service: Service, root: str) -> list[str]:
    """``GET /v1/clusters/{root}``'s members from the tables (NotFound if not a root)."""
    found = await service.cluster_slice(root, None, EVERY)
    assert found.size == len(found.members) and not found.more, found
    return found.members


async def every_cluster(service: Service) -> dict[str, list[str]]:
    """Every cluster the tables hold, singletons included, by root: what the service answers
    for, whatever its memory holds (flushed documents leave it)."""
    found: dict[str, list[str]] = {}
    after: str | None = None
    while True:
        members, after = await page(service, 1, 1_000, after)
        found.update((m[0], m) for m in members)
        if after is None:
            return found


# --- the oracle: memory ---------------------------------------------------------------------


def memory_roots(index: ServiceIndex, min_size: int) -> list[str]:
    """Root ids of the clusters of at least ``min_size`` members, sorted."""
    if min_size <= 1:
        return sorted(index.roots())
    return sorted(index.clusters_by_size(min_size))


def memory_page(index: ServiceIndex, min_size: int, limit: int, after: str | None) -> Page:
    """``page`` as memory answers it."""
    roots = memory_roots(index, min_size)
    start = bisect_right(roots, after) if after is not None else 0
    listed = roots[start : start + limit]
    more = start + limit < len(roots)
    return [index.members(root) for root in listed], (listed[-1] if more and listed else None)


def memory_cluster(index: ServiceIndex, root: str) -> list[str]:
    """The sorted members of the cluster rooted at ``root`` in memory (NotFound if not)."""
    if not index.is_root(root):
        raise NotFound(f"{root!r} is not the root of a cluster")
    return index.members(root)


def memory_page_cluster(index: ServiceIndex, root: str) -> list[str]:
    """``memory_cluster`` as the web's cluster pages take it: an indexed document alone (a
    linked one whose matches were deleted) is no cluster (NotFound; its document page shows
    it)."""
    if index.is_indexed(root) and index.is_root(root) and index.size_of(root) == 1:
        raise NotFound(f"{root!r} is not the root of a cluster")
    return memory_cluster(index, root)


def memory_cluster_or_indexed(service: Service, root: str) -> list[str]:
    """``cluster_or_indexed`` as memory answers it (blocking: it may read the served index)."""
    index = service.index
    if not index.is_root(root) and root not in index and service._indexed_digests([root]):
        return [root]
    return memory_cluster(index, root)


def memory_largest(index: ServiceIndex) -> list[tuple[str, int]]:
    """(root, size) of every listed cluster of two or more, largest first, then by root."""
    sizes = index.clusters_by_size(2)
    return sorted(sizes.items(), key=lambda item: (-item[1], item[0]))


def memory_counts(index: ServiceIndex) -> dict[str, Any]:
    """``read_stats``' clusters and duplicates as memory counts them."""
    sizes = index.clusters_by_size(2)
    return {"clusters": len(sizes), "duplicates": sum(sizes.values()) - len(sizes)}


# --- the proof: the tables answer as memory does ------------------------------------------------


async def _raised(call: Any) -> Any:
    """``await call``, or the name of the error it raised."""
    try:
        return await call
    except NotFound as exc:
        return type(exc).__name__


def _memory_or_raised(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except NotFound as exc:
        return type(exc).__name__


async def answers_as_memory(
    service: Service, ids: list[str], oracle: Service | None = None
) -> None:
    """Every cluster answer the routes give from the store's tables equals memory's (the
    service's in-memory index, its clusters kept as before): the listing by root (``min_size``
    1, 2 and 3, pages of 1, 2 and 3 walked to the end, and with members cut by a per-cluster
    and a total bound), each of ``ids`` (and every root) as ``GET /v1/clusters/{root}``,
    whole and paged one member at a time, the largest clusters and the size counts, and
    ``read_stats``' clusters and duplicates. ``oracle``: the service whose memory answers
    (one holding every document, on the same documents), for a service whose flushed
    documents leave memory."""
    oracle = service if oracle is None else oracle
    index = oracle.index
    for min_size in (1, 2, 3):
        for limit in (1, 2, 3):
            after: str | None = None
            while True:
                got = await page(service, min_size, limit, after)
                assert got == memory_page(index, min_size, limit, after), (min_size, limit, after)
                after = got[1]
                if after is None:
                    break
        await _cut(service, index, min_size)
    roots = memory_roots(index, 1)
    for doc_id in sorted({*ids, *roots, *index.linked_ids()}):
        want = await asyncio.to_thread(_memory_or_raised, memory_cluster_or_indexed, oracle, doc_id)
        assert await _raised(cluster_or_indexed(service, doc_id)) == want, doc_id
        if isinstance(want, list):
            assert await _paged(service, doc_id, want) == want, doc_id
            assert await _raised(service.cluster(doc_id)) == _memory_or_raised(
                memory_page_cluster, index, doc_id
            ), doc_id
    largest, sizes = await service.largest_clusters(0, EVERY)
    assert largest == memory_largest(index)
    assert sizes == dict(Counter(size for _, size in largest))
    if largest:
        assert (await service.largest_clusters(1, 1))[0] == largest[1:2]
    stats = await service.read_stats()
    assert {k: stats[k] for k in ("clusters", "duplicates")} == memory_counts(index)


async def _cut(service: Service, index: ServiceIndex, min_size: int) -> None:
    """One page of the whole listing with at most 2 members a cluster and 3 in all: each
    cluster lists its first members, ``more`` when some are left out."""
    slices, _ = await service.clusters_page(min_size, EVERY, None, 3, 2)
    want, _ = memory_page(index, min_size, EVERY, None)
    assert [s.root for s in slices] == [m[0] for m in want]
    for s, members in zip(slices, want, strict=True):
        assert s.size == len(members) and 1 <= len(s.members) <= 2, s
        assert s.members == members[: len(s.members)] and s.more == (len(s.members) < s.size), s
    listed = 0  # members listed so far: 3 in all, then each cluster its root alone
    for s in slices:
        assert len(s.members) <= max(3 - listed, 1), (s, listed)
        listed += len(s.members)


async def _paged(service: Service, root: str, want: list[str]) -> list[str]:
    """A cluster's members read one at a time, each from the last one's cursor, each page
    saying whether more follow as ``want`` (memory's members) does."""
    members: list[str] = []
    while True:
        found = await service.cluster_slice(root, members[-1] if members else None, 1)
        members += found.members
        assert found.size == len(want) and found.more == (len(members) < len(want)), found
        if not found.more:
            return members
