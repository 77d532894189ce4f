"""Corpus files in and out of Spark: inputs read with Spark's own readers and checked, the
survivors written as a directory of part files, and files on any Hadoop filesystem. (Named
``corpus``, not ``io``: ``spark-submit app/spark/submit.py`` puts this folder first on
``sys.path``, where an ``io.py`` would shadow the standard library's.)

Inputs are local paths, directories, globs or Hadoop URIs (``s3a://``, ``hdfs://``, ``gs://``).
A name ending in ``.parquet`` (a file, a directory of parts, or a glob such as ``*.parquet``) is
read as Parquet; anything else as JSON Lines (``.jsonl``, ``.jsonl.gz``: Spark's text reader
decompresses by extension). Either way Spark's readers skip the names Hadoop hides (``_*``,
``.*``: ``_SUCCESS``, ``.crc`` files), so a Spark output directory is an input. Each row is
checked and parsed by the local reader's own code, and kept whole as JSON text (every field,
in order), with its place in the local engine's reading order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from neardup.app.spark import kernels
from neardup.core.engine import (
    CLUSTER_KEY,
    CorpusError,
    DuplicateIdError,
    RowWriter,
    Schema,
    expand_inputs,
    parquet_schema,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "OUTPUT_FORMATS",
    "HadoopPath",
    "check_rows",
    "check_unique_ids",
    "label_root",
    "output_format",
    "read_corpus",
]

#: Output names the Spark engine writes (a directory of part files in that format).
OUTPUT_FORMATS = (".parquet", ".jsonl", ".jsonl.gz")
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


def dry_format(output: str, dry_run: bool) -> str:
    """``output_format``, but JSON Lines for a dry run's ``-`` (no ``--output``: nothing is
    written, the local engine's standard output is JSON Lines)."""
    return ".jsonl" if dry_run and output == "-" else output_format(output)


def _is_parquet(path: str) -> bool:
    return path.rstrip("/").lower().endswith(".parquet")


#: The columns ``read_corpus`` gives (``pos`` orders the rows as the local engine reads them).
_DOCUMENTS = (
    "id string, text string, bad string, file string, "
    "pos struct<input: int, file: string, start: bigint, n: bigint>, row string"
)


def read_corpus(
    spark: SparkSession,
    inputs: Sequence[str],
    *,
    rows: bool = False,
    reserved: str | None = None,
    schema: Schema | None = None,
) -> DataFrame:
    """All inputs as one DataFrame (id, text, bad, file, pos, row): ``bad`` says why a row is
    not a document (None for a good one; its id and text are then null), ``pos`` is the row's
    place in the local engine's reading order (input, file, then line or row), and with
    ``rows`` ``row`` is the whole row as JSON text (else null). ``reserved`` is a field no row
    may have; ``schema`` says where the id and text are (and ``--id-prefix``). Nothing is read
    until an action runs."""
    schema = schema or Schema()
    parts = [
        (_read_parquet if _is_parquet(p) else _read_json)(
            spark, p, i, rows, reserved, schema, label_root(spark, p) if schema.id_prefix else None
        )
        for i, p in enumerate(inputs)
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


def _position(index: int, start: Column, n: Column) -> Column:
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(index).alias("input"),
        F.col("_metadata.file_path").alias("file"),
        start.cast("bigint").alias("start"),
        n.cast("bigint").alias("n"),
    )


def label_root(spark: SparkSession, path: str) -> str | None:
    """What the ``--id-prefix`` labels of an input's files are relative to, as the local
    engine's ``expand_inputs`` has it (``kernels.file_label``): a directory itself, a glob's
    part before its first wildcard (as unquoted paths, the form ``file_label`` compares), None
    for a file named on its own (its label is its base name)."""
    from urllib.parse import unquote, urlsplit

    magic = next((i for i, part in enumerate(path.split("/")) if set(part) & set("*?[")), None)
    if magic is None and not HadoopPath(spark, path).is_dir():
        return None
    root = path if magic is None else "/".join(path.split("/")[:magic]) or "."
    return unquote(urlsplit(HadoopPath(spark, root).qualified()).path).rstrip("/") or "/"


