"""Clusters: planted ones found exactly, borderline pairs apart, invariant to order and workers."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import neardup.core._banding
import neardup.core._cluster
from neardup.core._cluster import confirm, estimates, groups_of
from neardup.core.engine import MinhashParams, candidate_pairs, cluster_roots
from neardup.core.errors import ParameterError, SignatureError
from neardup.core.minhash import LSH, MERSENNE31, UnionFind, clusters, estimate, signatures
from tests import reference
from tests.fixtures import planted_corpus


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_clusters_are_found_exactly(seed):
    corpus = planted_corpus(seed)
    found = clusters(corpus.docs)
    assert found == corpus.expected_clusters()
    by_member = {m: group for group in found for m in group}
    for a, b in corpus.borderline:
        assert by_member[a] == {a} and by_member[b] == {b}
    for doc_id in corpus.short:
        assert by_member[doc_id] == {doc_id}


def _chain():
    words = [f"w{i}" for i in range(400)]
    x = words[:300]
    y = words[40:340]  # J(x, y) and J(y, z) about 0.76; J(x, z) about 0.56
    z = words[80:380]
    return {"x": " ".join(x), "y": " ".join(y), "z": " ".join(z)}


def test_chain_of_near_duplicates_is_one_cluster():
    docs = _chain()
    sig = dict(zip(sorted(docs), signatures([docs[k] for k in sorted(docs)]), strict=True))
    assert estimate(sig["x"], sig["y"]) >= 0.7 and estimate(sig["y"], sig["z"]) >= 0.7
    assert estimate(sig["x"], sig["z"]) < 0.7
    assert clusters(docs, threshold=0.7) == [{"x", "y", "z"}]


def test_unconfirmed_candidates_are_never_merged():
    docs = _chain()
    # x ~ z is a candidate at most rarely and never confirmed at 0.7; at 0.95 nothing merges.
    assert clusters(docs, threshold=0.95) == [{"x"}, {"y"}, {"z"}]


def test_wordless_and_empty_texts_never_cluster():
    docs = {"a": "", "b": "  ", "c": "!!!", "d": "...", "e": "one two"}
    assert clusters(docs) == [{"a"}, {"b"}, {"c"}, {"d"}, {"e"}]


def test_one_and_three_workers_give_the_same_clusters():
    corpus = planted_corpus(5)
    assert clusters(corpus.docs, workers=1) == clusters(corpus.docs, workers=3)


@given(st.randoms(use_true_random=False))
def test_clusters_do_not_depend_on_input_order(rnd):
    corpus = planted_corpus(1, n_clusters=4, n_borderline=2, n_singletons=5)
    items = list(corpus.docs.items())
    rnd.shuffle(items)
    assert clusters(dict(items)) == clusters(corpus.docs)


def test_clusters_reject_inconsistent_parameters():
    with pytest.raises(ParameterError, match="multiple of bands"):
        clusters({"a": "x"}, num_perm=100, bands=16)
    with pytest.raises(ParameterError, match="threshold"):
        clusters({"a": "x"}, threshold=0.0)


def _roots(sigs, bands, threshold, rank=None):
    return cluster_roots(sigs, MinhashParams(sigs.shape[1], bands, threshold), rank)


def _reference_roots(sigs, bands, threshold):
    """Brute-force candidates + estimate + graph search (tests/reference.py), over row numbers."""
    pairs = reference.candidates(sigs, bands)
    confirmed = [(a, b) for a, b in pairs if estimate(sigs[a], sigs[b]) >= threshold]
    root = reference.components(range(len(sigs)), confirmed)
    return [root[i] for i in range(len(sigs))], [(f"{a:06d}", f"{b:06d}") for a, b in pairs]


def _contract_roots(sigs, bands, threshold):
    """The contract's LSH + estimate + UnionFind, over zero-padded row numbers."""
    rows = sigs.shape[1] // bands
    lsh = LSH(bands, rows)
    keys = [f"{i:06d}" for i in range(len(sigs))]
    for key, sig in zip(keys, sigs, strict=True):
        lsh.insert(key, sig)
    uf = UnionFind(keys)
    for a, b in lsh.candidates():
        if estimate(sigs[int(a)], sigs[int(b)]) >= threshold:
            uf.union(a, b)
    return [int(uf.find(k)) for k in keys], lsh.candidates()


