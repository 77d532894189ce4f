"""The in-memory index the service queries, in terms of document ids: core's incremental
``SignatureIndex`` (signatures, classes of identical signatures, LSH buckets over the classes)
and ``Components`` (clusters with smallest-id roots), plus the id of every document number.

Nothing but signatures is needed to rebuild it: clusters are the components of the confirmed
pairs, a deterministic function of the signatures, so a deletion regroups its cluster by
clustering the remaining members' signatures again, and recovery clusters them all once. Copies
of one text are one class: a new copy costs the same whatever the number of earlier copies, and
``matches`` are summarised (a count and the best ``max_matches``).

Mutation is planned first (``plan``, ``plan_removal``, ``plan_removals``: pure computation on
the current index, safe to run off the event loop) and applied after the store has made the
change durable (``apply``, ``apply_removal``, ``apply_removals``: synchronous and cheap), so
a reader never sees half a change and a failed write leaves the index untouched.

Memory follows the live documents, not every document ever registered: core's structures are
sized by their own positions (slots), and each slot records the store's number of its document
(which keeps growing: numbers are never reused). A removed document's slot stays until
``compacted`` (pure, off the event loop) builds the index of the live documents alone in
fresh slots, which its owner swaps in; ``wants_compaction`` says when the removed slots are
as many as the live ones (amortised: each compaction follows at least as many removals as it
copies documents).

With a persistent index served (``neardup serve --index``), the indexed documents that the
service's documents match are linked in too (``Plan.indexed``: rows of a plan that are indexed
documents): they take slots, with their signatures, and join clusters as any document does,
but have no store number (``number`` is None for them) and are not counted by ``len``; a
cluster without a document of the service's own is not listed (``roots``,
``clusters_by_size``): its members are singletons of the index as far as listings go.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from neardup.app.service.clusters import ClusterMerge, ClusterRow, ClusterWrite
from neardup.core.engine import (
    Components,
    MinhashParams,
    Placement,
    SignatureIndex,
    batch_matches,
    cluster_roots,
    id_rank,
)

__all__ = [
    "COMPACT_AFTER", "Faulted", "Found", "Plan", "Removal", "Removals", "ServiceIndex", "merged",
]  # fmt: skip

#: Removed slots are compacted away once they are as many as the live documents and at least
#: this many (a small index is not rebuilt for every few removals).
COMPACT_AFTER = 4096


@dataclass(frozen=True)
class Found:
    """One document's matches: how many, and the best of them as (id, estimate)."""

    count: int
    best: list[tuple[str, float]]


@dataclass
class Plan:
    """A batch of new documents, checked against the index and ready to apply."""

    ids: list[str]
    sigs: NDArray[np.uint32]
    #: the store's number of the first document (the others follow it)
    start: int
    #: the index slot of the first document
    slot: int
    placement: Placement
    found: list[Found]
    #: per new document: one document number of every class it matched (what it joins)
    links: list[NDArray[np.int64]]
    #: how many of the first rows are indexed documents being linked (no store number)
    indexed: int = 0


@dataclass(frozen=True)
class Removal:
    """A document's removal, planned: its cluster's other members and their new roots."""

    doc_id: str
    #: the document's slot in the index
    num: int
    #: the index's version when planned; applying after any other change is refused
    version: int
    group: list[int]
    roots: list[int]


@dataclass(frozen=True)
class Faulted:
    """Members of one cluster (or a singleton) not held in memory, as
    ``ServiceIndex.fault_in`` takes them: ids, signatures, store numbers (-1 for an indexed
    document), and the ids of the cluster's members that are held."""

    ids: list[str]
    sigs: NDArray[np.uint32]
    numbers: list[int]
    #: members of the same cluster held in memory already (a memtable document's, at start)
    held: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Removals:
    """Several documents' removal, planned at once: each cluster they leave regrouped once,
    from the members that stay (what removing them one after the other comes to: the
    components of the confirmed pairs among those members)."""

    doc_ids: list[str]
    #: the documents' slots in the index
    nums: list[int]
    #: the index's version when planned; applying after any other change is refused
    version: int
    #: per cluster left: the members that stay, and their new roots
    groups: list[tuple[list[int], list[int]]]


@dataclass(frozen=True)
class _Source:
    """Matched documents that share one estimate: how many, and the first ids in id order."""

    estimate: float
    count: int
    first_ids: Sequence[str]