def _read_json(
    spark: SparkSession,
    path: str,
    index: int,
    rows: bool,
    reserved: str | None,
    schema: Schema,
    root: str | None,
) -> DataFrame:
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    try:
        df = spark.read.text(path)
    except AnalysisException as exc:
        raise _missing(spark, path, exc) from None

    def documents(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = kernels.line_documents(batch, reserved, schema, root)
            yield out if rows else _without_rows(out)

    # Within a file, rows keep their order: a split's rows are one partition's, in order.
    pos = _position(index, F.col("_metadata.file_block_start"), F.monotonically_increasing_id())
    return df.select(
        "value", F.col("_metadata.file_path").alias("file"), pos.alias("pos")
    ).mapInArrow(documents, _DOCUMENTS)


def _without_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    import pyarrow as pa

    column = batch.schema.get_field_index("row")
    return batch.set_column(column, "row", pa.nulls(len(batch), pa.string()))


def _read_parquet(
    spark: SparkSession,
    path: str,
    index: int,
    rows: bool,
    reserved: str | None,
    schema: Schema,
    root: str | None,
) -> DataFrame:
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    try:
        df = spark.read.parquet(path)
    except AnalysisException as exc:
        raise _missing(spark, path, exc) from None
    columns = list(df.columns)
    problem = schema.column_problem(columns)
    if problem is not None:
        raise CorpusError(path, None, problem)

    def documents(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = kernels.parquet_documents(batch, columns, reserved, schema, root)
            yield out if rows else _without_rows(out)

    pos = _position(index, F.lit(0), F.col("_metadata.row_index"))
    internal = [F.col("_metadata.file_path").alias("file"), pos.alias("pos")]
    return df.select(*columns, *internal).mapInArrow(documents, _DOCUMENTS)


def parquet_hint(spark: SparkSession, inputs: Sequence[str]) -> pa.Schema | None:
    """The Arrow types a Parquet output casts its columns back to, as the local engine's: the
    Parquet inputs' columns, unified, ``meta`` with its ``minhash_cluster``; None without
    Parquet inputs. Each input's schema is its files' (read by the driver, as the local engine
    reads it) where fsspec reaches them, else as Spark reads it (``s3a://``, ``hdfs://``: a
    column of nulls only is then an int32 column)."""
    import pyarrow as pa
    from pyspark.errors import AnalysisException
    from pyspark.sql.pandas.types import to_arrow_schema

    schemas = []
    for path in inputs:
        if not _is_parquet(path):
            continue
        try:
            schemas.append(parquet_schema(expand_inputs([path])))
            continue
        except (CorpusError, OSError, ImportError, ValueError):
            pass  # not a filesystem fsspec knows here: Spark's view of the columns
        try:
            schemas.append(to_arrow_schema(spark.read.parquet(path).schema))
        except AnalysisException as exc:
            raise _missing(spark, path, exc) from None
    if not schemas:
        return None
    try:
        base = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        base = schemas[0]
    hint: pa.Schema = RowWriter.hint(base, CLUSTER_KEY)
    return hint


def _line_of(
    spark: SparkSession, file: str, reserved: str | None, schema: Schema | None
) -> int | None:
    """The first line of a JSON Lines file that is not a document, or not UTF-8 (an error path
    only; UTF-8 is checked by Spark, before its rows become Python strings)."""
    from pyspark.sql import functions as F

    text = spark.read.text(file)
    lines = text.select(F.is_valid_utf8("value").alias("ok"), "value").rdd.zipWithIndex()
    shape = schema or Schema()
    bad = lines.filter(
        lambda r: not r[0][0] or kernels.line_problem(r[0][1], reserved, shape) is not None
    )
    first = bad.map(lambda r: r[1] + 1).take(1)  # zipWithIndex keeps the file's order
    return int(first[0]) if first else None


def check_rows(
    spark: SparkSession,
    docs: DataFrame,
    reserved: str | None = None,
    schema: Schema | None = None,
) -> None:
    """CorpusError naming the file (and line, for JSON Lines) of the first row that is not a
    document; nothing when every row is one."""
    from pyspark.sql import functions as F

    bad = docs.where(F.col("bad").isNotNull()).select("file", "bad").limit(1).collect()
    if not bad:
        return
    file, reason = str(bad[0]["file"]), str(bad[0]["bad"])
    line = None if _is_parquet(file) else _line_of(spark, file, reserved, schema)
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

    def is_dir(self) -> bool:
        """Whether the path is a directory."""
        return bool(self._fs.exists(self._jpath)) and bool(
            self._fs.getFileStatus(self._jpath).isDirectory()
        )

    def qualified(self) -> str:
        """The path as a full URI (``file:///d/a%20b``)."""
        return str(self._fs.makeQualified(self._jpath).toUri().toString())

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

    def rename_parts(self, old: str, new: str) -> None:
        """Rename this directory's part files (and their checksums) from ``part-*{old}[.*]`` to
        ``part-*{new}[.*]``."""
        for status in self._fs.listStatus(self._jpath):
            source = status.getPath()
            name = str(source.getName())
            if name.startswith("part-") and old in name:
                head, _, tail = name.rpartition(old)
                target = self._jvm.org.apache.hadoop.fs.Path(self._jpath, head + new + tail)
                if not self._fs.rename(source, target):
                    raise CorpusError(self.path, None, f"cannot rename {name}")

    def tidy_parts(self, ending: str) -> list[str]:
        """Remove what Spark writes beside a directory's part files (``_SUCCESS``, ``.crc``
        checksums) and return the part files' names ending in ``ending``, sorted."""
        from py4j.protocol import Py4JError

        try:  # a checksummed filesystem (file:) lists its .crc files only through the raw one
            raw = self._fs.getRawFileSystem()
        except Py4JError:
            raw = self._fs
        names = []
        for status in raw.listStatus(self._jpath):
            name = str(status.getPath().getName())
            if name.startswith("part-") and name.endswith(ending):
                names.append(name)
            elif name == "_SUCCESS" or name.endswith(".crc"):
                raw.delete(status.getPath(), False)
        return sorted(names)

    def size(self) -> int:
        """Bytes under the path (a directory's files summed)."""
        return int(self._fs.getContentSummary(self._jpath).getLength())
