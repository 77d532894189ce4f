"""``--index`` on Spark against the local engine: three incremental rounds, the engines taking
turns on one index, give the local engine's byte-identical outputs and equal index parts; read
mode adds nothing; a colliding id and a locked parameter stop the run before anything is written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.app.spark.index import BROADCAST_KEYS_CONF
from neardup.app.spark.job import SparkManifest, SparkParams, run_spark_dedup
from neardup.core.engine import (
    DocIndex,
    IndexConflictError,
    IndexDamagedError,
    IndexIdError,
    NeardupError,
)
from tests.app.cli.test_cli_spark import neardup
from tests.app.spark.conftest import part_lines, write_shards
from tests.app.spark.corpus import index_rounds

ROUNDS = index_rounds()
#: The rounds' options: the second keeps duplicates (every reason, with its index part).
KEEP = (False, True, False)
#: The index columns the two engines must write alike.
INDEX_INDEPENDENT = re.compile(r'"(p\d{8})-[0-9a-f]{12}"')


def _inputs(root: Path, r: int) -> list[str]:
    return write_shards(root / f"round{r}", ROUNDS[r], 2)


def _local(inputs: list[str], out: Path, index: Path, r: int, mode: str = "append") -> Any:
    from neardup.app.cli.dedup import run_dedup
    from neardup.app.cli.options import DedupOptions, DedupParams

    options = DedupOptions(
        inputs=tuple(inputs), output=str(out), params=DedupParams(keep_duplicates=KEEP[r]),
        quiet=True, index=str(index), index_mode=mode,
    )  # fmt: skip
    return run_dedup(options)


def _spark(
    spark: Any, inputs: list[str], out: Path, index: Path | str, r: int, mode: str = "append"
) -> SparkManifest:
    params = SparkParams(keep_duplicates=KEEP[r], index=str(index), index_mode=mode)
    return run_spark_dedup(spark, inputs, str(out), params=params)


def _unnamed(lines: list[str]) -> list[str]:
    """Lines with each part name's random half cut (the version half stays)."""
    return [INDEX_INDEPENDENT.sub(r'"\1"', line) for line in lines]


def _index_table(index: Path) -> pa.Table:
    """Every live indexed row (the rows deletion vectors delete left out), sorted by id; each
    part's files, in listed order, sorted already."""
    opened = DocIndex.open(str(index))
    tables = []
    for part in opened.parts:
        table = pa.concat_tables([pq.read_table(index / f.path) for f in part.files])
        ids = table.column("id").to_pylist()
        assert ids == sorted(ids), part.name
        deleted = set(opened.deletes.rows(part).tolist())
        table = table.filter(pa.array([i not in deleted for i in range(table.num_rows)]))
        tables.append(table.replace_schema_metadata(None))
    return pa.concat_tables(tables).sort_by("id")


def _key_tables(index: Path) -> list[bytes]:
    """The bytes of every part's key table and id table, in listing order (they hold no part
    name)."""
    opened = DocIndex.open(str(index))
    assert all(part.keys is not None and part.ids is not None for part in opened.parts)
    return [(index / f.path).read_bytes() for part in opened.parts for f in (part.keys, part.ids)]


def _layout(index: Path, part: Any) -> set[tuple[str, str, bool]]:
    """(column, compression, dictionary page) of every column chunk of a part's files."""
    chunks = set()
    for f in part.files:
        meta = pq.ParquetFile(index / f.path).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                column = meta.row_group(g).column(c)
                chunks.add((column.path_in_schema, column.compression, column.has_dictionary_page))
    return chunks