class ServiceIndex:
    """Documents by id: signatures, classes, buckets and clusters.

    Args:
        params: num_perm, bands and threshold are used.
        max_matches: how many matches a result lists at most (all are counted).
    """

    def __init__(self, params: MinhashParams, max_matches: int = 100) -> None:
        self.params = params
        self.threshold = params.threshold
        self.max_matches = max_matches
        self._ids: list[str] = []  # the id of every slot (removed documents' included)
        self._num_of: dict[str, int] = {}  # the slot of every live document
        self._numbers = array("q")  # the store's number of every slot's document
        self._next = 0  # the store's number of the next new document
        self._id_chars = 0  # total length of the slots' ids, for nbytes()
        self._indexed = bytearray()  # per slot: 1 for an indexed document linked in
        self._linked = 0  # live slots of indexed documents
        self._documents = 0  # the service's own live documents, held here or not
        self._unordered = False  # slots out of number order (``fault_in`` brought some back)
        self.version = 0  # bumped by every change, for caches of derived views
        self._sigs = SignatureIndex(params.num_perm, params.bands, self._ids)
        self._clusters = Components(self._ids)

    # --- reading, by id -----------------------------------------------------------------------

    def __len__(self) -> int:
        """The service's own documents, held here or flushed and let go (``evicted``); linked
        indexed documents are not counted."""
        return self._documents

    def __contains__(self, doc_id: object) -> bool:
        """Whether ``doc_id`` is a document here: the service's own or a linked indexed one."""
        return doc_id in self._num_of

    @property
    def held(self) -> int:
        """Documents held in memory: the service's own and linked indexed ones."""
        return len(self._num_of)

    @property
    def linked(self) -> int:
        """Indexed documents linked in (held because a document of the service's matched)."""
        return self._linked

    def is_indexed(self, doc_id: str) -> bool:
        """Whether ``doc_id`` is a linked indexed document."""
        slot = self._num_of.get(doc_id)
        return slot is not None and bool(self._indexed[slot])

    @property
    def next_number(self) -> int:
        """The document number the next new document gets (the store's numbering)."""
        return self._next

    def number(self, doc_id: str) -> int | None:
        """The document number of ``doc_id`` (what the store keys rows by), or None."""
        slot = self._num_of.get(doc_id)
        return None if slot is None or self._indexed[slot] else self._numbers[slot]

    @property
    def removed(self) -> int:
        """Slots still held by removed documents (until ``compacted``)."""
        return int(self._sigs.count) - len(self._num_of)

    def wants_compaction(self) -> bool:
        """Whether removed slots are as many as the live documents, and at least
        ``COMPACT_AFTER``: time to swap in ``compacted()``."""
        return self.removed >= max(len(self._num_of), COMPACT_AFTER)

    def root_of(self, doc_id: str) -> str:
        """The id of the root of ``doc_id``'s cluster (KeyError if unknown)."""
        return self._ids[self._clusters.find(self._num_of[doc_id])]

    def is_root(self, doc_id: str) -> bool:
        """Whether ``doc_id`` is registered and the root of its cluster."""
        num = self._num_of.get(doc_id)
        return num is not None and self._clusters.find(num) == num

    def members(self, root: str) -> list[str]:
        """The sorted member ids of the cluster rooted at ``root`` (just ``root`` if alone)."""
        num = self._num_of[root]
        return sorted(self._ids[m] for m in self._clusters.members.get(num, [num]))

    def size_of(self, root: str) -> int:
        """The number of members of the cluster rooted at ``root`` (KeyError if unknown)."""
        num = self._num_of[root]
        return len(self._clusters.members.get(num, [num]))

    def clusters_by_size(self, min_size: int = 2) -> dict[str, int]:
        """Root id -> size of every cluster of at least ``min_size`` (>= 2) members that holds a
        document of the service's own."""
        members = self._clusters.members
        return {
            self._ids[r]: len(m)
            for r, m in members.items()
            if len(m) >= max(min_size, 2) and self._owned(m)
        }

    def roots(self) -> list[str]:
        """The root id of every cluster, singletons included (unsorted), but those holding no
        document of the service's own."""
        find, members, flags = self._clusters.find, self._clusters.members, self._indexed
        return [
            self._ids[n]
            for n in self._num_of.values()
            if find(n) == n and (not flags[n] or self._owned(members.get(n, [n])))
        ]

    def _owned(self, members: Iterable[int]) -> bool:
        """Whether one of ``members`` (slots) is a document of the service's own."""
        if not self._linked:
            return True
        flags = self._indexed
        return any(not flags[m] for m in members)

    def documents_since(self, number: int) -> list[str]:
        """The ids of the live documents of the service's own numbered ``number`` or more, in
        number order (slots hold them in that order: the cost grows with them, not with N)."""
        if self._unordered:  # slots do not follow numbers: every live one looked at
            live = sorted(
                (n, i) for i, s in self._num_of.items() if (n := self._numbers[s]) >= number
            )
            return [i for _, i in live]
        out: list[str] = []
        slot = len(self._ids) - 1
        while slot >= 0:
            num = self._numbers[slot]
            if 0 <= num < number:
                break
            doc_id = self._ids[slot]
            if num >= number and self._num_of.get(doc_id) == slot:
                out.append(doc_id)
            slot -= 1
        return out[::-1]

    def slot_signatures(self, start: int, stop: int) -> NDArray[np.uint32]:
        """The signatures of slots ``start`` to ``stop - 1`` (a copy)."""
        return self._sigs.signatures(np.arange(start, stop, dtype=np.int64))

    def signatures_of(self, doc_ids: list[str]) -> NDArray[np.uint32]:
        """The stored signatures of those documents (a copy)."""
        return self._sigs.signatures([self._num_of[i] for i in doc_ids])

    def matches(
        self, sigs: NDArray[np.uint32], threshold: float | None = None, limit: int | None = None
    ) -> list[Found]:
        """Per query signature: its registered near duplicates, counted, the best listed."""
        t = self.threshold if threshold is None else threshold
        rows, reps, est = self._sigs.matches(sigs, t)
        sources = self._class_sources(rows, reps, est, len(sigs))
        cap = self.max_matches if limit is None else min(limit, self.max_matches)
        return [_ranked(found, cap) for found in sources]

    def earlier_matches(self, doc_ids: Sequence[str]) -> list[Found]:
        """Per registered document: its confirmed matches among documents registered before it
        (one banding pass for all of them: a re-sent batch costs what a new one does)."""
        nums = np.array([self._num_of[i] for i in doc_ids], dtype=np.int64)
        rows, reps, est = self._sigs.matches(self._sigs.signatures(nums), self.threshold)
        sources: list[list[_Source]] = [[] for _ in doc_ids]
        for row, rep, e in zip(rows.tolist(), reps.tolist(), est.tolist(), strict=True):
            members = np.asarray(self._sigs.members(rep), dtype=np.int64)
            # By store number (indexed documents have none, -1: before every document of the
            # service's own); slots follow numbers only until a cluster is faulted in.
            numbers = np.frombuffer(self._numbers, dtype=np.int64)
            earlier = members[numbers[members] < numbers[nums[row]]]
            if len(earlier):
                first = [self._ids[m] for m in earlier[: self.max_matches].tolist()]
                sources[row].append(_Source(e, len(earlier), first))
        return [_ranked(found, self.max_matches) for found in sources]

    def _class_sources(
        self, rows: NDArray[np.int64], reps: NDArray[np.int64], est: NDArray[np.float64], n: int
    ) -> list[list[_Source]]:
        """Per query row, one source per matched class (its members all share the estimate)."""
        out: list[list[_Source]] = [[] for _ in range(n)]
        sizes = self._sigs.sizes(reps).tolist()
        cap = self.max_matches
        found = zip(rows.tolist(), reps.tolist(), est.tolist(), sizes, strict=True)
        for row, rep, e, size in found:
            out[row].append(_Source(e, size, _LazyIds(self, rep, cap)))
        return out

    # --- writing ------------------------------------------------------------------------------

    def plan(self, ids: list[str], sigs: NDArray[np.uint32], indexed: int = 0) -> Plan:
        """Place the new documents in classes and find, for each, its confirmed matches among
        everything registered before it, earlier documents of the same batch included. The
        first ``indexed`` rows are indexed documents to link in (each matched by a later row,
        or by a document here): they come first, as every indexed document comes before the
        service's own."""
        start = self._sigs.count
        where = self._sigs.place(sigs, self.threshold)
        distinct = sigs[where.first]
        rows, reps, est = where.matches
        registered = self._class_sources(rows, reps, est, len(distinct))
        targets = self._link_targets(rows, reps, len(distinct))
        batch = _BatchSources(ids, start, where, *batch_matches(distinct, self.params.bands,
                                                                 self.threshold))  # fmt: skip
        found, links = [], []
        for j in range(len(ids)):
            d = int(where.copy_of[j])
            earlier, nums = batch.before(j, d, self.max_matches)
            found.append(_ranked(registered[d] + earlier, self.max_matches))
            links.append(np.concatenate((targets[d], nums)))
        return Plan(ids, sigs, self._next, start, where, found, links, indexed)

    def plan_if_new(
        self, ids: list[str], sigs: NDArray[np.uint32], extra: Sequence[Found] | None = None
    ) -> tuple[Plan, dict[int, Found]]:
        """``plan`` for only the documents without a confirmed match, in batch order, among the
        registered documents and the batch's earlier documents that are kept; the others are
        left out, each row with its matches (registered and earlier kept ones). ``extra``: per
        row, its matches found elsewhere (indexed documents not linked here), counted as
        registered ones."""
        registered = self.matches(sigs)
        if extra is not None:
            registered = [
                merged(a, b, self.max_matches) for a, b in zip(registered, extra, strict=True)
            ]
        later, earlier, est = batch_matches(sigs, self.params.bands, self.threshold)
        before: list[list[tuple[int, float]]] = [[] for _ in ids]
        for a, b, e in zip(later.tolist(), earlier.tolist(), est.tolist(), strict=True):
            before[a].append((b, e))
        kept = np.zeros(len(ids), dtype=np.bool_)
        left: dict[int, Found] = {}
        for j, found in enumerate(registered):
            within = [(ids[b], e) for b, e in before[j] if kept[b]]
            if found.count or within:
                best = sorted(found.best + within, key=lambda m: (-m[1], m[0]))
                left[j] = Found(found.count + len(within), best[: self.max_matches])
            else:
                kept[j] = True
        rows = np.flatnonzero(kept)
        return self.plan([ids[j] for j in rows.tolist()], sigs[rows]), left

    def _link_targets(
        self, rows: NDArray[np.int64], reps: NDArray[np.int64], n: int
    ) -> list[NDArray[np.int64]]:
        """Per distinct row, an alive member of every matched class (its representative, unless
        that one was deleted)."""
        targets = reps.copy()
        for i in np.flatnonzero(~self._sigs.alive_many(reps)).tolist():
            targets[i] = self._sigs.members(int(reps[i]))[0]
        order = np.argsort(rows, kind="stable")
        cuts = np.searchsorted(rows[order], np.arange(n + 1))
        return [targets[order[cuts[d] : cuts[d + 1]]] for d in range(n)]

    def apply(self, plan: Plan) -> None:
        """Add a planned batch (after it is durable). Synchronous: readers never see half.

        Raises:
            RuntimeError: the index changed since the plan was made.
        """
        if plan.slot != self._sigs.count or plan.start != self._next:
            raise RuntimeError("the index changed between planning and applying a batch")
        self.version += 1
        self._ids.extend(plan.ids)
        own = len(plan.ids) - plan.indexed
        self._numbers.extend([-1] * plan.indexed)
        self._numbers.extend(range(plan.start, plan.start + own))
        self._indexed.extend(b"\x01" * plan.indexed + b"\x00" * own)
        self._linked += plan.indexed
        self._documents += own
        self._next = plan.start + own
        nums = self._sigs.add(plan.sigs, plan.placement)
        self._num_of.update(zip(plan.ids, nums.tolist(), strict=True))
        self._id_chars += sum(map(len, plan.ids))
        self._clusters.grow(self._sigs.count)
        for num, links in zip(nums.tolist(), plan.links, strict=True):
            if len(links):
                for root in np.unique(self._clusters.roots(links)).tolist():
                    self._clusters.union(num, root)

    def fault_in(self, clusters: Sequence[Faulted]) -> None:
        """Bring back documents not held here, with their store numbers (-1: an indexed
        document) and signatures, each group joined into one cluster with the members of it
        held here already (``Faulted.held``), as the store's tables hold it (rooted at its
        smallest id). Synchronous; the caller plans after it (the plan then sees every member).

        Raises:
            ValueError: a document to bring back is held here already, or given twice.
        """
        ids = [i for c in clusters for i in c.ids]
        if not ids:
            return
        held = [i for i in ids if i in self._num_of]
        if held or len(set(ids)) != len(ids):
            raise ValueError(f"documents held already or repeated: {sorted(set(held))[:5]}")
        sigs = np.concatenate([c.sigs for c in clusters]).astype(np.uint32)
        numbers = [n for c in clusters for n in c.numbers]
        self.version += 1
        placement = self._sigs.place(sigs, self.threshold)
        self._ids.extend(ids)  # before ``add``: classes order their members by id
        slots = self._sigs.add(sigs, placement)
        self._numbers.extend(numbers)
        flags = bytes(1 if n < 0 else 0 for n in numbers)
        self._indexed.extend(flags)
        self._linked += sum(flags)
        self._unordered = True
        self._num_of.update(zip(ids, slots.tolist(), strict=True))
        self._id_chars += sum(map(len, ids))
        self._clusters.grow(self._sigs.count)
        at = 0
        for c in clusters:
            group = slots[at : at + len(c.ids)].tolist() + [self._num_of[i] for i in c.held]
            for slot in group[1:]:
                self._clusters.union(group[0], slot)
            at += len(c.ids)
        self.version += 1  # (a reader that began meanwhile sees another version: read again)

    def dropped(self, count: int = 1) -> None:
        """``count`` documents of the service's own, not held here (flushed and let go), were
        deleted: counted (``len``) no more."""
        self.version += 1
        self._documents -= count

    def remove(self, doc_id: str) -> None:
        """Take a document out now: ``plan_removal`` then ``apply_removal``."""
        self.apply_removal(self.plan_removal(doc_id))

    def plan_removal(self, doc_id: str) -> Removal:
        """Plan taking a document out (KeyError if unknown): its cluster is regrouped by
        clustering the remaining members' signatures again (a chain that loses its middle
        splits). Reads the index only; the cost grows with the size of the cluster."""
        num = self._num_of[doc_id]
        root = self._clusters.find(num)
        group = [m for m in self._clusters.members.get(root, [num]) if m != num]
        return Removal(doc_id, num, self.version, group, self._regrouped(group))

    def _regrouped(self, group: list[int]) -> list[int]:
        """The new root of every member of ``group`` (what stays of one cluster): its
        members' signatures clustered again."""
        if len(group) < 2:
            return group
        ids = [self._ids[m] for m in group]
        found = cluster_roots(self._sigs.signatures(group), self.params, id_rank(ids))
        return [group[r] for r in found.tolist()]

    def plan_removals(self, doc_ids: Sequence[str]) -> Removals:
        """``plan_removal`` of several documents at once (KeyError if one is unknown; each
        once): the documents grouped by the cluster they leave, each of those clusters
        regrouped once from the members that stay. Reads the index only; the cost grows with
        those clusters' sizes."""
        nums = [self._num_of[i] for i in doc_ids]
        leaving: dict[int, list[int]] = {}
        for num in nums:
            leaving.setdefault(self._clusters.find(num), []).append(num)
        gone = set(nums)
        groups = []
        for root, removed in leaving.items():
            group = [m for m in self._clusters.members.get(root, removed) if m not in gone]
            groups.append((group, self._regrouped(group)))
        return Removals(list(doc_ids), nums, self.version, groups)

    def apply_removal(self, removal: Removal) -> None:
        """Take a planned document out (after the store deleted it). Synchronous.

        Raises:
            RuntimeError: the index changed since the removal was planned.
        """
        if removal.version != self.version:
            raise RuntimeError("the index changed between planning and applying a removal")
        del self._num_of[removal.doc_id]
        self._linked -= self._indexed[removal.num]
        self._documents -= 1 - self._indexed[removal.num]
        self.version += 1
        self._sigs.remove(removal.num)
        self._clusters.detach(removal.num)
        self._clusters.regroup(removal.group, removal.roots)

    def apply_removals(self, removals: Removals) -> None:
        """Take planned documents out (after the store deleted them). Synchronous.

        Raises:
            RuntimeError: the index changed since the removals were planned.
        """
        if removals.version != self.version:
            raise RuntimeError("the index changed between planning and applying a removal")
        self.version += 1
        for doc_id, num in zip(removals.doc_ids, removals.nums, strict=True):
            del self._num_of[doc_id]
            self._linked -= self._indexed[num]
            self._documents -= 1 - self._indexed[num]
            self._sigs.remove(num)
        # Every removed document detached first (the first of a cluster takes its members'
        # list; the others find nothing left to take), then each cluster's rest regrouped.
        for num in removals.nums:
            self._clusters.detach(num)
        for group, roots in removals.groups:
            self._clusters.regroup(group, roots)

    # --- the store's clusters (app/service/clusters.py) ---------------------------------------

    def cluster_write(self, plan: Plan, removal: Removal | None = None) -> ClusterWrite:
        """What applying ``plan`` changes in the store's clusters: one union per cluster it
        makes or grows. Pure (run it with the plan, off the event loop). ``removal``: a
        replace's, applied first (the plan was made before it: a link to the removed document
        goes to another member of its class, or nowhere)."""
        post = _PostRemoval(self, removal)
        slot, n = plan.slot, len(plan.ids)
        # Union-find over the new documents (-1 - j) and the existing roots they join (slots).
        parent: dict[int, int] = {-1 - j: -1 - j for j in range(n)}

        def find(k: int) -> int:
            while parent.setdefault(k, k) != k:
                parent[k] = parent[parent[k]]
                k = parent[k]
            return k

        for j, links in enumerate(plan.links):
            for link in links.tolist():
                target = -1 - (link - slot) if link >= slot else post.target(link)
                if target is not None:
                    other = target if target < 0 else post.find(target)
                    parent[find(other)] = find(-1 - j)
        groups: dict[int, tuple[list[int], list[int]]] = {}
        for k in list(parent):
            new, existing = groups.setdefault(find(k), ([], []))
            (new if k < 0 else existing).append(-1 - k if k < 0 else k)
        merges = []
        for new, existing in groups.values():
            size = len(new) + sum(post.size(e) for e in existing)
            if size < 2:
                continue
            added = [(plan.ids[j], j >= plan.indexed) for j in new]
            added += [(self._ids[e], post.own(e) > 0) for e in existing if post.size(e) == 1]
            own = sum(own for _, own in added) + sum(
                post.own(e) for e in existing if post.size(e) > 1
            )
            joined = [self._ids[e] for e in existing if post.size(e) > 1]
            root = min([plan.ids[j] for j in new] + [self._ids[e] for e in existing])
            merges.append(ClusterMerge(joined, added, root, size, own))
        write = ClusterWrite(merges=merges)
        return write if removal is None else self.removal_write(removal).then(write)

    def removal_write(self, removal: Removal | Removals) -> ClusterWrite:
        """What applying ``removal`` changes in the store's clusters: the removed documents'
        clusters dropped and their remaining members' new clusters (of two or more) written."""
        if isinstance(removal, Removal):
            return ClusterWrite([removal.doc_id], self._parts(removal.group, removal.roots))
        rows = [row for group, roots in removal.groups for row in self._parts(group, roots)]
        return ClusterWrite(list(removal.doc_ids), rows)

    def _parts(self, group: list[int], roots: list[int]) -> list[ClusterRow]:
        """The clusters of two or more that ``group`` (members regrouped under ``roots``)
        becomes."""
        parts: dict[int, list[int]] = {}
        for m, r in zip(group, roots, strict=True):
            parts.setdefault(r, []).append(m)
        return [
            ClusterRow(self._ids[r], [(self._ids[m], not self._indexed[m]) for m in ms])
            for r, ms in parts.items()
            if len(ms) > 1
        ]

    def cluster_of(self, doc_id: str) -> ClusterRow | None:
        """The cluster of ``doc_id`` as the store keeps it (None: a singleton, or unknown)."""
        num = self._num_of.get(doc_id)
        if num is None:
            return None
        members = self._clusters.members.get(self._clusters.find(num))
        if members is None or len(members) < 2:
            return None
        root = self._ids[self._clusters.find(num)]
        return ClusterRow(root, [(self._ids[m], not self._indexed[m]) for m in members])

    def all_clusters(self) -> Iterator[ClusterRow]:
        """Every cluster of two or more as the store keeps it (a migration's fill)."""
        for root, members in list(self._clusters.members.items()):
            if len(members) > 1:
                yield ClusterRow(
                    self._ids[root], [(self._ids[m], not self._indexed[m]) for m in members]
                )

    def id_of(self, slot: int) -> str:
        """The id of the document in ``slot``."""
        return self._ids[slot]

    def held_ids(self) -> list[str]:
        """The ids of the documents held in memory (``held``)."""
        return list(self._num_of)

    def linked_ids(self) -> list[str]:
        """The ids of the linked indexed documents."""
        if not self._linked:
            return []
        flags = self._indexed
        return [i for i, s in self._num_of.items() if flags[s]]

    # --- recovery -----------------------------------------------------------------------------

    def load(
        self,
        count: int,
        next_number: int,
        chunks: Iterable[tuple[list[int], list[str], NDArray[np.uint32]]],
        documents: int | None = None,
    ) -> None:
        """Rebuild an empty index from the store: its ``count`` documents, a chunk at a time in
        increasing number order (each number below ``next_number``, the store's next), into
        slots 0 to ``count - 1``; then classes and clusters from the signatures. ``documents``:
        the service's documents in all (default ``count``), when those loaded are the
        memtable only (the others flushed, held by the index; ``fault_in`` brings their
        clusters)."""
        if self._sigs.count:
            raise RuntimeError("load() rebuilds an empty index only")
        self._sigs.start_load(count)
        slot = 0
        for nums, ids, sigs in chunks:
            if slot + len(nums) > count:
                raise RuntimeError(f"the store holds more than the {count} documents it counted")
            slots = np.arange(slot, slot + len(nums), dtype=np.int64)
            self._sigs.load(slots, sigs)
            self._ids.extend(ids)
            self._numbers.extend(nums)
            self._indexed.extend(bytes(len(nums)))
            self._num_of.update(zip(ids, slots.tolist(), strict=True))
            self._id_chars += sum(map(len, ids))
            slot += len(nums)
        if slot != count or (slot and self._numbers[-1] >= next_number):
            raise RuntimeError(f"not all of the store's {count} documents below {next_number} read")
        self._next = next_number
        self._documents = count if documents is None else documents
        self._sigs.finish_load()
        self._clusters.assign(self._cluster_all())

    def _cluster_all(self) -> NDArray[np.int64]:
        """Every slot's root: the batch clustering of the (all live) loaded documents."""
        if self._sigs.count == 0:
            return np.zeros(0, dtype=np.int64)
        found = cluster_roots(self._sigs.stored(), self.params, id_rank(self._ids))
        return np.asarray(found, dtype=np.int64)

    def compacted(self) -> ServiceIndex:
        """This index without its removed documents' slots: the live documents in fresh slots
        (in the same order), their classes and buckets rebuilt by core's bulk load, their
        clusters carried over as they are. Reads this index only (run it off the event loop,
        with writers kept out); the owner swaps it in. Its version is one more than this one's.
        """
        return self._kept(np.array(sorted(self._num_of.values()), dtype=np.int64))

    def evicted(self, through: int) -> ServiceIndex:
        """This index with only the memtable (the service's documents numbered after
        ``through``, the flush mark served) and the clusters holding one of them, whole: what a
        flushed document needs here once its version is served. Everything else is in the
        index's parts and the store's tables, and ``fault_in`` brings it back when a write
        touches it. Pure (off the loop, writers kept out); the owner swaps it in."""
        live = np.array(sorted(self._num_of.values()), dtype=np.int64)
        numbers = np.frombuffer(self._numbers, dtype=np.int64)[live]
        roots = self._clusters.roots(live)
        wanted = np.unique(roots[numbers > through])
        return self._kept(live[np.isin(roots, wanted)])

    def _kept(self, slots: NDArray[np.int64]) -> ServiceIndex:
        """A fresh index of the live ``slots`` (increasing, whole clusters) in that order."""
        fresh = ServiceIndex(self.params, self.max_matches)
        ids = [self._ids[s] for s in slots.tolist()]
        fresh._ids.extend(ids)
        fresh._num_of = dict(zip(ids, range(len(ids)), strict=True))
        fresh._numbers = array("q", np.asarray(self._numbers, dtype=np.int64)[slots].tobytes())
        fresh._next = self._next
        fresh._id_chars = sum(map(len, ids))
        fresh._indexed = bytearray(np.frombuffer(self._indexed, dtype=np.uint8)[slots].tobytes())
        fresh._linked = sum(fresh._indexed)
        fresh._documents = self._documents
        numbers = np.frombuffer(fresh._numbers, dtype=np.int64)
        own = numbers[numbers >= 0]
        fresh._unordered = bool(np.any(own[1:] < own[:-1]))
        fresh._sigs = self._sigs.compacted(slots, fresh._ids)
        roots = self._clusters.roots(slots)
        moved = np.searchsorted(slots, roots)
        if len(slots) and not np.array_equal(slots[np.minimum(moved, len(slots) - 1)], roots):
            raise RuntimeError("a live document's cluster root is a removed document")
        fresh._clusters.assign(moved.astype(np.int64))
        fresh.version = self.version + 1
        return fresh

    def nbytes(self) -> int:
        """Approximate memory of the index: arrays exactly, the id map by CPython's sizes."""
        # Per slot: its id, a str of n ASCII chars (49 + n bytes), the list's pointer (8) and the
        # store's number (8); per live document a dict entry (about 100).
        id_bytes = self._id_chars + 65 * len(self._ids) + 100 * len(self._num_of)
        return int(self._sigs.nbytes() + self._clusters.nbytes() + id_bytes)


