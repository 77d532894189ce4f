"""``bench.index`` at a tiny size: the new dump it writes, and one whole run of its steps."""

import json
import subprocess
import sys
from collections import Counter

from bench.batch.corpus import write_corpus
from bench.index.batch import INDEX_EXACT_RATE, INDEX_NEAR_RATE, write_batch
from tests.indexes import ROOT, env


def test_the_new_dump_holds_copies_of_indexed_originals_under_new_ids(tmp_path):
    base, out = tmp_path / "base.jsonl", tmp_path / "batch.jsonl"
    write_corpus(base, 2_000, seed=0, corpus="a")
    counts = write_batch(base, out, 400, base_docs=2_000, seed=0, corpus="a")
    indexed = {row["id"]: row for row in map(json.loads, base.read_text().splitlines())}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == counts.docs == 400
    assert len({r["id"] for r in rows}) == 400 and not {r["id"] for r in rows} & set(indexed)
    kinds = Counter(r["meta"].get("kind", "original") for r in rows)
    assert kinds["index-exact"] == counts.index_exact == round(400 * INDEX_EXACT_RATE)
    assert kinds["index-near"] == counts.index_near == round(400 * INDEX_NEAR_RATE)
    assert kinds["exact"] == counts.fresh_exact and kinds["near"] == counts.fresh_near
    for row in rows:
        kind = row["meta"].get("kind")
        if kind in ("index-exact", "index-near"):
            source = indexed[row["meta"]["src"]]
            assert source["meta"] == {}  # an original: the index keeps it
            assert (row["text"] == source["text"]) == (kind == "index-exact")
        elif kind in ("exact", "near"):
            assert row["meta"]["src"].startswith("nd")  # a copy of a fresh document


def test_a_tiny_run_measures_every_step_and_the_incremental_run_drops_the_planted_copies(
    tmp_path,
):
    done = subprocess.run(
        [sys.executable, "-m", "bench.index", "--docs", "1500", "--batch", "300", "--repeat",
         "2", "--workers", "1", "--cache-dir", str(tmp_path), "--markdown"],
        cwd=ROOT, env=env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("## Persistent index (incremental dedup)")
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():  # the first table's rows (the details reuse the names)
        if line.startswith("| ") and " | " in line:
            rows.setdefault(line.split(" | ")[0].strip("| ").split(":")[0], line.split(" | "))
    for run in ("build", "no index", "read", "append", "full rerun"):
        assert run in rows, run
    assert rows["no index"][-1] == "15, 15 |"  # without the index every planted copy stays
    assert rows["append"][-1].split(",")[0] == "0"  # no exact copy of an indexed text kept
    assert rows["read"][-1] == rows["append"][-1]
    assert "| append / no index, wall |" in text and "| full rerun / append, wall |" in text
    assert "| extra peak RSS per indexed document |" in text
    assert "no persistent index" in text
    assert "| batch survivors, append vs full rerun | both " in text
    assert text.count(" wall s of every round | ") == 3  # no index, read and append, twice


def test_the_compaction_memory_bench_measures_each_size_and_the_slope_between(capsys):
    from bench.index.compact import main

    assert main(["--docs", "300", "200", "--parts", "2", "--num-perm", "16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" documents:")[0] for line in lines[:2]] == ["200", "300"]
    assert lines[2].startswith("between the sizes: ") and lines[2].endswith(" MiB")


def test_a_tiny_lookups_run_times_both_layouts_with_key_tables_of_238_bytes_a_doc(tmp_path):
    """``bench.index.lookups`` at 3,000 documents: every cell filled (the query finds its copy)."""
    from bench.index import lookups

    result = lookups.measure(3_000, 1_000, tmp_path, 1, appends=(50,))
    assert 17 * 14 <= result["keys_bytes"] / (3_000 + lookups.REAL_DOCS) < 17 * 14 + 40
    for layout in ("new", "old"):
        assert set(result[layout]) == {"query", "append_50"}
        assert all(wall > 0 and cpu > 0 for wall, cpu in result[layout].values())
    table = lookups.markdown([result], "cmd", (50,)).splitlines()
    assert table[-1].startswith("| 3,000 |") and table[-1].count("|") == 9
