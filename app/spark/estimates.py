"""The estimate a ``near`` row's ``neardup`` object states (``--keep-duplicates``): core's
estimate of the row's signature and its target's, over Arrow batches after one join on each.

One join for both runs: a batch run's target is the row's cluster root (``job``), an index
run's the root or the component's smallest indexed id (``index``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from neardup.app.spark import kernels

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["near_estimates"]


def near_estimates(
    pairs: DataFrame, signatures: DataFrame, targets: DataFrame, num_perm: int
) -> DataFrame:
    """(id, estimate) of each (id, target) of ``pairs``: the estimate of the row's signature
    (``signatures``: id, sig) and its target's (``targets``: id, sig)."""
    from pyspark.sql import functions as F

    def estimate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield kernels.estimate_batch(batch, num_perm)

    target_sigs = targets.select(F.col("id").alias("target"), F.col("sig").alias("root_sig"))
    joined = (
        pairs.select("id", "target")
        .join(signatures.select("id", "sig"), "id")
        .join(target_sigs, "target")
        .select("id", "sig", "root_sig")
    )
    return joined.mapInArrow(estimate, "id string, estimate double")
