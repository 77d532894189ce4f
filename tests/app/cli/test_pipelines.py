"""``neardup dedup`` in a data pipeline (issue 12): any schema, any storage, what was removed
and why, which member survives, early and clear errors, runs a team can operate."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from neardup.app.cli import main
from neardup.app.cli import progress as progress_module
from neardup.app.cli.main import MINHASH_DEFAULTS, TOKENIZERS, build_parser
from neardup.core.engine import TOKENIZERS as engine_tokenizers
from neardup.core.engine import MinhashParams
from tests.app.cli.licenses import EVAL_PASSAGE, license_rows, mit, write_example

ROOT = Path(__file__).resolve().parents[3]
SHELL_NGRAM = "tom found a shiny red shell by the river and carried it home"
MIT_IDS = ["deb/libfontenc1", "deb/libxau6", "py/pip-26.3.dist-info/LICENSE.txt",
           "py/six-1.16.0.dist-info/LICENSE"]  # fmt: skip


def neardup(*args, cwd, stdin=""):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "neardup", *map(str, args)], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=300, input=stdin,
    )  # fmt: skip


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def licenses(tmp_path):
    """README.md's worked example, written as ``python -m tests.app.cli.licenses`` writes it."""
    write_example(tmp_path)
    return tmp_path


def run(tmp_path, *args) -> int:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        return main([*map(str, args)])
    finally:
        os.chdir(cwd)


# --- 3. what was removed and why; which member survives -------------------------------------


def test_removed_lists_every_dropped_row_unchanged_with_why(licenses):
    result = neardup("dedup", "licenses.jsonl", "--output", "kept.jsonl", "--removed",
                     "removed.jsonl", "--protected", "eval.jsonl", "--workers", "1",
                     cwd=licenses)  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in license_rows()}
    removed = {r["id"]: r for r in read_jsonl(licenses / "removed.jsonl")}
    kept = {r["id"]: r for r in read_jsonl(licenses / "kept.jsonl")}
    assert set(removed) | set(kept) == set(rows) and not set(removed) & set(kept)
    for doc_id, row in removed.items():
        why = row.pop("neardup")
        assert row == rows[doc_id]  # the input row, unchanged
        assert set(why) == {"reason", "duplicate_of", "estimate", "set", "item", "ngram"}
    near = [i for i in MIT_IDS if i != "deb/libfontenc1"]
    for doc_id in near:  # smallest id survives by default
        why = read_why(licenses, doc_id)
        assert why["reason"] == "near" and why["duplicate_of"] == "deb/libfontenc1"
        assert 0.8 <= why["estimate"] < 1.0
    assert read_why(licenses, "deb/libedit2") == {
        "reason": "exact", "duplicate_of": "deb/libbsd0", "estimate": 1.0, "set": None,
        "item": None, "ngram": None,
    }  # fmt: skip
    assert read_why(licenses, "web/blog-post-17") == {
        "reason": "contaminated", "duplicate_of": None, "estimate": None, "set": "eval.jsonl",
        "item": "story-3", "ngram": SHELL_NGRAM,
    }  # fmt: skip
    manifest = json.loads((licenses / "kept.jsonl.manifest.json").read_text())
    assert manifest["removed"]["rows"] == len(removed) == 5


def read_why(tmp_path, doc_id):
    return next(r for r in read_jsonl(tmp_path / "removed.jsonl") if r["id"] == doc_id)["neardup"]


@pytest.mark.parametrize(
    ("policy", "survivor"),
    [
        ("smallest-id", "deb/libfontenc1"),
        ("first", "deb/libfontenc1"),
        ("longest", "py/pip-26.3.dist-info/LICENSE.txt"),
        ("max:quality", "deb/libxau6"),
    ],
)
def test_keep_policy_chooses_the_survivor_and_the_cluster_keeps_its_smallest_id(
    licenses, policy, survivor
):
    rows = license_rows()
    rows.insert(0, rows.pop(2))  # pip first in input order
    if policy == "first":
        survivor = "py/pip-26.3.dist-info/LICENSE.txt"
    write_jsonl(licenses / "licenses.jsonl", rows)
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "kept.jsonl", "--removed",
               "removed.jsonl", "--keep", policy, "--workers", "1", "--quiet") == 0  # fmt: skip
    kept = {r["id"]: r for r in read_jsonl(licenses / "kept.jsonl")}
    assert [i for i in MIT_IDS if i in kept] == [survivor]
    assert kept[survivor]["meta"]["minhash_cluster"] == "deb/libfontenc1"
    for doc_id in MIT_IDS:
        if doc_id != survivor:
            assert read_why(licenses, doc_id)["duplicate_of"] == survivor


