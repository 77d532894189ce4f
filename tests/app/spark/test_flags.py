"""The local engine's later flags on Spark, several per run (a Spark job is seconds): rows whose
id and text live elsewhere (``--id-field``, ``--text-field``), ids prefixed with their file's
label (``--id-prefix file``), the dropped rows with why (``--removed``) against an index, and
``--dry-run``; each byte for byte (or count for count) what the local engine does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neardup.app.cli.dedup import run_dedup
from neardup.app.cli.options import DedupOptions, DedupParams
from neardup.app.spark.job import SparkParams, run_spark_dedup
from neardup.core.engine import Schema
from tests.app.spark.conftest import part_lines, write_shards
from tests.app.spark.corpus import index_rounds
from tests.fixtures import write_protected

#: Rows with the id in ``doc.key`` (an integer for some) and the text in ``body``.
SCHEMA = Schema("doc.key", "body", id_prefix=True)
#: Rows the protected sets catch: one kept by dedup, one a copy of it (exact-dropped first).
DIRTY = (
    "blah Tom found a shiny red shell by the river and carried it home to show his sister. more"
)


def _reshaped(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``docs`` with the id under ``doc.key`` (beside another field) and the text in ``body``,
    an id of digits as an integer."""
    out = []
    for d in docs:
        key = int(d["id"][2:]) if d["id"].startswith("n-") else d["id"]
        row = {"body": d["text"], "doc": {"src": "web", "key": key}}
        if "meta" in d:
            row["meta"] = d["meta"]
        out.append(row)
    return out


def _rounds() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    first, second, _ = index_rounds()
    second = [*second, {"id": "dirty-1", "text": DIRTY}, {"id": "dirty-0", "text": DIRTY}]
    second += [{"id": f"n-{n}", "text": d["text"]} for n, d in enumerate(second[:3])]
    return _reshaped(first), _reshaped(second)


def _local(inputs: list[str], out: Path, **options: Any) -> Any:
    params = DedupParams(**options.pop("params", {}))
    return run_dedup(
        DedupOptions(
            inputs=tuple(inputs), output=str(out), schema=SCHEMA, params=params, quiet=True,
            **options,
        )
    )  # fmt: skip


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_spark_fields_prefix_and_removed_against_an_index_equal_local(
    spark: Any, tmp_path: Path
) -> None:
    first, second = _rounds()
    index = tmp_path / "idx"
    write_shards(tmp_path / "r1", first, 2, name="r1")
    index_manifest = _local([str(tmp_path / "r1")], tmp_path / "r1.jsonl", index=str(index))
    assert index_manifest.index["rows_added"] > 0
    write_shards(tmp_path / "in", second, 3, name="r 2")  # a space: Spark's paths quote it
    inputs = [str(tmp_path / "in" / "r*.jsonl")]  # a glob: labels relative to its folder
    protected = tuple(str(p) for p in write_protected(tmp_path))
    local = _local(
        inputs, tmp_path / "local.jsonl", removed=str(tmp_path / "local-removed.jsonl"),
        protected=protected, index=str(index), index_mode="read",
    )  # fmt: skip
    params = SparkParams(schema=SCHEMA, index=str(index), index_mode="read")
    manifest = run_spark_dedup(
        spark, inputs, str(tmp_path / "spark.jsonl"), protected=protected, params=params,
        removed=str(tmp_path / "spark-removed.jsonl"),
    )  # fmt: skip
    expected = _lines(tmp_path / "local.jsonl")
    assert part_lines(tmp_path / "spark.jsonl", ordered=True) == expected
    removed = _lines(tmp_path / "local-removed.jsonl")
    assert part_lines(tmp_path / "spark-removed.jsonl", ordered=True) == removed
    for key in ("read", "exact_dropped", "near_dropped", "decontaminated", "written"):
        assert manifest.counts[key] == local.counts[key], key
    assert manifest.removed is not None and manifest.removed["rows"] == len(removed)
    assert manifest.schema == {"id_field": "doc.key", "text_field": "body", "id_prefix": True}
    # The shapes are really there: prefixed ids in their field, every reason, index parts.
    kept = [json.loads(line) for line in expected]
    assert all(r["doc"]["key"].startswith("r 2-") and r["doc"]["src"] == "web" for r in kept)
    keys = {r["doc"]["key"] for r in kept + [json.loads(x) for x in removed]}
    assert {"0", "1", "2"} <= {k.rsplit("/", 1)[1] for k in keys}  # integer ids, as strings
    why = [json.loads(line)["neardup"] for line in removed]
    assert {w["reason"] for w in why} == {"exact", "near", "contaminated"}
    assert any(w["index_part"] for w in why) and any(w["index_part"] is None for w in why)
    assert sum(w["reason"] == "contaminated" for w in why) == 1  # its copy is exact-dropped
    assert all("minhash_cluster" not in r.get("meta", {}) for r in map(json.loads, removed))


def test_spark_dry_run_writes_nothing_and_counts_as_local(spark: Any, tmp_path: Path) -> None:
    _, second = _rounds()
    inputs = write_shards(tmp_path / "in", second, 2)
    protected = tuple(str(p) for p in write_protected(tmp_path))
    local = _local(
        inputs, tmp_path / "local.jsonl", removed=str(tmp_path / "lr.jsonl"),
        protected=protected, dry_run=True, params={"keep_duplicates": True},
    )  # fmt: skip
    manifest = run_spark_dedup(
        spark, inputs, str(tmp_path / "spark.jsonl"), protected=protected,
        params=SparkParams(keep_duplicates=True, schema=SCHEMA),
        removed=str(tmp_path / "sr.jsonl"), dry_run=True,
    )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.jsonl", "held_out.txt", "in"]
    assert {k: v for k, v in manifest.counts.items() if k != "edges"} == local.counts
    assert manifest.clusters == local.clusters and manifest.cluster_sizes == local.cluster_sizes
    assert local.counts["decontaminated"] == 2 and manifest.removed is None  # both checked
