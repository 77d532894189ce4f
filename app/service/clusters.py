"""The store's clusters: one row per cluster of two or more members, one per member, written
by every write in its own transaction, on both stores (app/service/store.py, pgstore.py).

- ``clusters(label, root, size, own)``: ``label`` a stable number naming the cluster while it
  lasts, ``root`` its smallest member id (the contract's order: code points), ``own`` how many
  members are the service's own documents (the others are linked indexed documents; a cluster
  with none is not listed), indexed by (size DESC, root) for the size-ordered listing.
- ``cluster_members(id, label, own)``, indexed by (label, id). Singletons have no rows.

What a write changes is computed by the in-memory index (``ServiceIndex.cluster_write``,
``removal_write``) before the store makes the write durable, as a ``ClusterWrite``: clusters
dropped (``cleared``), clusters written whole (``rows``: a deletion's regroup), then unions
(``merges``). A union relabels the smaller clusters' members into the largest one's label
(weighted: O(smaller) row writes); a new cluster takes the next label. The SQL below is one
for both stores, written with ``?`` placeholders (``Sql`` adapts them). Reading them:
app/service/cluster_reads.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "ClusterMerge",
    "ClusterRow",
    "ClusterWrite",
    "Sql",
    "StoredCluster",
    "apply_write",
    "fill",
    "stored_clusters",
]

#: Ids bound in one ``IN (...)`` list (under SQLite's limit on parameters).
_CHUNK = 500


@dataclass(frozen=True)
class ClusterRow:
    """A cluster written whole: its root id and every member as (id, own)."""

    root: str
    members: list[tuple[str, bool]]

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def own(self) -> int:
        return sum(1 for _, own in self.members if own)

    def stored(self) -> StoredCluster:
        """What the store holds of this cluster once written."""
        return StoredCluster(self.root, self.size, self.own, frozenset(self.members))


@dataclass(frozen=True)
class StoredCluster:
    """A cluster as the store holds it: its row (root, size, own) and its members' rows as
    (id, own). A write made from a stale view (a replica not serving the index's newer version
    yet) can leave the row apart from the members: a sync compares both (``cluster_sync``)."""

    root: str
    size: int
    own: int
    members: frozenset[tuple[str, bool]]


@dataclass(frozen=True)
class ClusterMerge:
    """A union: ``joined`` names one member of each cluster (of two or more) merged, ``added``
    the documents joining that had no cluster (new ones, singletons) as (id, own); ``root``,
    ``size`` and ``own`` are the merged cluster's."""

    joined: list[str]
    added: list[tuple[str, bool]]
    root: str
    size: int
    own: int


@dataclass
class ClusterWrite:
    """What one write changes, applied in this order: the clusters of the ``cleared`` ids
    dropped, ``rows`` written whole, then ``merges``."""

    cleared: list[str] = field(default_factory=list)
    rows: list[ClusterRow] = field(default_factory=list)
    merges: list[ClusterMerge] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.cleared or self.rows or self.merges)

    def then(self, other: ClusterWrite) -> ClusterWrite:
        """This write, then ``other``."""
        return ClusterWrite(
            [*self.cleared, *other.cleared], [*self.rows, *other.rows],
            [*self.merges, *other.merges],
        )  # fmt: skip


class Sql(Protocol):
    """A store's connection, in its open transaction, taking ``?`` placeholders."""

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def run(self, sql: str, params: Sequence[Any] = ()) -> None: ...
    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


def _chunks(ids: Sequence[Any]) -> Iterator[list[Any]]:
    for lo in range(0, len(ids), _CHUNK):
        yield list(ids[lo : lo + _CHUNK])


def _in(n: int) -> str:
    return ",".join("?" * n)


def _labels(db: Sql, ids: Sequence[str]) -> dict[str, int]:
    """The label of each of ``ids`` that is a member of a cluster."""
    found: dict[str, int] = {}
    for chunk in _chunks(ids):
        sql = f"SELECT id, label FROM cluster_members WHERE id IN ({_in(len(chunk))})"
        found.update((str(i), int(label)) for i, label in db.fetch(sql, chunk))
    return found