def test_keep_applies_to_the_exact_stage_too_ties_to_the_smallest_id(tmp_path):
    text = mit("2001 Same Holder")
    rows = [{"id": "b", "text": text, "q": 5}, {"id": "c", "text": text, "q": 9},
            {"id": "a", "text": text, "q": 9}]  # fmt: skip
    write_jsonl(tmp_path / "in.jsonl", rows)
    for policy, survivor in [("first", "b"), ("max:q", "a"), ("longest", "a")]:
        assert run(tmp_path, "dedup", "in.jsonl", "--output", "o.jsonl", "--removed", "r.jsonl",
                   "--keep", policy, "--workers", "1", "--quiet") == 0  # fmt: skip
        assert [r["id"] for r in read_jsonl(tmp_path / "o.jsonl")] == [survivor]
        assert {r["neardup"]["reason"] for r in read_jsonl(tmp_path / "r.jsonl")} == {"exact"}


def test_keep_max_compares_integers_past_2_53_exactly(tmp_path):
    """2**70 + 1 beats 2**70 (float64 would tie them, and the smaller id would win)."""
    text = mit("2001 Same Holder")
    rows = [{"id": "a", "text": text, "q": 2**70}, {"id": "b", "text": text, "q": 2**70 + 1},
            {"id": "c", "text": text, "q": 1.5e21}]  # fmt: skip
    write_jsonl(tmp_path / "in.jsonl", rows)
    assert run(tmp_path, "dedup", "in.jsonl", "--output", "o.jsonl", "--keep", "max:q",
               "--workers", "1", "--quiet") == 0  # fmt: skip
    assert [r["id"] for r in read_jsonl(tmp_path / "o.jsonl")] == ["c"]  # 1.5e21 > 2**70 + 1
    write_jsonl(tmp_path / "in.jsonl", rows[:2])
    assert run(tmp_path, "dedup", "in.jsonl", "--output", "o.jsonl", "--keep", "max:q",
               "--workers", "1", "--quiet") == 0  # fmt: skip
    assert [r["id"] for r in read_jsonl(tmp_path / "o.jsonl")] == ["b"]


def test_keep_duplicates_tags_rows_the_same_way(licenses):
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "all.jsonl", "--keep-duplicates",
               "--workers", "1", "--quiet") == 0  # fmt: skip
    out = {r["id"]: r for r in read_jsonl(licenses / "all.jsonl")}
    assert set(out) == {r["id"] for r in license_rows()}
    assert out["deb/libedit2"]["neardup"]["reason"] == "exact"
    assert out["deb/libxau6"]["neardup"]["duplicate_of"] == "deb/libfontenc1"
    assert "neardup" not in out["deb/libfontenc1"]
    assert all("minhash_cluster" in r["meta"] for r in out.values())


def test_a_bad_keep_policy_or_max_field_is_exit_2(licenses, capsys):
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "o.jsonl", "--keep", "best") == 2
    assert "max:FIELD" in capsys.readouterr().err
    write_jsonl(licenses / "s.jsonl", [{"id": "a", "text": "x y", "q": "high"}])
    assert run(licenses, "dedup", "s.jsonl", "--output", "o.jsonl", "--keep", "max:q",
               "--workers", "1") == 2  # fmt: skip
    assert "s.jsonl:1: 'q' must be a number" in capsys.readouterr().err
    assert not (licenses / "o.jsonl").exists()


# --- 2. any schema ------------------------------------------------------------------------


def test_id_and_text_fields_by_dotted_path_and_integer_ids(tmp_path):
    text = mit("1999 Nested")
    rows = [
        {"doc": {"num": 10}, "body": {"content": text}, "lang": "en", "tags": ["a"]},
        {"doc": {"num": 9}, "body": {"content": text}, "lang": "fr", "tags": []},
        {"doc": {"num": 100}, "body": {"content": "a lone short text"}, "lang": "en"},
    ]
    write_jsonl(tmp_path / "in.jsonl", rows)
    assert run(tmp_path, "dedup", "in.jsonl", "--output", "o.jsonl", "--id-field", "doc.num",
               "--text-field", "body.content", "--removed", "r.jsonl", "--workers", "1",
               "--quiet") == 0  # fmt: skip
    out = read_jsonl(tmp_path / "o.jsonl")
    # Integer ids order as their decimal strings: "10" < "9", so 10 survives.
    assert [r["doc"]["num"] for r in out] == [10, 100]
    assert out[0] == {**rows[0], "meta": {"minhash_cluster": "10"}}
    [removed] = read_jsonl(tmp_path / "r.jsonl")
    assert removed["doc"] == {"num": 9} and removed["neardup"]["duplicate_of"] == "10"


