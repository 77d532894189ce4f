"""``--index`` on Spark: the new batch against a persistent index, and its survivors added to it.

The index is core's (``DocIndex``: the manifest's latest version, its parameter lock and its
damage checks, all on the driver through fsspec); its listed Parquet files are read by Spark's
own reader (any Hadoop path). A run reads the index at most twice:

1. ``probe``: the ``id``, ``digest`` and ``bands`` columns of every indexed row, filtered
   map-side against the new batch's ids, text digests and band keys, broadcast to every task
   (``ProbeFilter``): no shuffle of the index. A new batch of more than
   ``neardup.index.broadcastKeys`` band keys (a Spark setting, default ``BROADCAST_KEYS``) is
   joined instead: every indexed row's digest and band keys are shuffled against the batch's.
2. ``signatures``: the ``id`` and ``signature`` of the indexed rows a band key matched (the
   candidates), joined with the candidate ids broadcast (a shuffled join when they are many);
   skipped when no band key matched.

Candidates are confirmed by core's rule (a band of equal rows and an estimate at least the
threshold, ``kernels.confirm_batch``) and become edges (new class, indexed id) beside the new
batch's own; ``star_roots`` makes components of both, so a component's root is its smallest id,
indexed ids included. The semantics are docs/algorithm.md's (indexed documents always survive),
row for row the local engine's.

Append mode writes the survivors' part (``id``, ``digest``, ``bands``, ``signature``, sorted by
id over the part's files in name order) under ``IDX/parts/<part>/`` after the output is
committed, and commits the next version through core's ``commit_index`` (an exclusive create)
from the driver.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.app.spark import kernels
from neardup.app.spark.estimates import near_estimates
from neardup.core.engine import (
    DocIndex,
    IndexDamagedError,
    IndexFile,
    IndexIdError,
    IndexPart,
    MinhashParams,
    NeardupError,
    commit_index,
    index_part_name,
    index_record,
    run_info,
    write_deletes,
    write_part_keys,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from neardup.app.spark.recrawl import Recrawl

__all__ = [
    "BROADCAST_KEYS",
    "BROADCAST_KEYS_CONF",
    "IndexProbe",
    "indexed_roots",
    "open_index",
    "probe_index",
    "write_index_part",
]

#: Band keys of the new batch (rows x bands) broadcast to the probe's tasks at most; beyond, a
#: join. 8 Mi keys are 64 MiB of uint64 (half a million new documents at 16 bands).
BROADCAST_KEYS = 1 << 23
#: The Spark setting that overrides ``BROADCAST_KEYS`` (``--conf neardup.index.broadcastKeys=N``).
BROADCAST_KEYS_CONF = "neardup.index.broadcastKeys"


def open_index(url: str, mode: str, params: MinhashParams) -> DocIndex:
    """The index's latest version, checked: the parameters locked to it (IndexParameterError),
    every listed file present, of its size, readable Parquet with the listed rows
    (IndexDamagedError); IndexMissingError in read mode when nothing is committed at ``url``."""
    index = DocIndex.open(url, missing_ok=mode == "append")
    index.check_params(params)
    index.verify()
    for part in index.parts:
        for f in part.files:
            with index.parquet(f):
                pass
        index.deletes.rows(part)  # its deletion vector, read and checked whole
    return index


def _index_rows(spark: SparkSession, index: DocIndex, files: Sequence[str]) -> DataFrame:
    """The live rows of ``index``'s files ``files`` as one DataFrame (id, digest, bands,
    signature, part, file): rows its deletion vectors delete are left out (``_live``)."""
    from pyspark.sql import functions as F

    file = F.col("_metadata.file_path")
    part = F.regexp_extract(file, r"/parts/([^/]+)/[^/]+$", 1)
    frame = spark.read.parquet(*files)
    rows = frame.select(
        "id", "digest", "bands", "signature", part.alias("part"), file.alias("file")
    )
    return _live(spark, index, rows)


@dataclass
class IndexProbe:
    """What the new batch matched in the index (DataFrames, persisted until ``release``).

    Attributes:
        exact: (digest, ix, ix_part): per text digest found, its smallest indexed id and part.
        edges: (child, parent, estimate): confirmed (new class id, indexed id) pairs.
        signatures: (iid, isig, part): the matched indexed rows' signatures.
        broadcast: whether the probe broadcast the new batch (else it joined).
        candidates: (new class, indexed row) pairs a band key matched.
        files: the index files, and those the signatures were read from (holding candidates).
        matched: the indexed rows that are exact copies or confirmed pairs of new rows, and the
            new rows that are exact copies or confirmed pairs of indexed rows.
    """

    exact: DataFrame
    edges: DataFrame
    signatures: DataFrame
    broadcast: bool
    candidates: int
    files: tuple[int, int]
    matched: tuple[int, int]
    persisted: list[DataFrame]

    def release(self) -> None:
        """Unpersist what the probe kept."""
        for frame in self.persisted:
            frame.unpersist()


def _band_keys(live: DataFrame, params: MinhashParams) -> DataFrame:
    def keys(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield kernels.band_key_batch(batch, params)

    return live.mapInArrow(keys, "band int, key binary, cid string")


def _filter(classes: DataFrame, live: DataFrame, params: MinhashParams) -> kernels.ProbeFilter:
    """The new batch's ids, digests and band keys, collected to the driver (Arrow)."""
    ids = classes.select("id").toArrow().column("id").to_pylist()
    digests = classes.select("digest").distinct().toArrow().column("digest").to_pylist()
    sigs = live.select("sig").toArrow().column("sig")
    from neardup.core.engine import band_digests, binary_matrix

    matrix = binary_matrix(sigs, 4 * params.num_perm, "<u4")
    keys = (
        band_digests(np.ascontiguousarray(matrix, dtype=np.uint32), params.bands)
        if matrix is not None and len(matrix)
        else np.empty((0, params.bands), dtype=np.uint64)
    )
    return kernels.ProbeFilter(ids, digests, keys, params.bands)


