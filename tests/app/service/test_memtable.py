"""Memory as a cache of the clusters a write touches (docs/scaling.md, "The switch,
designed"): an index that evicted its flushed documents, then had the clusters a write touches
faulted back in whole, plans that write exactly as the index holding every document does."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.service.index import Faulted, ServiceIndex
from neardup.core.engine import MinhashParams
from tests.app.service.test_index import IDS, SIGS

PARAMS = MinhashParams()


def _sigs(ids):
    return np.array([SIGS[i] for i in ids], dtype=np.uint32).reshape(-1, PARAMS.num_perm)


def _full(order, sizes):
    """The index holding every document, registered in ``order`` in batches of ``sizes``."""
    index = ServiceIndex(PARAMS)
    pos = step = 0
    while pos < len(order):
        batch = list(order[pos : pos + sizes[step % len(sizes)]])
        index.apply(index.plan(batch, _sigs(batch)))
        pos, step = pos + len(batch), step + 1
    return index


def _cluster(index, doc_id):
    root = index.root_of(doc_id)
    return index.members(root)


def _fault(full, evicted, ids):
    """Bring into ``evicted`` the whole clusters of ``ids`` it does not hold, from ``full``
    (what the service reads from the store's tables and the index's parts)."""
    wanted, seen = [], set()
    for doc_id in ids:
        if doc_id in evicted or doc_id in seen:
            continue
        members = _cluster(full, doc_id)
        seen.update(members)
        numbers = [full.number(m) for m in members]
        wanted.append(Faulted(members, _sigs(members), [-1 if n is None else n for n in numbers]))
    evicted.fault_in(wanted)


def _touched(full, evicted, sigs):
    """What ``ServedIndex.near`` would find for ``sigs`` that ``evicted`` no longer holds."""
    return [i for f in full.matches(sigs, limit=None) for i, _ in f.best if i not in evicted]


def _write_ids(write):
    return (
        sorted(write.cleared),
        sorted((r.root, sorted(r.members)) for r in write.rows),
        sorted((m.root, m.size, m.own, sorted(m.joined), sorted(m.added)) for m in write.merges),
    )


@settings(max_examples=30, deadline=None)
@given(
    st.permutations(IDS),
    st.lists(st.integers(1, 8), min_size=1, max_size=6),
    st.integers(0, len(IDS) - 1),
    st.integers(1, 8),
)
def test_an_evicted_index_plans_a_new_batch_as_the_full_one_once_its_clusters_are_back(
    order, sizes, split, batch_size
):
    """Registrations: matches (counted, best listed), the store's cluster write and the roots
    after applying, the same."""
    kept, new = order[: len(order) - batch_size], order[len(order) - batch_size :]
    full = _full(kept, sizes)
    through = full.number(kept[min(split, len(kept) - 1)]) if kept else -1
    evicted = full.evicted(through)
    memtable = [i for i in kept if full.number(i) > through]
    assert all(i in evicted for i in memtable)
    assert len(evicted) <= len(full)
    sigs = _sigs(new)
    _fault(full, evicted, _touched(full, evicted, sigs))
    a, b = full.plan(list(new), sigs), evicted.plan(list(new), sigs)
    assert a.found == b.found
    assert _write_ids(full.cluster_write(a)) == _write_ids(evicted.cluster_write(b))
    full.apply(a)
    evicted.apply(b)
    for doc_id in new:
        assert evicted.root_of(doc_id) == full.root_of(doc_id)
        assert _cluster(evicted, doc_id) == _cluster(full, doc_id)


@settings(max_examples=30, deadline=None)
@given(st.permutations(IDS), st.integers(0, len(IDS) - 1), st.sampled_from(IDS))
def test_an_evicted_index_regroups_a_deletion_and_lists_earlier_matches_as_the_full_one(
    order, split, victim
):
    """Deletes (the regroup written to the store) and a re-sent document's earlier matches."""
    full = _full(order, [5])
    through = full.number(order[split])
    evicted = full.evicted(through)
    _fault(full, evicted, [victim])
    assert evicted.earlier_matches([victim]) == full.earlier_matches([victim])
    a, b = full.plan_removal(victim), evicted.plan_removal(victim)
    assert _write_ids(full.removal_write(a)) == _write_ids(evicted.removal_write(b))
    full.apply_removal(a)
    evicted.apply_removal(b)
    for doc_id in _cluster(full, order[0]) if order[0] != victim else []:
        if doc_id in evicted:
            assert evicted.root_of(doc_id) == full.root_of(doc_id)


def test_eviction_keeps_the_memtable_and_its_clusters_whole_and_drops_the_rest():
    full = _full(IDS, [len(IDS)])
    through = full.number(IDS[len(IDS) // 2])
    evicted = full.evicted(through)
    memtable = {i for i in IDS if full.number(i) > through}
    held = {i for i in IDS if i in evicted}
    expected = {m for i in memtable for m in _cluster(full, i)}
    assert held == expected and memtable <= held
    assert evicted.documents_since(through + 1) == full.documents_since(through + 1)
    assert evicted.nbytes() < full.nbytes()


def test_documents_since_follows_numbers_after_a_fault_in():
    full = _full(IDS, [len(IDS)])
    evicted = full.evicted(full.number(IDS[-3]))
    gone = next(i for i in IDS if i not in evicted)
    _fault(full, evicted, [gone])
    late = full.number(IDS[-5])
    assert evicted.documents_since(late) == [i for i in full.documents_since(late) if i in evicted]
    assert gone in evicted and gone in evicted.documents_since(0)


def test_fault_in_refuses_a_document_held_already():
    full = _full(IDS, [len(IDS)])
    with pytest.raises(ValueError, match="held already"):
        full.fault_in([Faulted([IDS[0]], _sigs([IDS[0]]), [0])])


def test_a_faulted_document_counts_as_earlier_the_members_registered_before_it_whatever_their_ids():
    """Faulted members take slots in id order; "earlier" goes by store number."""
    full = _full(IDS, [len(IDS)])
    group = max((_cluster(full, i) for i in IDS), key=len)
    order = [i for i in IDS if i not in group] + sorted(group, reverse=True)
    full = _full(order, [len(order)])
    evicted = full.evicted(full.next_number)  # everything flushed and served
    assert evicted.held == 0 and len(evicted) == len(full)
    last = min(group)  # registered after every other member of its cluster
    _fault(full, evicted, [last])
    found = evicted.earlier_matches([last])
    assert found == full.earlier_matches([last]) and found[0].count >= len(group) - 1


def test_a_cluster_member_found_nowhere_is_left_out_not_an_error():
    """The tables name a member that neither the store nor the index holds (a damaged store):
    logged and left out; a cluster whose every missing member is so brings nothing back."""

    class Tables:
        def cluster_rows(self, ids):
            return {i: ("ghost", 2) for i in ids}

        def cluster_members(self, root, after, limit):
            return [] if after else ["ghost", "phantom"]

        def numbered(self, ids):
            return {}

    class Served:
        @staticmethod
        def signatures(ids):
            return {}

    from neardup.app.service.faults import faulted

    full = _full(IDS, [len(IDS)])
    assert faulted(Tables(), Served(), full.evicted(full.next_number), ["ghost"]) == []