def test_parquet_columns_pass_through_with_their_types(tmp_path):
    text = mit("2004 Parquet")
    table = pa.table({
        "id": pa.array(["p1", "p2", "p3"]),
        "text": pa.array([text, text, "another short text"]),
        "score": pa.array([1, 2, 3], type=pa.int32()),
        "meta": pa.array([{"lang": "en"}, {"lang": "de"}, {"lang": "fr"}]),
        "tags": pa.array([["x"], [], ["y", "z"]], type=pa.list_(pa.string())),
    })  # fmt: skip
    pq.write_table(table, tmp_path / "in.parquet")
    assert run(tmp_path, "dedup", "in.parquet", "--output", "o.parquet", "--workers", "1",
               "--quiet") == 0  # fmt: skip
    out = pq.read_table(tmp_path / "o.parquet")
    assert out.schema.field("score").type == pa.int32()
    assert out.schema.field("tags").type == pa.list_(pa.string())
    assert pa.types.is_struct(out.schema.field("meta").type)  # never JSON text
    assert out.to_pylist() == [
        {"id": "p1", "text": text, "score": 1, "meta": {"lang": "en", "minhash_cluster": "p1"},
         "tags": ["x"]},
        {"id": "p3", "text": "another short text", "score": 3,
         "meta": {"lang": "fr", "minhash_cluster": "p3"}, "tags": ["y", "z"]},
    ]  # fmt: skip


# --- 4. errors: one line, exit 2, nothing left behind -------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing.jsonl", "--output", "o.jsonl"], "missing.jsonl: no such file or directory"),
        (["licenses.jsonl", "--output", "nodir/o.jsonl"], "no such directory"),
        (["licenses.jsonl", "--output", "o.jsonl", "--protected", "nope.jsonl"], "nope.jsonl"),
        (["nosuch://bucket/x.jsonl", "--output", "o.jsonl"], "unknown URL scheme"),
        (["licenses.jsonl", "--output", "o.jsonl", "--manifest", "nodir/m.json"], "nodir"),
        (["licenses.jsonl", "--output", "o.txt"], "unknown output format"),
        (["-", "--output", "o.jsonl", "--protected", "-"], "standard input ('-') can be read once"),
        (["-", "--output", "-", "--removed", "-"], "cannot both be standard output"),
    ],
)
def test_bad_paths_are_one_line_and_exit_2_leaving_nothing(licenses, args, says):
    before = sorted(p.name for p in licenses.iterdir())
    result = neardup("dedup", *args, "--workers", "1", cwd=licenses)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and says in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in licenses.iterdir()) == before


def test_compressed_and_parquet_protected_sets(licenses):
    item = {"id": "story-3", "question": EVAL_PASSAGE}
    (licenses / "e.jsonl.gz").write_bytes(gzip.compress(json.dumps(item).encode()))
    (licenses / "e.jsonl.zst").write_bytes(zstandard.compress(json.dumps(item).encode()))
    pq.write_table(pa.Table.from_pylist([item]), licenses / "e.parquet")
    for name in ("e.jsonl.gz", "e.jsonl.zst", "e.parquet", "-"):
        result = neardup("contamination", "licenses.jsonl", "--protected", name, "--quiet",
                         cwd=licenses, stdin=json.dumps(item) + "\n")  # fmt: skip
        assert result.returncode == 0, result.stderr
        [hit] = json.loads(result.stdout)["items"]
        named = {k: hit[k] for k in ("set", "item", "document_ids", "first_ngram")}
        assert named == {"set": name, "item": "story-3", "document_ids": ["web/blog-post-17"],
                         "first_ngram": SHELL_NGRAM}  # fmt: skip


# --- 5. paths, directories, globs, '-', fsspec URLs ---------------------------------------


