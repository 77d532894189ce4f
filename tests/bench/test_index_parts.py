"""``bench.index.parts`` at a tiny size: every figure measured, the served index compacted."""

from __future__ import annotations

from pathlib import Path

from bench.index.parts import markdown, measure


def test_parts_bench_measures_before_during_and_after_a_compaction(tmp_path: Path) -> None:
    result = measure(3_000, 10, tmp_path, queries=20, repeat=1)
    before, after, on = result["before"], result["after"], result["on"]
    assert before["parts"] == 11 and after["parts"] < before["parts"]
    assert before["rows"] == after["rows"] == 5_000
    assert on["parts_after"] == after["parts"] and on["compaction_s"] > 0
    assert on["after"] != "-" and result["off"]["after"] != "-"
    assert all(b > 0 for b in (before["near_one_ms"], after["flush_s"], after["id_one_ms"]))
    assert "after compaction" in markdown(result, "test")
