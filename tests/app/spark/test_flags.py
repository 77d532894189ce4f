"""The local engine's later flags on Spark, several per run (a Spark job is seconds): rows whose
id and text live elsewhere (``--id-field``, ``--text-field``), ids prefixed with their file's
label (``--id-prefix file``), the dropped rows with why (``--removed``) against an index, and
``--dry-run``; each byte for byte (or count for count) what the local engine does."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.app.cli.dedup import run_dedup
from neardup.app.cli.options import DedupOptions, DedupParams
from neardup.app.spark import kernels
from neardup.app.spark.job import SparkParams, run_spark_dedup
from neardup.app.spark.kernels import OUTPUT, REMOVED
from neardup.core.engine import (
    KeepPolicy,
    NgramIndex,
    ProtectedSet,
    Protection,
    Schema,
    expand_inputs,
)
from tests.app.spark.conftest import part_lines, write_shards
from tests.app.spark.corpus import adversarial_docs, index_rounds
from tests.fixtures import write_protected

#: Rows with the id in ``doc.key`` (an integer for some) and the text in ``body``.
SCHEMA = Schema("doc.key", "body", id_prefix=True)
#: Rows the protected sets catch: one kept by dedup, one a copy of it (exact-dropped first).
DIRTY = "blah Tom found a shiny red shell by the river and carried it home to show his sister. more"


#: A 3-gram a protected set holds, and texts: clean, its copy, two dirty (near copies).
DIRTY_GRAM = "shiny red shell"
TEXTS = ("a clean text", "a clean text", f"a {DIRTY_GRAM} too", f"he found a {DIRTY_GRAM}")


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


@functools.cache
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
    gone = tmp_path / "spark-removed.jsonl"
    size = sum(p.stat().st_size for p in gone.glob("part-*"))
    assert manifest.removed == {"path": str(gone), "format": ".jsonl", "rows": len(removed),
                                "bytes": size}  # fmt: skip
    assert manifest.index is not None and local.index is not None
    assert {k: manifest.index[k] for k in local.index} == local.index
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
    # A Parquet input too: ``doc`` a struct column, ``body`` a string one.
    typed = {i for i, r in enumerate(second) if i % 2 and type(r["doc"]["key"]) is str}
    columns = [{"body": second[i]["body"], "doc": second[i]["doc"]} for i in sorted(typed)]
    table = pa.Table.from_pylist(columns)
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "a.parquet")
    rest = [r for i, r in enumerate(second) if i not in typed]
    inputs = [str(tmp_path / "in" / "a.parquet"), *write_shards(tmp_path / "in", rest, 2)]
    protected = tuple(str(p) for p in write_protected(tmp_path))
    local = _local(
        inputs, tmp_path / "local.jsonl", removed=str(tmp_path / "lr.jsonl"),
        protected=protected, dry_run=True,
        params={"keep_duplicates": True, "keep": KeepPolicy.parse("first")},
    )  # fmt: skip
    manifest = run_spark_dedup(
        spark, inputs, str(tmp_path / "spark.jsonl"), protected=protected,
        params=SparkParams(keep_duplicates=True, schema=SCHEMA, keep="first"),
        removed=str(tmp_path / "sr.jsonl"), dry_run=True,
    )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.jsonl", "held_out.txt", "in"]
    assert {k: v for k, v in manifest.counts.items() if k != "edges"} == local.counts
    assert manifest.clusters == local.clusters and manifest.cluster_sizes == local.cluster_sizes
    assert manifest.singletons == local.singletons
    assert local.counts["decontaminated"] == 2 and manifest.removed is None  # both checked


def test_spark_keep_longest_equals_local(spark: Any, tmp_path: Path) -> None:
    """The survivor of a cluster (and of identical texts) by the policy, ties by smallest id;
    with --keep-duplicates every dropped row names it, and the estimate to it. (``first``
    differs only in the column compared, the rows' places: the dry run above takes it.)"""
    keep = "longest"
    inputs = write_shards(tmp_path / "in", adversarial_docs(), 3)  # "first" is not smallest id
    out = tmp_path / "spark.jsonl"
    params = SparkParams(keep_duplicates=True, keep=keep)
    manifest = run_spark_dedup(spark, inputs, str(out), params=params)
    local = run_dedup(
        DedupOptions(
            inputs=tuple(inputs), output=str(tmp_path / "local.jsonl"), quiet=True,
            params=DedupParams(keep_duplicates=True, keep=KeepPolicy.parse(keep)),
        )
    )  # fmt: skip
    expected = _lines(tmp_path / "local.jsonl")
    assert part_lines(out, ordered=True) == expected
    rows = [json.loads(line) for line in expected]
    near = {
        r["neardup"]["duplicate_of"] for r in rows if r.get("neardup", {}).get("reason") == "near"
    }
    assert near - {r["meta"]["minhash_cluster"] for r in rows}  # a survivor that is not the root
    assert {k: v for k, v in manifest.counts.items() if k != "edges"} == local.counts
    assert manifest.clusters == local.clusters and manifest.cluster_sizes == local.cluster_sizes
    assert manifest.singletons == local.singletons
    assert manifest.parameters["keep"] == keep and manifest.parameters["keep_duplicates"]


def test_file_label_is_the_local_readers_label(tmp_path: Path) -> None:
    """``--id-prefix``'s label of a file as Spark names it (a quoted URI) is the one the local
    engine's ``expand_inputs`` gives it, for a directory, a glob and a file named alone."""
    folder = tmp_path / "in put"
    (folder / "sub dir").mkdir(parents=True)
    for name in ("a b.jsonl", "sub dir/c%.jsonl", "z.jsonl"):
        (folder / name).write_text('{"id": "x", "text": "t"}\n', encoding="utf-8")
    for target, root in (
        (str(folder), str(folder)),
        (str(folder / "*" / "*.jsonl"), str(folder)),
        (str(folder / "a b.jsonl"), None),
    ):
        for source in expand_inputs([target]):
            uri = "file:" + quote(source.path)  # as Spark's _metadata.file_path has it
            assert kernels.file_label(uri, root) == source.label, (target, source.label)
    assert kernels.file_label("s3a://b/x/p%3Fq.jsonl", "/x") == "p?q.jsonl"


def test_route_rows_sends_each_row_where_the_local_engine_writes_it() -> None:
    rows = [json.dumps({"id": i, "text": t, "meta": {"n": 1}}) for i, t in enumerate(TEXTS)]
    reasons = [(None, None, None), ("exact", "0", 1.0), ("near", "0", 0.9), (None, None, None)]
    sets = [ProtectedSet("evals", 1, {DIRTY_GRAM: ["q1"]}, 3)]
    for keep_all in (False, True):
        routed = kernels.route_rows(
            rows, ["0"] * 4, reasons, ["p1", None, "p2", None], Protection(sets),
            keep_all=keep_all,
        )  # fmt: skip
        dests = [d for _, d in routed]
        out = [r for r, _ in routed]
        dirty = out[3]["neardup"]
        assert dirty == {
            "reason": "contaminated",
            "duplicate_of": None,
            "estimate": None,
            "set": "evals",
            "item": "q1",
            "ngram": DIRTY_GRAM,
            "index_part": None,
        }
        assert "minhash_cluster" not in out[3]["meta"] and "neardup" not in out[0]
        assert out[0]["meta"] == {"n": 1, "minhash_cluster": "0"}
        if keep_all:  # the near copy is checked too: it is dirty, so removed
            assert dests == [OUTPUT, OUTPUT, REMOVED, REMOVED]
            assert out[2]["neardup"] == dirty
            assert out[1]["neardup"]["reason"] == "exact" and "minhash_cluster" in out[1]["meta"]
        else:  # the dropped rows are not checked: removed as dropped
            assert dests == [OUTPUT, REMOVED, REMOVED, REMOVED]
            assert "minhash_cluster" not in out[1]["meta"]
            assert out[2]["neardup"] == {"reason": "near", "duplicate_of": "0", "estimate": 0.9,
                "set": None, "item": None, "ngram": None, "index_part": "p2"}  # fmt: skip
        index = NgramIndex({DIRTY_GRAM}, 3)
        unnamed = kernels.route_rows(rows, ["0"] * 4, reasons, None, index, keep_all=keep_all)
        assert [d for _, d in unnamed] == dests  # the verdicts alone: the same places


def test_cli_hands_the_flags_to_spark_and_a_dry_run_reports_as_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``neardup dedup --engine spark`` in process, the session and the run stubbed (what they
    do is the tests above): every new flag reaches the run, and ``--dry-run`` prints the local
    engine's report (its keys, no ``edges``) and writes no manifest."""
    from neardup.app.cli.main import main
    from neardup.app.spark import entry
    from neardup.app.spark.job import SparkManifest

    got: dict[str, Any] = {}

    class Session:
        # the CLI's per-stage progress reads Spark's status tracker: no job has run here
        sparkContext = SimpleNamespace(
            statusTracker=lambda: SimpleNamespace(getJobIdsForGroup=lambda group: [])
        )

        def stop(self) -> None:
            got["stopped"] = True

    def run(spark: Any, inputs: list[str], output: str, **options: Any) -> SparkManifest:
        got.update(options, inputs=inputs, output=output)
        counts = {"read": 3, "exact_dropped": 1, "near_dropped": 0, "decontaminated": 0,
                  "written": 2, "edges": 7}  # fmt: skip
        return SparkManifest("spark", "4", "local[1]", {}, inputs, [], counts=counts,
                             clusters=1, cluster_sizes={"2": 1}, singletons=1)  # fmt: skip

    monkeypatch.setattr(entry, "spark_session", lambda master, quiet=False: Session())
    monkeypatch.setattr(entry, "run_spark_dedup", run)
    (tmp_path / "a.jsonl").write_text('{"k": "a", "t": "x"}\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code = main([
        "dedup", "a.jsonl", "--output", "o.jsonl", "--engine", "spark", "--removed", "r.jsonl",
        "--id-field", "k", "--text-field", "t", "--id-prefix", "file", "--dry-run",
    ])  # fmt: skip
    assert code == 0 and got["stopped"]
    assert got["params"].schema == Schema("k", "t", id_prefix=True)
    assert got["removed"] == "r.jsonl" and got["dry_run"] is True
    assert json.loads(capsys.readouterr().out) == {
        "dry_run": True,
        "counts": {"read": 3, "exact_dropped": 1, "near_dropped": 0, "decontaminated": 0,
                   "written": 2},
        "clusters": 1,
        "cluster_sizes": {"2": 1},
        "singletons": 1,
    }  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]
    # a dry run needs no --output on this engine either: nothing is written, as locally
    assert main(["dedup", "a.jsonl", "--engine", "spark", "--id-field", "k", "--text-field", "t",
                 "--dry-run", "--quiet"]) == 0  # fmt: skip
    assert got["output"] == "-" and got["dry_run"] is True
    from neardup.app.spark.corpus import dry_format
    from neardup.core.engine import CorpusError

    assert dry_format("-", True) == ".jsonl" and dry_format("o.parquet", True) == ".parquet"
    with pytest.raises(CorpusError, match="unknown output format"):
        dry_format("-", False)  # a real run still needs an output the engine writes
    assert json.loads(capsys.readouterr().out)["singletons"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_cli_hands_recrawled_and_an_id_prefix_template_to_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: ``--recrawled`` and ``--id-prefix TEMPLATE`` reach the Spark run as given."""
    from neardup.app.cli.main import main
    from neardup.app.spark import entry
    from neardup.app.spark.job import SparkManifest

    got: dict[str, Any] = {}

    class Session:
        sparkContext = SimpleNamespace(  # the CLI's per-stage progress reads its tracker
            statusTracker=lambda: SimpleNamespace(getJobIdsForGroup=lambda group: [])
        )

        def stop(self) -> None:
            pass

    def run(spark: Any, inputs: list[str], output: str, **options: Any) -> SparkManifest:
        got.update(options)
        return SparkManifest("spark", "4", "local[1]", {}, inputs, [], counts={"read": 0})

    monkeypatch.setattr(entry, "spark_session", lambda master, quiet=False: Session())
    monkeypatch.setattr(entry, "run_spark_dedup", run)
    (tmp_path / "a.jsonl").write_text('{"id": "a", "text": "x"}\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code = main([
        "dedup", "a.jsonl", "--output", "o.jsonl", "--engine", "spark", "--index", "idx",
        "--recrawled", "replace", "--id-prefix", "cc-2024-10/{file}/", "--dry-run",
    ])  # fmt: skip
    assert code == 0
    assert got["params"].recrawled == "replace"
    assert got["params"].schema == Schema(id_prefix="cc-2024-10/{file}/")
    assert got["params"].as_dict()["recrawled"] == "replace"