def test_directories_globs_and_stdin_stdout(licenses):
    rows = license_rows()
    shards = licenses / "shards"
    (shards / "2024").mkdir(parents=True)
    write_jsonl(shards / "2024" / "a.jsonl", rows[:4])
    (shards / "b.jsonl.gz").write_bytes(
        gzip.compress("".join(json.dumps(r) + "\n" for r in rows[4:]).encode())
    )
    expected = ["deb/libfontenc1", "deb/libbsd0", "py/requests-2.32.dist-info/LICENSE",
                "web/blog-post-17"]  # fmt: skip
    for inputs in (["shards"], ["shards/*/*.jsonl", "shards/*.gz"]):
        result = neardup("dedup", *inputs, "--output", "-", "--workers", "1", "--quiet",
                         cwd=licenses)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == expected
    stdin = (licenses / "licenses.jsonl").read_text()
    result = neardup("dedup", "-", "--output", "-", "--workers", "1", "--quiet", cwd=licenses,
                     stdin=stdin)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == expected
    assert not list(licenses.glob("*.manifest.json"))  # no manifest for stdout unless asked


def test_fsspec_urls_for_inputs_outputs_and_protected_sets(licenses):
    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/in/part-0.jsonl", (licenses / "licenses.jsonl").read_bytes())
    fs.pipe("/bucket/eval.jsonl", (licenses / "eval.jsonl").read_bytes())
    try:
        assert run(licenses, "dedup", "memory://bucket/in", "--output",
                   "memory://bucket/out/kept.parquet", "--removed",
                   f"file://{licenses}/removed.jsonl", "--protected", "memory://bucket/eval.jsonl",
                   "--workers", "1", "--quiet") == 0  # fmt: skip
        with fs.open("/bucket/out/kept.parquet", "rb") as fh:
            kept = pq.read_table(fh).column("id").to_pylist()
        assert kept == ["deb/libfontenc1", "deb/libbsd0", "py/requests-2.32.dist-info/LICENSE"]
        manifest = json.loads(fs.cat("/bucket/out/kept.parquet.manifest.json"))
        assert manifest["inputs"] == [
            {
                "path": "memory://bucket/in/part-0.jsonl",
                "bytes": (licenses / "licenses.jsonl").stat().st_size,
            }
        ]
        assert [r["neardup"]["reason"] for r in read_jsonl(licenses / "removed.jsonl")] == [
            "near", "near", "near", "exact", "contaminated"]  # fmt: skip
        assert not [p for p in fs.find("/bucket") if ".partial-" in p]
    finally:
        fs.rm("/bucket", recursive=True)


# --- 6. repeated ids while reading; --id-prefix file ---------------------------------------


def test_a_repeated_id_stops_the_read_naming_file_and_line(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "LICENSE", "text": mit("1 A")}])
    write_jsonl(tmp_path / "b.jsonl", [{"id": "x", "text": "y z"}, {"id": "LICENSE", "text": "q"}])
    result = neardup("dedup", "a.jsonl", "b.jsonl", "--output", "o.jsonl", "--workers", "1",
                     cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert "b.jsonl:2: id 'LICENSE' appears again" in result.stderr
    assert "--id-prefix file" in result.stderr
    assert run(tmp_path, "dedup", "a.jsonl", "b.jsonl", "--output", "o.jsonl", "--id-prefix",
               "file", "--workers", "1", "--quiet") == 0  # fmt: skip
    ids = [r["id"] for r in read_jsonl(tmp_path / "o.jsonl")]
    assert ids == ["a.jsonl/LICENSE", "b.jsonl/x", "b.jsonl/LICENSE"]


# --- 7. operable runs -------------------------------------------------------------------


def test_version_flag():
    result = neardup("--version", cwd=ROOT)
    assert result.returncode == 0 and result.stdout.startswith("neardup ")


def test_every_batch_flag_has_help_and_shows_its_default():
    assert MinhashParams().as_dict() == MINHASH_DEFAULTS
    assert engine_tokenizers == TOKENIZERS
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "dedup" in a.choices)
    for command in ("dedup", "contamination"):
        sub = subparsers.choices[command]
        formatter = sub.formatter_class(command)
        for action in sub._actions:
            if action.dest == "help":
                continue
            text = formatter._get_help_string(action) or ""
            assert action.help, f"{command} {action.option_strings} has no help"
            if action.option_strings and not action.required:
                assert "default" in text, f"{command} {action.option_strings}: {text}"


def test_manifest_has_version_command_line_cluster_sizes_and_cpu_workers(licenses):
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "o.jsonl", "--quiet") == 0
    manifest = json.loads((licenses / "o.jsonl.manifest.json").read_text())
    assert manifest["version"] and manifest["version"][0].isdigit()
    assert manifest["command"] == ["neardup", "dedup", "licenses.jsonl", "--output", "o.jsonl",
                                   "--quiet"]  # fmt: skip
    # clusters of two or more by size (adding up to ``clusters``), and the singletons apart
    assert manifest["cluster_sizes"] == {"2": 1, "4": 1} and manifest["clusters"] == 2
    assert manifest["singletons"] == 2
    assert manifest["parameters"]["workers"] == (os.cpu_count() or 1)


