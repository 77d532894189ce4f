"""The Spark engine's pure parts, without a JVM: the manifest and its counts, the stage clock,
the output rows' batch function and the Parquet schema's (driven by a stand-in for the two
DataFrame calls they make, ``select`` and ``mapInArrow``), the index opened and committed, the
output's format, the Parquet hint, the shuffle figures read from a stand-in status store, and
the errors a run gives before any JVM starts."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j.protocol import Py4JError

from neardup.app.spark import corpus, entry, index, job, kernels, metrics, submit
from neardup.core.engine import (
    CorpusError,
    DocIndex,
    IndexConflictError,
    IndexIdError,
    IndexMissingError,
    IndexParameterError,
    MinhashParams,
    ParameterError,
    RowWriter,
    band_digests,
    batch_signatures,
    commit_index,
    run_info,
    text_digests,
    write_part,
)

PARAMS = MinhashParams(num_perm=16, bands=4, threshold=0.5)


#: Arrow types of the DDL types the functions under test promise ``mapInArrow`` (a struct is
#: not checked).
DDL_TYPES = {"string": pa.string(), "binary": pa.binary(), "int": pa.int32(),
             "bigint": pa.int64(), "boolean": pa.bool_(), "double": pa.float64()}  # fmt: skip


def promised(schema: Any) -> list[tuple[str, pa.DataType | None]]:
    """(name, Arrow type or None for a struct) of a schema given to ``mapInArrow``: a DDL
    string or a pyspark ``StructType``."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return [(f.name, f.type) for f in to_arrow_schema(schema)]
    assert isinstance(schema, str), schema
    depth, fields, field = 0, [], ""
    for ch in schema + ",":
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            name, kind = field.split(maxsplit=1)
            fields.append((name, None if kind.startswith("struct<") else DDL_TYPES[kind]))
            field = ""
        else:
            field += ch
    return fields


class Frame:
    """What the functions under test ask of a DataFrame: its columns, ``select`` of names,
    ``mapInArrow`` (run at once over each partition's batches; every batch must have the
    promised columns' number and types, and is named as promised, as the JVM reads it),
    ``collect``, ``distinct`` and ``toArrow``."""

    def __init__(self, batches: list[pa.RecordBatch], promised: Any = None) -> None:
        self.parts = [batches]
        self.promised = promised

    @classmethod
    def split(cls, batches: list[pa.RecordBatch]) -> Frame:
        """A frame of one partition per batch."""
        frame = cls([])
        frame.parts = [[b] for b in batches]
        return frame

    @property
    def batches(self) -> list[pa.RecordBatch]:
        return [b for part in self.parts for b in part]

    @property
    def columns(self) -> list[str]:
        return list(self.batches[0].schema.names)

    def select(self, *names: str) -> Frame:
        frame = Frame([])
        frame.parts = [[b.select(list(names)) for b in part] for part in self.parts]
        return frame

    def mapInArrow(
        self, fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], schema: Any
    ) -> Frame:
        fields = promised(schema)
        frame = Frame([], schema)
        frame.parts = []
        for part in self.parts:
            out = []
            for batch in fn(iter(part)):
                assert len(batch.schema) == len(fields), (batch.schema, schema)
                for (_, kind), actual in zip(fields, batch.schema.types, strict=True):
                    assert kind is None or actual == kind, (batch.schema, schema)
                out.append(batch.rename_columns([name for name, _ in fields]))
            frame.parts.append(out)
        return frame

    def collect(self) -> list[dict[str, Any]]:
        return [row for b in self.batches for row in b.to_pylist()]

    def distinct(self) -> Frame:
        rows = {tuple(r.items()): r for r in self.collect()}
        return Frame([pa.RecordBatch.from_pylist(list(rows.values()), self.batches[0].schema)])

    def toArrow(self) -> pa.Table:
        return pa.Table.from_batches(self.batches)

    def names_promised(self) -> list[str]:
        """The top-level names of the schema given to ``mapInArrow``."""
        return [name for name, _ in promised(self.promised)]


def _spark() -> Any:
    """A session as ``_output_lines`` uses it: a broadcast's ``value`` is the value."""
    return SimpleNamespace(
        sparkContext=SimpleNamespace(broadcast=lambda v: SimpleNamespace(value=v))
    )


# --- The manifest, its counts and the clock ---


def test_spark_params_as_flags_and_the_manifest_as_json() -> None:
    params = job.SparkParams(minhash=PARAMS, keep_duplicates=True)
    version = {"tokenizer_version": PARAMS.tokenizer_version, "window_version": "words"}
    assert params.as_dict() == {
        **PARAMS.as_dict(), **version, "keep_duplicates": True, "keep": "smallest-id"
    }  # fmt: skip
    indexed = job.SparkParams(minhash=PARAMS, index="idx", index_mode="read")
    assert indexed.as_dict() == {
        **PARAMS.as_dict(), **version, "keep_duplicates": False, "keep": "smallest-id",
        "index": "idx", "index_mode": "read", "recrawled": "keep-both",
    }  # fmt: skip
    default = job.SparkParams()
    assert default.index is None and default.index_mode == "append"
    assert default.minhash == MinhashParams() and not default.keep_duplicates
    manifest = job.SparkManifest("spark", "4", "local[2]", {}, ["in"], [])
    body = manifest.as_json()
    assert "index" not in body
    assert body == {
        "engine": "spark", "spark_version": "4", "master": "local[2]", "parameters": {},
        "inputs": ["in"], "protected": [], "counts": {}, "clusters": 0, "component_rounds": 0,
        "shuffle_bytes": {}, "seconds": {}, "output": {}, "cluster_sizes": {}, "singletons": 0,
        "schema": {"id_field": "id", "id_prefix": False, "text_field": "text"},
    }  # fmt: skip
    manifest.index = {"url": "idx"}
    assert manifest.as_json()["index"] == {"url": "idx"}


def test_counts_per_stage() -> None:
    manifest = job.SparkManifest("spark", "4", "local", {}, [], [])
    job._counts(manifest, (3, 2), 10, 4, 7, keep_all=False)
    assert manifest.counts == {
        "read": 10, "exact_dropped": 3, "near_dropped": 2, "decontaminated": 1, "written": 4,
        "edges": 7,
    }  # fmt: skip
    job._counts(manifest, (3, 2), 10, 9, 7, keep_all=True)  # every row kept, tagged
    assert manifest.counts == {
        "read": 10, "exact_dropped": 0, "near_dropped": 0, "decontaminated": 1, "written": 9,
        "edges": 7,
    }  # fmt: skip
    job._counts(manifest, None, 5, 5, 0, keep_all=False)
    assert manifest.counts["exact_dropped"] == 0 and manifest.counts["decontaminated"] == 0


