"""Union-find roots are the smallest member, whatever the order of the unions."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from core.minhash import UnionFind
from core.unionfind import min_label_components
from tests.strategies import ids

edges = st.lists(st.tuples(ids, ids), max_size=30)


@given(edges, st.randoms(use_true_random=False))
def test_union_find_root_is_the_smallest_member_for_every_union_order(pairs, rnd):
    forward = UnionFind()
    for x, y in pairs:
        forward.union(x, y)
    shuffled = [(y, x) if rnd.random() < 0.5 else (x, y) for x, y in pairs]
    rnd.shuffle(shuffled)
    other = UnionFind()
    for x, y in shuffled:
        other.union(x, y)
    groups = forward.groups()
    assert groups == other.groups()
    for root, members in groups.items():
        assert root == min(members)
        assert all(forward.find(m) == root for m in members)


def test_union_find_chain_is_one_group():
    uf = UnionFind(["z", "y", "x"])
    uf.union("z", "y")
    uf.union("y", "x")
    assert uf.groups() == {"x": {"x", "y", "z"}}
    assert uf.find("unseen") == "unseen"


def test_union_returns_the_smaller_root_not_the_first_argument():
    uf = UnionFind()
    assert uf.union("m", "a") == "a"
    assert uf.union("b", "c") == "b"
    assert uf.union("c", "m") == "a"


@given(st.integers(1, 40), st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=60))
def test_min_label_components_equal_union_find(n, pairs):
    pairs = [(x % n, y % n) for x, y in pairs]
    uf = UnionFind(range(n))
    for x, y in pairs:
        uf.union(x, y)
    left = np.array([p[0] for p in pairs], dtype=np.int64)
    right = np.array([p[1] for p in pairs], dtype=np.int64)
    labels = min_label_components(n, left, right)
    assert labels.tolist() == [uf.find(i) for i in range(n)]
