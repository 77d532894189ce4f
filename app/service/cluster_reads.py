"""Reading the store's clusters (app/service/clusters.py): every cluster answer comes from
here, bounded by its request whatever is stored, in one SQL for both stores (``?``
placeholders; ``collate`` orders ids by code point on PostgreSQL, as SQLite's binary order
does).

- ``listing``: a page by root (``GET /v1/clusters``), singletons merged in from the live
  documents; ``cluster_slice``: a cluster by root, paged (``GET /v1/clusters/{root}``);
- ``clusters_page``: by size (the web overview); ``cluster_sizes``: how many listed clusters
  there are of each size, kept by the stores' triggers on ``clusters`` (stats, histogram);
- ``cluster_rows``, ``cluster_members``, ``linked_members``: by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neardup.app.service.clusters import Sql, _chunks, _in

__all__ = [
    "ClusterSlice",
    "cluster_members",
    "cluster_rows",
    "cluster_sizes",
    "cluster_slice",
    "clusters_page",
    "linked_members",
    "listing",
    "numbered",
]


@dataclass(frozen=True)
class ClusterSlice:
    """One cluster as an answer lists it: its root, its size, ``members`` in id order (those
    asked for: after a cursor, at most a limit) and whether more follow them."""

    root: str
    size: int
    members: list[str]
    more: bool


def cluster_rows(db: Sql, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """(root, size) of each of ``ids`` that is in a cluster of two or more."""
    found: dict[str, tuple[str, int]] = {}
    for chunk in _chunks(ids):
        sql = (
            "SELECT m.id, c.root, c.size FROM cluster_members m JOIN clusters c "
            f"ON c.label = m.label WHERE m.id IN ({_in(len(chunk))})"
        )
        found.update((str(i), (str(root), int(size))) for i, root, size in db.fetch(sql, chunk))
    return found


def numbered(db: Sql, ids: Sequence[str], alive: str = "") -> dict[str, tuple[int, bytes]]:
    """The number and signature bytes of each of ``ids`` that is a live document of the
    service's own (``alive``: the condition a row is live by, for stores that mark deletes)."""
    found: dict[str, tuple[int, bytes]] = {}
    for chunk in _chunks(ids):
        sql = f"SELECT id, num, sig FROM documents WHERE id IN ({_in(len(chunk))}){alive}"
        found.update((str(i), (int(n), bytes(b))) for i, n, b in db.fetch(sql, chunk))
    return found


def cluster_members(db: Sql, root: str, after: str | None, limit: int, collate: str) -> list[str]:
    """The member ids of the cluster rooted at ``root`` after ``after``, in id order, at most
    ``limit`` (none: ``root`` is not the root of a cluster of two or more)."""
    sql = (
        "SELECT m.id FROM cluster_members r JOIN clusters c ON c.label = r.label AND c.root = r.id "
        f"JOIN cluster_members m ON m.label = c.label WHERE r.id = ? AND m.id{collate} > ? "
        f"ORDER BY m.id{collate} LIMIT ?"
    )
    return [str(r[0]) for r in db.fetch(sql, (root, "" if after is None else after, limit))]


def cluster_slice(
    db: Sql, root: str, after: str | None, limit: int, collate: str, alive: str
) -> ClusterSlice | bool | None:
    """The cluster rooted at ``root``: its members after ``after``, at most ``limit`` (a live
    document of the service's own in no cluster: alone); True if ``root`` is a member of a
    cluster but not its root; None if it is in none and no live document. ``alive``: as for
    ``listing``."""
    sql = (
        "SELECT c.root, c.size, c.label FROM cluster_members m JOIN clusters c "
        "ON c.label = m.label WHERE m.id = ?"
    )
    rows = db.fetch(sql, (root,))
    if not rows:
        sql = f"SELECT 1 FROM documents d WHERE {alive} d.id = ?"
        if not db.fetch(sql, (root,)):
            return None
        return ClusterSlice(root, 1, [root] if after is None or root > after else [], False)
    if str(rows[0][0]) != root:
        return True
    size, label = int(rows[0][1]), int(rows[0][2])
    sql = (
        f"SELECT id FROM cluster_members WHERE label = ? AND id{collate} > ? "
        f"ORDER BY id{collate} LIMIT ?"
    )
    ids = [str(r[0]) for r in db.fetch(sql, (label, "" if after is None else after, limit + 1))]
    return ClusterSlice(root, size, ids[:limit], len(ids) > limit)


