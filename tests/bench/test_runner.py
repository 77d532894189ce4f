"""``python -m bench``: the record of a run, and nothing written when a module fails."""

import pytest

import bench.__main__ as runner
from bench.__main__ import _section, record


def test_a_section_keeps_its_own_heading_or_gets_the_module_name():
    assert _section("bench.batch", "## Batch dedup\n\n| a |\n") == "## Batch dedup\n\n| a |\n"
    assert _section("bench.decont", "\n| a |\n\n") == "## `bench.decont`\n\n| a |\n"


def test_a_section_leaves_out_the_plain_text_before_the_markdown():
    output = "ingest: 8583 docs/s\n  lag: p50 7 ms\n\n## Service\n\n| a | b |\n|---|---|\n"
    assert _section("bench.service", output) == "## Service\n\n| a | b |\n|---|---|\n"


def test_two_tables_one_after_the_other_stay_two_tables():
    output = "| a |\n|---|\n| 1 |\n| fact |\n|---|\n| x |\n"
    expected = "## `m`\n\n| a |\n|---|\n| 1 |\n\n| fact |\n|---|\n| x |\n"
    assert _section("m", output) == expected


def test_the_record_names_the_run_and_holds_every_section_in_order():
    text = record(["## One\n", "## Two\n"], "T0", "T1", "0.10, 0.20, 0.30", ["--output", "x"])
    assert text.startswith("# Benchmark results\n")
    assert "| date (start - end of run) | T0 - T1 |" in text
    assert "`python -m bench --output x`" in text
    assert "0.10, 0.20, 0.30 at start" in text
    assert text.index("## One") < text.index("## Two")


def test_a_failing_module_leaves_the_results_file_as_it_was(tmp_path, monkeypatch):
    results = tmp_path / "RESULTS.md"
    results.write_text("the previous run\n")
    monkeypatch.setattr(runner, "MODULES", ("bench.common.machine", "bench.no_such_module"))
    with pytest.raises(SystemExit, match=r"bench\.no_such_module failed"):
        runner.main(["--output", str(results)])
    assert results.read_text() == "the previous run\n"
    assert [p.name for p in tmp_path.iterdir()] == ["RESULTS.md"]
