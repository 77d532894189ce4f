"""The service's index: buckets against brute force, clusters against core, in any order."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.buckets import _Band
from app.index import ServiceIndex
from core.minhash import clusters as core_clusters
from core.minhash import signatures
from tests.fixtures import planted_corpus

CORPUS = planted_corpus(4, n_clusters=6, n_borderline=3, n_singletons=10)
IDS = sorted(CORPUS.docs)
SIGS = dict(zip(IDS, signatures([CORPUS.docs[i] for i in IDS]), strict=True))


@given(
    st.lists(st.lists(st.integers(0, 40), max_size=300), min_size=1, max_size=6),
    st.lists(st.integers(0, 45), min_size=1, max_size=20),
)
def test_band_lookup_equals_brute_force(appends, queries):
    band = _Band()
    keys, nums = [], []
    for chunk in appends:
        k = np.array(chunk, dtype=np.uint64)
        n = np.arange(len(nums), len(nums) + len(chunk), dtype=np.int32)
        band.append(k, n)
        keys += chunk
        nums += n.tolist()
    q = np.array(queries, dtype=np.uint64)
    qi, found = band.lookup(q)
    expected = sorted(
        (i, n) for i, key in enumerate(queries) for k, n in zip(keys, nums, strict=True) if k == key
    )
    assert sorted(zip(qi.tolist(), found.tolist(), strict=True)) == expected
    band.merge()
    qi, found = band.lookup(q)
    assert sorted(zip(qi.tolist(), found.tolist(), strict=True)) == expected


def _clusters(index: ServiceIndex) -> list[set[str]]:
    groups: dict[str, set[str]] = {}
    for doc_id, num in index.num_of.items():
        groups.setdefault(index.root_id(num), set()).add(doc_id)
    return sorted(groups.values(), key=min)


def _register(index, ids):
    sigs = np.array([SIGS[i] for i in ids], dtype=np.uint32).reshape(-1, 128)
    plan = index.plan(list(ids), sigs)
    index.apply(plan)
    return plan


@settings(max_examples=25)
@given(st.permutations(IDS), st.lists(st.integers(1, 12), min_size=1, max_size=20))
def test_any_arrival_order_and_batching_gives_core_clusters(order, sizes):
    index = ServiceIndex(128, 16, 0.8)
    pos, step = 0, 0
    while pos < len(order):
        size = sizes[step % len(sizes)]
        _register(index, order[pos : pos + size])
        pos, step = pos + size, step + 1
    assert _clusters(index) == core_clusters(CORPUS.docs)


@settings(max_examples=15)
@given(st.permutations(IDS), st.sets(st.sampled_from(IDS), max_size=12))
def test_deletion_leaves_core_clusters_of_the_remaining_docs(order, deleted):
    index = ServiceIndex(128, 16, 0.8)
    _register(index, order)
    for doc_id in sorted(deleted):
        index.remove(doc_id)
    remaining = {i: CORPUS.docs[i] for i in IDS if i not in deleted}
    assert _clusters(index) == core_clusters(remaining)


def test_loading_from_stored_rows_rebuilds_the_same_clusters():
    live = ServiceIndex(128, 16, 0.8)
    plan = _register(live, IDS)
    rebuilt = ServiceIndex(128, 16, 0.8)
    half = len(IDS) // 2
    chunks = [
        (plan.nums[:half], list(IDS[:half]), plan.sigs[:half]),
        (plan.nums[half:], list(IDS[half:]), plan.sigs[half:]),
    ]
    rebuilt.load(len(IDS), chunks, plan.pairs())
    assert _clusters(rebuilt) == _clusters(live) == core_clusters(CORPUS.docs)
    probe = plan.sigs[:5]
    assert rebuilt.matches(probe) == live.matches(probe)