@given(
    st.lists(
        st.lists(st.integers(0, 3), min_size=8, max_size=8).map(
            lambda row: [MERSENNE31 if v == 3 else v for v in row]
        ),
        max_size=25,
    ),
    st.sampled_from([0.5, 0.75, 1.0]),
)
def test_vectorised_clusters_equal_the_lsh_union_find_reference(rows, threshold):
    # Tiny alphabets make band collisions, copies and all-P rows frequent.
    sigs = np.array(rows, dtype=np.uint32).reshape(-1, 8)
    roots, reference_pairs = _reference_roots(sigs, 4, threshold)
    pairs = candidate_pairs(sigs, 4) if len(sigs) else np.empty((0, 2), dtype=np.int64)
    assert [(f"{a:06d}", f"{b:06d}") for a, b in pairs.tolist()] == reference_pairs
    assert _roots(sigs, 4, threshold).tolist() == roots
    # The contract's faces (LSH over the engine's banding, UnionFind over its components).
    assert _contract_roots(sigs, 4, threshold) == (roots, reference_pairs)


def test_digest_collisions_never_make_false_candidates(monkeypatch):
    # Every band digest equal: the exact row comparison must still separate different rows.
    rng = np.random.default_rng(3)
    sigs = rng.integers(0, 4, size=(30, 8), dtype=np.uint32)
    expected_pairs = candidate_pairs(sigs, 4).tolist()
    expected_roots = _roots(sigs, 4, 0.5).tolist()
    monkeypatch.setattr(
        neardup.core._banding, "band_digest", lambda block: np.zeros(len(block), np.uint64)
    )
    assert candidate_pairs(sigs, 4).tolist() == expected_pairs
    assert _roots(sigs, 4, 0.5).tolist() == expected_roots
    roots, reference_pairs = _reference_roots(sigs, 4, 0.5)
    assert [(f"{a:06d}", f"{b:06d}") for a, b in expected_pairs] == reference_pairs
    assert expected_roots == roots


def test_all_p_rows_are_never_candidates_even_when_repeated():
    e = [MERSENNE31] * 8
    half = [MERSENNE31] * 6 + [0, 1]  # bands 0-2 equal to the empty row's bands
    sigs = np.array([e, e, half, [0, 1, 2, 3, 4, 5, 6, 7]], dtype=np.uint32)
    assert candidate_pairs(sigs, 4).tolist() == []
    assert _roots(sigs, 4, 0.5).tolist() == [0, 1, 2, 3]


def test_candidate_pairs_survive_band_digest_collisions(monkeypatch):
    monkeypatch.setattr(
        neardup.core._banding, "band_digest", lambda b: np.zeros(len(b), dtype=np.uint64)
    )
    sigs = np.array([[1, 2, 5, 6], [3, 4, 5, 6], [1, 2, 7, 8], [9, 9, 9, 9]], dtype=np.uint32)
    assert candidate_pairs(sigs, 2).tolist() == [[0, 1], [0, 2]]


@given(st.randoms(use_true_random=False))
def test_cluster_roots_with_a_rank_equal_sorting_the_rows_first(rnd):
    corpus = planted_corpus(6, n_clusters=5, n_borderline=2, n_singletons=6)
    ids = list(corpus.docs)
    rnd.shuffle(ids)
    sigs = signatures([corpus.docs[i] for i in ids])
    order = np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.int64)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    roots = _roots(sigs, 16, 0.8, rank)
    sorted_roots = _roots(sigs[order], 16, 0.8)
    assert [ids[r] for r in roots.tolist()] == [
        ids[order[sorted_roots[rank[i]]]] for i in range(len(ids))
    ]
    assert all(ids[roots[i]] <= ids[i] for i in range(len(ids)))


