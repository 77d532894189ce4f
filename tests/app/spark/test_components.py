"""Large-star / small-star on Spark against a union-find with smallest-id roots."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.spark.components import star_roots

# Ids from a small alphabet with non-ASCII letters: Spark orders strings by UTF-8 bytes, which
# must agree with Python's code point order for the roots to be the same.
NODE = st.text(alphabet="abzÄéω中𝔄", min_size=1, max_size=3)


def _union_find_roots(edges: list[tuple[str, str]]) -> dict[str, str]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in parent}


@settings(max_examples=4, deadline=None)
@given(st.lists(st.tuples(NODE, NODE), min_size=1, max_size=40))
def test_star_roots_equal_union_find_on_random_graphs(
    spark: Any, edges: list[tuple[str, str]]
) -> None:
    frame = spark.createDataFrame(edges, "child string, parent string").repartition(3)
    roots, rounds = star_roots(frame)
    got = {row["node"]: row["root"] for row in roots.collect()}
    expected = {x: r for x, r in _union_find_roots(edges).items() if x != r}
    assert got == expected
    assert rounds <= 2 * max(1, len(expected)).bit_length() + 2


def test_star_roots_on_a_long_path_takes_logarithmic_rounds(spark: Any) -> None:
    # A path given in the worst order for label propagation (the smallest id at one end).
    n = 100
    nodes = [f"n{i:04d}" for i in range(n)]
    edges = [(nodes[i + 1], nodes[i]) for i in range(n - 1)]
    roots, rounds = star_roots(spark.createDataFrame(edges, "child string, parent string"))
    got = {row["node"]: row["root"] for row in roots.collect()}
    assert got == dict.fromkeys(nodes[1:], nodes[0])
    assert rounds <= 2 * n.bit_length()


def test_star_roots_reliable_checkpoints_give_the_same_roots(spark: Any) -> None:
    edges = [("c", "b"), ("b", "a"), ("e", "d"), ("d", "c"), ("y", "x")]
    frame = spark.createDataFrame(edges, "child string, parent string")
    roots, _ = star_roots(frame, reliable=True)
    assert {r["node"]: r["root"] for r in roots.collect()} == {
        "b": "a", "c": "a", "d": "a", "e": "a", "y": "x"
    }  # fmt: skip
