"""The store's clusters made equal to the in-memory index's for some documents: linking of
indexed documents (at start, a refresh of the served index, an indexed twin after a delete),
and the one fill of a store made before the cluster tables (app/service/clusters.py).

A registration, a replace and a delete write what they change in their own transaction
(``ServiceIndex.cluster_write``, ``removal_write``); a linking is computed by each replica from
the log and the served index, so it is written as the clusters' whole state here: writing it
twice (replicas computing the same links) changes nothing, and nothing is written when the
store already holds it. The service writes it under the store's write lock, after the other
replicas' changes (``Service._store_relinked``). Compared whole (rows and members), it also
repairs a cluster a replica serving an older version of the index wrote from that version.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from neardup.app.service.clusters import ClusterRow, ClusterWrite, StoredCluster
from neardup.app.service.index import ServiceIndex
from neardup.app.service.store import Store

__all__ = ["sync_clusters", "sync_write"]

log = logging.getLogger("neardup")


def sync_write(store: Store, index: ServiceIndex, ids: Iterable[str]) -> ClusterWrite | None:
    """The write making the store's clusters of ``ids`` those of ``index`` (None: they are
    already): the clusters of ``ids`` in the store and in memory, closed over their members
    (every cluster touched is dropped and written whole). Compared whole, rows and members: a
    write from a replica that served an older version of the index may have left a cluster's
    size, root or own counting documents that version had. Blocking: the store's thread,
    with writers kept out. The cost grows with those clusters."""
    seen: set[str] = set()
    todo = set(ids)
    stored: dict[int, StoredCluster] = {}
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
        for label, cluster in store.stored_clusters(sorted(todo)).items():
            if label not in stored:
                stored[label] = cluster
                more.update(i for i, _ in cluster.members)
        for doc_id in todo:
            row = in_memory(doc_id)
            if row is not None:
                more.update(i for i, _ in row.members)
        todo = more - seen
    rows = [row for row in memory.values() if row is not None]
    if {row.stored() for row in rows} == set(stored.values()):
        return None
    return ClusterWrite(cleared=sorted(seen), rows=rows)


def sync_clusters(store: Store, index: ServiceIndex, ids: Iterable[str]) -> bool:
    """Write ``sync_write`` (if anything) through ``store.write_clusters``; False if a shared
    store refused it (called outside its write transaction, after another replica wrote
    since this one's position). Blocking, as ``sync_write``."""
    write = sync_write(store, index, ids)
    if write is None:
        return True
    written = store.write_clusters(write)
    if not written:
        log.info("clusters of linked documents not written: the store moved on meanwhile")
    return written