def test_clusters_refuse_a_worker_count_below_one():
    for workers in (0, -2, True):
        with pytest.raises(ParameterError, match=r"^workers must be a whole number >= 1, got "):
            clusters({"a": "one two", "b": "three four"}, workers=workers)


# --- exact behaviour of each step: estimates in chunks, confirmation, roots, groups ----------

P = MERSENNE31


def _u32(*rows):
    return np.array(rows, dtype=np.uint32)


@pytest.mark.parametrize("chunk", [1, 2, 1 << 16])
def test_estimates_are_the_share_of_equal_positions_chunk_by_chunk(monkeypatch, chunk):
    monkeypatch.setattr(neardup.core._cluster, "_ESTIMATE_CHUNK", chunk)
    sigs = _u32([1, 2, 3, 4], [1, 2, 3, 5], [1, 9, 9, 9], [0, 0, 0, 0])
    pairs = np.array([[0, 1], [0, 2], [1, 2], [0, 3], [2, 2]], dtype=np.int64)
    out = estimates(sigs, pairs)
    assert out.dtype == np.float64
    assert out.tolist() == [0.75, 0.25, 0.25, 0.0, 1.0]
    other = _u32([1, 2, 3, 4], [0, 2, 0, 4])
    cross = np.array([[0, 1], [1, 1], [2, 0], [3, 0]], dtype=np.int64)
    assert estimates(sigs, cross, other).tolist() == [0.5, 0.25, 0.25, 0.0]
    assert confirm(sigs, pairs, 0.25).tolist() == [[0, 1], [0, 2], [1, 2], [2, 2]]
    assert confirm(sigs, pairs, 0.75).tolist() == [[0, 1], [2, 2]]
    assert confirm(sigs, pairs, 0.76).tolist() == [[2, 2]]
    assert estimates(sigs, np.empty((0, 2), dtype=np.int64)).tolist() == []


def test_cluster_roots_names_a_signature_length_that_is_not_the_params():
    with pytest.raises(SignatureError) as caught:
        cluster_roots(_u32([1, 2, 3, 4]), MinhashParams(8, 4, 0.5))
    assert str(caught.value) == "signatures have 4 entries, params say 8"
    roots = cluster_roots(np.zeros((0, 8), dtype=np.uint32), MinhashParams(8, 4, 0.5))
    assert roots.tolist() == [] and roots.dtype == np.int64


@pytest.mark.parametrize(
    ("rows", "threshold", "roots"),
    [
        # copies, a near copy (estimate 0.75), a far one (0.25) and empty rows
        ([[1, 2, 3, 4], [5, 5, 5, 5], [1, 2, 3, 4], [1, 2, 3, 9], [P, P, P, P], [P, P, P, P],
          [1, 7, 8, 9]], 0.75, [0, 1, 0, 0, 4, 5, 6]),
        ([[1, 2, 3, 4], [5, 5, 5, 5], [1, 2, 3, 4], [1, 2, 3, 9], [P, P, P, P], [P, P, P, P],
          [1, 7, 8, 9]], 1.0, [0, 1, 0, 3, 4, 5, 6]),
        ([[3, 3, 3, 3], [3, 3, 3, 3], [3, 3, 3, 3]], 1.0, [0, 0, 0]),
        ([[1, 2, 3, 4]], 0.5, [0]),
        ([[6, 6, 1, 1], [6, 6, 2, 2], [7, 7, 2, 2]], 0.5, [0, 0, 0]),
    ],
)  # fmt: skip
def test_cluster_roots_table(rows, threshold, roots):
    sigs = np.array(rows, dtype=np.uint32)
    assert _roots(sigs, 2, threshold).tolist() == roots


