"""The Spark engine against the local engine and core: the same survivors and tags, byte for
byte, for 1, 3 and 7 shards, reversed input, --keep-duplicates, protected files and Parquet."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.app.cli.dedup import run_dedup
from neardup.app.cli.options import DedupOptions
from neardup.app.spark.job import SparkParams, run_spark_dedup
from neardup.core.engine import CLUSTER_KEY, Doc
from neardup.core.minhash import decontaminate, exact_dedup, near_dedup
from tests.app.spark.conftest import local_lines, part_lines, write_shards
from tests.app.spark.corpus import TEMPLATED, adversarial_docs
from tests.fixtures import write_protected


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return adversarial_docs()


@pytest.fixture(scope="module")
def reference(docs: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The local engine's output for the corpus in one file."""
    tmp = tmp_path_factory.mktemp("local")
    inputs = write_shards(tmp, docs, 1)
    return local_lines(inputs, tmp / "out.jsonl")


def _core_tags(docs: list[dict[str, Any]]) -> dict[str, str]:
    """id -> minhash_cluster of core's exact_dedup then near_dedup."""
    stream = (Doc(d["id"], d["text"], d.get("meta", {})) for d in docs)
    return {d.id: d.meta[CLUSTER_KEY] for d in near_dedup(exact_dedup(stream))}


@pytest.mark.parametrize(
    ("parts", "reverse", "folder"), [(1, False, False), (3, True, False), (7, False, True)]
)
def test_spark_survivors_and_tags_equal_local_and_core(
    spark: Any, docs: list[dict[str, Any]], reference: list[str], tmp_path: Path, parts: int,
    reverse: bool, folder: bool,
) -> None:  # fmt: skip
    """``folder``: the shards given as their directory, two of them gzipped, and a gzipped
    output (one Spark run for both checks)."""
    import gzip

    rows = docs[::-1] if reverse else docs
    inputs = write_shards(tmp_path / "in", rows, parts)
    if folder:
        for path in inputs[:2]:
            with gzip.open(path + ".gz", "wt", encoding="utf-8") as fh:
                fh.write(Path(path).read_text(encoding="utf-8"))
            Path(path).unlink()
        inputs = [str(tmp_path / "in")]  # a directory of .jsonl and .jsonl.gz shards
    out = tmp_path / ("out.jsonl.gz" if folder else "out.jsonl")
    manifest = run_spark_dedup(spark, inputs, str(out))
    lines = part_lines(out)
    assert lines == reference
    parts_written = [p.name for p in out.glob("part-*")]
    assert parts_written and all(
        p.endswith(".jsonl.gz" if folder else ".jsonl") for p in parts_written
    )
    tags = {json.loads(line)["id"]: json.loads(line)["meta"][CLUSTER_KEY] for line in lines}
    assert tags == _core_tags(docs)
    # The shapes are really there: the chain joined, the template collapsed, copies dropped.
    assert "chain-1" in tags and "chain-2" not in tags and "chain-9" not in tags
    assert sum(i.startswith("tpl-") for i in tags) == 1
    assert sum(i.startswith("copy-") for i in tags) == 1 and "copy-3" in tags
    texts = [json.loads(line)["text"] for line in lines]
    assert texts.count("") == 1 and texts.count("... !!! ???") == 1 and "dots" in tags
    assert manifest.counts["read"] == len(docs)
    assert manifest.counts["written"] == len(lines)
    dropped = manifest.counts["exact_dropped"] + manifest.counts["near_dropped"]
    assert manifest.counts["read"] - dropped == len(lines)
    assert set(manifest.seconds) == {"signatures", "classes", "candidates", "components", "write"}
    assert manifest.engine == "spark" and manifest.master == "local[2]"