def listing(
    db: Sql,
    min_size: int,
    after: str | None,
    limit: int,
    most: int,
    per_cluster: int,
    collate: str,
    alive: str,
) -> tuple[list[ClusterSlice], str | None]:
    """A page of the listing by root (``GET /v1/clusters``): the ``limit`` clusters of at
    least ``min_size`` members holding a document of the service's own, rooted after
    ``after``, and with ``min_size`` 1 the service's own documents in no cluster (singletons)
    merged in; and the next cursor (None: the last page).

    Each cluster lists its first ``per_cluster`` members at most, and all of them together
    ``most`` at most (beyond, a cluster lists its root alone): the answer's budget cannot
    hold more (each member takes 4 bytes or more). ``alive``: the condition (ending in
    ``AND``) a row of ``documents`` meets when it is live."""
    start = "" if after is None else after
    sql = (
        f"SELECT root, size, label FROM clusters WHERE own > 0 AND size >= ? AND root{collate} > ? "
        f"ORDER BY root{collate} LIMIT ?"
    )
    found: list[tuple[str, int, int | None]] = [
        (str(r), int(s), int(label))
        for r, s, label in db.fetch(sql, (max(min_size, 2), start, limit + 1))
    ]
    if min_size <= 1:
        sql = (
            f"SELECT d.id FROM documents d WHERE {alive} d.id{collate} > ? AND NOT EXISTS "
            f"(SELECT 1 FROM cluster_members m WHERE m.id = d.id) ORDER BY d.id{collate} LIMIT ?"
        )
        found += [(str(r[0]), 1, None) for r in db.fetch(sql, (start, limit + 1))]
        found.sort()  # code points, the order of both (UTF-8 bytes, COLLATE "C")
    page = found[:limit]
    cursor = page[-1][0] if len(found) > limit and page else None
    return _with_members(db, page, most, per_cluster, collate), cursor


def _with_members(
    db: Sql, page: list[tuple[str, int, int | None]], most: int, per_cluster: int, collate: str
) -> list[ClusterSlice]:
    """``page``'s clusters with their first members: those listed whole read in one query a
    chunk, the others (cut by ``per_cluster`` or ``most``) one query each, at most
    ``most / per_cluster + 1`` of them (a cluster listing its root alone reads nothing)."""
    takes: list[int] = []
    left = most
    for _, size, _ in page:
        takes.append(min(size, per_cluster, max(left, 1)))
        left -= takes[-1]
    whole = [label for (_, size, label), take in zip(page, takes, strict=True)
             if label is not None and take == size]  # fmt: skip
    held: dict[int, list[str]] = {}
    for chunk in _chunks(whole):
        sql = f"SELECT label, id FROM cluster_members WHERE label IN ({_in(len(chunk))})"
        for label, i in db.fetch(sql, chunk):
            held.setdefault(int(label), []).append(str(i))
    out: list[ClusterSlice] = []
    for (root, size, label), take in zip(page, takes, strict=True):
        if label is None or take == 1:
            members = [root]  # a singleton, or a cluster's first member: its root
        elif take == size:
            members = sorted(held.get(label, []))
        else:
            sql = f"SELECT id FROM cluster_members WHERE label = ? ORDER BY id{collate} LIMIT ?"
            members = [str(r[0]) for r in db.fetch(sql, (label, take))]
        out.append(ClusterSlice(root, size, members, len(members) < size))
    return out


def clusters_page(
    db: Sql,
    min_size: int,
    after: tuple[int, str] | None,
    limit: int,
    owned: bool,
    collate: str,
    offset: int = 0,
) -> list[tuple[str, int]]:
    """(root, size) of clusters of at least ``min_size`` members, largest first then by root,
    after the cursor ``after`` (a (size, root) of the previous page) and ``offset`` rows, at
    most ``limit``; ``owned``: only those holding a document of the service's own (as
    listings show them)."""
    where = "size >= ?" + (" AND own > 0" if owned else "")
    params: list[Any] = [max(min_size, 2)]
    if after is not None:
        where += f" AND (size < ? OR (size = ? AND root{collate} > ?))"
        params += [after[0], after[0], after[1]]
    sql = (
        f"SELECT root, size FROM clusters WHERE {where} ORDER BY size DESC, root{collate} "
        "LIMIT ? OFFSET ?"
    )
    return [(str(r), int(s)) for r, s in db.fetch(sql, [*params, limit, offset])]


def cluster_sizes(db: Sql) -> dict[int, int]:
    """Size -> how many clusters of that size hold a document of the service's own (the
    listed ones), from ``cluster_sizes``: one row a distinct size, kept by the stores'
    triggers on ``clusters`` in every write's transaction."""
    rows = db.fetch("SELECT size, clusters FROM cluster_sizes WHERE clusters > 0")
    return {int(size): int(n) for size, n in rows}


def linked_members(db: Sql) -> list[str]:
    """The ids of cluster members that are not the service's own (linked indexed documents)."""
    return [str(r[0]) for r in db.fetch("SELECT id FROM cluster_members WHERE NOT own")]
