"""Bringing back into memory the clusters a write touches (docs/scaling.md, "The switch,
designed"): memory holds the memtable and the clusters holding one of its documents; a flushed
document, and the cluster it is in, live in the index's parts and the store's tables until a
write touches them. ``faulted`` reads what ``ServiceIndex.fault_in`` needs: the clusters of
the ids asked for (the tables), their members' numbers and signatures (the store's for the
service's own documents, the index's for indexed ones), and the service's own flushed
documents that are in no cluster, alone. Indexed documents in no cluster are left to linking
(``linking_plan``), as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np

from neardup.app.service.index import Faulted, ServiceIndex
from neardup.app.service.served import ServedIndex
from neardup.app.service.store import Store

__all__ = ["MEMBERS_PAGE", "faulted"]

log = logging.getLogger("neardup")

#: Members read a query at a time from the store's tables.
MEMBERS_PAGE = 10_000


def _members(store: Store, root: str) -> list[str]:
    """Every member id of the cluster rooted at ``root``, a page at a time."""
    out: list[str] = []
    while page := store.cluster_members(root, out[-1] if out else None, MEMBERS_PAGE):
        out += page
        if len(page) < MEMBERS_PAGE:
            break
    return out


def faulted(
    store: Store, served: ServedIndex, index: ServiceIndex, ids: Iterable[str]
) -> list[Faulted]:
    """What ``index.fault_in`` takes to hold the whole clusters of ``ids`` (held or not), and
    those of ``ids`` that are the service's own documents in no cluster. Blocking (the store
    and the index): on the store's thread, under the write lock (the tables are then this
    replica's), or at start."""
    asked = sorted(set(ids))
    if not asked:
        return []
    rows = store.cluster_rows(asked)
    groups = [_members(store, root) for root in sorted({root for root, _ in rows.values()})]
    alone = [i for i in asked if i not in rows and i not in index]
    missing = [m for g in groups for m in g if m not in index] + alone
    own = store.numbered(missing)
    # A replica following the others' writes may read tables ahead of the changes it applied:
    # documents numbered after its position come with their own change, not from here.
    ahead = {i for i, (num, _) in own.items() if num >= index.next_number}
    own = {i: v for i, v in own.items() if i not in ahead}
    groups = [[m for m in g if m not in ahead] for g in groups]
    alone = [i for i in alone if i not in ahead]
    others = [i for i in missing if i not in own and i not in ahead]
    sigs = served.signatures(others) if others else {}
    width = index.params.num_perm

    def faults(members: list[str], held: list[str]) -> Faulted:
        rows = [np.frombuffer(own[m][1], dtype="<u4") if m in own else sigs[m] for m in members]
        numbers = [own[m][0] if m in own else -1 for m in members]
        return Faulted(members, np.stack(rows).astype(np.uint32).reshape(-1, width), numbers, held)

    out = []
    for group in groups:
        gone = [m for m in group if m not in index]
        if not gone:
            continue
        lost = [m for m in gone if m not in own and m not in sigs]
        if lost:  # the tables name a member that is neither the store's nor the index's
            log.warning("cluster members not found, left out: %s", lost[:5])
            gone = [m for m in gone if m not in lost]
        if gone:
            out.append(faults(gone, [m for m in group if m in index]))
    out += [faults([i], []) for i in alone if i in own]
    return out