class _PostRemoval:
    """The index's clusters as they are after a planned removal (or now, without one)."""

    def __init__(self, index: ServiceIndex, removal: Removal | None) -> None:
        self._index = index
        self._removal = removal
        self._root: dict[int, int] = {}
        self._parts: dict[int, list[int]] = {}
        if removal is not None:
            self._root = dict(zip(removal.group, removal.roots, strict=True))
            for m, r in self._root.items():
                self._parts.setdefault(r, []).append(m)

    def target(self, slot: int) -> int | None:
        """``slot``, or for the removed document another member of its class (None: none)."""
        removal = self._removal
        if removal is None or slot != removal.num:
            return slot
        sigs = self._index._sigs
        others = [m for m in sigs.members(sigs.representative(slot)) if m != slot]
        return others[0] if others else None

    def find(self, slot: int) -> int:
        root = self._root.get(slot)
        return self._index._clusters.find(slot) if root is None else root

    def _members(self, root: int) -> list[int]:
        part = self._parts.get(root)
        if part is not None:
            return part
        return self._index._clusters.members.get(root, [root])

    def size(self, root: int) -> int:
        return len(self._members(root))

    def own(self, root: int) -> int:
        members = self._members(root)
        if not self._index._linked:
            return len(members)
        flags = self._index._indexed
        return sum(1 for m in members if not flags[m])


