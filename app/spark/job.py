"""The Spark batch run: exact dedup, near dedup and decontamination, identical to the local one.

Stages (each materialised once, so its seconds mean something and later stages reuse it):

1. ``signatures``: one pass over the inputs (Spark's readers): core's kernel over Arrow
   batches and SHA-256 of the text (Spark's ``sha2`` of the UTF-8 bytes), kept; then every row
   checked (a bad one is a CorpusError naming the file and line) and ids checked unique
   (DuplicateIdError), before anything is written.
2. ``classes``: each document's class, the smallest id among documents of its identical live
   signature (a document without shingles is a class of its own, as in core), and whether it
   is its text's exact keeper (smallest id of its SHA-256).
3. ``candidates``: one (band, key) row per band of every class; buckets of two or more members
   get their signatures joined and are compared in sorted runs (``BucketEdges``), yielding a
   star of confirmed components per bucket.
4. ``components``: large-star / small-star over those edges; every class's root is the
   smallest id of its component.
5. ``write``: the second pass over the inputs: the kept documents' whole rows tagged with
   their root (with ``--keep-duplicates`` all of them, a would-be-dropped one with the local
   engine's ``neardup`` object: its exact keeper, or its root and their estimate, computed
   over Arrow batches after one join on the root's signature), minus the contaminated ones,
   sorted into the local engine's order and written as part files (JSON Lines with its
   encoder; Parquet with the schema its writer infers) to a hidden sibling directory that is
   moved to the output when complete.

Rows are read, checked and parsed by the local reader's code and kept whole (every field),
so the output is the local engine's output file, row for row. The survivors and tags are
exactly the local engine's: the classes are core's identical-row
classes, a bucket is a run of equal band rows, confirmation is core's ``estimates``, and
components of the same graph have the same smallest-id roots, for any partitioning or order.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from neardup.app.spark import kernels
from neardup.app.spark.components import star_roots
from neardup.app.spark.corpus import (
    HadoopPath,
    check_rows,
    check_unique_ids,
    dry_format,
    output_format,
    parquet_hint,
    read_corpus,
)
from neardup.app.spark.estimates import near_estimates
from neardup.app.spark.index import (
    IndexProbe,
    commit_part,
    index_decisions,
    index_summary,
    indexed_roots,
    open_index,
    probe_index,
    write_index_part,
)
from neardup.app.spark.metrics import shuffle_bytes
from neardup.app.spark.recrawl import Recrawl, recrawl, renamed_rows
from neardup.core.engine import (
    RECRAWL_POLICIES,
    CorpusError,
    IndexConflictError,
    MinhashParams,
    NgramIndex,
    ParameterError,
    ProtectedSet,
    Protection,
    RowWriter,
    Schema,
    read_protected_set,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "SparkManifest", "SparkParams", "StageWatch", "check_formats", "check_keep", "run_spark_dedup",
]  # fmt: skip


@dataclass(frozen=True)
class SparkParams:
    """The knobs of ``neardup dedup --engine spark``: core's parameters and what to keep."""

    minhash: MinhashParams = field(default_factory=MinhashParams)
    keep_duplicates: bool = False
    #: ``--index``: the persistent index the run reads (and with ``index_mode`` ``append``
    #: extends); None: no index.
    index: str | None = None
    index_mode: str = "append"
    #: ``--id-field``, ``--text-field`` and ``--id-prefix``: where the id and text are.
    schema: Schema = field(default_factory=Schema)
    #: ``--keep``: which member of a cluster survives (``smallest-id``, ``first``, ``longest``;
    #: ties by smallest id), not with ``index``.
    keep: str = "smallest-id"
    #: ``--recrawled``: what a new row whose id is indexed with a changed text becomes.
    recrawled: str = RECRAWL_POLICIES[0]

    def as_dict(self) -> dict[str, Any]:
        """Flat, as the flags are spelled (for the manifest)."""
        flat = {
            **self.minhash.as_dict(),
            "tokenizer_version": self.minhash.tokenizer_version,
            "window_version": self.minhash.window_version,
            "keep_duplicates": self.keep_duplicates,
            "keep": self.keep,
        }
        if self.index is not None:
            flat.update(index=self.index, index_mode=self.index_mode, recrawled=self.recrawled)
        return flat


