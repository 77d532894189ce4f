"""Union-find roots are the smallest member, whatever the order of the unions."""

import numpy as np
import pytest
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


# --- exact behaviour of Components and min_label_components ------------------------------------


@pytest.mark.parametrize(
    ("n", "edges", "labels"),
    [
        (4, [], [0, 1, 2, 3]),
        (5, [(4, 3), (3, 2), (2, 1)], [0, 1, 1, 1, 1]),  # a chain: labels travel the whole way
        (6, [(5, 0), (1, 4)], [0, 1, 2, 3, 1, 0]),
        (6, [(5, 4), (4, 3), (3, 2), (2, 1), (1, 0)], [0] * 6),
        (6, [(0, 5), (5, 1), (1, 4), (4, 2), (2, 3)], [0] * 6),  # a zigzag
        (3, [(1, 1)], [0, 1, 2]),
        (0, [], []),
    ],
)
def test_min_label_components_table(n, edges, labels):
    left = np.array([a for a, _ in edges], dtype=np.int64)
    right = np.array([b for _, b in edges], dtype=np.int64)
    got = min_label_components(n, left, right)
    assert got.dtype == np.int64
    assert got.tolist() == labels


def test_components_grow_to_what_is_asked_or_twice_their_size():
    c = Components(list("abcdefghijklmnopqrstuvwxyz"))
    assert c.nbytes() == 0 and c.members == {}
    c.grow(3)
    assert c._parent.tolist() == [0, 1, 2] and c.nbytes() == 12
    c.grow(3)
    c.grow(2)
    assert len(c._parent) == 3
    c.union(0, 2)
    c.grow(4)  # twice the size, the old parents kept, new nodes their own roots
    assert c._parent.tolist() == [0, 1, 0, 3, 4, 5] and c.nbytes() == 24
    c.grow(20)
    assert len(c._parent) == 20 and c._parent[6:].tolist() == list(range(6, 20))
    assert c._parent.dtype == np.int32


def test_find_halves_the_path_and_roots_jump_to_the_top():
    c = Components(list(range(6)))
    c.grow(6)
    c._parent[:] = [0, 0, 1, 2, 3, 4]  # a chain 5 -> 4 -> 3 -> 2 -> 1 -> 0
    assert c.roots(np.array([5, 3, 0, 1])).tolist() == [0, 0, 0, 0]
    assert c._parent.tolist() == [0, 0, 1, 2, 3, 4]  # roots() changes nothing
    assert c.find(5) == 0
    assert c._parent.tolist() == [0, 0, 1, 1, 3, 3]  # 5 -> 3, 3 -> 1: every other step skipped
    assert c.find(0) == 0 and c.find(4) == 0
    assert c.roots(np.array([], dtype=np.int64)).tolist() == []


def test_union_roots_at_the_smaller_key_and_gathers_the_members():
    keys = ["m", "c", "x", "a", "b"]
    c = Components(keys)
    c.grow(5)
    assert c.union(0, 2) == 0
    assert c.members == {0: [0, 2]}
    assert c.union(2, 1) == 1  # "c" < "m": the root moves to 1
    assert c.members == {1: [1, 0, 2]}
    assert c.union(0, 1) == 1 and c.members == {1: [1, 0, 2]}  # already one component
    assert c.union(4, 3) == 3
    assert c.members == {1: [1, 0, 2], 3: [3, 4]}
    assert c.union(3, 0) == 3
    assert c.members == {3: [3, 4, 1, 0, 2]}
    assert [c.find(i) for i in range(5)] == [3] * 5


def test_detach_and_regroup_split_a_component():
    keys = ["a", "b", "c", "d"]
    c = Components(keys)
    c.grow(4)
    c.union(0, 1)
    c.union(1, 2)
    assert c.detach(1) == [0, 2]
    assert c.find(1) == 1 and c.members == {}
    c.regroup([0, 2], [0, 2])
    assert c.members == {} and [c.find(i) for i in range(4)] == [0, 1, 2, 3]
    c.union(0, 2)
    c.union(3, 2)
    assert c.detach(3) == [0, 2]
    c.regroup([0, 2], [0, 0])
    assert c.members == {0: [0, 2]}
    assert c.detach(1) == []  # a singleton leaves nothing behind
    assert c.detach(2) == [0]
    c.regroup([0], [0])
    assert c.members == {}


def test_assign_sets_every_root_and_rebuilds_the_members():
    c = Components(list(range(8)))
    c.grow(2)
    c.union(0, 1)
    c.assign(np.array([0, 1, 0, 3, 0, 3, 6], dtype=np.int64))
    assert c._parent[:7].tolist() == [0, 1, 0, 3, 0, 3, 6]
    assert len(c._parent) == 7
    assert c.members == {0: [0, 2, 4], 3: [3, 5]}
    assert [c.find(i) for i in range(7)] == [0, 1, 0, 3, 0, 3, 6]
    c.assign(np.arange(3, dtype=np.int64))
    assert c.members == {} and c._parent[:3].tolist() == [0, 1, 2]


def test_regroup_refuses_roots_that_do_not_pair_with_the_nodes():
    c = Components(["a", "b", "c"])
    c.grow(3)
    for nums, roots in (([0, 1], [0]), ([0], [0, 0])):
        with pytest.raises(ValueError, match="zip"):
            c.regroup(nums, roots)