def test_what_spark_does_not_write_or_keep_is_refused_whole() -> None:
    """The flags the Spark engine refuses before any JVM starts, each message whole."""
    job.check_formats(".jsonl", True, "removed.jsonl.gz")  # JSON Lines: both taken
    job.check_formats(".parquet", False, None)
    with pytest.raises(ParameterError) as tags:
        job.check_formats(".parquet", True, None)
    assert str(tags.value) == (
        "--engine spark writes --keep-duplicates' neardup tags to JSON Lines only, not Parquet "
        "(see docs/spark.md)"
    )
    with pytest.raises(ParameterError) as gone:
        job.check_formats(".jsonl", False, "removed.parquet")
    assert str(gone.value) == (
        "--engine spark writes --removed to JSON Lines only (.jsonl, .jsonl.gz), not Parquet "
        "(see docs/spark.md)"
    )
    with pytest.raises(CorpusError, match="unknown output format"):
        job.check_formats(".jsonl", False, "removed.csv")
    for keep in ("smallest-id", "first", "longest"):
        job.check_keep(keep, None)
    job.check_keep("smallest-id", "idx")
    with pytest.raises(ParameterError) as policy:
        job.check_keep("max:score", None)
    assert str(policy.value) == (
        "--engine spark does not take --keep max:score: it keeps smallest-id, first or longest; "
        "run --engine local for max:FIELD (see docs/spark.md)"
    )
    with pytest.raises(ParameterError) as indexed:
        job.check_keep("first", "idx")
    assert str(indexed.value) == (
        "--engine spark takes --keep first without --index only; run --engine local for both "
        "(see docs/spark.md)"
    )


def test_the_clock_times_each_stage_in_its_own_job_group(monkeypatch: pytest.MonkeyPatch) -> None:
    groups: list[tuple[str, str]] = []
    spark = SimpleNamespace(
        sparkContext=SimpleNamespace(setJobGroup=lambda g, d: groups.append((g, d)))
    )
    ticks = iter([1.0, 2.23456, 2.5, 3.0])
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks))
    seconds: dict[str, float] = {}
    clock = job._Clock(spark, seconds, "signatures")
    assert re.fullmatch(r"neardup-[0-9a-f]{12}:", clock.run)
    assert groups == [(clock.run + "signatures", "neardup dedup: signatures")]
    clock.lap("signatures", "classes")
    clock.lap("classes")
    assert seconds == {"signatures": 1.235, "classes": 0.265}
    assert groups[1:] == [(clock.run + "classes", "neardup dedup: classes")]
    assert job._Clock(spark, {}, "x").run != clock.run


# --- The output rows (JSON Lines or Parquet text) and the Parquet schema ---


OUT = kernels.OUTPUT


def _ngram(n: int, tokenizer: str = "words", *, keep_all: bool = False) -> job.SparkParams:
    """The run's parameters with n-grams of ``n`` words (``_output_lines`` reads n, the
    tokenizer and ``--keep-duplicates`` from them)."""
    minhash = replace(PARAMS, ngram=n, tokenizer=tokenizer)
    return job.SparkParams(minhash=minhash, keep_duplicates=keep_all)


def _kept(columns: dict[str, list[Any]]) -> Frame:
    return Frame([pa.RecordBatch.from_pydict(columns)])


ROWS = [
    '{"id": "a", "text": "one two three", "x": 1.5}',
    '{"id": "b", "text": "four five six seven", "x": NaN, "y": Infinity}',
    '{"id": "c", "text": "eight nine ten", "meta": {"k": 1}}',
]


def test_output_lines_are_the_local_engines_rows_without_the_contaminated(tmp_path: Path) -> None:
    protected = tmp_path / "bench.txt"
    protected.write_text("five six\n", encoding="utf-8")
    kept = _kept({"row": ROWS, "root": ["a", "b", "a"], "pos": [0, 1, 2], "id": ["a", "b", "c"]})
    out = job._output_lines(_spark(), kept, [str(protected)], _ngram(2))
    assert out.names_promised() == ["pos", "value", "nulls", "dest"]
    [batch] = out.batches
    assert batch.schema.names == ["pos", "value", "nulls", "dest"]
    assert batch.schema.field("nulls").type == pa.int32()
    tagged = kernels.tagged_rows([ROWS[0], ROWS[2]], ["a", "a"])
    assert batch.to_pylist() == [
        {"pos": 0, "value": RowWriter.finite_dumps(tagged[0])[0], "nulls": 0, "dest": OUT},
        {"pos": 2, "value": RowWriter.finite_dumps(tagged[1])[0], "nulls": 0, "dest": OUT},
    ]
    # Without protected sets nothing is dropped; JSON Lines has null for NaN and infinities.
    every = job._output_lines(_spark(), kept, [], _ngram(2)).batches[0]
    assert every.column("pos").to_pylist() == [0, 1, 2]
    assert every.column("nulls").to_pylist() == [0, 2, 0]
    assert json.loads(every.column("value")[1].as_py())["y"] is None
    # A Parquet output keeps them (Python's json tokens) and counts none.
    kept_nan = job._output_lines(_spark(), kept, [], _ngram(2), finite=False).batches[0]
    assert kept_nan.column("nulls").to_pylist() == [0, 0, 0]
    assert '"y": Infinity' in kept_nan.column("value")[1].as_py()


def test_output_lines_tokenize_protected_sets_with_the_runs_tokenizer(tmp_path: Path) -> None:
    protected = tmp_path / "bench.txt"
    protected.write_text("東京都\n", encoding="utf-8")
    row = '{"id": "a", "text": "私は東京都に住む"}'
    kept = _kept({"row": [row], "root": ["a"], "pos": [0]})
    words = job._output_lines(_spark(), kept, [str(protected)], _ngram(1))
    assert len(words.batches[0]) == 1  # one "word" for the whitespace tokenizer: no match
    multi = job._output_lines(_spark(), kept, [str(protected)], _ngram(1, "multilingual"))
    assert len(multi.batches[0]) == 0