def probe_index(
    spark: SparkSession,
    index: DocIndex,
    classes: DataFrame,
    params: MinhashParams,
    replaced: Sequence[str] = (),
) -> IndexProbe:
    """The new batch (``classes``: id, cid, live, digest, sig) against ``index`` less the
    documents ``replaced`` (``--recrawled replace``): ids still there (IndexIdError, before
    anything is written; re-crawled ids are decided before, ``app.spark.recrawl``), exact
    copies, and confirmed pairs."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    urls = index.file_urls()
    rows = _without(spark, _index_rows(spark, index, urls), replaced)
    live = classes.where(F.col("live") & (F.col("id") == F.col("cid"))).select("cid", "sig")
    limit = int(spark.conf.get(BROADCAST_KEYS_CONF, str(BROADCAST_KEYS)) or BROADCAST_KEYS)
    broadcast = live.count() * params.bands <= limit
    shared = spark.sparkContext.broadcast(_filter(classes, live, params)) if broadcast else None
    bands = params.bands

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        found = None if shared is None else shared.value
        for batch in batches:
            yield kernels.probe_batch(batch, found, bands)

    hits = rows.select("id", "digest", "bands", "part", "file").mapInArrow(
        probe, "band int, key binary, iid string, part string, file string"
    )
    hits = hits.persist(StorageLevel.MEMORY_AND_DISK)
    persisted = [hits]
    try:
        if broadcast:
            taken = hits.where(F.col("band") == kernels.PROBE_ID).select(F.col("iid"), "part")
        else:  # a shuffled join of the indexed ids with the new batch's
            taken = rows.select(F.col("id").alias("iid"), "part").join(
                classes.select(F.col("id").alias("iid")), "iid"
            )
        _check_ids(index, taken)
        digests = classes.select(F.col("digest").alias("key")).distinct()
        exact = (
            hits.where(F.col("band") == kernels.PROBE_DIGEST)
            .join(digests, "key")
            .groupBy("key")
            .agg(F.min(F.struct("iid", "part")).alias("m"))
            .select(
                F.col("key").alias("digest"),
                F.col("m.iid").alias("ix"),
                F.col("m.part").alias("ix_part"),
            )
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        persisted.append(exact)
        pairs = (
            hits.where(F.col("band") >= 0)
            .join(_band_keys(live, params), ["band", "key"])
            .select("cid", "iid", "file")
            .distinct()
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        persisted.append(pairs)
        candidates = pairs.count()
        wanted = pairs.select("iid").distinct()
        if candidates * bands <= limit:
            wanted = F.broadcast(wanted)
        # Only the files holding a candidate are read again (for their signatures); after a
        # join (which does not carry the files), all of them.
        files = (
            sorted(str(r["file"]) for r in pairs.select("file").distinct().collect())
            if broadcast
            else (urls if candidates else [])
        )
        signatures = (
            _without(spark, _index_rows(spark, index, files if files else urls[:1]), replaced)
            .where(F.lit(bool(files)))
            .select(F.col("id").alias("iid"), F.col("signature").alias("isig"), "part")
            .join(wanted, "iid")
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        persisted.append(signatures)
        if candidates:
            signatures.count()
        edges = _confirmed(pairs, live, signatures, params).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(edges)
        matched = _matched(classes, exact, edges)  # exact and edges computed (and kept) here
    except BaseException as exc:
        for frame in persisted:
            frame.unpersist()
        if isinstance(exc, Exception) and not isinstance(exc, NeardupError):
            # Spark's own error for a listed file gone or broken (a compaction while this run
            # read the index, or damage): core's error naming the file instead.
            index.verify()
        raise
    hits.unpersist()
    persisted.remove(hits)
    spread = (len(urls), len(files))
    return IndexProbe(exact, edges, signatures, broadcast, candidates, spread, matched, persisted)


def _live(spark: SparkSession, index: DocIndex, rows: DataFrame) -> DataFrame:
    """``rows`` (index rows) less the rows the parts' deletion vectors delete: their ids, read
    on the driver (few: compaction drops them), taken out by part."""
    deleted = list(index.deletes.all_ids())
    if not deleted:
        return rows
    gone = spark.createDataFrame(deleted, "id string, part string")
    return rows.join(gone, ["id", "part"], "left_anti")


def _without(spark: SparkSession, rows: DataFrame, ids: Sequence[str]) -> DataFrame:
    """``rows`` (index rows) less those whose id is one of ``ids``."""
    if not ids:
        return rows
    gone = spark.createDataFrame([(i,) for i in ids], "id string")
    return rows.join(gone, "id", "left_anti")


def _matched(classes: DataFrame, exact: DataFrame, edges: DataFrame) -> tuple[int, int]:
    """The distinct indexed ids of ``exact`` (ix) and ``edges`` (parent), and the distinct new
    ids of ``classes`` whose digest is in ``exact`` or whose class is a child in ``edges``:
    counted in one job."""
    from pyspark.sql import functions as F

    indexed = exact.select(F.col("ix").alias("key")).unionByName(
        edges.select(F.col("parent").alias("key"))
    )
    by_text = classes.join(exact.select("digest"), "digest", "left_semi")
    by_pair = classes.join(edges.select(F.col("child").alias("cid")), "cid", "left_semi")
    new = by_text.select(F.col("id").alias("key")).unionByName(
        by_pair.select(F.col("id").alias("key"))
    )
    tagged = indexed.withColumn("new", F.lit(False)).unionByName(new.withColumn("new", F.lit(True)))
    counts = {
        bool(r["new"]): int(r["count"]) for r in tagged.distinct().groupBy("new").count().collect()
    }
    return counts.get(False, 0), counts.get(True, 0)


def indexed_roots(
    probe: IndexProbe, classes: DataFrame, tagged: DataFrame, recrawled: Recrawl | None = None
) -> DataFrame:
    """(root): one row for each indexed document the new batch matched (``_matched``'s), the
    ``root`` of the new rows linked to it (an exact copy or a confirmed pair), and for each
    indexed document a dropped re-crawled row names (``recrawled``), so that the manifest's
    clusters count it as a member, as the local engine's do (``Decisions``)."""
    from pyspark.sql import functions as F

    by_pair = probe.edges.select(F.col("child").alias("cid"), F.col("parent").alias("iid")).join(
        classes.select("id", "cid"), "cid"
    )
    by_text = probe.exact.select("digest", F.col("ix").alias("iid")).join(
        classes.select("id", "digest"), "digest"
    )
    linked = by_pair.select("id", "iid").unionByName(by_text.select("id", "iid"))
    if recrawled is not None:
        linked = linked.unionByName(
            recrawled.dropped.select("id", F.col("duplicate_of").alias("iid"))
        )
    return (
        linked.join(tagged.select("id", "root"), "id")
        .select("iid", "root")
        .distinct()
        .select("root")
    )


def _check_ids(index: DocIndex, taken: DataFrame) -> None:
    """IndexIdError naming the new batch's ids found in the index (the first in id order) and
    how many there are."""
    shown = taken.orderBy("iid").limit(IndexIdError.SHOWN).collect()
    if not shown:
        return
    found = {str(r["iid"]): str(r["part"]) for r in shown}
    total = len(shown) if len(shown) < IndexIdError.SHOWN else taken.count()
    raise IndexIdError(index.url, found, total)


def _confirmed(
    pairs: DataFrame, live: DataFrame, signatures: DataFrame, params: MinhashParams
) -> DataFrame:
    """(child, parent, estimate): the candidate (new class, indexed id) pairs core confirms."""
    from pyspark.sql import functions as F

    def confirm(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield kernels.confirm_batch(batch, params)

    joined = pairs.join(live, "cid").join(signatures.select("iid", "isig"), "iid")
    confirmed = joined.select("cid", "sig", "iid", "isig").mapInArrow(
        confirm, "cid string, iid string, estimate double"
    )
    return confirmed.select(F.col("cid").alias("child"), F.col("iid").alias("parent"), "estimate")


def write_index_part(
    spark: SparkSession,
    index: DocIndex,
    survivors: DataFrame,
    params: MinhashParams,
    inputs: Sequence[str],
) -> IndexPart | None:
    """Write the survivors (id, digest, sig) as a new part under ``IDX/parts/<part>/`` (rows
    sorted by id over its files in name order), listed by no version until committed; None
    when there are none (no empty part)."""
    from pyspark.sql import functions as F

    from neardup.app.spark.corpus import HadoopPath

    count = survivors.count()
    if count == 0:
        return None
    name = index_part_name(index.version + 1)
    relative = f"parts/{name}"
    target = HadoopPath(spark, index.url.rstrip("/") + "/" + relative)

    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield kernels.part_batch(batch, params)

    part = survivors.select("id", "digest", "sig").mapInArrow(
        rows, "id string, digest binary, bands binary, signature binary"
    )
    # As core writes parts: row groups of INDEX_ROW_GROUP rows (Spark sizes them in bytes), no
    # dictionaries (digests and signatures are random bits); zstd (a no-op on those bits).
    row_bytes = 64 + 16 + 8 * params.bands + 4 * params.num_perm
    writer = part.orderBy(F.col("id")).write.mode("errorifexists").option("compression", "zstd")
    writer = writer.option("parquet.enable.dictionary", "false")
    writer.option("parquet.block.size", str(kernels.INDEX_ROW_GROUP * row_bytes)).parquet(
        target.path
    )
    files = target.tidy_parts(".parquet")
    listed = []
    for file_name in files:
        path = posixpath.join(relative, file_name)
        listed.append(IndexFile(path, _rows_of(index, path), _bytes_of(index, path)))
    got = sum(f.rows for f in listed)
    if got != count:
        raise IndexDamagedError(index.url, relative, f"holds {got} rows, {count} were written")
    run = run_info("spark", _version(), list(inputs))
    # The key table from the driver, read back from the part's files in order: the bytes the
    # local engine writes for the same rows (bounded memory: core spills sorted runs).
    return write_part_keys(index, IndexPart(name, count, tuple(listed), run), params)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("neardup")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _rows_of(index: DocIndex, path: str) -> int:
    import pyarrow.parquet as pq

    with index.fs.open(index.path(path), "rb") as handle:
        return int(pq.ParquetFile(handle).metadata.num_rows)


def _bytes_of(index: DocIndex, path: str) -> int:
    return int(index.fs.size(index.path(path)))


def commit_part(
    index: DocIndex,
    params: MinhashParams,
    part: IndexPart | None,
    replaced: Sequence[str] = (),
    inputs: Sequence[str] = (),
) -> int:
    """Commit ``part`` (if any) as the version after the one read, with the ``replaced``
    documents deleted (core's ``write_deletes``, from the driver: a deletion vector for each
    part holding one); IndexConflictError when another run committed it first."""
    deletes, _ = write_deletes(index, replaced)
    return commit_index(index, params, add=[part] if part else [], deletes=deletes)


def index_summary(index: DocIndex, mode: str, probe: IndexProbe | None) -> dict[str, Any]:
    """The manifest's ``index`` object (the local engine's keys), before a part is added; and
    what the probe did (``broadcast``: the new batch's keys were broadcast, else joined;
    ``candidates``: the (new class, indexed row) pairs a band key matched)."""
    matched, matching = (0, 0) if probe is None else probe.matched
    return {
        **index_record(index.url, mode, index.version, index.rows, matched, matching),
        "broadcast": None if probe is None else probe.broadcast,
        "candidates": 0 if probe is None else probe.candidates,
        "files": None if probe is None else probe.files[0],
        "files_read_for_signatures": None if probe is None else probe.files[1],
    }


def index_decisions(
    classes: DataFrame, roots: DataFrame, probe: IndexProbe, num_perm: int, reasons: bool
) -> DataFrame:
    """(id, root, reason, duplicate_of, estimate, index_part) of every new row, as the local
    engine decides against an index (docs/algorithm.md):

    - an exact copy of an indexed text is ``exact`` of the smallest such indexed id (1.0);
    - else a copy of a new text is ``exact`` of that text's keeper (its smallest id, 1.0), or
      when the keeper is dropped as ``near``, of what the keeper names (its estimate);
    - else a row whose component holds an indexed document is ``near`` of the component's
      smallest indexed id;
    - else a row that is not its component's root is ``near`` of the root;
    - else it is kept (null reason).

    ``root`` (``minhash_cluster``) is the component's smallest id, indexed ids included.
    ``estimate`` is that of the row's and ``duplicate_of``'s signatures for ``near`` rows when
    ``reasons`` (else null: only the kept rows are written).
    """
    from pyspark.sql import functions as F

    comp = roots.select("node", "root").unionByName(
        roots.select(F.col("root").alias("node"), "root").distinct()
    )
    indexed = probe.signatures.select(F.col("iid").alias("node"), F.col("part").alias("npart"))
    heads = (
        comp.join(indexed, "node")
        .groupBy("root")
        .agg(F.min(F.struct("node", "npart")).alias("h"))
        .select(
            F.col("root").alias("hroot"),
            F.col("h.node").alias("ihead"),
            F.col("h.npart").alias("ihead_part"),
        )
    )
    own = F.when(F.col("live"), F.coalesce("root", "cid")).otherwise(F.col("keeper"))
    rows = (
        classes.select("id", "cid", "live", "exact", "keeper", "digest")
        .join(roots, F.col("cid") == F.col("node"), "left")
        .select("id", "exact", "keeper", "digest", own.alias("own"))
        .join(probe.exact, "digest", "left")
        .join(heads, F.col("own") == F.col("hroot"), "left")
    )
    ix, ihead = F.col("ix").isNotNull(), F.col("ihead").isNotNull()
    new_exact, new_near = ~F.col("exact"), F.col("own") != F.col("id")
    decided = rows.select(
        "id",
        F.when(ix, F.least("own", "ix")).otherwise(F.col("own")).alias("root"),
        F.when(ix | new_exact, F.lit("exact"))
        .when(ihead | new_near, F.lit("near"))
        .alias("reason"),
        F.when(ix, F.col("ix"))
        .when(ihead, F.col("ihead"))
        .when(new_exact | new_near, F.col("own"))
        .alias("duplicate_of"),
        F.when(ix, F.col("ix_part")).when(ihead, F.col("ihead_part")).alias("index_part"),
        # 1.0: the row's text is duplicate_of's (an indexed copy, or its kept keeper)
        (ix | (new_exact & ~ihead & (F.col("own") == F.col("keeper")))).alias("same"),
    )
    if not reasons:
        return decided.drop("same").withColumn("estimate", F.lit(None).cast("double"))

    targets = classes.select("id", "sig").unionByName(
        probe.signatures.select(F.col("iid").alias("id"), F.col("isig").alias("sig"))
    )
    pairs = decided.where(F.col("reason").isNotNull() & ~F.col("same")).select(
        "id", F.col("duplicate_of").alias("target")
    )
    estimated = near_estimates(pairs, classes, targets, num_perm)
    return decided.join(estimated, "id", "left").select(
        "id",
        "root",
        "reason",
        "duplicate_of",
        F.when(F.col("same"), F.lit(1.0)).otherwise(F.col("estimate")).alias("estimate"),
        "index_part",
    )