class _LazyIds(Sequence[str]):
    """The first ``cap`` member ids of a class, read only if the ranking gets to them."""

    def __init__(self, index: ServiceIndex, rep: int, cap: int) -> None:
        self._index, self._rep, self._cap = index, rep, cap

    def _ids(self) -> list[str]:
        ids = self._index._ids
        return [ids[m] for m in self._index._sigs.members(self._rep)[: self._cap]]

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        return self._ids()[i]

    def __len__(self) -> int:
        return len(self._ids())

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._ids())


class _BatchSources:
    """Matches inside one batch: for a row, the earlier rows of its own distinct signature and
    of every distinct signature confirmed against it."""

    def __init__(
        self,
        ids: list[str],
        start: int,
        where: Placement,
        later: NDArray[np.int64],
        earlier: NDArray[np.int64],
        est: NDArray[np.float64],
    ) -> None:
        self._ids = ids
        self._start = start
        self._empty = where.empty
        n = len(where.first)
        self._neighbours: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        for a, b, e in zip(later.tolist(), earlier.tolist(), est.tolist(), strict=True):
            self._neighbours[a].append((b, e))
            self._neighbours[b].append((a, e))
        order = np.argsort(where.copy_of, kind="stable")
        cuts = np.searchsorted(where.copy_of[order], np.arange(n + 1))
        self._rows = [order[cuts[d] : cuts[d + 1]].tolist() for d in range(n)]
        self._best: dict[int, list[list[str]]] = {}

    def before(self, j: int, d: int, cap: int) -> tuple[list[_Source], NDArray[np.int64]]:
        """Sources of the rows before ``j`` matching row ``j`` (of distinct signature ``d``),
        and one document number of each (to link to)."""
        sources, links = [], []
        own = [] if self._empty[j] else [(d, 1.0)]
        for other, e in own + self._neighbours[d]:
            rows = self._rows[other]
            count = bisect_left(rows, j)
            if count:
                sources.append(_Source(e, count, self._prefix_best(other, cap)[count - 1]))
                links.append(self._start + rows[0])
        return sources, np.array(links, dtype=np.int64)

    def _prefix_best(self, d: int, cap: int) -> list[list[str]]:
        """For every prefix of the rows of ``d``, its ``cap`` smallest ids, sorted."""
        cached = self._best.get(d)
        if cached is not None:
            return cached
        found: list[list[str]] = []
        best: list[str] = []
        for row in self._rows[d]:
            best = sorted([*best, self._ids[row]])[:cap]
            found.append(best)
        self._best[d] = found
        return found


def merged(a: Found, b: Found, cap: int) -> Found:
    """Two disjoint sets of matches as one: counts added, the ``cap`` best (estimate
    descending, then id)."""
    if not b.count:
        return a
    best = sorted([*a.best, *b.best], key=lambda m: (-m[1], m[0]))[:cap]
    return Found(a.count + b.count, best)


def _ranked(sources: list[_Source], cap: int) -> Found:
    """The count of every source, and the ``cap`` best (estimate descending, then id)."""
    count = sum(s.count for s in sources)
    best: list[tuple[str, float]] = []
    ranked = sorted(sources, key=lambda s: -s.estimate)
    i = 0
    while i < len(ranked) and len(best) < cap:
        e = ranked[i].estimate
        group: list[str] = []
        while i < len(ranked) and ranked[i].estimate == e:
            group.extend(ranked[i].first_ids)
            i += 1
        best.extend((doc_id, e) for doc_id in sorted(group)[: cap - len(best)])
    return Found(count, best)