def test_cluster_roots_with_a_rank_root_each_cluster_at_its_first_member_in_rank_order():
    sigs = _u32([1, 2, 3, 4], [5, 5, 5, 5], [1, 2, 3, 4], [1, 2, 3, 9], [P, P, P, P])
    rank = np.array([3, 0, 1, 4, 2], dtype=np.int64)  # row 2 comes before rows 0 and 3
    assert _roots(sigs, 2, 0.75, rank).tolist() == [2, 1, 2, 2, 4]
    rank = np.array([4, 3, 2, 1, 0], dtype=np.int64)
    assert _roots(sigs, 2, 0.75, rank).tolist() == [3, 1, 3, 3, 4]


def test_groups_of_are_sets_of_ids_sorted_by_root():
    roots = np.array([2, 1, 2, 1, 4], dtype=np.int64)
    assert groups_of(["e", "d", "c", "b", "a"], roots) == [{"d", "b"}, {"e", "c"}, {"a"}]
    assert groups_of([], np.empty(0, dtype=np.int64)) == []


def test_clusters_default_to_the_default_params(monkeypatch):
    seen = {}
    real_signatures, real_roots = neardup.core._cluster.signatures, cluster_roots

    def spy_signatures(texts, **kwargs):
        seen["signatures"] = (list(texts), kwargs)
        return real_signatures(texts, **kwargs)

    def spy_roots(sigs, params, rank=None):
        seen["params"] = params
        return real_roots(sigs, params, rank)

    monkeypatch.setattr(neardup.core._cluster, "signatures", spy_signatures)
    monkeypatch.setattr(neardup.core._cluster, "cluster_roots", spy_roots)
    docs = {"b": "one two three four five six", "a": "one two three four five six", "c": "x"}
    assert clusters(docs) == [{"a", "b"}, {"c"}]
    defaults = MinhashParams()
    assert seen["params"] == defaults
    texts, kwargs = seen["signatures"]
    assert texts == [docs["a"], docs["b"], docs["c"]]  # in id order
    assert kwargs == {
        "num_perm": defaults.num_perm, "seed": defaults.seed, "k": defaults.k, "workers": 1,
        "tokenizer": defaults.tokenizer,
    }  # fmt: skip
    clusters(docs, num_perm=64, bands=8, threshold=0.5, k=2, seed=3, tokenizer="multilingual")
    assert seen["params"] == MinhashParams(64, 8, 0.5, k=2, seed=3, tokenizer="multilingual")
    assert seen["signatures"][1] == {
        "num_perm": 64, "seed": 3, "k": 2, "workers": 1, "tokenizer": "multilingual"}  # fmt: skip


def test_cluster_roots_band_one_row_of_each_signature_so_copies_make_no_bucket(monkeypatch):
    banded = []
    real = neardup.core._cluster.candidate_pairs

    def spy(sigs, bands, among=None):
        banded.append(None if among is None else among.tolist())
        return real(sigs, bands, among=among)

    monkeypatch.setattr(neardup.core._cluster, "candidate_pairs", spy)
    sigs = np.array([[1, 2, 3, 4]] * 50 + [[1, 2, 3, 9], [5, 5, 5, 5]], dtype=np.uint32)
    roots = _roots(sigs, 2, 0.75)
    assert roots.tolist() == [0] * 51 + [51]
    assert banded == [[0, 50, 51]]  # the first copy stands for all fifty


def test_cluster_roots_in_rank_order_are_row_numbers():
    sigs = _u32([1, 2, 3, 4], [1, 2, 3, 4], [9, 9, 9, 9])
    roots = _roots(sigs, 2, 0.75, np.array([2, 1, 0], dtype=np.int64))
    assert roots.dtype == np.int64 and roots.tolist() == [1, 1, 2]
    assert _roots(sigs, 2, 0.75).dtype == np.int64