def _candidates(docs: list[dict[str, Any]], table: pa.Table) -> int:
    """The (new class, indexed row) pairs that share a band key, computed apart from the probe:
    a class is the live documents of one signature (as the Spark engine's classes)."""
    from neardup.app.spark import kernels

    params = SparkParams().minhash
    batch = pa.record_batch({"text": [d["text"] for d in docs]})
    signed = kernels.signature_batch(batch, params).to_pylist()
    sigs = sorted({r["sig"] for r in signed if r["live"]})
    keys = kernels.band_key_batch(
        pa.record_batch({"cid": [str(i) for i in range(len(sigs))], "sig": sigs}), params
    ).to_pylist()
    wanted: dict[tuple[int, bytes], set[str]] = {}
    for k in keys:
        wanted.setdefault((k["band"], k["key"]), set()).add(k["cid"])
    pairs: set[tuple[str, str]] = set()
    for row in table.select(["id", "bands"]).to_pylist():
        for b in range(params.bands):
            for cid in wanted.get((b, row["bands"][8 * b : 8 * b + 8]), ()):
                pairs.add((cid, row["id"]))
    return len(pairs)


_COMPARED = ("version_read", "version_written", "rows_added", "indexed_rows")
_MATCHED = ("indexed_rows_matched", "rows_matching_index")


@pytest.fixture(scope="module")
def local_rounds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The local engine's three rounds on one index: inputs, output lines, index tables,
    manifests' index records, and a copy of the index after the first round."""
    root = tmp_path_factory.mktemp("local")
    index = root / "idx"
    got: dict[str, Any] = {
        "inputs": [], "lines": [], "tables": [], "keys": [], "records": [], "sizes": [],
    }  # fmt: skip
    for r in range(3):
        inputs = _inputs(root, r)
        manifest = _local(inputs, root / f"out{r}.jsonl", index, r)
        got["inputs"].append(inputs)
        got["lines"].append((root / f"out{r}.jsonl").read_text(encoding="utf-8").splitlines())
        got["tables"].append(_index_table(index))
        got["keys"].append(_key_tables(index))
        got["records"].append(manifest.index)
        got["sizes"].append((manifest.clusters, manifest.cluster_sizes, manifest.singletons))
        if r == 0:
            shutil.copytree(index, root / "after-first")
    got["after_first"] = root / "after-first"
    return got