def test_spark_keep_duplicates_and_protected_equal_local(
    spark: Any, docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Both runs equal the local engine's; the second (--keep-duplicates) also shows the giant
    bucket of templated pages as one cluster."""
    eval_jsonl, held_out = write_protected(tmp_path)
    dirty = [
        {"id": "dirty-1", "text": "blah " + "Tom found a shiny red shell by the river and "
         "carried it home to show his sister. more"},
        {"id": "dirty-2", "text": "In the middle of the night the old lighthouse keeper climbed "
         "the stairs one last time before dawn"},
    ]  # fmt: skip
    inputs = write_shards(tmp_path / "in", docs + dirty, 3)
    protected = [str(eval_jsonl), str(held_out)]
    for keep in (False, True):
        out = tmp_path / f"spark-{keep}.jsonl"
        manifest = run_spark_dedup(
            spark, inputs, str(out), protected=protected, params=SparkParams(keep_duplicates=keep)
        )
        expected = local_lines(
            inputs, tmp_path / f"local-{keep}.jsonl", protected=[Path(p) for p in protected],
            params={"keep_duplicates": keep},
        )  # fmt: skip
        assert part_lines(out) == expected
        assert manifest.counts["decontaminated"] == 2
        ids = {json.loads(line)["id"] for line in expected}
        assert not ids & {"dirty-1", "dirty-2"}
    # The giant bucket is one cluster of all templated pages (every row kept, tagged).
    rows = [json.loads(line) for line in part_lines(out)]
    assert len(rows) == len(docs)
    roots = {r["meta"][CLUSTER_KEY] for r in rows if r["id"].startswith("tpl-")}
    templated = sorted(r["id"] for r in rows if r["id"].startswith("tpl-"))
    assert len(templated) == TEMPLATED and roots == {templated[0]}
    # And core's decontaminate agrees on which documents go.
    kept = decontaminate((Doc(d["id"], d["text"]) for d in dirty), protected)
    assert list(kept) == []


def test_spark_reads_parquet_globs_and_writes_parquet_like_local(
    spark: Any, docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    half = len(docs) // 2
    table = pa.table(
        {
            "id": [d["id"] for d in docs[:half]],
            "text": [d["text"] for d in docs[:half]],
            "meta": [d.get("meta", {"n": -1}) for d in docs[:half]],  # a struct, as local's
            # infinities, which a Parquet output keeps (JSON Lines has null)
            "score": [(-1) ** i * math.inf if i % 3 == 0 else i / 4 for i in range(half)],
        }
    )
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "a.parquet")
    rest = write_shards(tmp_path / "in", docs[half:], 1, name="b")
    inputs = [str(tmp_path / "in" / "*.parquet"), *rest]  # a glob
    out = tmp_path / "out.parquet"
    manifest = run_spark_dedup(spark, inputs, str(out))
    local = run_dedup(DedupOptions(inputs=tuple(inputs), output=str(tmp_path / "l.parquet"),
                                   quiet=True))  # fmt: skip
    expected = pq.read_table(tmp_path / "l.parquet")
    got = pq.read_table(out)
    assert got.schema.equals(expected.schema), (got.schema, expected.schema)
    assert got.equals(expected)  # the same rows in the same order
    assert pa.types.is_struct(got.schema.field("meta").type)
    assert {math.inf, -math.inf} <= set(got.column("score").to_pylist())
    assert "nan_as_null" not in manifest.counts
    assert (tmp_path / "out.parquet" / "_SUCCESS").exists()
    # The manifest says what the local engine's says, and what Spark did.
    assert {k: v for k, v in manifest.counts.items() if k != "edges"} == local.counts
    assert manifest.clusters == local.clusters and manifest.cluster_sizes == local.cluster_sizes
    assert manifest.singletons == local.singletons
    assert manifest.counts["edges"] > 0 and manifest.component_rounds >= 1
    parts = sum(p.stat().st_size for p in out.glob("part-*"))
    assert manifest.output == {"path": str(out), "format": ".parquet", "bytes": parts}
    assert manifest.parameters == SparkParams().as_dict() and manifest.inputs == inputs
    assert manifest.protected == [] and manifest.index is None and manifest.removed is None
    stages = {"signatures", "classes", "candidates", "components", "write"}
    assert set(manifest.seconds) == stages and set(manifest.shuffle_bytes) == stages
    assert manifest.shuffle_bytes["classes"]["write"] > 0