def test_output_lines_with_reasons_index_parts_and_survivors() -> None:
    kept = _kept(
        {
            "row": ROWS,
            "root": ["a", "a", "a"],
            "pos": [5, 6, 7],
            "reason": [None, "near", "exact"],
            "duplicate_of": [None, "a", "ix"],
            "estimate": [None, 0.5, 1.0],
            "id": ["a", "b", "c"],
            "index_part": [None, None, "p1"],
        }
    )
    out = job._output_lines(_spark(), kept, [], _ngram(2, keep_all=True), survivors=True)
    assert out.names_promised() == ["pos", "value", "nulls", "dest", "id", "survivor"]
    [batch] = out.batches
    assert batch.schema.names == ["pos", "value", "nulls", "dest", "id", "survivor"]
    assert batch.column("id").to_pylist() == ["a", "b", "c"]
    assert batch.column("survivor").to_pylist() == [True, False, False]
    rows = [json.loads(v) for v in batch.column("value").to_pylist()]
    assert "neardup" not in rows[0]
    assert rows[1]["neardup"] == kernels.reason_object("near", "a", 0.5, None, True)
    assert rows[2]["neardup"] == kernels.reason_object("exact", "ix", 1.0, "p1", True)
    # Without reasons every written row is a survivor; without parts, no index_part.
    plain = _kept({"row": ROWS[:1], "root": ["a"], "pos": [0], "id": ["a"]})
    one = job._output_lines(_spark(), plain, [], _ngram(2), survivors=True).batches[0]
    assert one.column("survivor").to_pylist() == [True]
    tagged = _kept({k: v[:2] for k, v in kept.batches[0].to_pydict().items() if k != "index_part"})
    two = job._output_lines(_spark(), tagged, [], _ngram(2, keep_all=True)).batches[0]
    assert json.loads(two.column("value")[1].as_py())["neardup"] == kernels.reason_object(
        "near", "a", 0.5
    )
    # An empty batch (as every kernel takes one): an empty batch of the promised types.
    empty = Frame([kept.batches[0].slice(0, 0)])
    for removing in (False, True):
        none = job._output_lines(
            _spark(), empty, [], _ngram(2), survivors=True, removing=removing
        ).batches
        assert [len(b) for b in none] == [0]


def _values(rows: list[dict[str, Any]], chunk: int | None = None) -> Frame:
    values = pa.array([json.dumps(r) for r in rows], pa.string())
    table = pa.table({"value": values, "pos": list(range(len(rows)))})
    return Frame(table.to_batches(max_chunksize=chunk) if chunk else table.to_batches())


def test_parquet_schema_is_the_local_writers_over_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"id": str(i), "text": "t", "n": None if i < 3 else i} for i in range(5)]
    expected = RowWriter.table(rows, None).schema
    assert job._parquet_schema(_values(rows), "out.parquet", None) == expected
    monkeypatch.setattr(job, "_SCHEMA_ROWS", 2)  # nulls only in the first chunks: unified
    got = job._parquet_schema(_values(rows, chunk=1), "out.parquet", None)
    assert got.field("n").type == pa.int64() and got.names == ["id", "text", "n"]
    hint = pa.schema([("n", pa.int8())])
    assert job._parquet_schema(_values(rows), "o", hint).field("n").type == pa.int8()
    empty = job._parquet_schema(
        Frame([pa.record_batch({"value": pa.array([], pa.string())})]), "o", None
    )
    assert empty == pa.schema([("id", pa.string()), ("text", pa.string())])


def test_parquet_schema_refuses_rows_of_no_schema() -> None:
    bad = [{"id": "a", "text": "t", "n": 1}, {"id": "b", "text": "t", "n": "x"}]
    with pytest.raises(CorpusError) as refused:
        job._parquet_schema(_values(bad), "out.parquet", None)
    assert str(refused.value).startswith("out.parquet: rows do not fit one Parquet schema: ")
    # Each chunk fits a schema of its own, the two do not unify.
    with pytest.raises(CorpusError, match="rows do not fit one Parquet schema"):
        job._parquet_schema(Frame(_values(bad, chunk=1).batches), "o", None)


def test_arrow_rows_are_the_rows_in_the_schemas_columns() -> None:
    rows = [{"id": "a", "text": "t", "n": 1}, {"id": "b", "text": "u", "n": None}]
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("n", pa.int16())])
    out = job._arrow_rows(_values(rows), schema)
    assert out.names_promised() == ["id", "text", "n"]
    table = pa.Table.from_batches(out.batches)
    assert table.schema == schema and table.to_pylist() == rows


# --- Inputs and outputs by name ---


def test_output_format_by_name() -> None:
    assert corpus.output_format("s3a://b/out.JSONL.GZ/") == ".jsonl.gz"
    assert corpus.output_format("out.jsonl") == ".jsonl"
    assert corpus.output_format("dir/out.parquet/") == ".parquet"
    with pytest.raises(CorpusError) as unknown:
        corpus.output_format("out.csv")
    assert str(unknown.value) == (
        "out.csv: unknown output format; the Spark engine writes .parquet, .jsonl, .jsonl.gz"
    )
    assert corpus._is_parquet("a/B.PARQUET/") and not corpus._is_parquet("a.parquet.jsonl")


def test_missing_inputs_and_shown_paths() -> None:
    gone = corpus._missing(None, "in.jsonl", Exception("[PATH_NOT_FOUND] Path does not exist"))
    assert (gone.path, gone.line, gone.reason) == ("in.jsonl", None, "no such file")
    also = corpus._missing(None, "x", Exception("file does not exist"))
    assert also.reason == "no such file"
    other = corpus._missing(None, "x", Exception("denied\nmore"))
    assert other.reason == "cannot read: denied"
    assert corpus._missing(None, "x", Exception("")).reason.startswith("cannot read: ")
    assert corpus._shown("file:///tmp/a.jsonl") == "/tmp/a.jsonl"
    assert corpus._shown("file:/tmp/a.jsonl") == "/tmp/a.jsonl"
    assert corpus._shown("s3a://b/file:/x") == "s3a://b/file:/x"
    assert corpus._shown("file:relative") == "file:relative"


def test_rows_are_dropped_when_not_asked_for() -> None:
    batch = pa.RecordBatch.from_pydict({"id": ["a"], "row": ["{}"], "n": [1]})
    out = corpus._without_rows(batch)
    assert out.schema == pa.schema([("id", pa.string()), ("row", pa.string()), ("n", pa.int64())])
    assert out.to_pylist() == [{"id": "a", "row": None, "n": 1}]


def test_parquet_hint_unifies_the_parquet_inputs(tmp_path: Path) -> None:
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(pa.table({"id": ["x"], "text": ["t"], "n": pa.array([1], pa.int16())}), a)
    meta = pa.array([{"k": 1}], pa.struct([("k", pa.int64())]))
    pq.write_table(pa.table({"id": ["y"], "text": ["u"], "meta": meta}), b)
    hint = corpus.parquet_hint(None, [str(a), "c.jsonl", str(b)])
    assert hint is not None
    assert hint.names == ["id", "text", "n", "meta"]
    assert hint.field("n").type == pa.int16()
    assert hint.field("meta").type.names == ["k", "minhash_cluster"]
    assert corpus.parquet_hint(None, ["c.jsonl"]) is None
    c = tmp_path / "c.parquet"  # 'n' a string here: the schemas do not unify, the first wins
    pq.write_table(pa.table({"id": ["z"], "text": ["v"], "n": ["s"]}), c)
    first = corpus.parquet_hint(None, [str(a), str(c)])
    assert first is not None and first.field("n").type == pa.int16()


# --- The index: opened and checked, its parts committed ---