@dataclass
class SparkManifest:
    """What a Spark run did: engine, Spark's version and master, parameters, inputs, counts per
    stage, clusters, component rounds, seconds per stage and the output."""

    engine: str
    spark_version: str
    master: str
    parameters: dict[str, Any]
    inputs: list[str]
    protected: list[dict[str, Any]]
    schema: dict[str, Any] = field(default_factory=lambda: asdict(Schema()))
    counts: dict[str, int] = field(default_factory=dict)
    clusters: int = 0
    #: How many clusters of two or more members have each size, by size, and how many
    #: documents near-duplicate none, as the local engine's.
    cluster_sizes: dict[str, int] = field(default_factory=dict)
    singletons: int = 0
    component_rounds: int = 0
    shuffle_bytes: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)
    #: With ``--index``: the version read, what the probe did and the part added (if any).
    index: dict[str, Any] | None = None
    #: With ``--removed``: its path, format, bytes and rows.
    removed: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """The manifest as a JSON-ready dict (``index`` only with ``--index``, ``removed`` only
        with ``--removed``)."""
        body = asdict(self)
        for key in ("index", "removed"):
            if body[key] is None:
                del body[key]
        return body


class StageWatch(Protocol):
    """What follows a run's stages (``app.cli.progress.StageProgress``: their progress)."""

    def stage(self, name: str, group: str) -> None:
        """Stage ``name`` starts; its Spark jobs run in the job group ``group``."""


class _Clock:
    """Seconds per stage; each stage's Spark jobs in a job group named ``RUN:STAGE`` (``RUN``
    this run's own, so a session's earlier runs do not count in its shuffle bytes), told to
    ``watch`` as it starts."""

    def __init__(
        self,
        spark: SparkSession,
        seconds: dict[str, float],
        first: str,
        watch: StageWatch | None = None,
    ) -> None:
        self.spark = spark
        self.seconds = seconds
        self.run = f"neardup-{uuid.uuid4().hex[:12]}:"
        self.started = time.perf_counter()
        self.watch = watch
        self._group(first)

    def _group(self, stage: str) -> None:
        self.spark.sparkContext.setJobGroup(self.run + stage, f"neardup dedup: {stage}")
        if self.watch is not None:
            self.watch.stage(stage, self.run + stage)

    def lap(self, stage: str, following: str | None = None) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(now - self.started, 3)
        self.started = now
        if following is not None:
            self._group(following)


#: The Spark type of each ``--keep`` policy's ``pref`` column (smaller is preferred; ties by
#: id): ``first`` the row's place in the local engine's reading order, ``longest`` minus its
#: text's length in characters (code points, as Python's ``len``).
_PREF_TYPES = {
    "first": "struct<input: int, file: string, start: bigint, n: bigint>",
    "longest": "int",
}


def _signed(raw: DataFrame, params: MinhashParams, keep: str = "smallest-id") -> DataFrame:
    """(id, sha, bad, file, sig, live): one pass over the inputs; ``file`` is kept for bad rows
    only (the error names it), a bad row's missing text is signed as ""; with a ``keep`` policy
    of ``_PREF_TYPES`` also ``pref``."""
    from pyspark.sql import functions as F

    def sign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield kernels.signature_batch(batch, params)

    text = F.coalesce(F.col("text"), F.lit(""))
    bad_file = F.when(F.col("bad").isNotNull(), F.col("file"))
    columns: list[Column | str] = ["id", text.alias("text"), F.sha2(text, 256).alias("sha"), "bad"]
    columns.append(bad_file.alias("file"))
    out = "id string, sha string, bad string, file string, sig binary, live boolean"
    if keep in _PREF_TYPES:  # passed through after file, before the signature's columns
        pref = F.col("pos") if keep == "first" else -F.length(text)
        columns.append(pref.alias("pref"))
        out = out.replace(", sig", f", pref {_PREF_TYPES[keep]}, sig")
    return raw.select(*columns).mapInArrow(sign, out)


