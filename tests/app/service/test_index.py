"""The service's index: clusters against core, in any arrival order, batching or deletion."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.service.index import ServiceIndex
from core.engine import MinhashParams
from core.minhash import clusters as core_clusters
from core.minhash import signatures
from tests.fixtures import planted_corpus

CORPUS = planted_corpus(4, n_clusters=6, n_borderline=3, n_singletons=10)
IDS = sorted(CORPUS.docs)
SIGS = dict(zip(IDS, signatures([CORPUS.docs[i] for i in IDS]), strict=True))


def _clusters(index: ServiceIndex) -> list[set[str]]:
    groups = [set(index.members(root)) for root in index.roots()]
    for group in groups:  # every member's root is the smallest id of its group
        assert all(index.root_of(m) == min(group) for m in group)
    return sorted(groups, key=min)


def _register(index, ids):
    sigs = np.array([SIGS[i] for i in ids], dtype=np.uint32).reshape(-1, 128)
    plan = index.plan(list(ids), sigs)
    index.apply(plan)
    return plan


@settings(max_examples=25)
@given(st.permutations(IDS), st.lists(st.integers(1, 12), min_size=1, max_size=20))
def test_any_arrival_order_and_batching_gives_core_clusters(order, sizes):
    index = ServiceIndex(MinhashParams())
    pos, step = 0, 0
    while pos < len(order):
        size = sizes[step % len(sizes)]
        _register(index, order[pos : pos + size])
        pos, step = pos + size, step + 1
    assert _clusters(index) == core_clusters(CORPUS.docs)


@settings(max_examples=15)
@given(st.permutations(IDS), st.sets(st.sampled_from(IDS), max_size=12))
def test_deletion_leaves_core_clusters_of_the_remaining_docs(order, deleted):
    index = ServiceIndex(MinhashParams())
    _register(index, order)
    for doc_id in sorted(deleted):
        index.remove(doc_id)
    remaining = {i: CORPUS.docs[i] for i in IDS if i not in deleted}
    assert _clusters(index) == core_clusters(remaining)


def test_loading_from_stored_rows_rebuilds_the_same_clusters():
    live = ServiceIndex(MinhashParams())
    plan = _register(live, IDS)
    rebuilt = ServiceIndex(MinhashParams())
    half = len(IDS) // 2
    chunks = [
        (plan.nums[:half], list(IDS[:half]), plan.sigs[:half]),
        (plan.nums[half:], list(IDS[half:]), plan.sigs[half:]),
    ]
    rebuilt.load(len(IDS), chunks, plan.pairs())
    assert _clusters(rebuilt) == _clusters(live) == core_clusters(CORPUS.docs)
    probe = plan.sigs[:5]
    assert rebuilt.matches(probe) == live.matches(probe)