def test_spark_rounds_taking_turns_with_the_local_engine_equal_local_rounds(
    spark: Any, local_rounds: dict[str, Any], tmp_path: Path
) -> None:
    """Spark creates an index from round 0 as the local engine does. On the local engine's
    index of round 0, Spark appends round 1 (--keep-duplicates: every reason with its index
    part; keys broadcast; the index as a Hadoop ``file://`` URL), reads round 2 (read mode,
    through the join fallback: no key broadcast), and the local engine appends round 2 to the
    part Spark added: every output, index and manifest record is the local engine's alone
    (three Spark runs in all)."""

    def same_as_local(lines: list[str], index: Path, r: int) -> None:
        assert _unnamed(lines) == _unnamed(local_rounds["lines"][r]), r
        assert _index_table(index).equals(local_rounds["tables"][r]), r
        # Each part's key table byte for byte (Spark's built on the driver from its files).
        assert _key_tables(index) == local_rounds["keys"][r], r

    def same_record(manifest: SparkManifest, r: int) -> dict[str, Any]:
        record, local = manifest.index, local_rounds["records"][r]
        assert record is not None and local is not None
        assert {k: record[k] for k in _COMPARED + _MATCHED} == {
            k: local[k] for k in _COMPARED + _MATCHED
        }
        # The clusters the manifest counts hold the indexed documents they reach, as locally.
        assert (manifest.clusters, manifest.cluster_sizes, manifest.singletons) == local_rounds[
            "sizes"
        ][r], r
        return record

    inputs = local_rounds["inputs"]
    created = tmp_path / "created"
    first = _spark(spark, inputs[0], tmp_path / "o0.jsonl", created, 0)
    same_as_local(part_lines(tmp_path / "o0.jsonl", ordered=True), created, 0)
    assert same_record(first, 0)["broadcast"] is None  # nothing indexed yet
    assert [p.run["engine"] for p in DocIndex.open(str(created)).parts] == ["spark"]
    stages = {"signatures", "classes", "candidates", "components", "write"}
    assert set(first.seconds) == stages | {"index_part"}  # no index part to probe yet
    index = tmp_path / "idx"
    shutil.copytree(local_rounds["after_first"], index)  # made by the local engine
    url = index.as_uri()
    second = _spark(spark, inputs[1], tmp_path / "o1.jsonl", url, 1)
    same_as_local(part_lines(tmp_path / "o1.jsonl", ordered=True), index, 1)
    record = same_record(second, 1)
    assert record["broadcast"] is True
    # The candidates: the pairs a band key joins (not every pair of a live class and a hit).
    assert record["candidates"] == _candidates(ROUNDS[1], local_rounds["tables"][0]) > 0
    # Only the files holding a candidate are read for signatures.
    assert 1 <= record["files_read_for_signatures"] <= record["files"]
    assert set(second.seconds) == stages | {"index", "index_part"}
    # Spark writes its part's files zstd-compressed (core: the ids only) and, as core, without
    # dictionaries (docs/index.md: any compression reads).
    local_part, spark_part = DocIndex.open(str(index)).parts
    # Committed by core's commit from the driver: marked as the local engine marks its parts.
    for part, version in ((local_part, 1), (spark_part, 2)):
        marker = index / "parts" / part.name / "_committed"
        assert json.loads(marker.read_text()) == {"version": version}
    columns = ("id", "digest", "bands", "signature")
    assert _layout(index, spark_part) == {(c, "ZSTD", False) for c in columns}
    assert {dictionary for _, _, dictionary in _layout(index, local_part)} == {False}
    # Read mode: the same output as appending would write, and the index as it was.
    before = sorted(p.name for p in (index / "_index").iterdir())
    spark.conf.set(BROADCAST_KEYS_CONF, "0")  # the join fallback: no key of the batch broadcast
    try:
        read = _spark(spark, inputs[2], tmp_path / "read.jsonl", url, 2, mode="read")
    finally:
        spark.conf.unset(BROADCAST_KEYS_CONF)
    lines = part_lines(tmp_path / "read.jsonl", ordered=True)
    assert _unnamed(lines) == _unnamed(local_rounds["lines"][2])
    assert sorted(p.name for p in (index / "_index").iterdir()) == before
    assert read.index is not None and read.index["version_written"] is None
    sizes = (read.clusters, read.cluster_sizes, read.singletons)
    assert sizes == local_rounds["sizes"][2]  # as appending
    assert read.index["broadcast"] is False and set(read.seconds) == stages | {"index"}
    assert read.index["candidates"] == _candidates(ROUNDS[2], local_rounds["tables"][1]) > 0
    # The local engine appends to the part the Spark engine added.
    _local(inputs[2], tmp_path / "o2.jsonl", index, 2)
    same_as_local((tmp_path / "o2.jsonl").read_text(encoding="utf-8").splitlines(), index, 2)
    engines = [p.run["engine"] for p in DocIndex.open(str(index)).parts]
    assert engines == ["local", "spark", "local"]
    # The shapes are there: the bridge, the copies of indexed texts, an indexed empty text.
    rows = {json.loads(line)["id"]: json.loads(line) for line in part_lines(tmp_path / "o1.jsonl")}
    bridge = rows["r2-bridge"]["neardup"]
    assert bridge["reason"] == "near" and bridge["duplicate_of"] == "chain-1"
    assert bridge["index_part"].startswith("p00000001-")
    why = [r["neardup"] for r in rows.values() if r.get("neardup")]
    copies = [w for w in why if w["reason"] == "exact" and w["index_part"] is not None]
    assert {w["duplicate_of"] for w in copies} >= {"empty-0", "dots-2"}  # wordless, indexed
    assert len(copies) >= 5 and rows["r2-empty"]["neardup"]["duplicate_of"] == "empty-0"
    assert sum(w["reason"] == "near" and w["index_part"] is not None for w in why) >= 4