def _classes(signed: DataFrame, digest: bool = False) -> DataFrame:
    """(id, sig, live, cid, exact, keeper, smallest): each document's class (the smallest id
    among documents of its identical live signature), its text's exact keeper (the preferred
    row of its SHA-256: with a ``pref`` column the smallest (pref, id), else the smallest id),
    whether it is that keeper, and the smallest id of its SHA-256 (what names a wordless
    text's cluster); ``pref`` passed on; with ``digest`` also the text's 16-byte digest (the
    first half of its SHA-256, as the index stores it)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # Live documents with identical signatures are one class (core merges them up front); a
    # document without shingles is a class of its own, keyed by its id.
    klass = Window.partitionBy(
        "live", F.when(F.col("live"), F.col("sig")).otherwise(F.encode("id", "UTF-8"))
    )
    same_text = Window.partitionBy("sha")
    smallest = F.min("id").over(same_text)
    preferred = "pref" in signed.columns
    keeper = F.min(F.struct("pref", "id")).over(same_text)["id"] if preferred else smallest
    extra: list[Column | str] = ["pref"] if preferred else []
    if digest:
        extra.append(F.unhex(F.substring("sha", 1, 32)).alias("digest"))
    return signed.select(
        "id", "sig", "live", F.min("id").over(klass).alias("cid"), keeper.alias("keeper"),
        smallest.alias("smallest"), *extra,
    ).withColumn("exact", F.col("id") == F.col("keeper"))  # fmt: skip


def _edges(signed: DataFrame, params: MinhashParams) -> DataFrame:
    """(child, parent) stars of every bucket's confirmed components, over class ids."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def bands(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield kernels.band_batch(batch, params)

    classes = signed.where(F.col("live") & (F.col("id") == F.col("cid"))).select("cid", "sig")
    keys = classes.mapInArrow(bands, "band int, key binary, cid string")
    bucket = Window.partitionBy("band", "key")
    shared = keys.withColumn("n", F.count("*").over(bucket)).where(F.col("n") >= 2).drop("n")
    members = shared.join(classes, "cid")
    runs = members.repartition("band", "key").sortWithinPartitions("band", "key", "cid")
    return runs.mapInArrow(kernels.BucketEdges(params), "child string, parent string")