def test_progress_has_a_total_and_an_eta_on_every_pass(licenses, monkeypatch, capsys):
    monkeypatch.setattr(progress_module, "LOG_EVERY", 0.0)
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "o.jsonl", "--protected",
               "eval.jsonl", "--workers", "1") == 0  # fmt: skip
    err = capsys.readouterr().err
    size = (licenses / "licenses.jsonl").stat().st_size
    for stage in ("signatures", "write"):
        running = [ln for ln in err.splitlines() if f"{stage}: running" in ln]
        assert running and all(f"/{size} bytes" in ln and "ETA" in ln for ln in running), err


def test_dry_run_reports_the_counts_and_writes_nothing(licenses, capsys):
    before = sorted(p.name for p in licenses.iterdir())
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "o.jsonl", "--removed", "r.jsonl",
               "--protected", "eval.jsonl", "--workers", "1", "--dry-run",
               "--quiet") == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in licenses.iterdir()) == before
    assert report["counts"] == {"read": 8, "exact_dropped": 1, "near_dropped": 3,
                                "decontaminated": 1, "written": 3}  # fmt: skip


def test_dry_run_needs_no_output_and_a_real_run_names_the_missing_flag(licenses, capsys):
    before = sorted(p.name for p in licenses.iterdir())
    assert run(licenses, "dedup", "licenses.jsonl", "--dry-run", "--quiet") == 0
    report = json.loads(capsys.readouterr().out)
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "o.jsonl", "--dry-run") == 0
    assert json.loads(capsys.readouterr().out) == report
    assert report["counts"]["written"] == 4 and report["singletons"] == 2
    with pytest.raises(SystemExit) as usage:
        run(licenses, "dedup", "licenses.jsonl", "--quiet")
    assert usage.value.code == 2
    assert "required: --output (or --dry-run" in capsys.readouterr().err
    assert sorted(p.name for p in licenses.iterdir()) == before


def test_removed_and_kept_duplicates_in_parquet_have_a_typed_reason(licenses):
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "o.parquet", "--removed",
               "r.parquet", "--protected", "eval.jsonl", "--workers", "1",
               "--quiet") == 0  # fmt: skip
    removed = pq.read_table(licenses / "r.parquet")
    assert removed.schema.field("neardup").type.field("ngram").type == pa.string()
    assert [r["reason"] for r in removed.column("neardup").to_pylist()] == [
        "near", "near", "near", "exact", "contaminated"]  # fmt: skip
    assert "neardup" not in pq.read_table(licenses / "o.parquet").column_names
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "all.parquet",
               "--keep-duplicates", "--workers", "1", "--quiet") == 0  # fmt: skip
    tagged = pq.read_table(licenses / "all.parquet").column("neardup").to_pylist()
    assert [t and t["reason"] for t in tagged] == [None, "near", "near", "near", None, "exact",
                                                   None, None]  # fmt: skip


def test_the_worked_example_corpus_is_written_by_the_module_readme_names(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tests.app.cli.licenses", str(tmp_path)], cwd=ROOT,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert read_jsonl(tmp_path / "licenses.jsonl") == license_rows()
    assert read_jsonl(tmp_path / "eval.jsonl") == [{"id": "story-3", "question": EVAL_PASSAGE}]
    assert "python -m tests.app.cli.licenses" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_a_protected_set_that_protects_nothing_is_warned_about(licenses, capsys):
    """Items all under 13 words protect no n-gram: every check against them says clean. The
    service refuses such a set (422); a batch run goes on, saying so on stderr."""
    write_jsonl(licenses / "short.jsonl", [{"id": "q1", "question": "too short to protect"}])
    assert run(licenses, "dedup", "licenses.jsonl", "--output", "o.jsonl", "--protected",
               "short.jsonl", "--protected", "eval.jsonl", "--quiet") == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "neardup dedup: warning: --protected short.jsonl: it protects nothing" in err
    assert "eval.jsonl" not in err  # a set that protects something is not named
    assert run(licenses, "contamination", "licenses.jsonl", "--protected", "short.jsonl",
               "--output", "report.json", "--quiet") == 0  # fmt: skip
    assert "neardup contamination: warning: --protected short.jsonl: it protects" in (
        capsys.readouterr().err
    )