def _index_with(url: str, ids: list[str], texts: list[str]) -> DocIndex:
    base = DocIndex.open(url, missing_ok=True)
    sigs = batch_signatures(texts, PARAMS)
    part = write_part(base, PARAMS, ids, text_digests(texts), sigs, run_info("local", "t", []))
    commit_index(base, PARAMS, [part])
    return DocIndex.open(url)


def test_open_index_checks_mode_params_and_files(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    with pytest.raises(IndexMissingError):
        index.open_index(url, "read", PARAMS)
    assert index.open_index(url, "append", PARAMS).version == 0
    _index_with(url, ["a", "b"], ["one two three four", "five six seven eight"])
    opened = index.open_index(url, "read", PARAMS)
    assert opened.version == 1 and opened.rows == 2
    with pytest.raises(IndexParameterError):
        index.open_index(url, "append", MinhashParams(num_perm=16, bands=8, threshold=0.5))
    # A listed file that is not Parquet (of the listed size): damaged, before any JVM starts.
    [path] = opened.file_urls()
    size = Path(path).stat().st_size
    Path(path).write_bytes(b"x" * size)
    with pytest.raises(Exception, match="idx"):
        index.open_index(url, "read", PARAMS)


def test_a_run_with_a_bad_index_fails_before_spark_starts(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    _index_with(url, ["a"], ["one two three four"])
    params = job.SparkParams(minhash=MinhashParams(num_perm=32, bands=8), index=url)
    with pytest.raises(IndexParameterError):
        entry.dedup_on_spark(["in.jsonl"], "out.jsonl", params=params, master="bogus")
    read = job.SparkParams(minhash=PARAMS, index=str(tmp_path / "none"), index_mode="read")
    with pytest.raises(IndexMissingError):
        entry.dedup_on_spark(["in.jsonl"], "out.jsonl", params=read, master="bogus")


def test_commit_part_files_rows_and_bytes(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    first = _index_with(url, ["a", "b", "c"], ["one two three", "four five six", "seven"])
    f = first.parts[0].files[0]
    assert index._rows_of(first, f.path) == 3
    assert index._bytes_of(first, f.path) == f.bytes == Path(first.file_urls()[0]).stat().st_size
    base = DocIndex.open(url)
    sigs = batch_signatures(["eight nine"], PARAMS)
    part = write_part(
        base, PARAMS, ["d"], text_digests(["eight nine"]), sigs, run_info("s", "v", [])
    )
    assert index.commit_part(base, PARAMS, part) == 2
    with pytest.raises(IndexConflictError):
        index.commit_part(base, PARAMS, part)  # version 2 is taken
    assert DocIndex.open(url).rows == 4
    assert re.fullmatch(r"\d+\.\d+.*|0\+unknown", index._version())


def test_index_summary_without_a_probe(tmp_path: Path) -> None:
    opened = _index_with(str(tmp_path / "idx"), ["a"], ["one two"])
    summary = index.index_summary(opened, "read", None)
    assert summary == {
        "url": opened.url, "mode": "read", "version_read": 1, "version_written": None,
        "part": None, "rows_added": 0, "indexed_rows": 1, "indexed_rows_matched": 0,
        "rows_matching_index": 0, "broadcast": None, "candidates": 0, "files": None,
        "files_read_for_signatures": None,
    }  # fmt: skip


def test_index_summary_says_what_the_probe_did(tmp_path: Path) -> None:
    """With a probe: the matched counts in the local engine's keys, and the probe's own figures
    (the DataFrames are not read)."""
    opened = _index_with(str(tmp_path / "idx"), ["a", "b"], ["one two", "three four"])
    probe = index.IndexProbe(
        exact=None, edges=None, signatures=None, broadcast=False, candidates=7, files=(3, 1),
        matched=(2, 5), persisted=[],
    )  # fmt: skip
    summary = index.index_summary(opened, "append", probe)
    assert summary == {
        "url": opened.url, "mode": "append", "version_read": 1, "version_written": None,
        "part": None, "rows_added": 0, "indexed_rows": 2, "indexed_rows_matched": 2,
        "rows_matching_index": 5, "broadcast": False, "candidates": 7, "files": 3,
        "files_read_for_signatures": 1,
    }  # fmt: skip


class _Sorted:
    """``taken.orderBy("iid").limit(n).collect()`` over a list of rows."""

    def __init__(self, rows: list[dict[str, str]]) -> None:
        self.rows = rows

    def orderBy(self, key: str) -> _Sorted:
        return _Sorted(sorted(self.rows, key=lambda r: r[key]))

    def limit(self, n: int) -> _Sorted:
        return _Sorted(self.rows[:n])

    def collect(self) -> list[dict[str, str]]:
        return self.rows

    def count(self) -> int:
        return len(self.rows)


def test_ids_already_indexed_are_named_first_in_id_order(tmp_path: Path) -> None:
    opened = _index_with(str(tmp_path / "idx"), ["a"], ["one two"])
    index._check_ids(opened, _Sorted([]))
    taken = [{"iid": f"n{i:02d}", "part": "p1"} for i in range(25, -1, -1)]
    with pytest.raises(IndexIdError) as found:
        index._check_ids(opened, _Sorted(taken))
    message = str(found.value)
    assert "n00" in message and "n19" in message and "n20" not in message


# --- Shuffle bytes, read from a stand-in for the driver's status store ---


def _option(value: str | None) -> Any:
    return SimpleNamespace(isDefined=lambda: value is not None, get=lambda: value)


def _status_spark(calls: list[Any]) -> Any:
    def stage(sid: int, written: int, read: int) -> Any:
        return SimpleNamespace(
            stageId=lambda: sid, shuffleWriteBytes=lambda: written, shuffleReadBytes=lambda: read
        )

    stages = [stage(1, 10, 0), stage(2, 0, 7), stage(2, 1, 1), stage(3, 100, 100),
              stage(4, 5, 6)]  # fmt: skip
    jobs = [
        SimpleNamespace(
            jobId=lambda: 2, jobGroup=lambda: _option("run:b"), stageIds=lambda: [2, 1]
        ),
        SimpleNamespace(jobId=lambda: 1, jobGroup=lambda: _option("run:a"), stageIds=lambda: [1]),
        SimpleNamespace(jobId=lambda: 3, jobGroup=lambda: _option("old:a"), stageIds=lambda: [3]),
        SimpleNamespace(jobId=lambda: 4, jobGroup=lambda: _option(None), stageIds=lambda: [4]),
    ]

    def stage_list(*args: Any) -> list[Any]:
        calls.append(("stageList", args[1:3]))
        return stages

    store = SimpleNamespace(stageList=stage_list, jobsList=lambda _: jobs)
    bus = SimpleNamespace(waitUntilEmpty=lambda ms: calls.append(("wait", ms)))
    context = SimpleNamespace(listenerBus=lambda: bus, statusStore=lambda: store)
    jvm = SimpleNamespace(
        scala=SimpleNamespace(jdk=SimpleNamespace(javaapi=SimpleNamespace(
            CollectionConverters=SimpleNamespace(asJava=list)))),
        java=SimpleNamespace(util=SimpleNamespace(ArrayList=list)),
        double="double",
    )  # fmt: skip
    gateway = SimpleNamespace(new_array=lambda kind, n: calls.append(("array", kind, n)) or [])
    return SimpleNamespace(
        sparkContext=SimpleNamespace(
            _jvm=jvm, _jsc=SimpleNamespace(sc=lambda: context), _gateway=gateway
        )
    )


def test_shuffle_bytes_per_stage_of_this_runs_groups() -> None:
    calls: list[Any] = []
    got = metrics.shuffle_bytes(_status_spark(calls), "run:")
    # stage 1 is in both groups (a reused shuffle): counted once, in the first job's group
    assert got == {"a": {"write": 10, "read": 0}, "b": {"write": 1, "read": 8}}
    assert list(got) == ["a", "b"]
    assert ("wait", metrics._DRAIN_MS) in calls
    assert ("stageList", (False, False)) in calls and ("array", "double", 0) in calls
    assert metrics.shuffle_bytes(_status_spark([]), "none:") == {}


def test_shuffle_bytes_are_none_when_the_store_cannot_be_read() -> None:
    def broken() -> Any:
        raise Py4JError("no such method")

    spark = SimpleNamespace(
        sparkContext=SimpleNamespace(_jvm=None, _jsc=SimpleNamespace(sc=broken))
    )
    assert metrics.shuffle_bytes(spark, "run:") == {}


# --- Errors before any JVM: the spark-submit entry and the master URL ---


def test_submit_runs_the_cli_with_the_spark_engine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["in.jsonl", "--output", "out.jsonl", "--spark-master", "bogus://x"]
    assert submit.main(args) == 2
    err = capsys.readouterr().err
    assert "'bogus://x' is not a Spark master URL" in err
    monkeypatch.setattr("sys.argv", ["submit.py", *args[:3], "--spark-master", "local[x]"])
    assert submit.main() == 2
    assert "'local[x]' is not a Spark master URL" in capsys.readouterr().err


# --- The session and the run around it, with stand-ins for Spark's builder and the job ---


class _Builder:
    """``SparkSession.builder`` as ``spark_session`` uses it; records what it was told."""

    def __init__(self, fail: str | None = None) -> None:
        self.told: dict[str, Any] = {}
        self.fail = fail
        self.session = SimpleNamespace(
            sparkContext=SimpleNamespace(setLogLevel=lambda level: self.told.update(log=level))
        )

    def appName(self, name: str) -> _Builder:
        self.told["app"] = name
        return self

    def master(self, master: str) -> _Builder:
        self.told["master"] = master
        return self

    def config(self, key: str, value: str) -> _Builder:
        self.told[key] = value
        return self

    def getOrCreate(self) -> Any:
        if self.fail is not None:
            raise RuntimeError(self.fail)
        return self.session


def _with_builder(monkeypatch: pytest.MonkeyPatch, builder: _Builder) -> None:
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "builder", builder)


def test_spark_session_configures_a_local_master(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    builder = _Builder()
    _with_builder(monkeypatch, builder)
    assert entry.spark_session("local[2]") is builder.session
    assert builder.told == {
        "app": "neardup dedup", "master": "local[2]", "spark.sql.shuffle.partitions": "8",
        "spark.ui.showConsoleProgress": "false", "log": "WARN",
        "spark.driver.extraJavaOptions": entry.quiet_logging(),  # no start-up banner
    }  # fmt: skip
    import os
    import sys

    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    quiet = _Builder()
    _with_builder(monkeypatch, quiet)
    monkeypatch.setenv("PYSPARK_PYTHON", "python9")
    entry.spark_session("local", quiet=True)
    assert quiet.told["spark.ui.showConsoleProgress"] == "false" and quiet.told["log"] == "ERROR"
    assert os.environ["PYSPARK_PYTHON"] == "python9"
    # No master named nor configured: Spark's default local[*] is local too (it ran with the
    # cluster default of 200 shuffle partitions, several times slower on a small run).
    for name in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    default = _Builder()
    _with_builder(monkeypatch, default)
    entry.spark_session(None)
    assert "master" not in default.told
    assert default.told["spark.sql.shuffle.partitions"] == "8"


def test_spark_session_leaves_a_cluster_to_its_configuration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master yarn pyspark-shell")  # configured
    builder = _Builder()
    _with_builder(monkeypatch, builder)
    entry.spark_session(None)
    off = {"spark.ui.showConsoleProgress": "false"}  # neardup's progress replaces Spark's bar
    off["spark.driver.extraJavaOptions"] = str(entry.quiet_logging())
    assert builder.told == {"app": "neardup dedup", "log": "WARN"} | off
    yarn = _Builder()
    _with_builder(monkeypatch, yarn)
    entry.spark_session("yarn")
    assert yarn.told == {"app": "neardup dedup", "master": "yarn", "log": "WARN"} | off
    import os

    assert "PYSPARK_PYTHON" not in os.environ
    assert not hasattr(builder.session.sparkContext, "pythonExec")  # no master known: left


def test_spark_session_runs_this_interpreter_where_the_configuration_chose_local(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No --spark-master: Spark's default (local[*]) would run ``python3`` from the PATH in
    the executors, not the environment neardup is installed in; a cluster keeps its own."""
    import sys

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    for chosen, expected in (("local[*]", sys.executable), ("yarn", "python3")):
        builder = _Builder()
        builder.session.sparkContext.master = chosen
        builder.session.sparkContext.pythonExec = "python3"
        _with_builder(monkeypatch, builder)
        entry.spark_session(None)
        assert builder.session.sparkContext.pythonExec == expected, chosen
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python")  # the user's choice stands
    builder = _Builder()
    builder.session.sparkContext.master, builder.session.sparkContext.pythonExec = "local", "x"
    _with_builder(monkeypatch, builder)
    entry.spark_session(None)
    assert builder.session.sparkContext.pythonExec == "x"


def test_spark_session_errors_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_builder(monkeypatch, _Builder(fail="\n  \nJAVA_HOME is not set\nat line 2"))
    with pytest.raises(entry.ParameterError) as refused:
        entry.spark_session("yarn")
    assert str(refused.value) == "cannot start Spark (--spark-master yarn): JAVA_HOME is not set"
    _with_builder(monkeypatch, _Builder(fail=""))
    with pytest.raises(entry.ParameterError, match=r"\(--spark-master None\): RuntimeError$"):
        entry.spark_session(None)
    with pytest.raises(entry.ParameterError, match="is not a Spark master URL"):
        entry.spark_session("local[]")
    monkeypatch.setitem(__import__("sys").modules, "pyspark.sql", None)  # not installed
    with pytest.raises(entry.ParameterError) as missing:
        entry.spark_session("local")
    assert str(missing.value).startswith(
        "the Spark engine needs the spark extra (pyspark) and Java 17: pip install -e '.[spark]'"
    )


class _Path:
    """``HadoopPath`` over a local file, as ``dedup_on_spark`` writes the manifest with it."""

    def __init__(self, spark: Any, path: str) -> None:
        assert callable(spark.stop)  # the run's session, through which Hadoop is reached
        self.path = path

    def write_bytes(self, data: bytes) -> None:
        Path(self.path).write_bytes(data)


def _fake_run(
    monkeypatch: pytest.MonkeyPatch, manifest: job.SparkManifest, conflict: bool = False
) -> list[str]:
    events: list[str] = []
    session = SimpleNamespace(stop=lambda: events.append("stopped"))
    monkeypatch.setattr(entry, "spark_session", lambda master, quiet: events.append(
        f"session {master} {quiet}") or session)  # fmt: skip
    monkeypatch.setattr(entry, "HadoopPath", _Path)

    def run(spark: Any, inputs: Any, output: str, **kw: Any) -> job.SparkManifest:
        assert spark is session and kw["params"] == job.SparkParams()
        events.append(f"run {list(inputs)} {output} {list(kw['protected'])}")
        if conflict:
            kw["on_conflict"](manifest)
            raise IndexConflictError("idx", 2, ["p"])
        return manifest

    monkeypatch.setattr(entry, "run_spark_dedup", run)
    return events


def _manifest(**extra: Any) -> job.SparkManifest:
    manifest = job.SparkManifest("spark", "4", "local[2]", {}, ["in.jsonl"], [])
    manifest.counts = {"read": 5, "exact_dropped": 1, "near_dropped": 2, "decontaminated": 0,
                       "written": 2, "edges": 3, **extra}  # fmt: skip
    return manifest


def test_dedup_on_spark_writes_the_manifest_and_says_what_it_did(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = _manifest(nan_as_null=2)
    events = _fake_run(monkeypatch, manifest)
    out = str(tmp_path / "out.jsonl")
    assert entry.dedup_on_spark(["in.jsonl"], out + "/", protected=["p.txt"]) is manifest
    assert events == ["session None False", f"run ['in.jsonl'] {out}/ ['p.txt']", "stopped"]
    written = (tmp_path / "out.jsonl.manifest.json").read_text(encoding="utf-8")
    assert written == json.dumps(manifest.as_json(), indent=2) + "\n"
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "neardup dedup: warning: 2 NaN or infinite values written as null (JSON has no number "
        "for them; a Parquet output keeps them)",
        f"neardup dedup (spark, local[2]): read 5, exact-dropped 1, near-dropped 2, "
        f"decontaminated 0, wrote 2 to {out}/ (manifest {out}.manifest.json)",
    ]
    other = str(tmp_path / "m.json")
    manifest.index = {"url": "idx", "mode": "append", "version_read": 0, "version_written": 1,
                      "part": "p1", "rows_added": 2, "indexed_rows": 0,
                      "indexed_rows_matched": 0, "rows_matching_index": 0}  # fmt: skip
    manifest.counts.pop("nan_as_null")
    entry.dedup_on_spark(["in.jsonl"], out, manifest_path=other, master="local[2]")
    assert events[-3] == "session local[2] False"
    assert json.loads(Path(other).read_text(encoding="utf-8"))["index"]["part"] == "p1"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[1].startswith("neardup dedup: index idx: read version 0")
    entry.dedup_on_spark(["in.jsonl"], out, quiet=True)
    assert events[-3] == "session None True" and capsys.readouterr().err == ""


def test_dedup_on_spark_stops_spark_and_keeps_a_conflicts_manifest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    manifest = _manifest()
    manifest.index = {"conflict": "lost"}
    events = _fake_run(monkeypatch, manifest, conflict=True)
    out = str(tmp_path / "out.jsonl")
    with pytest.raises(IndexConflictError):
        entry.dedup_on_spark(["in.jsonl"], out)
    assert events[-1] == "stopped"
    written = json.loads((tmp_path / "out.jsonl.manifest.json").read_text(encoding="utf-8"))
    assert written["index"] == {"conflict": "lost"}


# --- HadoopPath's part files, over a stand-in filesystem ---


class _JPath:
    def __init__(self, parent: Any, name: str | None = None) -> None:
        self.full = parent if name is None else f"{parent.full}/{name}"

    def getName(self) -> str:
        return self.full.rsplit("/", 1)[-1]

    def getParent(self) -> _JPath:
        return _JPath(self.full.rsplit("/", 1)[0])

    def toString(self) -> str:
        return self.full


class _Fs:
    def __init__(self, names: list[str], refuse: str | None = None) -> None:
        self.files = {f"/d/{n}" for n in names}
        self.refuse = refuse

    def listStatus(self, path: _JPath) -> list[Any]:
        inside = sorted(f for f in self.files if f.startswith(path.full + "/"))
        return [SimpleNamespace(getPath=lambda f=f: _JPath(f)) for f in inside]

    def rename(self, source: _JPath, target: _JPath) -> bool:
        moved = {f for f in self.files if f == source.full or f.startswith(source.full + "/")}
        if source.getName() == self.refuse or not moved:
            return False
        self.files = (self.files - moved) | {target.full + f[len(source.full) :] for f in moved}
        return True

    def delete(self, path: _JPath, recursive: bool) -> bool:
        gone = {f for f in self.files if f == path.full or f.startswith(path.full + "/")}
        if not recursive and gone - {path.full}:
            raise OSError(f"{path.full} is a non-empty directory")  # Hadoop's IOException
        self.files -= gone
        return bool(gone)

    def exists(self, path: _JPath) -> bool:
        return any(f == path.full or f.startswith(path.full + "/") for f in self.files)


def _hadoop(fs: _Fs, path: str = "/d") -> corpus.HadoopPath:
    out = corpus.HadoopPath.__new__(corpus.HadoopPath)
    jvm = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(hadoop=SimpleNamespace(
        fs=SimpleNamespace(Path=_JPath)))))  # fmt: skip
    out._jvm, out._fs, out._jpath, out.path = jvm, fs, _JPath(path), path
    return out


def test_part_files_are_renamed_and_tidied() -> None:
    names = ["part-00000-x.txt", "part-00001-x.txt.gz", ".part-00000-x.txt.crc", "_SUCCESS",
             "other.txt", "part-00002-x.csv"]  # fmt: skip
    fs = _Fs(names)
    folder = _hadoop(fs)
    folder.rename_parts(".txt", ".jsonl")
    assert {f.rsplit("/", 1)[1] for f in fs.files} == {
        "part-00000-x.jsonl", "part-00001-x.jsonl.gz", ".part-00000-x.txt.crc", "_SUCCESS",
        "other.txt", "part-00002-x.csv",
    }  # fmt: skip
    fs.getRawFileSystem = lambda: fs
    assert folder.tidy_parts(".jsonl") == ["part-00000-x.jsonl"]
    assert {f.rsplit("/", 1)[1] for f in fs.files} == {
        "part-00000-x.jsonl", "part-00001-x.jsonl.gz", "other.txt", "part-00002-x.csv"
    }  # fmt: skip
    assert folder.tidy_parts(".gz") == ["part-00001-x.jsonl.gz"]
    with pytest.raises(CorpusError, match=r"cannot rename part-00002-x\.csv"):
        _hadoop(_Fs(["part-00002-x.csv"], refuse="part-00002-x.csv")).rename_parts(".csv", ".c")


def test_a_sibling_replaces_its_target_when_moved() -> None:
    fs = _Fs(["out/part-0", "out.partial/part-1"])
    partial = _hadoop(fs, "/d/out.partial")
    target = partial.sibling("out")
    assert (target.path, target.name) == ("/d/out", "out")
    assert target.exists() and not _hadoop(fs, "/d/none").exists()
    partial.rename_to(target)
    assert fs.files == {"/d/out/part-1"}
    stuck = _hadoop(_Fs(["a/x"], refuse="a"), "/d/a")
    with pytest.raises(CorpusError, match="cannot move /d/a there"):
        stuck.rename_to(stuck.sibling("b"))


def test_the_probe_filter_is_the_new_batchs_ids_digests_and_band_digests() -> None:
    sigs = np.arange(2 * PARAMS.num_perm, dtype=np.uint32).reshape(2, PARAMS.num_perm)
    classes = Frame(
        [pa.RecordBatch.from_pydict({"id": ["a", "b", "c"], "digest": [b"x", b"y", b"x"]})]
    )
    live = Frame(
        [pa.RecordBatch.from_arrays([pa.array(["a", "b"]), kernels.binary_rows(sigs)],
                                    names=["cid", "sig"])]
    )  # fmt: skip
    probe = index._filter(classes, live, PARAMS)
    assert probe.ids == ["a", "b", "c"] and probe.digests == [b"x", b"y"]
    digests = np.sort(band_digests(sigs, PARAMS.bands), axis=0)
    assert [k.tolist() for k in probe.keys] == digests.T.tolist()
    keys = Frame(live.mapInArrow(lambda b: b, "cid string, sig binary").batches)
    [out] = index._band_keys(keys, PARAMS).batches
    assert out.to_pylist() == kernels.band_key_batch(live.batches[0], PARAMS).to_pylist()
    nobody = Frame([live.batches[0].slice(0, 0)])
    assert index._filter(classes, nobody, PARAMS).keys == []


def test_inputs_missing_by_sparks_error_class_and_other_errors_by_their_first_line() -> None:
    gone = corpus._missing(None, "s3a://b/in", Exception("[PATH_NOT_FOUND] Path: s3a://b/in."))
    assert (gone.path, gone.reason) == ("s3a://b/in", "no such file")
    other = corpus._missing(None, "s3a://b/in", Exception("[UNABLE] Access Denied\nat ..."))
    assert (other.path, other.line, other.reason) == (
        "s3a://b/in",
        None,
        "cannot read: [UNABLE] Access Denied",
    )
    with pytest.raises(CorpusError, match="unknown output format"):
        corpus.output_format("out.jsonlX")  # only slashes are stripped from the end


class _Stages(list):
    """The java.util.ArrayList the stand-in store is given."""


def _store_spark(jobs: list[tuple[int, str | None, list[int]]], calls: list[Any]) -> Any:
    """A status store of stages (id, write, read) and jobs (id, group, stage ids); a group's
    ``get`` raises when it is not defined (Scala's ``None.get``)."""
    stages = [(1, 10, 0), (2, 3, 7), (2, 1, 1), (3, 100, 100), (5, 40, 2)]

    def option(value: str | None) -> Any:
        def get() -> str:
            if value is None:
                raise LookupError("None.get")
            return value

        return SimpleNamespace(isDefined=lambda: value is not None, get=get)

    def stage_list(*args: Any) -> list[Any]:
        calls.append(args)
        return [SimpleNamespace(stageId=lambda s=s: s[0], shuffleWriteBytes=lambda s=s: s[1],
                                shuffleReadBytes=lambda s=s: s[2]) for s in stages]  # fmt: skip

    quantiles = object()
    store = SimpleNamespace(
        stageList=stage_list,
        jobsList=lambda statuses: [
            SimpleNamespace(jobId=lambda j=j: j[0], jobGroup=lambda j=j: option(j[1]),
                            stageIds=lambda j=j: j[2]) for j in jobs
        ] if statuses is None else [],
    )  # fmt: skip
    context = SimpleNamespace(
        listenerBus=lambda: SimpleNamespace(waitUntilEmpty=lambda ms: None),
        statusStore=lambda: store,
    )
    jvm = SimpleNamespace(
        scala=SimpleNamespace(jdk=SimpleNamespace(javaapi=SimpleNamespace(
            CollectionConverters=SimpleNamespace(asJava=list)))),
        java=SimpleNamespace(util=SimpleNamespace(ArrayList=_Stages)),
        double="double",
    )  # fmt: skip
    gateway = SimpleNamespace(
        new_array=lambda kind, n: quantiles if (kind, n) == ("double", 0) else None
    )
    calls.append(quantiles)
    return SimpleNamespace(
        sparkContext=SimpleNamespace(
            _jvm=jvm, _jsc=SimpleNamespace(sc=lambda: context), _gateway=gateway
        )
    )


def test_shuffle_bytes_sum_attempts_skip_other_groups_and_count_a_stage_once() -> None:
    calls: list[Any] = []
    jobs = [(4, "run:b", [1, 2, 4]), (1, "run:a", [1]), (2, "old:a", [3]), (3, None, [3]),
            (5, "run:c", [5])]  # fmt: skip
    got = metrics.shuffle_bytes(_store_spark(jobs, calls), "run:")
    # stage 2's two attempts summed; stage 1 counted in job 1's group only; stage 4 is gone
    # from the store (no figures); jobs of other groups, or none, skipped wherever they are
    assert got == {"a": {"write": 10, "read": 0}, "b": {"write": 4, "read": 8},
                   "c": {"write": 40, "read": 2}}  # fmt: skip
    quantiles, args = calls
    assert len(args) == 5 and args[1:4] == (False, False, quantiles)
    assert type(args[0]) is _Stages and type(args[4]) is _Stages


def test_parquet_schema_over_partitions_widens_types_or_says_why_it_cannot() -> None:
    ints, floats = [{"id": "a", "text": "t", "n": 1}], [{"id": "b", "text": "t", "n": 1.5}]
    words = [{"id": "c", "text": "t", "n": "x"}]
    parts = Frame.split(_values(ints).batches + _values(floats).batches)
    assert job._parquet_schema(parts, "o", None).field("n").type == pa.float64()  # permissive
    [a, b] = (RowWriter.table(r, None).schema for r in (ints, words))
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)) as arrow:
        pa.unify_schemas([a, b], promote_options="permissive")
    parts = Frame.split(_values(ints).batches + _values(words).batches)
    with pytest.raises(CorpusError) as refused:
        job._parquet_schema(parts, "out.parquet", None)
    assert str(refused.value) == f"out.parquet: rows do not fit one Parquet schema: {arrow.value}"
    assert (refused.value.path, refused.value.line) == ("out.parquet", None)


def test_parquet_schema_says_which_rows_fit_no_schema() -> None:
    bad = [{"id": "a", "text": "t", "n": 1}, {"id": "b", "text": "t", "n": "x"}]
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)) as arrow:
        RowWriter.table(bad, None)
    with pytest.raises(CorpusError) as refused:
        job._parquet_schema(_values(bad), "out.parquet", None)
    assert str(refused.value) == f"out.parquet: rows do not fit one Parquet schema: {arrow.value}"


def test_parquet_hint_widens_types_and_asks_spark_where_fsspec_cannot_read(tmp_path: Path) -> None:
    from pyspark.errors import AnalysisException
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(pa.table({"id": ["x"], "text": ["t"], "n": pa.array([1], pa.int16())}), a)
    pq.write_table(pa.table({"id": ["y"], "text": ["u"], "n": pa.array([1], pa.int32())}), b)
    hint = corpus.parquet_hint(None, [str(a), str(b)])
    assert hint is not None and hint.field("n").type == pa.int32()  # permissive: widened
    assert not corpus._is_parquet("a.parquetX")
    asked: list[str] = []

    def parquet(path: str) -> Any:
        asked.append(path)
        if "gone" in path:
            raise AnalysisException("[PATH_NOT_FOUND] Path does not exist: " + path)
        fields = [StructField("id", StringType()), StructField("n", LongType())]
        return SimpleNamespace(schema=StructType(fields))

    spark = SimpleNamespace(read=SimpleNamespace(parquet=parquet))
    remote = "nowhere-fs://bucket/c.parquet"  # no fsspec filesystem: Spark's view of it
    hint = corpus.parquet_hint(spark, [remote])
    assert asked == [remote] and hint == pa.schema([("id", pa.string()), ("n", pa.int64())])
    with pytest.raises(CorpusError) as gone:
        corpus.parquet_hint(spark, ["nowhere-fs://bucket/gone.parquet"])
    assert (gone.value.path, gone.value.reason) == (
        "nowhere-fs://bucket/gone.parquet",
        "no such file",
    )


def test_ids_already_indexed_are_the_first_20_with_their_parts(tmp_path: Path) -> None:
    opened = _index_with(str(tmp_path / "idx"), ["a"], ["one two"])
    taken = [{"iid": f"n{i:02d}", "part": f"p{i % 3}"} for i in range(25, -1, -1)]
    with pytest.raises(IndexIdError) as found:
        index._check_ids(opened, _Sorted(taken))
    assert found.value.url == opened.url
    assert found.value.found == {f"n{i:02d}": f"p{i % 3}" for i in range(20)}
    assert "'n19' (part p1) and 6 more already in the index" in str(found.value)


def test_dedup_on_spark_starts_an_append_runs_new_index_and_names_manifests_by_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    class Started(Exception):
        pass

    def session(master: str | None, quiet: bool) -> Any:
        raise Started

    monkeypatch.setattr(entry, "spark_session", session)
    params = job.SparkParams(minhash=PARAMS, index=str(tmp_path / "new-index"))
    with pytest.raises(Started):  # nothing committed yet: an append run starts one
        entry.dedup_on_spark(["in.jsonl"], "out.jsonl", params=params)
    manifest = _manifest()
    _fake_run(monkeypatch, manifest)
    entry.dedup_on_spark(["in.jsonl"], str(tmp_path / "runX.jsonl.gzX"), quiet=True)
    assert (tmp_path / "runX.jsonl.gzX.manifest.json").exists()


def test_a_standalone_master_is_given_a_few_seconds_to_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[tuple[Any, ...]] = []

    def connect(address: tuple[str, int], timeout: float | None = None) -> Any:
        asked.append((address, timeout))
        raise TimeoutError("timed out")

    monkeypatch.setattr(entry.socket, "create_connection", connect)
    with pytest.raises(entry.ParameterError, match=r"\(h:7077: timed out; g:1: timed out\)"):
        entry.check_master("spark://h:7077,g:1")
    assert asked == [(("h", 7077), 5.0), (("g", 1), 5.0)]


def test_a_part_committed_to_a_new_index_locks_the_runs_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import metadata

    url = str(tmp_path / "idx")
    base = DocIndex.open(url, missing_ok=True)
    sigs = batch_signatures(["one two"], PARAMS)
    part = write_part(base, PARAMS, ["a"], text_digests(["one two"]), sigs, run_info("s", "v", []))
    assert index.commit_part(base, PARAMS, part) == 1
    with pytest.raises(IndexParameterError):
        DocIndex.open(url).check_params(MinhashParams(num_perm=16, bands=8, threshold=0.5))
    DocIndex.open(url).check_params(PARAMS)
    assert index._version() == metadata.version("neardup")

    def unknown(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", unknown)
    assert index._version() == "0+unknown"


def test_part_files_errors_name_the_directory_and_checksums_go_without_a_raw_filesystem() -> None:
    fs = _Fs(["part-00000-a.txt.txt", "_SUCCESS", ".part-00000-a.txt.txt.crc"])
    folder = _hadoop(fs)
    folder.rename_parts(".txt", ".jsonl")  # the last occurrence is the ending
    assert "/d/part-00000-a.txt.jsonl" in fs.files

    def no_raw() -> Any:
        raise Py4JError("no raw filesystem")

    fs.getRawFileSystem = no_raw
    assert folder.tidy_parts(".jsonl") == ["part-00000-a.txt.jsonl"]
    assert fs.files == {"/d/part-00000-a.txt.jsonl"}
    with pytest.raises(CorpusError) as stuck:
        _hadoop(_Fs(["part-1.csv"], refuse="part-1.csv")).rename_parts(".csv", ".c")
    assert stuck.value.path == "/d"
    blocked = _hadoop(_Fs(["a/x"], refuse="a"), "/d/a")
    with pytest.raises(CorpusError) as moved:
        blocked.rename_to(blocked.sibling("b"))
    assert moved.value.path == "/d/b"
