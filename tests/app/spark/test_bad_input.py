"""Bad input to the Spark engine: a CorpusError naming the file (and line) or a
DuplicateIdError naming the id, and no output, no manifest, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.app.spark.job import run_spark_dedup
from neardup.core.engine import CorpusError, DuplicateIdError, ParameterError

GOOD = [{"id": f"d{i}", "text": f"some words for document number {i} here"} for i in range(6)]


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _nothing_written(folder: Path) -> None:
    left = sorted(p.name for p in folder.iterdir() if p.name.startswith(("out", ".out")))
    assert left == []


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ('{"id": "x", "text": "unterminated', "not valid JSON"),
        (
            '{"text": "no id here"}',
            "no 'id' field (its fields: text); name the id's field with --id-field",
        ),
        ('{"id": "", "text": "empty id"}', "'id' must be a non-empty string"),
        (
            '{"id": "y"}',
            "no 'text' field (its fields: id); name the text's field with --text-field",
        ),
        ('{"id": "z", "text": "t", "meta": [1, 2]}', "'meta' must be an object"),
    ],
)
def test_spark_bad_row_names_file_and_line_and_writes_nothing(
    spark: Any, tmp_path: Path, bad_line: str, reason: str
) -> None:
    good = _write(tmp_path / "good.jsonl", [json.dumps(d) for d in GOOD[:3]])
    lines = [json.dumps(d) for d in GOOD[3:]]
    bad = _write(tmp_path / "bad.jsonl", [lines[0], "", lines[1], bad_line, lines[2]])
    with pytest.raises(CorpusError) as info:
        run_spark_dedup(spark, [good, bad], str(tmp_path / "out.jsonl"))
    message = str(info.value)
    assert "bad.jsonl:4" in message and reason in message
    _nothing_written(tmp_path)


def test_spark_repeated_id_is_named(spark: Any, tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", [json.dumps(d) for d in GOOD])
    b = _write(tmp_path / "b.jsonl", [json.dumps({"id": "d4", "text": "another text"})])
    with pytest.raises(DuplicateIdError, match="d4"):
        run_spark_dedup(spark, [a, b], str(tmp_path / "out.parquet"))
    _nothing_written(tmp_path)


def test_spark_parquet_without_text_column_and_missing_input(spark: Any, tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": ["a"], "body": ["x"]}), tmp_path / "t.parquet")
    with pytest.raises(CorpusError, match=r"no 'text' column \(its columns: id, body\); name the "
                       "text's field with --text-field"):  # fmt: skip
        run_spark_dedup(spark, [str(tmp_path / "t.parquet")], str(tmp_path / "out.jsonl"))
    with pytest.raises(CorpusError, match="no such file"):
        run_spark_dedup(spark, [str(tmp_path / "nope.jsonl")], str(tmp_path / "out.jsonl"))
    _nothing_written(tmp_path)


def test_spark_output_name_and_protected_file_are_checked_first(spark: Any, tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", [json.dumps(d) for d in GOOD])
    with pytest.raises(CorpusError, match="unknown output format"):
        run_spark_dedup(spark, [a], str(tmp_path / "out.csv"))
    with pytest.raises(CorpusError, match="no such file"):
        run_spark_dedup(spark, [a], str(tmp_path / "out.jsonl"), protected=["missing.jsonl"])
    with pytest.raises(ParameterError):
        from neardup.app.spark.job import SparkParams
        from neardup.core.engine import MinhashParams

        run_spark_dedup(spark, [a], str(tmp_path / "out.jsonl"),
                        params=SparkParams(MinhashParams(bands=7)))  # fmt: skip
    _nothing_written(tmp_path)


def test_both_engines_refuse_a_row_with_its_own_neardup_field_when_they_write_reasons(
    spark: Any, tmp_path: Path
) -> None:
    """One rule for both engines: a run that writes reasons (``--removed`` or
    ``--keep-duplicates``) refuses every row that has a ``neardup`` field, in its first pass (a
    kept row too: whether a run fails must not depend on which rows turn out duplicates); a run
    that writes none passes the field through as any other."""
    from tests.app.spark.conftest import run_local

    lines = [json.dumps(d) for d in GOOD[:2]]
    lines.insert(1, json.dumps({"id": "n", "text": "t", "neardup": {"reason": "mine"}}))  # kept
    lines.append(json.dumps({"id": "o", "text": "t", "neardup": None}))  # n's exact copy
    bad = _write(tmp_path / "bad.jsonl", lines)
    refused = r"bad\.jsonl:2: the row already has a 'neardup' field"
    removed = str(tmp_path / "r.jsonl")
    with pytest.raises(CorpusError, match=refused):
        run_spark_dedup(spark, [bad], str(tmp_path / "out.jsonl"), removed=removed)
    _nothing_written(tmp_path)
    for flags in ({"removed": removed}, {"params": {"keep_duplicates": True}}):
        with pytest.raises(CorpusError, match=refused):
            run_local([bad], tmp_path / "out.jsonl", **flags)
        _nothing_written(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]  # no --removed either
    run_local([bad], tmp_path / "out.jsonl")
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["id"], r.get("neardup")) for r in out] == [
        ("d0", None), ("n", {"reason": "mine"}), ("d1", None)
    ]  # fmt: skip


def test_spark_nan_is_bad_json_lines_input_and_null_from_parquet(
    spark: Any, tmp_path: Path
) -> None:
    """The local engine's rule (issue 23): a JSON Lines NaN/Infinity token is a bad row naming
    file:line and the field; a Parquet input's NaN or infinity is null in a JSON Lines output,
    counted as ``nan_as_null``, and every line parses strictly."""
    import math

    from tests.app.spark.conftest import part_lines

    row = {"id": "n", "text": "a b c", "meta": {"w": float("nan")}}
    bad = _write(tmp_path / "bad.jsonl", [json.dumps(d) for d in GOOD[:2]] + [json.dumps(row)])
    with pytest.raises(CorpusError) as info:
        run_spark_dedup(spark, [bad], str(tmp_path / "out.jsonl"))
    assert "bad.jsonl:3: NaN is not JSON (field 'meta.w')" in str(info.value)
    _nothing_written(tmp_path)
    scores = [float("nan"), 1.0, math.inf, -math.inf, 2.0, 3.0]
    pq.write_table(pa.table({"id": [d["id"] for d in GOOD], "text": [d["text"] for d in GOOD],
                             "score": scores}), tmp_path / "in.parquet")  # fmt: skip
    manifest = run_spark_dedup(spark, [str(tmp_path / "in.parquet")], str(tmp_path / "o.jsonl"))
    assert manifest.counts["nan_as_null"] == 3

    def refuse(token: str) -> Any:
        raise ValueError(token)

    rows = [json.loads(line, parse_constant=refuse) for line in part_lines(tmp_path / "o.jsonl")]
    assert sorted((r["id"], r["score"]) for r in rows) == [
        ("d0", None),
        ("d1", 1.0),
        ("d2", None),
        ("d3", None),
        ("d4", 2.0),
        ("d5", 3.0),
    ]


def test_spark_input_not_utf8_names_file_and_line_and_writes_nothing(
    spark: Any, tmp_path: Path
) -> None:
    good = [json.dumps(d) for d in GOOD]
    bad = tmp_path / "latin.jsonl"
    bad.write_bytes("\n".join([good[0], good[1]]).encode() + b'\n{"id": "l", "text": "caf\xe9"}\n')
    with pytest.raises(CorpusError) as info:
        run_spark_dedup(spark, [str(bad)], str(tmp_path / "out.jsonl"))
    assert str(info.value) == (
        f"{bad}:3: not UTF-8 (invalid continuation byte at byte 24 of the line)"
    )
    _nothing_written(tmp_path)
