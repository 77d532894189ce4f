"""A service's clusters as the tests read them: from the store's cluster tables (what the
routes answer: ``Service.clusters_page``, ``cluster_slice``, ``read_stats``) and from memory
(the oracle: the ``ServiceIndex`` the service still keeps up to date, read as the service read
it before its answers came from the tables). Used only by tests."""

from __future__ import annotations

from bisect import bisect_right
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
