"""Union-find roots are the smallest member, whatever the order of the unions."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.engine import Components, min_label_components
from neardup.core.minhash import UnionFind
from tests import reference
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


def test_union_find_holds_the_items_it_was_given_or_joined():
    uf = UnionFind(["a"])
    uf.union("b", "c")
    assert [x in uf for x in ("a", "b", "c", "d")] == [True, True, True, False]


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
    root = reference.components(range(n), pairs)
    assert labels.tolist() == [root[i] for i in range(n)]


@given(edges, st.randoms(use_true_random=False))
def test_union_find_groups_equal_a_graph_search(pairs, rnd):
    uf = UnionFind()
    for x, y in pairs:
        uf.union(x, y)
    nodes = sorted({x for p in pairs for x in p})
    root = reference.components(nodes, pairs)
    assert {x: uf.find(x) for x in nodes} == root


@given(
    st.lists(ids, min_size=1, max_size=25, unique=True),
    st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), max_size=40),
    st.lists(st.integers(0, 24), max_size=8),
)
def test_components_regrouped_after_removals_equal_a_fresh_search(keys, pairs, removals):
    """Unions, then removals whose former group is regrouped from recomputed roots: roots and
    member lists equal a graph search over the remaining nodes and edges."""
    n = len(keys)
    pairs = [(a % n, b % n) for a, b in pairs]
    components = Components(keys)
    components.grow(n)
    for a, b in pairs:
        components.union(a, b)
    assert components.roots(np.arange(n)).tolist() == [components.find(i) for i in range(n)]
    removed: set[int] = set()
    for x in removals:
        if x % n in removed:
            continue
        removed.add(x % n)
        group = components.detach(x % n)
        edges = [(a, b) for a, b in pairs if a not in removed and b not in removed]
        fresh = reference.components(group, [(a, b) for a, b in edges if a in group])
        by_key = {m: min(
            (g for g in group if fresh[g] == fresh[m]), key=keys.__getitem__
        ) for m in group}  # fmt: skip
        components.regroup(group, [by_key[m] for m in group])
        alive = [i for i in range(n) if i not in removed]
        key_edges = [(keys[a], keys[b]) for a, b in edges]
        root = reference.components([keys[i] for i in alive], key_edges)
        assert {keys[i]: keys[components.find(i)] for i in alive} == root
        assert components.find(x % n) == x % n
        sizes = {keys[r]: len(m) for r, m in components.members.items()}
        expected: dict[str, int] = {}
        for member_root in root.values():
            expected[member_root] = expected.get(member_root, 0) + 1
        assert sizes == {r: c for r, c in expected.items() if c > 1}
