"""Corpus files in and out of Spark: inputs read with Spark's own readers and checked, the
survivors written as a directory of part files, and files on any Hadoop filesystem. (Named
``corpus``, not ``io``: ``spark-submit app/spark/submit.py`` puts this folder first on
``sys.path``, where an ``io.py`` would shadow the standard library's.)

Inputs are local paths, directories, globs or Hadoop URIs (``s3a://``, ``hdfs://``, ``gs://``).
A name ending in ``.parquet`` (a file, a directory of parts, or a glob such as ``*.parquet``) is
read as Parquet; anything else as JSON Lines (``.jsonl``, ``.jsonl.gz``: Spark's JSON reader
decompresses by extension). Rows become (id, text, meta, file) with ``meta`` as JSON text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from neardup.core.engine import CorpusError, DuplicateIdError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "OUTPUT_FORMATS",
    "HadoopPath",
    "check_rows",
    "check_unique_ids",
    "output_format",
    "read_corpus",
]

#: Output names the Spark engine writes (a directory of part files in that format).
OUTPUT_FORMATS = (".parquet", ".jsonl", ".jsonl.gz")
_CORRUPT = "_corrupt_record"
_JSON_SCHEMA = f"id STRING, text STRING, meta STRING, {_CORRUPT} STRING"
#: Repeated ids named in the error at most (the rest are counted).
_SHOWN_IDS = 20


def output_format(output: str) -> str:
    """The output's format by its name; CorpusError for any other."""
    name = output.rstrip("/").lower()
    for ending in OUTPUT_FORMATS:
        if name.endswith(ending):
            return ending
    raise CorpusError(
        output, None, f"unknown output format; the Spark engine writes {', '.join(OUTPUT_FORMATS)}"
    )


def _is_parquet(path: str) -> bool:
    return path.rstrip("/").lower().endswith(".parquet")


def read_corpus(spark: SparkSession, inputs: Sequence[str]) -> DataFrame:
    """All inputs as one DataFrame (id, text, meta, file, bad): ``bad`` says why a row is not a
    document (None for a good one). Nothing is read until an action runs."""
    parts = [
        _read_json(spark, p) if not _is_parquet(p) else _read_parquet(spark, p) for p in inputs
    ]
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _missing(spark: SparkSession, path: str, exc: Exception) -> CorpusError:
    text = str(exc)
    if "PATH_NOT_FOUND" in text or "does not exist" in text:
        return CorpusError(path, None, "no such file")
    return CorpusError(path, None, f"cannot read: {text.splitlines()[0] if text else exc}")


def _bad_reason(corrupt: Column | None) -> Column:
    """Why a row is not a document, as a column (null for a good row)."""
    from pyspark.sql import functions as F

    reason = F.when(F.lit(False), F.lit(None))
    if corrupt is not None:
        reason = F.when(corrupt.isNotNull(), F.lit("not valid JSON, or not a JSON object"))
    meta = F.col("meta")
    return (
        reason.when(
            F.col("id").isNull() | (F.col("id") == ""), F.lit("'id' must be a non-empty string")
        )
        .when(F.col("text").isNull(), F.lit("'text' must be a string"))
        .when(
            meta.isNotNull() & ~F.ltrim(meta).startswith("{"),
            F.lit("'meta' must be an object when present"),
        )
    )


def _read_json(spark: SparkSession, path: str) -> DataFrame:
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    try:
        df = (
            spark.read.schema(_JSON_SCHEMA)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", _CORRUPT)
            .option("allowSingleQuotes", "false")  # JSON, as the local reader takes it
            .json(path)
        )
    except AnalysisException as exc:
        raise _missing(spark, path, exc) from None
    return df.select(
        "id",
        "text",
        "meta",
        F.col("_metadata.file_path").alias("file"),
        _bad_reason(F.col(_CORRUPT)).alias("bad"),
    )