def test_spark_derived_id_indexed_with_another_text_stops_the_run_before_anything_is_written(
    spark: Any, tmp_path: Path
) -> None:
    """Issue 33: a re-crawled id is no error; the one left is a ``keep-both`` derived id that
    the index holds with another text: IndexIdError naming it and its part (exit 2), before
    anything is written, on Spark as on the local engine."""
    import hashlib

    new_text = _words("h")
    derived = "u#rev-" + hashlib.sha256(new_text.encode()).hexdigest()[:12]
    base = write_shards(tmp_path / "base", [{"id": "u", "text": _words("a")},
                                            {"id": derived, "text": _words("c")}], 1)  # fmt: skip
    index = tmp_path / "idx"
    _local_run(base, tmp_path, "base", index)
    part = DocIndex.open(str(index)).parts[0].name
    inputs = write_shards(tmp_path / "in", [{"id": "u", "text": new_text}], 1)
    with pytest.raises(IndexIdError) as local:
        _local_run(inputs, tmp_path, "l", index)
    with pytest.raises(IndexIdError) as caught:
        _spark(spark, inputs, tmp_path / "out.jsonl", index, 0)
    assert isinstance(caught.value, NeardupError)  # exit 2
    assert str(caught.value) == str(local.value)
    assert f"{derived!r} (part {part})" in str(caught.value)
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "l.jsonl").exists()
    assert [p.name for p in (index / "_index").iterdir() if p.suffix == ".json"] == [
        "00000001.json"
    ]


