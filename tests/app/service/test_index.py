"""The service's index: clusters against core, in any arrival order, batching or deletion."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.service.index import Found, ServiceIndex
from neardup.core.engine import MinhashParams
from neardup.core.minhash import MERSENNE31, signatures
from neardup.core.minhash import clusters as core_clusters
from tests import reference
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


#: The documents in clusters of two or more (removals of several of one cluster interact).
CLUSTERED = sorted(i for group in core_clusters(CORPUS.docs) if len(group) > 1 for i in group)


@settings(max_examples=20)
@given(
    st.permutations(IDS),
    st.lists(
        st.sets(st.sampled_from(CLUSTERED) | st.sampled_from(IDS), min_size=1, max_size=8),
        min_size=1, max_size=3,
    ),
)  # fmt: skip
def test_removals_planned_together_leave_core_clusters_of_the_remaining_docs(order, batches):
    """``plan_removals``: several documents (of one cluster or many) taken out at once, batch
    after batch, leave what removing them one by one leaves; the index is untouched until
    applied, and the store's write is the clusters that stay."""
    index = ServiceIndex(MinhashParams())
    _register(index, order)
    gone: set[str] = set()
    for batch in batches:
        ids = sorted(batch - gone)
        before = _clusters(index)
        removals = index.plan_removals(ids)
        write = index.removal_write(removals)
        assert _clusters(index) == before
        index.apply_removals(removals)
        gone |= set(ids)
        remaining = {i: CORPUS.docs[i] for i in IDS if i not in gone}
        assert _clusters(index) == core_clusters(remaining)
        assert sorted(write.cleared) == ids
        touched = {i for group in before if group & set(ids) for i in group} - gone
        want = [g for g in _clusters(index) if g & touched and len(g) > 1]
        assert sorted(({i for i, _ in r.members} for r in write.rows), key=min) == want