def _read_parquet(spark: SparkSession, path: str) -> DataFrame:
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    try:
        df = spark.read.parquet(path)
    except AnalysisException as exc:
        raise _missing(spark, path, exc) from None
    if not {"id", "text"} <= set(df.columns):
        raise CorpusError(path, None, "a Parquet corpus needs the columns 'id' and 'text'")
    if "meta" not in df.columns:
        meta = F.lit(None).cast("string")
    elif isinstance(df.schema["meta"].dataType, StringType):
        meta = F.col("meta")
    else:
        meta = F.to_json(F.col("meta"))
    typed = df.select(
        F.col("id").cast("string").alias("id"),
        F.col("text").cast("string").alias("text"),
        meta.alias("meta"),
        F.col("_metadata.file_path").alias("file"),
    )
    return typed.withColumn("bad", _bad_reason(None))


def _line_of(spark: SparkSession, file: str) -> int | None:
    """The first line of a JSON Lines file that is not a document (an error path only)."""
    from pyspark.sql import functions as F

    lines = spark.read.text(file).rdd.zipWithIndex().map(lambda r: (r[0][0], r[1] + 1))
    parsed = lines.toDF(["value", "line"]).select(
        "line",
        F.from_json(
            "value",
            _JSON_SCHEMA,
            {
                "mode": "PERMISSIVE",
                "columnNameOfCorruptRecord": _CORRUPT,
                "allowSingleQuotes": "false",
            },
        ).alias("row"),
        F.trim("value").alias("trimmed"),
    )
    rows = parsed.where(F.col("trimmed") != "").select("line", "row.*")
    bad = rows.where(_bad_reason(F.col(_CORRUPT)).isNotNull())
    first = bad.agg(F.min("line")).first()
    return None if first is None or first[0] is None else int(first[0])


def check_rows(spark: SparkSession, docs: DataFrame) -> None:
    """CorpusError naming the file (and line, for JSON Lines) of the first row that is not a
    document; nothing when every row is one."""
    from pyspark.sql import functions as F

    bad = docs.where(F.col("bad").isNotNull()).select("file", "bad").limit(1).collect()
    if not bad:
        return
    file, reason = str(bad[0]["file"]), str(bad[0]["bad"])
    line = None if _is_parquet(file) else _line_of(spark, file)
    raise CorpusError(_shown(file), line, reason)


def _shown(uri: str) -> str:
    """A local file as the user would type it (``/tmp/a.jsonl``); any other by its URI."""
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix + "/"):
            return uri[len(prefix) :]
    return uri


def check_unique_ids(docs: DataFrame) -> None:
    """DuplicateIdError naming the repeated ids (the first ``_SHOWN_IDS`` in id order)."""
    from pyspark.sql import functions as F

    repeated = docs.groupBy("id").count().where(F.col("count") > 1).select("id")
    shown = [row["id"] for row in repeated.orderBy("id").limit(_SHOWN_IDS).collect()]
    if shown:
        raise DuplicateIdError(*shown)


class HadoopPath:
    """A path on any Hadoop filesystem (local, HDFS, S3A, GCS), through the JVM's FileSystem."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        jvm: Any = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._jvm = jvm
        self.path = path
        self._jpath = jvm.org.apache.hadoop.fs.Path(path)
        self._fs = self._jpath.getFileSystem(conf)

    def sibling(self, name: str) -> HadoopPath:
        """A path in the same directory."""
        parent = self._jpath.getParent()
        other = HadoopPath.__new__(HadoopPath)
        other._jvm, other._fs = self._jvm, self._fs
        other._jpath = self._jvm.org.apache.hadoop.fs.Path(parent, name)
        other.path = str(other._jpath.toString())
        return other

    @property
    def name(self) -> str:
        """The last component of the path."""
        return str(self._jpath.getName())

    def exists(self) -> bool:
        """Whether anything is at the path."""
        return bool(self._fs.exists(self._jpath))

    def delete(self) -> None:
        """Remove the path (recursively); nothing if absent."""
        self._fs.delete(self._jpath, True)

    def rename_to(self, target: HadoopPath) -> None:
        """Move this path to ``target``, replacing what is there."""
        target.delete()
        if not self._fs.rename(self._jpath, target._jpath):
            raise CorpusError(target.path, None, f"cannot move {self.path} there")

    def write_bytes(self, data: bytes) -> None:
        """Create (or overwrite) the file with ``data``."""
        stream = self._fs.create(self._jpath, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def size(self) -> int:
        """Bytes under the path (a directory's files summed)."""
        return int(self._fs.getContentSummary(self._jpath).getLength())
