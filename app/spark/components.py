"""Connected components on Spark with smallest-label roots: large-star / small-star.

Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC 2014). Edges are kept as
(child, parent) with child > parent; one round is a large-star then a small-star, each a
couple of DataFrame joins and aggregations, and the graph becomes a forest of stars rooted at
each component's smallest label in O(log n) rounds. The edge table is checkpointed every round
so the lineage (and the query plan) never grows with the number of rounds; no step collects
edges to the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["MAX_ROUNDS", "star_roots"]

#: A bound far above O(log n) rounds for any real graph: reaching it is a bug, not a big input.
MAX_ROUNDS = 200


def _oriented(edges: DataFrame) -> DataFrame:
    """(child, parent) with child > parent, self-loops gone, each edge once."""
    from pyspark.sql import functions as F

    return (
        edges.where(F.col("child") != F.col("parent"))
        .select(
            F.greatest("child", "parent").alias("child"), F.least("child", "parent").alias("parent")
        )
        .distinct()
    )


def _large_star(edges: DataFrame) -> DataFrame:
    """Every node's larger neighbours are linked to the smallest of its neighbourhood."""
    from pyspark.sql import functions as F

    both = edges.select(F.col("parent").alias("node"), F.col("child").alias("other")).unionByName(
        edges.select(F.col("child").alias("node"), F.col("parent").alias("other"))
    )
    low = both.groupBy("node").agg(F.least(F.min("other"), F.col("node")).alias("low"))
    linked = both.where(F.col("other") > F.col("node")).join(low, "node")
    return _oriented(linked.select(F.col("other").alias("child"), F.col("low").alias("parent")))


def _small_star(edges: DataFrame) -> DataFrame:
    """Every node and its smaller neighbours are linked to the smallest of them."""
    from pyspark.sql import functions as F

    low = edges.groupBy("child").agg(F.min("parent").alias("low"))
    linked = edges.join(low, "child").select(
        F.col("parent").alias("child"), F.col("low").alias("parent")
    )
    own = low.select("child", F.col("low").alias("parent"))
    return _oriented(linked.unionByName(own))


def _is_star_forest(edges: DataFrame) -> bool:
    """Whether every child has one parent and no parent is a child (each root its star's min),
    in one aggregation."""
    from pyspark.sql import functions as F

    ends = edges.select(F.col("child").alias("node"), F.lit(1).alias("up"), F.lit(0).alias("down"))
    ends = ends.unionByName(
        edges.select(F.col("parent").alias("node"), F.lit(0).alias("up"), F.lit(1).alias("down"))
    )
    per_node = ends.groupBy("node").agg(F.sum("up").alias("ups"), F.max("down").alias("downs"))
    bad = per_node.where((F.col("ups") > 1) | ((F.col("ups") >= 1) & (F.col("downs") >= 1)))
    return bad.isEmpty()


def _checkpointed(edges: DataFrame, reliable: bool) -> DataFrame:
    return edges.checkpoint(eager=True) if reliable else edges.localCheckpoint(eager=True)


def star_roots(edges: DataFrame, reliable: bool = False) -> tuple[DataFrame, int]:
    """(node, root) for every node in an edge of ``edges`` (columns child, parent), root the
    smallest node of its component; and the number of rounds it took.

    Nodes of no edge are their own roots and are not listed. ``reliable`` checkpoints to the
    context's checkpoint directory (fault tolerant on a cluster) instead of executor storage.
    """
    from pyspark.sql import functions as F

    current = _checkpointed(_oriented(edges), reliable)
    rounds = 0
    while not _is_star_forest(current):
        if rounds == MAX_ROUNDS:
            raise RuntimeError(f"components did not converge in {MAX_ROUNDS} rounds")
        current = _checkpointed(_small_star(_large_star(current)), reliable)
        rounds += 1
    roots = current.select(F.col("child").alias("node"), F.col("parent").alias("root"))
    return roots, rounds
