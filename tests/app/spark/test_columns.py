"""Every column of every row, its type and its place: the Spark engine's output is the local
engine's output on the same input (JSON Lines byte for byte, in the same order; Parquet as an
equal Arrow table, schema included), whatever extra fields the rows carry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.app.spark.job import SparkParams, run_spark_dedup
from neardup.core.engine import CorpusError
from tests.app.spark.conftest import part_lines, run_local

#: A text of 200 distinct words; its near copy differs in the last word (Jaccard ~0.95).
_WORDS = [f"wort{i}" for i in range(200)]
BASE = " ".join(_WORDS)
NEAR = " ".join([*_WORDS[:-1], "änders"])
OTHER = " ".join(f"anders{i}" for i in range(120))
THIRD = "naïve café ünïcode text, " * 20


def _rows(parquet_safe: bool) -> list[dict[str, Any]]:
    """Rows with extra fields of many types, in varied key orders (``meta`` first, last, in the
    middle, null, absent), an exact copy and a near copy. ``parquet_safe``: every field of one
    Arrow type across rows (ints within 64 bits)."""
    big = 2**63 - 1 if parquet_safe else 2**70
    return [
        {"id": "k-1", "url": "https://ex.ample/ü?q=1", "text": BASE, "quality": 0.25,
         "views": big, "low": -(2**63), "ok": True, "none": None, "tags": ["x", "ÿ", ""],
         "info": {"lang": "de", "n": [1.5, 2.5, None]}, "meta": {"src": "web", "rank": 3}},
        {"meta": {"src": "forum", "rank": 1}, "id": "k-0", "text": BASE, "quality": 1e-300,
         "views": 0, "low": 7, "ok": False, "none": None, "tags": [], "url": "u",
         "info": {"lang": "en", "n": []}},
        {"id": "k-2", "text": NEAR, "quality": -0.0, "views": 12, "low": 0, "ok": None,
         "none": None, "tags": None, "url": "\u2028 \\ \"q\"", "info": None, "meta": None},
        {"id": "k-3", "text": OTHER, "quality": 3.0, "views": 5, "low": 1, "ok": True,
         "none": None, "tags": ["a"], "url": "中文", "info": {"lang": "zh", "n": [0.5]}},
        {"id": "k-4", "quality": 1.5, "text": THIRD, "views": 9, "low": 2, "ok": False,
         "none": None, "tags": ["é"], "url": "", "info": {"lang": "fr", "n": [1.0]},
         "meta": {"src": "σ", "rank": 2}},
    ]  # fmt: skip


#: Rows after the others, ids descending (a shuffle's order, or an id order, is not theirs).
FILLERS = [
    {"id": f"f-{i:02d}", "text": " ".join(f"filler{i}w{j}" for j in range(30)),
     "quality": i / 3, "views": i}
    for i in reversed(range(16))
]  # fmt: skip


def _write_inputs(folder: Path, rows: list[dict[str, Any]], fillers: bool = True) -> list[str]:
    """Two JSON Lines files, given in reverse name order (input order is the arguments'), one
    with non-ASCII characters unescaped and a blank line, the other as json.dumps writes (with
    ``fillers`` last)."""
    folder.mkdir(parents=True, exist_ok=True)
    first, second = folder / "b.jsonl", folder / "a.jsonl"
    first.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:3]) + "\n",
        encoding="utf-8",
    )
    rest = rows[3:] + (FILLERS if fillers else [])
    second.write_text("".join(json.dumps(r) + "\n" for r in rest), encoding="utf-8")
    return [str(first), str(second)]


@pytest.mark.parametrize(("keep", "name"), [(False, "out.jsonl"), (True, "out.jsonl.gz")])
def test_spark_json_lines_keep_every_field_byte_for_byte_in_order(
    spark: Any, tmp_path: Path, keep: bool, name: str
) -> None:
    inputs = _write_inputs(tmp_path / "in", _rows(parquet_safe=False))
    out = tmp_path / name
    params = SparkParams(keep_duplicates=keep)
    manifest = run_spark_dedup(spark, inputs, str(out), params=params)
    local = run_local(inputs, tmp_path / "local.jsonl", params={"keep_duplicates": keep})
    expected = local.read_text(encoding="utf-8").splitlines()
    got = part_lines(out, ordered=True)
    assert got == expected
    rows = [json.loads(line) for line in got]
    fillers = [f["id"] for f in FILLERS]
    assert [r["id"] for r in rows] == (
        ["k-1", "k-0", "k-2", "k-3", "k-4", *fillers] if keep else ["k-0", "k-3", "k-4", *fillers]
    )
    first = rows[0]
    assert first["views"] == (2**70 if keep else 0) and "url" in first and "quality" in first
    last = rows[-len(fillers) - 1]
    assert list(last) == ["id", "quality", "text", "views", "low", "ok", "none", "tags", "url",
                          "info", "meta"]  # fmt: skip
    assert manifest.counts["written"] == len(expected)
    assert set(manifest.shuffle_bytes) == set(manifest.seconds)
    assert all(v["write"] > 0 and v["read"] > 0 for v in manifest.shuffle_bytes.values())


def _assert_same_table(spark_dir: Path, local_file: Path) -> pa.Table:
    got, expected = pq.read_table(spark_dir), pq.read_table(local_file)
    # Spark adds its own schema metadata to the file; the columns and types are compared.
    assert got.schema.equals(expected.schema), f"{got.schema}\n!=\n{expected.schema}"
    assert got.equals(expected)  # rows in the same order
    return got


def test_spark_parquet_output_is_the_local_table(spark: Any, tmp_path: Path) -> None:
    inputs = _write_inputs(tmp_path / "in", _rows(parquet_safe=True))
    out = tmp_path / "out.parquet"
    run_spark_dedup(spark, inputs, str(out))
    got = _assert_same_table(out, run_local(inputs, tmp_path / "local.parquet"))
    assert got.column_names[:4] == ["meta", "id", "text", "quality"]
    assert got.schema.field("views").type == pa.int64()
    assert pa.types.is_struct(got.schema.field("info").type)
    assert pa.types.is_list(got.schema.field("tags").type)
    # The Spark output directory (_SUCCESS, .crc files) is an input to both engines.
    again = tmp_path / "again.jsonl"
    run_spark_dedup(spark, [str(out)], str(again))
    expected = run_local([str(out)], tmp_path / "again-local.jsonl").read_text(encoding="utf-8")
    assert part_lines(again, ordered=True) == expected.splitlines()
    assert len(expected.splitlines()) == got.num_rows


def test_rows_no_parquet_schema_fits_are_the_local_error(spark: Any, tmp_path: Path) -> None:
    rows = [{"id": "a", "text": OTHER, "n": 1}, {"id": "b", "text": THIRD, "n": 2**70}]
    inputs = _write_inputs(tmp_path / "in", rows, fillers=False)
    with pytest.raises(CorpusError, match="do not fit one Parquet schema") as local:
        run_local(inputs, tmp_path / "local.parquet")
    with pytest.raises(CorpusError, match="do not fit one Parquet schema") as spark_error:
        run_spark_dedup(spark, inputs, str(tmp_path / "out.parquet"))
    assert spark_error.value.reason == local.value.reason
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_spark_reads_parquet_with_typed_columns_like_local(spark: Any, tmp_path: Path) -> None:
    rows = _rows(parquet_safe=True)
    for row in rows:
        row.setdefault("meta", None)
    table = pa.Table.from_pylist(rows)
    table = table.set_column(
        table.schema.get_field_index("low"), "low", table["low"].cast(pa.int64())
    ).append_column("small", pa.array([1, 2, 3, None, 5], pa.int32()))
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "rows.parquet")
    inputs = [str(tmp_path / "in" / "rows.parquet")]
    jsonl, parquet = tmp_path / "out.jsonl", tmp_path / "out.parquet"
    run_spark_dedup(spark, inputs, str(jsonl))
    expected = run_local(inputs, tmp_path / "local.jsonl").read_text(encoding="utf-8")
    assert part_lines(jsonl, ordered=True) == expected.splitlines()
    run_spark_dedup(spark, inputs, str(parquet))
    got = _assert_same_table(parquet, run_local(inputs, tmp_path / "local.parquet"))
    assert got.schema.field("small").type == pa.int32()
