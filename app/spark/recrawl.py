"""Re-crawled ids on Spark: rows whose id is indexed, decided before the rest, as locally.

``recrawl`` reads the ``id`` column of the index (every file), keeps the rows whose id is one of
the new batch's ids or derived ids (a join: no id is collected), then the ``digest`` and
``signature`` of those rows from the files holding one, and compares each re-crawled row with
the indexed document of its id by core's rule (``kernels.recrawl_batch``: ``recrawl_verdicts``).
``--recrawled`` then decides, as ``app.cli.recrawl`` does on the local engine: the rows it
drops (with their reason, target, part and estimate) take no further part; ``keep-both`` renames
the other changed rows to their derived ids (``renamed``: the rows of pass 2 get them too,
``renamed_rows``); ``replace`` lists the indexed ids the run takes out of the index (collected:
the driver deletes them through core's ``write_deletes``: a deletion vector per part).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from neardup.app.spark import kernels
from neardup.core.engine import (
    RECRAWL_CHANGED,
    RECRAWL_NEAR,
    RECRAWL_REVISION,
    RECRAWL_SAME,
    DocIndex,
    IndexIdError,
    MinhashParams,
    Schema,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Recrawl", "recrawl", "renamed_rows"]

#: Hex digits of the SHA-256 in a derived id (core's ``derived_id``).
_HEX = 12


@dataclass
class Recrawl:
    """What ``--recrawled`` decided on Spark.

    Attributes:
        batch: the rows that go on (``signed``'s columns), renamed where ``keep-both`` says.
        dropped: (id, reason, duplicate_of, index_part, estimate) of the rows decided here.
        renamed: (id, new): original id -> derived id.
        replaced: the indexed ids ``replace`` takes out of the index.
        record: the manifest's ``index.recrawled`` object.
        persisted: frames to unpersist at the end.
    """

    batch: DataFrame
    dropped: DataFrame
    renamed: DataFrame | None
    replaced: list[str]
    record: dict[str, Any]
    persisted: list[DataFrame]

    def release(self) -> None:
        """Unpersist what was kept."""
        for frame in self.persisted:
            frame.unpersist()


def _derived(column: Any) -> Any:
    from pyspark.sql import functions as F

    return F.concat(column, F.lit(RECRAWL_REVISION), F.substring("sha", 1, _HEX))


def _indexed(spark: SparkSession, index: DocIndex, wanted: DataFrame) -> DataFrame:
    """(iid, part, idigest, isig): the indexed documents whose id is in ``wanted`` (iid)."""
    from pyspark.sql import functions as F

    from neardup.app.spark.index import _index_rows

    urls = index.file_urls()
    hits = (
        _index_rows(spark, index, urls)
        .select(F.col("id").alias("iid"), "part", "file")
        .join(wanted, "iid", "left_semi")
    )
    files = sorted(str(r["file"]) for r in hits.select("file").distinct().collect())
    if not files:
        return spark.createDataFrame([], "iid string, part string, idigest binary, isig binary")
    rows = _index_rows(spark, index, files).select(
        F.col("id").alias("iid"), "part", F.col("digest").alias("idigest"),
        F.col("signature").alias("isig"),
    )  # fmt: skip
    return rows.join(wanted, "iid", "left_semi")


def recrawl(
    spark: SparkSession,
    index: DocIndex,
    signed: DataFrame,
    params: MinhashParams,
    policy: str,
) -> Recrawl:
    """The re-crawled rows of ``signed`` (id, sha, sig, live, ...) against ``index``."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    wanted = (
        signed.select(F.col("id").alias("iid"))
        .unionByName(signed.select(_derived(F.col("id")).alias("iid")))
        .distinct()
    )
    found = _indexed(spark, index, wanted).persist(StorageLevel.MEMORY_AND_DISK)
    persisted = [found]
    digest = F.unhex(F.substring("sha", 1, 32))

    def verdicts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield kernels.recrawl_batch(batch, params)

    own = (
        signed.select("id", digest.alias("digest"), "sig", "sha")
        .join(found.withColumnRenamed("iid", "id"), "id")
        .select("id", "digest", "sig", "idigest", "isig", "part", "sha")
    )
    judged = own.select("id", "digest", "sig", "idigest", "isig").mapInArrow(
        verdicts, "id string, verdict int, estimate double"
    )
    judged = judged.join(own.select("id", "part", "sha"), "id").persist(
        StorageLevel.MEMORY_AND_DISK
    )
    persisted.append(judged)
    counts = {
        int(r["verdict"]): int(r["count"]) for r in judged.groupBy("verdict").count().collect()
    }
    changed = F.col("verdict") == RECRAWL_CHANGED
    reason = (
        F.when(F.col("verdict") == RECRAWL_SAME, F.lit("exact"))
        .when(F.col("verdict") == RECRAWL_NEAR, F.lit("near"))
        .otherwise(F.lit("recrawled"))
    )
    decided = judged.where(~changed) if policy != "keep-indexed" else judged
    dropped = decided.select(
        "id", reason.alias("reason"), F.col("id").alias("duplicate_of"),
        F.col("part").alias("index_part"), "estimate",
    )  # fmt: skip
    replaced: list[str] = []
    renamed = None
    if policy == "replace":
        replaced = sorted(str(r["id"]) for r in judged.where(changed).select("id").collect())
    elif policy == "keep-both":
        derived = judged.where(changed).select(
            "id", _derived(F.col("id")).alias("new"), F.unhex(F.substring("sha", 1, 32)).alias("d")
        )
        known = derived.join(
            found.select(F.col("iid").alias("new"), "part", "idigest"), "new"
        ).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(known)
        other = known.where(F.col("d") != F.col("idigest")).orderBy("new").limit(1).collect()
        if other:
            raise IndexIdError(index.url, {str(other[0]["new"]): str(other[0]["part"])})
        dropped = dropped.unionByName(
            known.select(
                "id",
                F.lit("exact").alias("reason"),
                F.col("new").alias("duplicate_of"),
                F.col("part").alias("index_part"),
                F.lit(1.0).alias("estimate"),
            )
        )
        renamed = derived.join(known.select("id"), "id", "left_anti").select("id", "new")
        renamed = renamed.persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(renamed)
    dropped = dropped.persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(dropped)
    dropped.count()  # kept before the inputs' signatures are let go
    batch = signed.join(dropped.select("id"), "id", "left_anti")
    n_renamed = 0 if renamed is None else renamed.count()
    if renamed is not None and n_renamed:
        batch = (
            batch.join(renamed, "id", "left")
            .withColumn("id", F.coalesce("new", "id"))
            .drop("new")
            .select(*signed.columns)
        )
    record = {
        "policy": policy,
        "same": counts.get(RECRAWL_SAME, 0),
        "near": counts.get(RECRAWL_NEAR, 0),
        "changed": counts.get(RECRAWL_CHANGED, 0),
        "renamed": n_renamed,
        "replaced": len(replaced),
    }
    return Recrawl(batch, dropped, renamed if n_renamed else None, replaced, record, persisted)


def renamed_rows(rows: DataFrame, renamed: DataFrame, schema: Schema) -> DataFrame:
    """``rows`` (id, row, pos) with the derived ids of ``renamed`` (id, new): in ``id`` and in
    the row's id field, as the local engine writes such a row."""
    id_field = schema.id_field

    def rename(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield kernels.renamed_batch(batch, id_field)

    joined = rows.select("id", "row", "pos").join(renamed, "id", "left")
    return joined.select("id", "row", "pos", "new").mapInArrow(
        rename,
        "id string, row string, pos struct<input: int, file: string, start: bigint, n: bigint>",
    )