def test_a_planned_removal_leaves_the_index_untouched_until_applied():
    index = ServiceIndex(MinhashParams())
    _register(index, IDS)
    before = _clusters(index)
    biggest = max(before, key=len)
    victim = sorted(biggest)[len(biggest) // 2]
    removal = index.plan_removal(victim)
    assert _clusters(index) == before and victim in index
    index.apply_removal(removal)
    assert victim not in index
    remaining = {i: CORPUS.docs[i] for i in IDS if i != victim}
    assert _clusters(index) == core_clusters(remaining)


def test_a_batch_planned_before_another_change_is_refused():
    index = ServiceIndex(MinhashParams())
    _register(index, IDS[:2])
    sigs = np.array([SIGS[i] for i in IDS[2:4]], dtype=np.uint32).reshape(-1, 128)
    plan = index.plan(list(IDS[2:4]), sigs)
    _register(index, IDS[4:5])
    with pytest.raises(RuntimeError) as refused:
        index.apply(plan)
    assert str(refused.value) == "the index changed between planning and applying a batch"
    assert IDS[2] not in index and len(index) == 3


def test_a_removal_planned_before_another_change_is_refused():
    index = ServiceIndex(MinhashParams())
    _register(index, IDS[:-1])
    removal = index.plan_removal(IDS[0])
    _register(index, IDS[-1:])
    with pytest.raises(RuntimeError) as refused:
        index.apply_removal(removal)
    assert str(refused.value) == "the index changed between planning and applying a removal"
    assert IDS[0] in index


def test_loading_from_stored_rows_rebuilds_the_same_clusters():
    live = ServiceIndex(MinhashParams())
    plan = _register(live, IDS)
    rebuilt = ServiceIndex(MinhashParams())
    half = len(IDS) // 2
    nums = list(range(len(IDS)))
    chunks = [
        (nums[:half], list(IDS[:half]), plan.sigs[:half]),
        (nums[half:], list(IDS[half:]), plan.sigs[half:]),
    ]
    rebuilt.load(len(IDS), len(IDS), chunks)
    assert _clusters(rebuilt) == _clusters(live) == core_clusters(CORPUS.docs)
    probe = plan.sigs[:5]
    assert rebuilt.matches(probe) == live.matches(probe)
    assert rebuilt.earlier_matches(IDS) == live.earlier_matches(IDS)


# Extra exact copies (one class of 8) and wordless texts, so classes and empties are exercised.
HEAVY = {**CORPUS.docs, **{f"copy-{i}": CORPUS.docs[IDS[0]] for i in range(7)}, "blank": "?!"}
HEAVY_IDS = sorted(HEAVY)
HEAVY_SIGS = dict(zip(HEAVY_IDS, signatures([HEAVY[i] for i in HEAVY_IDS]), strict=True))


def _expected(order, sig_of, threshold=0.8):
    """Per id: (count, every match sorted by estimate then id) among the ids before it,
    by brute force over candidate pairs (tests/reference.py) and the estimate."""
    sigs = np.array([sig_of[i] for i in order], dtype=np.uint32)
    pairs = set(reference.candidates(sigs, 16))
    out = {}
    for j, doc in enumerate(order):
        found = [
            (order[i], float(np.mean(sigs[i] == sigs[j])))
            for i in range(j)
            if (i, j) in pairs and np.mean(sigs[i] == sigs[j]) >= threshold
        ]
        out[doc] = (len(found), sorted(found, key=lambda m: (-m[1], m[0])))
    return out


@settings(max_examples=20, deadline=None)
@given(
    st.permutations(HEAVY_IDS),
    st.lists(st.integers(1, 12), min_size=1, max_size=8),
    st.integers(1, 4),
)
def test_matches_are_counted_and_the_best_listed_in_any_batching(order, sizes, cap):
    """Registration results: every earlier confirmed match counted, the best ``cap`` listed,
    as a pairwise brute force says; the same again for a re-registration (``unchanged``)."""
    index = ServiceIndex(MinhashParams(), max_matches=cap)
    expected = _expected(order, HEAVY_SIGS)
    pos, step = 0, 0
    while pos < len(order):
        batch = order[pos : pos + sizes[step % len(sizes)]]
        sigs = np.array([HEAVY_SIGS[i] for i in batch], dtype=np.uint32).reshape(-1, 128)
        plan = index.plan(list(batch), sigs)
        index.apply(plan)
        for doc, found in zip(batch, plan.found, strict=True):
            count, best = expected[doc]
            assert (found.count, found.best) == (count, best[:cap]), doc
        pos, step = pos + len(batch), step + 1
    # One pass for many (a re-sent batch) equals each on its own, and the expected matches.
    wanted = [Found(expected[doc][0], expected[doc][1][:cap]) for doc in order]
    assert index.earlier_matches(order) == wanted
    assert [index.earlier_matches([doc])[0] for doc in order] == wanted
    groups = [set(index.members(root)) for root in index.roots()]
    assert sorted(groups, key=min) == core_clusters(HEAVY)


def test_copies_of_one_text_are_one_bucket_entry():
    """1,000 copies in one batch then 1,000 more: one class, counted, never one entry each."""
    index = ServiceIndex(MinhashParams(), max_matches=5)
    sig = HEAVY_SIGS[IDS[0]]
    for part in range(2):
        ids = [f"c{part}-{i:04d}" for i in range(1000)]
        plan = index.plan(ids, np.tile(sig, (1000, 1)))
        index.apply(plan)
        assert [f.count for f in plan.found] == list(range(part * 1000, part * 1000 + 1000))
        assert plan.found[-1].best == [(f"c0-{i:04d}", 1.0) for i in range(5)]
    assert index._sigs.buckets.nbytes() < 16 * 4096 * 12 * 2  # one entry a band, buffers only
    assert len(index.members("c0-0000")) == 2000


def _confirmed(a: str, b: str) -> bool:
    """A confirmed pair: estimate at the threshold, neither without shingles (all-P rows)."""
    sa, sb = np.asarray(SIGS[a]), np.asarray(SIGS[b])
    empty = (sa == MERSENNE31).all() or (sb == MERSENNE31).all()
    return bool(not empty and (sa == sb).mean() >= MinhashParams().threshold)


@settings(max_examples=25)
@given(st.permutations(IDS), st.integers(0, len(IDS)))
def test_if_new_keeps_exactly_the_documents_without_an_earlier_kept_match(order, split):
    """Registered first, then a batch under if_new: a document is kept iff no registered or
    earlier kept document is a confirmed match; a left-out one lists such a match."""
    index = ServiceIndex(MinhashParams())
    first, batch = order[:split], order[split:]
    _register(index, first)
    sigs = np.array([SIGS[i] for i in batch], dtype=np.uint32).reshape(-1, 128)
    plan, left = index.plan_if_new(list(batch), sigs)
    kept_before: list[str] = list(first)
    expected_left = {}
    for j, doc_id in enumerate(batch):
        matched = [k for k in kept_before if _confirmed(doc_id, k)]
        if matched:
            expected_left[j] = set(matched)
        else:
            kept_before.append(doc_id)
    assert set(left) == set(expected_left)
    assert plan.ids == [d for j, d in enumerate(batch) if j not in expected_left]
    for j, found in left.items():
        assert found.count == len(expected_left[j])
        assert {i for i, _ in found.best} == expected_left[j]
    assert all(found.count == 0 for found in plan.found)
    index.apply(plan)


def _sig(*runs: tuple[int, int, int]) -> np.ndarray:
    """A signature of zeros (the root's) but ``value`` in positions ``lo`` to ``hi - 1``."""
    sig = np.zeros(128, dtype=np.uint32)
    for lo, hi, value in runs:
        sig[lo:hi] = value
    return sig


def test_a_left_out_document_lists_its_matches_best_first_then_by_id():
    """ "d" matches the registered "z-reg" and the kept "a-kept" at 0.8125 and the kept
    "b-kept" at 0.9375 (hand-made signatures; the kept ones match nothing registered nor each
    other): it is left out, its matches the highest first, equal ones by id. The cluster's
    root is its smallest id."""
    index = ServiceIndex(MinhashParams())
    index.apply(index.plan(["z-reg", "y-reg"], np.stack([_sig(), _sig((100, 108, 9))])))
    assert (index.is_root("y-reg"), index.is_root("z-reg"), index.is_root("nope")) == (
        True, False, False
    )  # fmt: skip
    d = _sig((0, 24, 1))
    batch = np.stack([_sig((0, 24, 1), (24, 48, 2)), _sig((0, 24, 1), (48, 56, 3)), d])
    plan, left = index.plan_if_new(["a-kept", "b-kept", "d"], batch)
    assert plan.ids == ["a-kept", "b-kept"]
    assert left == {2: Found(3, [("b-kept", 0.9375), ("a-kept", 0.8125), ("z-reg", 0.8125)])}


def test_a_loaded_index_roots_each_cluster_at_its_smallest_id_as_registering_does():
    """Rows in number order whose ids are not in id order: each cluster's root is still its
    smallest id, the clusters (of two or more, by default) are those of the index built by
    registering them, and the ids' characters are counted in its memory; one document loads
    too."""
    ids = ["z-first", "m-alone", "a-later"]
    sigs = np.stack([_sig(), _sig((0, 100, 5)), _sig((0, 8, 1))])
    built = ServiceIndex(MinhashParams())
    built.apply(built.plan(ids, sigs))
    loaded = ServiceIndex(MinhashParams())
    loaded.load(3, 5, [([0, 1], ids[:2], sigs[:2]), ([2], ids[2:], sigs[2:])])
    for index in (built, loaded):
        assert index.root_of("z-first") == index.root_of("a-later") == "a-later"
        assert index.clusters_by_size() == {"a-later": 2}
    assert loaded.next_number == 5
    longer = ServiceIndex(MinhashParams())  # the same ids, 4 characters longer each
    longer.load(3, 5, [([0, 1, 2], [f"{i}-xyz" for i in ids], sigs)])
    assert longer.nbytes() - loaded.nbytes() == 12
    single = ServiceIndex(MinhashParams())
    single.load(1, 1, [([0], ["only"], sigs[:1])])
    assert (len(single), single.root_of("only")) == (1, "only")


def test_load_refuses_a_store_that_does_not_hold_what_it_counted():
    sigs = np.stack([_sig(), _sig((0, 64, 1)), _sig((0, 128, 2))])
    index = ServiceIndex(MinhashParams())
    index.load(1, 1, [([0], ["a"], sigs[:1])])
    with pytest.raises(RuntimeError, match=r"^load\(\) rebuilds an empty index only$"):
        index.load(1, 1, [([0], ["a"], sigs[:1])])
    cases = [
        (1, 5, [0, 1], "the store holds more than the 1 documents it counted"),
        (3, 5, [0, 1], "not all of the store's 3 documents below 5 read"),
        (3, 2, [0, 1, 2], "not all of the store's 3 documents below 2 read"),
    ]
    for count, next_number, nums, message in cases:
        chunk = (nums, [f"d{n}" for n in nums], sigs[: len(nums)])
        with pytest.raises(RuntimeError) as refused:
            ServiceIndex(MinhashParams()).load(count, next_number, [chunk])
        assert str(refused.value) == message


def test_matches_list_up_to_the_limit_asked_and_a_compacted_index_keeps_its_cap_and_versions():
    sigs = np.stack([_sig(), _sig((0, 4, 1)), _sig((4, 8, 2)), _sig((8, 12, 3))])
    index = ServiceIndex(MinhashParams(), max_matches=2)
    index.apply(index.plan(["a", "b", "c", "d"], sigs))
    [capped], [one] = index.matches(sigs[:1]), index.matches(sigs[:1], None, 1)
    assert (capped.count, capped.best) == (4, [("a", 1.0), ("b", 0.96875)])
    assert (one.count, one.best) == (4, [("a", 1.0)])
    # A caller's limit lowers the cap, never raises it past MAX_MATCHES.
    [wide] = index.matches(sigs[:1], None, 50)
    assert (wide.count, wide.best) == (capped.count, capped.best)
    index.remove("a")
    fresh = index.compacted()
    [compacted] = fresh.matches(sigs[:1])
    assert (compacted.count, len(compacted.best)) == (3, 2)
    assert fresh.version == index.version + 1  # a new version: cached pages are not reused


def test_every_change_gives_the_index_a_new_version():
    """Cached pages are keyed by the version: a removal, like an addition, never gives a
    version seen before."""
    index = ServiceIndex(MinhashParams())
    seen = [index.version]
    index.apply(index.plan(["a", "b"], np.stack([_sig(), _sig((0, 4, 1))])))
    seen.append(index.version)
    index.remove("a")
    seen.append(index.version)
    index.apply(index.plan(["c"], np.stack([_sig((8, 12, 2))])))
    seen.append(index.version)
    assert seen == sorted(set(seen))


def test_documents_since_lists_the_live_documents_from_a_number_across_compaction():
    index = ServiceIndex(MinhashParams())
    _register(index, IDS[:4])  # numbers 0 to 3
    since = index.next_number
    _register(index, IDS[4:7])  # 4 to 6
    linked = np.array([SIGS[IDS[7]]], dtype=np.uint32)  # an indexed document: no number
    index.apply(index.plan([IDS[7]], linked, indexed=1))
    _register(index, IDS[8:10])  # 7 and 8
    index.remove(IDS[5])
    index.remove(IDS[1])
    assert index.documents_since(since) == [IDS[4], IDS[6], IDS[8], IDS[9]]
    assert index.compacted().documents_since(since) == [IDS[4], IDS[6], IDS[8], IDS[9]]
    assert index.documents_since(0) == [IDS[0], IDS[2], IDS[3], IDS[4], IDS[6], IDS[8], IDS[9]]
    assert index.documents_since(index.next_number) == []