def _sizes(db: Sql, labels: Sequence[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    for chunk in _chunks(labels):
        sql = f"SELECT label, size FROM clusters WHERE label IN ({_in(len(chunk))})"
        found.update((int(label), int(size)) for label, size in db.fetch(sql, chunk))
    return found


def _drop(db: Sql, labels: Sequence[int]) -> None:
    for chunk in _chunks(labels):
        db.run(f"DELETE FROM cluster_members WHERE label IN ({_in(len(chunk))})", chunk)
        db.run(f"DELETE FROM clusters WHERE label IN ({_in(len(chunk))})", chunk)


_PUT_MEMBER = (
    "INSERT INTO cluster_members (id, label, own) VALUES (?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET label = excluded.label, own = excluded.own"
)
_PUT_CLUSTER = (
    "INSERT INTO clusters (label, root, size, own) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (label) DO UPDATE SET root = excluded.root, size = excluded.size, "
    "own = excluded.own"
)


class _Labels:
    """New labels: one more than the largest in use (read once a write)."""

    def __init__(self, db: Sql) -> None:
        self._db = db
        self._next: int | None = None

    def take(self) -> int:
        self.read()
        label = self._next or 1
        self._next = label + 1
        return label

    def read(self) -> None:
        """Read the largest label now, before labels are dropped that the caller gives again
        (a new label is then never one of them)."""
        if self._next is None:
            row = self._db.fetch("SELECT coalesce(max(label), 0) FROM clusters")
            self._next = int(row[0][0]) + 1


def apply_write(db: Sql, write: ClusterWrite) -> None:
    """Apply ``write`` in the caller's transaction."""
    if not write:
        return
    labels = _Labels(db)
    freed: list[int] = []
    if write.cleared:
        old = sorted(set(_labels(db, write.cleared).values()))
        sizes = _sizes(db, old)
        freed = sorted(old, key=lambda label: (-sizes.get(label, 0), label))
        labels.read()
        _drop(db, old)
    members: list[tuple[str, int, bool]] = []
    clusters: list[tuple[int, str, int, int]] = []
    # Written whole, the largest first: each takes a freed label (the largest former
    # cluster's goes to the largest part of it), then new ones.
    for k, row in enumerate(sorted(write.rows, key=lambda r: (-r.size, r.root))):
        label = freed[k] if k < len(freed) else labels.take()
        members += [(i, label, own) for i, own in row.members]
        clusters.append((label, row.root, row.size, row.own))
    _put(db, members, clusters)
    if write.merges:
        _merge(db, write.merges, labels)


def _put(db: Sql, members: list[tuple[str, int, bool]], clusters: list[tuple[Any, ...]]) -> None:
    if members:
        db.many(_PUT_MEMBER, members)
    if clusters:
        db.many(_PUT_CLUSTER, clusters)


def _merge(db: Sql, merges: Sequence[ClusterMerge], labels: _Labels) -> None:
    """The unions: each into the label of its largest cluster (ties: the smallest label)."""
    held = _labels(db, [i for m in merges for i in m.joined])
    sizes = _sizes(db, sorted(set(held.values())))
    moves: list[tuple[int, int]] = []
    gone: list[int] = []
    members: list[tuple[str, int, bool]] = []
    clusters: list[tuple[Any, ...]] = []
    for m in merges:
        mine = sorted({held[i] for i in m.joined if i in held})
        if mine:
            big = min(mine, key=lambda label: (-sizes.get(label, 0), label))
            moves += [(big, other) for other in mine if other != big]
            gone += [other for other in mine if other != big]
        else:
            big = labels.take()
        members += [(i, big, own) for i, own in m.added]
        clusters.append((big, m.root, m.size, m.own))
    if moves:
        db.many("UPDATE cluster_members SET label = ? WHERE label = ?", moves)
        db.many("DELETE FROM clusters WHERE label = ?", [(label,) for label in gone])
    _put(db, members, clusters)


def fill(db: Sql, rows: Iterable[ClusterRow]) -> None:
    """Replace every cluster with ``rows`` (a migration's one fill), in the caller's
    transaction."""
    db.run("DELETE FROM cluster_members")
    db.run("DELETE FROM clusters")
    db.run("DELETE FROM cluster_sizes")  # counted again from the rows below, whatever it held
    members: list[tuple[str, int, bool]] = []
    clusters: list[tuple[Any, ...]] = []
    for label, row in enumerate(rows, start=1):
        members += [(i, label, own) for i, own in row.members]
        clusters.append((label, row.root, row.size, row.own))
        if len(members) >= 10_000:
            _put(db, members, clusters)
            members, clusters = [], []
    _put(db, members, clusters)


def stored_clusters(db: Sql, ids: Sequence[str]) -> dict[int, StoredCluster]:
    """The clusters holding any of ``ids``, by label, as stored (a label with member rows and
    no cluster row: root "", size and own 0)."""
    labels = sorted(set(_labels(db, ids).values()))
    rows: dict[int, tuple[str, int, int]] = {}
    members: dict[int, set[tuple[str, bool]]] = {label: set() for label in labels}
    for chunk in _chunks(labels):
        sql = f"SELECT label, root, size, own FROM clusters WHERE label IN ({_in(len(chunk))})"
        rows.update((int(b), (str(r), int(n), int(o))) for b, r, n, o in db.fetch(sql, chunk))
        sql = f"SELECT label, id, own FROM cluster_members WHERE label IN ({_in(len(chunk))})"
        for label, i, own in db.fetch(sql, chunk):
            members[int(label)].add((str(i), bool(own)))
    return {
        label: StoredCluster(*rows.get(label, ("", 0, 0)), frozenset(members[label]))
        for label in labels
    }
