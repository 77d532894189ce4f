"""What a newcomer types (issue 22), through the real command: corpus shards under Dolma's and
C4's names, eval sets as a JSON array or MMLU's CSV, a repeatable --protected, and --keep
max:FIELD on a field the rows lack."""

import csv
import gzip
import json

import pytest

from tests.app.cli.test_cli import neardup

#: 13 words: one protected n-gram per question, its own.
QUESTION = "which statement about the river crossing near old mill number {i} is true"
ROWS = [{"id": f"d{i:02d}", "text": f"document {i} " + "unrelated words " * 8} for i in range(6)]


def _jsonl(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def _one_error_line(result, command="dedup"):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"neardup {command}: error: "), result.stderr
    return lines[0]


@pytest.fixture
def evals(tmp_path):
    """The same 60 questions as a JSON array and as MMLU's headerless CSV, and a corpus that
    contains question 7."""
    items = [{"id": f"q{i}", "question": QUESTION.format(i=i), "answer": "A"} for i in range(60)]
    (tmp_path / "evals.json").write_text(json.dumps(items, indent=2), encoding="utf-8")
    with (tmp_path / "mmlu_test.csv").open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(
            [QUESTION.format(i=i), "yes", "no", "maybe", "never", "A"] for i in range(60)
        )
    rows = [*ROWS, {"id": "leak", "text": "so " + QUESTION.format(i=7) + " indeed"}]
    (tmp_path / "corpus.jsonl").write_text(_jsonl(rows), encoding="utf-8")
    return tmp_path