def test_cli_spark_index_parameter_mismatch_is_exit_2_before_spark(
    local_rounds: dict[str, Any], tmp_path: Path
) -> None:
    index = tmp_path / "idx"
    shutil.copytree(local_rounds["after_first"], index)
    inputs = local_rounds["inputs"][1]
    run = neardup(
        "dedup", *inputs, "--output", "out.jsonl", "--engine", "spark", "--spark-master",
        "local[1]", "--index", index, "--threshold", "0.7", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "parameter threshold is locked to the index" in run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_spark_damaged_index_file_is_named_before_spark_starts(
    local_rounds: dict[str, Any], tmp_path: Path
) -> None:
    from neardup.app.spark.entry import dedup_on_spark

    index = tmp_path / "idx"
    shutil.copytree(local_rounds["after_first"], index)
    listed = DocIndex.open(str(index)).parts[0].files[0].path
    data = (index / listed).read_bytes()
    (index / listed).write_bytes(data[: len(data) // 2])
    params = SparkParams(index=str(index))
    # A master Spark refuses (ParameterError) were the index not checked first, before any JVM.
    with pytest.raises(IndexDamagedError, match=re.escape(listed)):
        dedup_on_spark(local_rounds["inputs"][1], str(tmp_path / "out.jsonl"), params=params,
                       master="bogus://x")  # fmt: skip
    assert not (tmp_path / "out.jsonl").exists()


def test_spark_commit_lost_to_another_run_adds_nothing_and_says_so(
    spark: Any, local_rounds: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import neardup.app.spark.job as job

    index = tmp_path / "idx"
    shutil.copytree(local_rounds["after_first"], index)
    inputs = local_rounds["inputs"]
    real = job.write_index_part

    def racing(*args: Any, **kwargs: Any) -> Any:
        part = real(*args, **kwargs)
        _local(inputs[2], tmp_path / "winner.jsonl", index, 2)  # commits version 2 first
        return part

    monkeypatch.setattr(job, "write_index_part", racing)
    told: list[SparkManifest] = []
    params = SparkParams(index=str(index))
    with pytest.raises(IndexConflictError, match="another run added version 2"):
        run_spark_dedup(spark, inputs[1], str(tmp_path / "o.jsonl"), params=params,
                        on_conflict=told.append)  # fmt: skip
    assert part_lines(tmp_path / "o.jsonl")  # the output is written (and valid)
    (record,) = [m.index for m in told]
    assert record is not None and record["part"] is None and "version 2" in record["conflict"]
    opened = DocIndex.open(str(index))
    assert opened.version == 2 and [p.run["engine"] for p in opened.parts] == ["local", "local"]


# --- Re-crawled ids (issue 33.1) and duplicate_of leading to a kept document (33.12) ---------


def _words(tag: str, n: int = 40) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


_RECRAWL_BASE = [
    {"id": "u1", "text": _words("a")}, {"id": "u2", "text": _words("b")},
    {"id": "u3", "text": _words("c")}, {"id": "i9", "text": _words("d")},
]  # fmt: skip
_RECRAWL_NEW = [
    {"id": "u1", "text": _words("a")},  # the same text: exact of u1
    {"id": "u2", "text": _words("b") + " more"},  # near its indexed text
    {"id": "u3", "text": _words("e")},  # changed
    {"id": "u4", "text": _words("f")},
    # 33.12: n2 copies n1, which is near the indexed i9: n2 names i9
    {"id": "n1", "text": _words("d") + " more"},
    {"id": "n2", "text": _words("d") + " more"},
    # without the index: z0 is kept, z1 near it, z2 copies z1: z2 names z0
    {"id": "z0", "text": _words("g")},
    {"id": "z1", "text": _words("g") + " more"},
    {"id": "z2", "text": _words("g") + " more"},
]  # fmt: skip
_COUNTS = (
    "read",
    "exact_dropped",
    "near_dropped",
    "recrawled_dropped",
    "decontaminated",
    "written",
)


def _local_run(inputs: list[str], tmp: Path, name: str, index: Path, **kw: Any) -> Any:
    from neardup.app.cli.dedup import run_dedup
    from neardup.app.cli.options import DedupOptions

    options = DedupOptions(
        inputs=tuple(inputs), output=str(tmp / f"{name}.jsonl"),
        removed=str(tmp / f"{name}.removed.jsonl"), quiet=True, index=str(index), **kw,
    )  # fmt: skip
    return run_dedup(options)


def test_spark_recrawled_ids_and_resolved_chains_equal_the_local_engine(
    spark: Any, tmp_path: Path
) -> None:
    """Each --recrawled policy, in append and read mode, then keep-both's derived id met again:
    Spark's outputs, --removed rows, index tables and manifests are the local engine's."""
    base = write_shards(tmp_path / "base", _RECRAWL_BASE, 1)
    new = write_shards(tmp_path / "new", _RECRAWL_NEW, 2)
    origin = tmp_path / "origin"
    _local_run(base, tmp_path, "base", origin)
    cases = [("keep-both", "append"), ("keep-indexed", "read"), ("replace", "append")]
    for policy, mode in cases:
        local_idx, spark_idx = tmp_path / f"l-{policy}", tmp_path / f"s-{policy}"
        shutil.copytree(origin, local_idx)
        shutil.copytree(origin, spark_idx)
        local = _local_run(new, tmp_path, f"l-{policy}", local_idx, index_mode=mode,
                           recrawled=policy)  # fmt: skip
        params = SparkParams(index=str(spark_idx), index_mode=mode, recrawled=policy)
        got = run_spark_dedup(spark, new, str(tmp_path / f"s-{policy}.jsonl"), params=params,
                              removed=str(tmp_path / f"s-{policy}.removed.jsonl"))  # fmt: skip
        for kind in ("", ".removed"):
            mine = (tmp_path / f"l-{policy}{kind}.jsonl").read_text(encoding="utf-8").splitlines()
            theirs = part_lines(tmp_path / f"s-{policy}{kind}.jsonl", ordered=True)
            assert _unnamed(theirs) == _unnamed(mine), (policy, kind)
        assert _index_table(spark_idx).equals(_index_table(local_idx)), policy
        assert got.index is not None and local.index is not None
        assert got.index["recrawled"] == local.index["recrawled"], policy
        assert {k: got.index[k] for k in _COMPARED + _MATCHED} == {
            k: local.index[k] for k in _COMPARED + _MATCHED
        }
        assert {k: got.counts[k] for k in _COUNTS} == {k: local.counts[k] for k in _COUNTS}
        assert (got.clusters, got.cluster_sizes) == (local.clusters, local.cluster_sizes)
        lines = (tmp_path / f"l-{policy}.removed.jsonl").read_text().splitlines()
        why = {json.loads(x)["id"]: json.loads(x)["neardup"] for x in lines}
        assert (why["u1"]["reason"], why["u1"]["duplicate_of"]) == ("exact", "u1")
        assert (why["u2"]["reason"], why["u2"]["duplicate_of"]) == ("near", "u2")
        assert (why["n2"]["reason"], why["n2"]["duplicate_of"]) == ("exact", "i9")  # 33.12
        assert (why["z2"]["reason"], why["z2"]["duplicate_of"]) == ("exact", "z0")  # 33.12
        assert ("u3" in why) == (policy == "keep-indexed")
    # keep-both's derived id, met again: the same changed text is its exact copy.
    again = write_shards(tmp_path / "again", [_RECRAWL_NEW[2]], 1)
    local = _local_run(again, tmp_path, "l-again", tmp_path / "l-keep-both")
    params = SparkParams(index=str(tmp_path / "s-keep-both"))
    got = run_spark_dedup(spark, again, str(tmp_path / "s-again.jsonl"), params=params,
                          removed=str(tmp_path / "s-again.removed.jsonl"))  # fmt: skip
    mine = (tmp_path / "l-again.removed.jsonl").read_text(encoding="utf-8").splitlines()
    assert _unnamed(part_lines(tmp_path / "s-again.removed.jsonl", ordered=True)) == _unnamed(mine)
    assert json.loads(mine[0])["neardup"]["duplicate_of"].startswith("u3#rev-")
    assert got.index is not None and got.index["version_written"] is None


def test_spark_against_an_index_with_deletion_vectors_equals_the_local_engine(
    spark: Any, tmp_path: Path
) -> None:
    """Indexed documents deleted (``neardup index delete``) are no longer matched by either
    engine, and a replace on top of them adds to the part's vector: Spark's outputs, --removed
    rows, live index rows and counts are the local engine's."""
    from neardup.core.engine import delete_ids

    base = write_shards(tmp_path / "base", _RECRAWL_BASE, 1)
    new = write_shards(tmp_path / "new", _RECRAWL_NEW, 2)
    origin = tmp_path / "origin"
    _local_run(base, tmp_path, "base", origin)
    assert delete_ids(str(origin), ["u1", "i9", "nope"]).deleted == ("i9", "u1")
    local_idx, spark_idx = tmp_path / "l", tmp_path / "s"
    shutil.copytree(origin, local_idx)
    shutil.copytree(origin, spark_idx)
    local = _local_run(new, tmp_path, "l", local_idx, recrawled="replace")
    params = SparkParams(index=str(spark_idx), recrawled="replace")
    got = run_spark_dedup(spark, new, str(tmp_path / "s.jsonl"), params=params,
                          removed=str(tmp_path / "s.removed.jsonl"))  # fmt: skip
    for kind in ("", ".removed"):
        mine = (tmp_path / f"l{kind}.jsonl").read_text(encoding="utf-8").splitlines()
        theirs = part_lines(tmp_path / f"s{kind}.jsonl", ordered=True)
        assert _unnamed(theirs) == _unnamed(mine), kind
    assert _index_table(spark_idx).equals(_index_table(local_idx))
    assert got.index is not None and local.index is not None
    assert {k: got.index[k] for k in _COMPARED + _MATCHED} == {
        k: local.index[k] for k in _COMPARED + _MATCHED
    }
    assert {k: got.counts[k] for k in _COUNTS} == {k: local.counts[k] for k in _COUNTS}
    lines = (tmp_path / "l.removed.jsonl").read_text().splitlines()
    why = {json.loads(x)["id"]: json.loads(x)["neardup"] for x in lines}
    assert "u1" not in why  # its indexed document is deleted: u1 is new again
    assert (why["n2"]["reason"], why["n2"]["duplicate_of"]) == ("exact", "n1")  # not i9
    written = {json.loads(x)["id"] for x in (tmp_path / "l.jsonl").read_text().splitlines()}
    assert {"u1", "n1", "u3"} <= written
    for idx in (local_idx, spark_idx):
        opened = DocIndex.open(str(idx))
        assert opened.parts[0].deleted is not None and opened.parts[0].deleted.rows == 3
        assert set(_index_table(idx).column("id").to_pylist()) >= {"u1", "u2", "u3", "n1"}
        assert "i9" not in set(_index_table(idx).column("id").to_pylist())


def test_spark_copy_of_a_near_dropped_keeper_names_the_survivor_as_locally(
    spark: Any, tmp_path: Path
) -> None:
    """Issue 33.12 without an index: z2 copies z1, which the near stage drops for z0; z2 names
    z0 (the survivor) with z1's estimate, on Spark as on the local engine, byte for byte."""
    from neardup.app.cli.dedup import run_dedup
    from neardup.app.cli.options import DedupOptions

    new = write_shards(tmp_path / "new", _RECRAWL_NEW, 2)
    run_dedup(DedupOptions(inputs=tuple(new), output=str(tmp_path / "l.jsonl"),
                           removed=str(tmp_path / "l.removed.jsonl"), quiet=True))  # fmt: skip
    run_spark_dedup(
        spark, new, str(tmp_path / "s.jsonl"), removed=str(tmp_path / "s.removed.jsonl")
    )
    mine = (tmp_path / "l.removed.jsonl").read_text(encoding="utf-8").splitlines()
    assert part_lines(tmp_path / "s.removed.jsonl", ordered=True) == mine
    why = {json.loads(x)["id"]: json.loads(x)["neardup"] for x in mine}
    assert (why["z2"]["reason"], why["z2"]["duplicate_of"]) == ("exact", "z0")
    assert why["z2"]["estimate"] == why["z1"]["estimate"] < 1.0


def _words(name: str) -> str:
    """A long text of words of its own: its near copies are found, others' are not."""
    return " ".join(f"{name}w{i} x{i * 7}" for i in range(120))


def test_spark_and_local_runs_drop_copies_of_what_the_service_flushed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``neardup serve --index IDX`` flushes its documents (and a deletion) into IDX; then a
    read-mode run of either engine drops the new rows' near copies of the live ones, keeps the
    copy of the deleted one, and the two engines write the same lines."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from neardup.app.config import Settings
    from neardup.app.service import NewDoc, Service
    from neardup.app.service import pool as pool_module

    monkeypatch.setattr(
        pool_module, "spawn_pool", lambda workers, *, warm=None: ThreadPoolExecutor(workers)
    )
    origin = tmp_path / "idx"
    _local_run(write_shards(tmp_path / "base", [{"id": "b1", "text": _words("b")}], 1),
               tmp_path, "base", origin)  # fmt: skip

    async def serve() -> None:
        settings = Settings(workers=1, data_dir=tmp_path / "data", index=str(origin),
                            flush_rows=0, flush_seconds=1e9)  # fmt: skip
        service = await Service.start(settings)
        try:
            await service.register([NewDoc(n, _words(n), {}) for n in ("s1", "s2", "s3")])
            await service.flush()
            await service.delete("s2")
        finally:
            await service.close()  # the deletion flushed at shutdown

    asyncio.run(serve())
    new = [{"id": f"n-{n}", "text": _words(n) + " one more"} for n in ("s1", "s2", "s3", "b")]
    inputs = write_shards(tmp_path / "new", [*new, {"id": "fresh", "text": _words("f")}], 2)
    _local_run(inputs, tmp_path, "l", origin, index_mode="read")
    params = SparkParams(index=str(origin), index_mode="read")
    run_spark_dedup(spark, inputs, str(tmp_path / "s.jsonl"), params=params)
    mine = (tmp_path / "l.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(x)["id"] for x in mine) == ["fresh", "n-s2"]
    assert _unnamed(part_lines(tmp_path / "s.jsonl", ordered=True)) == _unnamed(mine)