def _tagged(classes: DataFrame, roots: DataFrame) -> DataFrame:
    """(id, exact, keeper, root, survivor): each document's exact keeper, its cluster's root
    (its smallest id, what ``minhash_cluster`` says) and the cluster's survivor (the root; with
    a ``pref`` column the member of smallest (pref, id))."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # A wordless text's cluster is its identical texts, named by their smallest id, as the
    # local engine names it.
    root = F.when(F.col("live"), F.coalesce("root", "cid")).otherwise(F.col("smallest"))
    preferred = "pref" in classes.columns
    tagged = (
        classes.select(
            "id", "cid", "live", "exact", "keeper", "smallest", *(["pref"] if preferred else [])
        )
        .join(roots, F.col("cid") == F.col("node"), "left")
        .select("id", "exact", "keeper", root.alias("root"), *(["pref"] if preferred else []))
    )
    if not preferred:
        return tagged.withColumn("survivor", F.col("root"))
    best = F.min(F.struct("pref", "id")).over(Window.partitionBy("root"))["id"]
    return tagged.select("id", "exact", "keeper", "root", best.alias("survivor"))


def _with_reasons(tagged: DataFrame, classes: DataFrame, params: MinhashParams) -> DataFrame:
    """``tagged`` (id, exact, keeper, root, survivor) with why each would-be-dropped row would be
    dropped (``--keep-duplicates``, ``--removed``): (id, root, reason, duplicate_of, estimate),
    as the local engine says it: ``exact`` of the keeper (estimate 1.0), ``near`` of the
    cluster's survivor (the estimate of their signatures, one join on the survivor's id for the
    rows that need it), null for survivors. ``duplicate_of`` is always a survivor: an exact copy
    whose keeper the near stage dropped names the cluster's survivor (a text's identical copies
    are one cluster), with the estimate to it."""
    from pyspark.sql import functions as F

    exact, near = ~F.col("exact"), F.col("exact") & (F.col("survivor") != F.col("id"))
    hop = exact & (F.col("keeper") != F.col("survivor"))  # the keeper is dropped as near
    pairs = tagged.where(near | hop).select("id", F.col("survivor").alias("target"))
    estimated = near_estimates(pairs, classes, classes, params.num_perm)
    return tagged.join(estimated, "id", "left").select(
        "id",
        "root",
        F.when(exact, F.lit("exact")).when(near, F.lit("near")).alias("reason"),
        F.when(exact | near, F.col("survivor")).alias("duplicate_of"),
        F.when(exact & ~hop, F.lit(1.0)).otherwise(F.col("estimate")).alias("estimate"),
    )


#: The ordering column of the output rows, the Spark type of their JSON text, how many NaN or
#: infinite floats the text has as null (JSON Lines), and where the row goes (kernels.OUTPUT or
#: kernels.REMOVED).
_LINES = (
    "pos struct<input: int, file: string, start: bigint, n: bigint>, value string, nulls int, "
    "dest int"
)
#: ... and with ``--index`` each written row's id and whether it is a survivor (the index's part).
_SURVIVORS = ", id string, survivor boolean"
#: Rows per chunk an executor infers a Parquet schema from (the local writer's batch).
_SCHEMA_ROWS = 8192


def _output_lines(
    spark: SparkSession,
    kept: DataFrame,
    protected: Sequence[str],
    params: SparkParams,
    *,
    finite: bool = True,
    survivors: bool = False,
    removing: bool = False,
) -> DataFrame:
    """(pos, value, nulls, dest): every row of ``kept`` that is written, as the JSON text the
    local engine writes for it, and where (``kernels.route_rows``): a survivor that shares no
    protected n-gram to the output (every input field, ``meta.minhash_cluster``); with
    ``reason``, ``duplicate_of`` and ``estimate`` columns a would-be-dropped row to the output
    with its ``neardup`` object (``--keep-duplicates``) or, ``removing``, to ``--removed``; and
    ``removing``, a contaminated row to ``--removed`` with its reason (else it goes nowhere).
    With ``finite`` (a JSON Lines output) NaN and infinities are null, ``nulls`` of them a row,
    as in every ``--removed`` row; otherwise (a Parquet output) they are kept, as Python's json
    writes them. With ``survivors`` also (id, survivor): the row's id, and whether it is kept
    (no reason)."""
    minhash, schema = params.minhash, params.schema
    n, tokenizer = minhash.ngram, minhash.tokenizer
    sets = [read_protected_set(path, n, tokenizer=tokenizer) for path in protected]
    # --removed says which set, item and n-gram: the sets themselves; else their n-grams do.
    # (and the n-grams protected as a whole: the executors need not weigh every n-gram)
    shipped: Any = (
        [(s.name, s.items, s.grams, s.wholes) for s in sets]
        if removing
        else (
            sorted({g for s in sets for g in s.grams}),
            sorted({g for s in sets for g in s.wholes or ()}),
        )
    )
    shared = spark.sparkContext.broadcast(shipped) if sets else None
    why = [c for c in ("reason", "duplicate_of", "estimate") if c in kept.columns]
    index_part = "index_part" in kept.columns
    keep_all = params.keep_duplicates

    def check() -> Protection | NgramIndex | None:
        if shared is None:
            return None
        if removing:
            return Protection(
                [ProtectedSet(name, items, grams, n, tokenizer=tokenizer, wholes=wholes)
                 for name, items, grams, wholes in shared.value]
            )  # fmt: skip
        grams, wholes = shared.value
        return NgramIndex(set(grams), n, tokenizer, wholes)

    def clean(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        checker = check()
        for batch in batches:
            reasons = (
                list(zip(*(batch.column(c).to_pylist() for c in why), strict=True)) if why else None
            )
            parts = batch.column("index_part").to_pylist() if index_part else None
            routed = kernels.route_rows(
                batch.column("row").to_pylist(), batch.column("root").to_pylist(), reasons,
                parts, checker, keep_all=keep_all, schema=schema,
            )  # fmt: skip
            taken = [removing or dest == kernels.OUTPUT for _, dest in routed]
            written = [r for r, take in zip(routed, taken, strict=True) if take]
            dumped = [
                RowWriter.finite_dumps(row)
                if finite or dest == kernels.REMOVED
                else (RowWriter.dumps(row), 0)
                for row, dest in written
            ]
            mask = pa.array(taken, pa.bool_())
            columns = [
                batch.column("pos").filter(mask),
                pa.array([text for text, _ in dumped], pa.string()),
                pa.array([nulls for _, nulls in dumped], pa.int32()),
                pa.array([dest for _, dest in written], pa.int32()),
            ]
            if survivors:
                kept_rows = [
                    dest == kernels.OUTPUT and (reasons is None or reasons[i][0] is None)
                    for i, (_, dest) in enumerate(routed)
                ]
                columns += [
                    batch.column("id").filter(mask),
                    pa.array(kept_rows, pa.bool_()).filter(mask),
                ]
            yield pa.RecordBatch.from_arrays(
                columns,
                ["pos", "value", "nulls", "dest", *(["id", "survivor"] if survivors else [])],
            )

    extra = ["id"] if survivors else []
    extra += ["index_part"] if index_part else []
    schema_out = _LINES + (_SURVIVORS if survivors else "")
    return kept.select("row", "root", "pos", *why, *extra).mapInArrow(clean, schema_out)


def _parquet_schema(ordered: DataFrame, output: str, hint: pa.Schema | None) -> pa.Schema:
    """The Arrow schema of the output rows, as the local writer infers it (``RowWriter.table``
    over chunks of rows, cast to the Parquet inputs' types), unified in input order over the
    executors' chunks; CorpusError when the rows fit no Parquet schema."""
    import pyarrow as pa

    def schemas(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import json

        import pyarrow as pa

        rows: list[dict[str, Any]] = []
        found: list[pa.Schema] = []
        error = None
        try:
            for batch in batches:
                rows.extend(json.loads(v) for v in batch.column("value").to_pylist())
                while len(rows) >= _SCHEMA_ROWS:
                    found.append(kernels.row_schema(rows[:_SCHEMA_ROWS], hint))
                    del rows[:_SCHEMA_ROWS]
            if rows:
                found.append(kernels.row_schema(rows, hint))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            error = str(exc)
        blobs: list[bytes | None] = [f.serialize().to_pybytes() for f in found]
        errors: list[str | None] = [None] * len(blobs)
        if error is not None:
            blobs, errors = [None], [error]
        yield pa.RecordBatch.from_arrays(
            [pa.array(blobs, pa.binary()), pa.array(errors, pa.string())], ["schema", "error"]
        )

    got = ordered.select("value").mapInArrow(schemas, "schema binary, error string").collect()
    errors = [r["error"] for r in got if r["error"] is not None]
    if errors:
        raise CorpusError(output, None, f"rows do not fit one Parquet schema: {errors[0]}")
    found = [pa.ipc.read_schema(pa.py_buffer(r["schema"])) for r in got if r["schema"]]
    if not found:  # no rows: the local writer's empty file
        return pa.schema([("id", pa.string()), ("text", pa.string())])
    try:
        return pa.unify_schemas(found, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CorpusError(output, None, f"rows do not fit one Parquet schema: {exc}") from None


def _write(
    spark: SparkSession, lines: DataFrame, output: HadoopPath, fmt: str, hint: pa.Schema | None
) -> None:
    """Part files, in the local engine's row order (part names in that order), to a hidden
    sibling directory moved over ``output`` once complete."""
    from pyspark import StorageLevel

    partial = output.sibling(f".{output.name}.partial-{uuid.uuid4().hex[:12]}")
    ordered = lines.orderBy("pos")
    try:
        if fmt == ".parquet":
            ordered = ordered.persist(StorageLevel.MEMORY_AND_DISK)  # read twice
            try:
                schema = _parquet_schema(ordered, output.path, hint)
                _arrow_rows(ordered, schema).write.mode("overwrite").parquet(partial.path)
            finally:
                ordered.unpersist()
        else:
            compression = "gzip" if fmt == ".jsonl.gz" else "none"
            writer = ordered.select("value").write.mode("overwrite")
            writer.option("compression", compression).text(partial.path)
            partial.rename_parts(".txt", ".jsonl")  # part-*.txt[.gz] -> part-*.jsonl[.gz]
        partial.rename_to(output)
    except BaseException:
        partial.delete()
        raise


def _arrow_rows(ordered: DataFrame, schema: pa.Schema) -> DataFrame:
    """The output rows as columns of ``schema`` (Spark's Parquet writer has no null type: a
    column null in every row is a string column)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    def arrow(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import json

        import pyarrow as pa

        for batch in batches:
            rows = [json.loads(v) for v in batch.column("value").to_pylist()]
            yield from pa.Table.from_pylist(rows, schema=schema).to_batches()

    return ordered.select("value").mapInArrow(arrow, from_arrow_schema(schema))


def run_spark_dedup(
    spark: SparkSession,
    inputs: Sequence[str],
    output: str,
    *,
    protected: Sequence[str] = (),
    params: SparkParams = SparkParams(),
    on_conflict: Callable[[SparkManifest], None] | None = None,
    removed: str | None = None,
    dry_run: bool = False,
    watch: StageWatch | None = None,
) -> SparkManifest:
    """Exact dedup, near dedup and decontamination of ``inputs`` into the directory ``output``
    (and every dropped row, with why, into the directory ``removed`` when given); each stage
    told to ``watch`` as it starts.

    With ``--index`` in append mode, a commit lost to another run (IndexConflictError, raised)
    first hands the manifest, saying so, to ``on_conflict`` (the output is written and valid).
    With ``dry_run`` everything is decided and counted, and nothing written (nor added to the
    index).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    fmt = dry_format(output, dry_run)
    check_formats(fmt, params.keep_duplicates, removed)
    check_keep(params.keep, params.index)
    manifest = SparkManifest(
        engine="spark",
        spark_version=spark.version,
        master=str(spark.sparkContext.master),
        parameters=params.as_dict(),
        inputs=list(inputs),
        protected=[{"path": p} for p in protected],
        schema=asdict(params.schema),
    )
    n, tokenizer = params.minhash.ngram, params.minhash.tokenizer
    for path in protected:  # read (and rejected) before any Spark work; warned, as locally
        why = read_protected_set(path, n, tokenizer=tokenizer).why_empty()
        if why is not None:
            print(f"neardup dedup: warning: --protected {path}: {why}", file=sys.stderr)
    index = None
    if params.index is not None:  # its parameters and files checked before any Spark work
        index = open_index(params.index, params.index_mode, params.minhash)
    probe: IndexProbe | None = None
    # Reasons are written (and no row may have their field) with either flag.
    reasons = params.keep_duplicates or removed is not None
    reserved = kernels.REASON_KEY if reasons else None
    hint = parquet_hint(spark, inputs) if fmt == ".parquet" and not dry_run else None
    clock = _Clock(spark, manifest.seconds, "signatures", watch)
    raw = read_corpus(spark, inputs, reserved=reserved, schema=params.schema)
    persisted: list[DataFrame] = []
    try:
        # One pass over the inputs: signatures and digests, kept; every check runs on them.
        signed = _signed(raw, params.minhash, params.keep).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(signed)
        read = signed.count()
        check_rows(spark, signed, reserved, params.schema)
        check_unique_ids(signed)
        batch, recrawled = signed, None
        if index is not None and index.parts:  # re-crawled ids decided first (app.spark.recrawl)
            recrawled = recrawl(spark, index, signed, params.minhash, params.recrawled)
            persisted.extend(recrawled.persisted)
            batch = recrawled.batch
            if recrawled.renamed is not None:  # a derived id may not be another row's
                check_unique_ids(batch)
        clock.lap("signatures", "classes")
        classes = _classes(batch, digest=index is not None)
        classes = classes.persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(classes)
        classes.count()
        signed.unpersist()
        if index is not None and index.parts:
            clock.lap("classes", "index")
            replaced = () if recrawled is None else recrawled.replaced
            probe = probe_index(spark, index, classes, params.minhash, replaced)
            clock.lap("index", "candidates")
        else:
            clock.lap("classes", "candidates")
        edges = _edges(classes, params.minhash).persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(edges)
        edge_count = edges.count()
        clock.lap("candidates", "components")
        reliable = spark.sparkContext.getCheckpointDir() is not None
        graph = edges
        if probe is not None:
            graph = edges.unionByName(probe.edges.select("child", "parent"))
        roots, manifest.component_rounds = star_roots(graph, reliable)
        if probe is not None:
            decided = index_decisions(classes, roots, probe, params.minhash.num_perm, reasons)
            if recrawled is not None:
                decided = decided.unionByName(_recrawl_rows(recrawled, roots, reasons))
            decided = decided.persist(StorageLevel.MEMORY_AND_DISK)
            persisted.append(decided)
            tagged = decided.select("id", "root", "reason")
        else:
            decided = None
            tagged = _tagged(classes, roots)
        tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
        persisted.append(tagged)
        if decided is not None:
            row = tagged.agg(
                F.count(F.when(F.col("reason") == "exact", 1)).alias("exact_dropped"),
                F.count(F.when(F.col("reason") == "near", 1)).alias("near"),
                F.count(F.when(F.col("reason") == "recrawled", 1)).alias("recrawled"),
            ).first()
        else:
            row = tagged.agg(
                F.count(F.when(~F.col("exact"), 1)).alias("exact_dropped"),
                F.count(F.when(F.col("exact") & (F.col("survivor") != F.col("id")), 1)).alias(
                    "near"
                ),
            ).first()
        stats = None if row is None else tuple(int(v) for v in row)
        members = tagged.select("root")
        if probe is not None:  # the indexed documents the rows reach are members, as locally
            members = members.unionByName(indexed_roots(probe, classes, tagged, recrawled))
        sizes = members.groupBy("root").count().groupBy("count").count().collect()
        manifest.cluster_sizes = {str(r[0]): int(r[1]) for r in sorted(sizes) if r[0] >= 2}
        manifest.clusters = sum(manifest.cluster_sizes.values())
        manifest.singletons = sum(int(r[1]) for r in sizes if r[0] == 1)
        clock.lap("components", "write")
        near = F.col("exact") & (F.col("survivor") == F.col("id"))
        if decided is not None:
            kept = decided if reasons else decided.where(F.col("reason").isNull())
            kept = kept.select(
                "id",
                "root",
                *(["reason", "duplicate_of", "estimate"] if reasons else []),
                "index_part",
            )
        elif reasons:
            kept = _with_reasons(tagged, classes, params.minhash)
        else:
            kept = tagged.where(near).select("id", "root")
        if index is not None and probe is None:  # nothing indexed yet: no reason names a part
            kept = kept.withColumn("index_part", F.lit(None).cast("string"))
        # The second pass over the inputs: the kept documents' whole rows.
        rows = read_corpus(spark, inputs, rows=True, schema=params.schema)
        if recrawled is not None and recrawled.renamed is not None:
            rows = renamed_rows(rows, recrawled.renamed, params.schema)
        appending = index is not None and params.index_mode == "append" and not dry_run
        lines = _output_lines(
            spark,
            kept.join(rows.select("id", "row", "pos"), "id"),
            protected,
            params,
            finite=fmt != ".parquet",
            survivors=appending,
            removing=removed is not None,
        )
        lines = lines.persist(StorageLevel.MEMORY_AND_DISK)  # sampled, then sorted
        persisted.append(lines)
        out_rows = F.col("dest") == kernels.OUTPUT
        totals = lines.agg(
            F.count(F.when(out_rows, 1)), F.count(F.when(~out_rows, 1)), F.sum("nulls")
        ).first()
        written, removed_rows, nulls = (
            (0, 0, 0) if totals is None else (int(totals[0]), int(totals[1]), int(totals[2] or 0))
        )
        if not dry_run:
            target = HadoopPath(spark, output)
            _write(spark, lines.where(out_rows), target, fmt, hint)
            manifest.output = {"path": output, "format": fmt, "bytes": target.size()}
            if removed is not None:
                gone = HadoopPath(spark, removed)
                _write(spark, lines.where(~out_rows), gone, output_format(removed), None)
                manifest.removed = {
                    "path": removed, "format": output_format(removed), "bytes": gone.size(),
                    "rows": removed_rows,
                }  # fmt: skip
        _counts(manifest, stats, read, written, edge_count, params.keep_duplicates)
        if index is not None:  # as the local engine counts them
            dropped = 0 if stats is None or len(stats) < 3 else stats[2]
            manifest.counts["recrawled_dropped"] = 0 if params.keep_duplicates else dropped
        if nulls:  # as the local engine counts them
            manifest.counts["nan_as_null"] = nulls
        summary = None if index is None else index_summary(index, params.index_mode, probe)
        if summary is not None:
            summary["recrawled"] = (
                _no_recrawl(params.recrawled) if recrawled is None else recrawled.record
            )
        if appending and index is not None and summary is not None:
            clock.lap("write", "index_part")
            survivors = (
                lines.where(F.col("survivor"))
                .select("id")
                .join(classes.select("id", "digest", "sig"), "id")
            )
            part = write_index_part(spark, index, survivors, params.minhash, list(inputs))
            replaced = [] if recrawled is None else recrawled.replaced
            if part is not None or replaced:
                summary["part"] = None if part is None else part.name
                try:
                    summary["version_written"] = commit_part(
                        index, params.minhash, part, replaced, list(inputs)
                    )
                except IndexConflictError as exc:
                    summary.update(part=None, conflict=str(exc))
                    manifest.index = summary
                    if on_conflict is not None:
                        on_conflict(manifest)
                    raise
                summary["rows_added"] = 0 if part is None else part.rows
            clock.lap("index_part")
        else:
            clock.lap("write")
        manifest.index = summary
    finally:
        if probe is not None:
            probe.release()
        for df in persisted:
            df.unpersist()
    manifest.shuffle_bytes = shuffle_bytes(spark, clock.run)
    return manifest


def _no_recrawl(policy: str) -> dict[str, Any]:
    """The manifest's ``index.recrawled`` of a run that found no indexed id (a new index)."""
    return {"policy": policy, "same": 0, "near": 0, "changed": 0, "renamed": 0, "replaced": 0}


def _recrawl_rows(recrawled: Recrawl, roots: DataFrame, reasons: bool) -> DataFrame:
    """(id, root, reason, duplicate_of, estimate, index_part) of the rows ``--recrawled``
    dropped, as ``index_decisions`` has the others: each a member of its indexed document's
    cluster (the root of that document's component, or the document itself)."""
    from pyspark.sql import functions as F

    named = roots.select(F.col("node").alias("duplicate_of"), F.col("root").alias("r"))
    return recrawled.dropped.join(named, "duplicate_of", "left").select(
        "id",
        F.coalesce("r", "duplicate_of").alias("root"),
        "reason",
        "duplicate_of",
        (F.col("estimate") if reasons else F.lit(None).cast("double")).alias("estimate"),
        "index_part",
    )


def check_formats(fmt: str, keep_duplicates: bool, removed: str | None) -> None:
    """ParameterError for what the Spark engine writes only as JSON Lines: ``--keep-duplicates``'
    ``neardup`` objects (a Parquet output) and ``--removed`` (a Parquet one); CorpusError for
    a ``--removed`` name of no output format."""
    if keep_duplicates and fmt == ".parquet":
        raise ParameterError(
            "--engine spark writes --keep-duplicates' neardup tags to JSON Lines only, not "
            "Parquet (see docs/spark.md)"
        )
    if removed is not None and output_format(removed) == ".parquet":
        raise ParameterError(
            "--engine spark writes --removed to JSON Lines only (.jsonl, .jsonl.gz), not "
            "Parquet (see docs/spark.md)"
        )


def check_keep(keep: str, index: str | None) -> None:
    """ParameterError for a ``--keep`` policy the Spark engine does not run: ``max:FIELD``, and
    any but ``smallest-id`` with an ``--index``."""
    if keep == "smallest-id":
        return
    if keep not in _PREF_TYPES:
        raise ParameterError(
            f"--engine spark does not take --keep {keep}: it keeps smallest-id, first or "
            "longest; run --engine local for max:FIELD (see docs/spark.md)"
        )
    if index is not None:
        raise ParameterError(
            f"--engine spark takes --keep {keep} without --index only; run --engine local for "
            "both (see docs/spark.md)"
        )


def _counts(
    manifest: SparkManifest,
    stats: tuple[int, ...] | None,
    read: int,
    written: int,
    edges: int,
    keep_all: bool,
) -> None:
    """The manifest's counts per stage."""
    exact_dropped, near_dropped = (0, 0) if stats is None else (stats[0], stats[1])
    kept_count = read if keep_all else read - sum(stats or ())  # recrawled_dropped too
    manifest.counts = {
        "read": read,
        "exact_dropped": 0 if keep_all else exact_dropped,
        "near_dropped": 0 if keep_all else near_dropped,
        "decontaminated": kept_count - written,
        "written": written,
        "edges": edges,
    }