def test_corpus_shards_named_json_gz_and_ndjson_are_json_lines(tmp_path):
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "a.json.gz").write_bytes(gzip.compress(_jsonl(ROWS[:3]).encode()))
    (tmp_path / "shards" / "b.ndjson").write_text(_jsonl(ROWS[3:5]), encoding="utf-8")
    # a manifest beside the shards is not a shard: a directory gives no plain .json
    (tmp_path / "shards" / "old.manifest.json").write_text('{\n  "version": "0"\n}\n', "utf-8")
    (tmp_path / "c.json").write_text(_jsonl(ROWS[5:]), encoding="utf-8")  # named: read
    result = neardup("dedup", "shards", "c.json", "--output", "out.jsonl", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = [json.loads(line)["id"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out == [r["id"] for r in ROWS]


def test_a_json_array_corpus_is_refused_with_a_hint(tmp_path):
    (tmp_path / "docs.json").write_text(json.dumps(ROWS, indent=1), encoding="utf-8")
    line = _one_error_line(neardup("dedup", "docs.json", "--output", "o.jsonl", cwd=tmp_path))
    assert "docs.json:1: not valid JSON" in line and "one JSON array" in line and "jq -c" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.json"]


def test_an_output_keeps_the_written_formats(tmp_path):
    (tmp_path / "in.jsonl").write_text(_jsonl(ROWS), encoding="utf-8")
    line = _one_error_line(neardup("dedup", "in.jsonl", "--output", "o.json.gz", cwd=tmp_path))
    assert "unknown output format" in line and ".jsonl.gz" in line


@pytest.mark.parametrize("protected", ["evals.json", "mmlu_test.csv"])
def test_contamination_reads_a_json_array_and_mmlus_csv_as_60_items(evals, protected):
    result = neardup(
        "contamination", "corpus.jsonl", "--protected", protected, "--quiet", cwd=evals
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    [read] = report["sets"]
    assert (read["set"], read["items"], read["ngrams"]) == (protected, 60, 60)
    [item] = report["items"]
    assert item["item"] == ("q7" if protected == "evals.json" else "8")  # MMLU: its row
    assert item["document_ids"] == ["leak"]


def test_dedup_decontaminates_with_a_csv_and_names_its_items_in_the_manifest(evals):
    result = neardup(
        "dedup", "corpus.jsonl", "--protected", "mmlu_test.csv", "--protected", "evals.json",
        "--output", "clean.jsonl", "--quiet", cwd=evals,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = json.loads((evals / "clean.jsonl.manifest.json").read_text())
    assert [(p["path"], p["items"]) for p in manifest["protected"]] == [
        ("mmlu_test.csv", 60), ("evals.json", 60)]  # fmt: skip
    assert manifest["counts"]["decontaminated"] == 1


@pytest.mark.parametrize("command", ["dedup", "contamination"])
def test_a_protected_file_not_readable_as_items_is_one_error_line(evals, command):
    (evals / "evals.xlsx").write_bytes(b"PK\x03\x04 not text")
    result = neardup(command, "corpus.jsonl", "--protected", "evals.xlsx", "--output",
                     "o.jsonl", cwd=evals)  # fmt: skip
    line = _one_error_line(result, command)
    assert "evals.xlsx: cannot read this file as protected items" in line and ".csv" in line
    assert not (evals / "o.jsonl").exists()


def test_protected_takes_one_file_and_does_not_swallow_the_inputs_after_it(evals):
    """`--protected a b` used to make b a protected set; now b is an input."""
    (evals / "more.jsonl").write_text(_jsonl([{"id": "m", "text": "more text"}]), "utf-8")
    result = neardup(
        "dedup", "--protected", "evals.json", "corpus.jsonl", "more.jsonl", "--output",
        "out.jsonl", "--quiet", cwd=evals,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = json.loads((evals / "out.jsonl.manifest.json").read_text())
    assert [i["path"] for i in manifest["inputs"]] == ["corpus.jsonl", "more.jsonl"]
    assert [p["path"] for p in manifest["protected"]] == ["evals.json"]
    result = neardup(
        "contamination", "--protected", "evals.json", "--protected", "mmlu_test.csv",
        "corpus.jsonl", "--sample", "corpus.jsonl", "--sample", "more.jsonl",
        "--sample-cap", "0.5", "--quiet", cwd=evals,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [p["set"] for p in json.loads(result.stdout)["sets"]] == [
        "evals.json", "mmlu_test.csv"]  # fmt: skip


def test_keep_max_of_a_field_no_row_has_is_an_error_naming_it(tmp_path):
    (tmp_path / "in.jsonl").write_text(_jsonl(ROWS), encoding="utf-8")
    result = neardup("dedup", "in.jsonl", "--output", "o.jsonl", "--keep", "max:qualty",
                     "--quiet", cwd=tmp_path)  # fmt: skip
    line = _one_error_line(result)
    assert "--keep max:qualty: no row of the 6 read has the field 'qualty'" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_keep_max_counts_and_warns_about_rows_without_the_field(tmp_path):
    rows = [{**r, "quality": i} for i, r in enumerate(ROWS[:4])] + ROWS[4:]
    (tmp_path / "in.jsonl").write_text(_jsonl(rows), encoding="utf-8")
    result = neardup("dedup", "in.jsonl", "--output", "o.jsonl", "--keep", "max:quality",
                     "--quiet", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "neardup dedup: warning: 2 of 6 rows have no 'quality' (--keep max:quality): they "
        "survive a cluster only when no member has it"
    ]
    manifest = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())
    assert manifest["counts"]["keep_field_missing"] == 2
    every = [{**r, "quality": 1} for r in ROWS]
    (tmp_path / "in.jsonl").write_text(_jsonl(every), encoding="utf-8")
    result = neardup("dedup", "in.jsonl", "--output", "o.jsonl", "--keep", "max:quality",
                     "--quiet", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0 and result.stderr == ""
    manifest = json.loads((tmp_path / "o.jsonl.manifest.json").read_text())
    assert "keep_field_missing" not in manifest["counts"]


@pytest.mark.parametrize(
    ("doc_id", "says"),
    [("a\u0000b", "U+0000"), ("line\nbreak", "U+000A"), ("esc\u001b[31m", "U+001B"),
     ("c1\u0085", "U+0085"), ("..", "no URL can carry")],
)  # fmt: skip
def test_an_id_the_service_would_refuse_is_refused_by_the_batch_run_naming_the_line(
    tmp_path, doc_id, says
):
    """One id rule (core's id_problem) for the batch engines and the service: what dedup writes,
    push can send."""
    rows = [{"id": "fine", "text": "a b c d e f"}, {"id": doc_id, "text": "g h i j k l"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ran = neardup("dedup", "in.jsonl", "--output", "out.jsonl", cwd=tmp_path)
    assert ran.returncode == 2
    [line] = ran.stderr.splitlines()
    assert line.startswith("neardup dedup: error: in.jsonl:2: the id ") and says in line, line
    assert not (tmp_path / "out.jsonl").exists()
