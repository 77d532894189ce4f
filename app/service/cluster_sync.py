"""The store's clusters made equal to the in-memory index's for some documents: linking of
indexed documents (at start, a refresh of the served index, an indexed twin after a delete),
and the one fill of a store made before the cluster tables (app/service/clusters.py).

A registration, a replace and a delete write what they change in their own transaction
(``ServiceIndex.cluster_write``, ``removal_write``); a linking is computed by each replica from
the log and the served index, so it is written as the clusters' whole state here: writing it
twice (replicas computing the same links) changes nothing, and nothing is written when the
store already holds it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from neardup.app.service.clusters import ClusterRow, ClusterWrite
from neardup.app.service.index import ServiceIndex
from neardup.app.service.store import Store

__all__ = ["sync_clusters", "sync_write"]

log = logging.getLogger("neardup")


def sync_write(store: Store, index: ServiceIndex, ids: Iterable[str]) -> ClusterWrite | None:
    """The write making the store's clusters of ``ids`` those of ``index`` (None: they are
    already): the clusters of ``ids`` in the store and in memory, closed over their members
    (every cluster touched is dropped and written whole). Blocking: the store's thread, with
    writers kept out. The cost grows with those clusters."""
    seen: set[str] = set()
    todo = set(ids)
    stored: dict[str, set[str]] = {}
    memory: dict[str, ClusterRow | None] = {}  # by root: each cluster's members listed once

    def in_memory(doc_id: str) -> ClusterRow | None:
        if doc_id not in index:
            return None
        root = index.root_of(doc_id)
        if root not in memory:
            memory[root] = index.cluster_of(doc_id)
            return memory[root]
        return None  # (its members are taken already)

    while todo:
        seen |= todo
        more: set[str] = set()
        for root, size in set(store.cluster_rows(sorted(todo)).values()):
            if root not in stored:
                stored[root] = set(store.cluster_members(root, None, size))
                more |= stored[root]
        for doc_id in todo:
            row = in_memory(doc_id)
            if row is not None:
                more.update(i for i, _ in row.members)
        todo = more - seen
    rows = {root: row for root, row in memory.items() if row is not None}
    held = {root: {i for i, _ in row.members} for root, row in rows.items()}
    if held == stored:
        return None
    return ClusterWrite(cleared=sorted(seen), rows=list(rows.values()))


def sync_clusters(store: Store, index: ServiceIndex, ids: Iterable[str]) -> bool:
    """Write ``sync_write`` (if anything) through ``store.write_clusters``; False if a shared
    store refused it (another replica wrote since this one's position: a later start writes
    it). Blocking, as ``sync_write``."""
    write = sync_write(store, index, ids)
    if write is None:
        return True
    written = store.write_clusters(write)
    if not written:
        log.info("clusters of linked documents not written: the store moved on meanwhile")
    return written
