"""``bench.index.memtable`` at a tiny size: a flushed service served, its figures measured."""

from __future__ import annotations

from pathlib import Path

from bench.index.memtable import markdown, measure


def test_memtable_bench_serves_the_flushed_documents_and_measures_them(tmp_path: Path) -> None:
    result = measure(2_000, tmp_path, None)
    [after] = result["runs"]
    assert after["name"] == "after" and after["documents"] == 3_000  # and the 1,000 registered
    assert after["clusters"] > 0  # a tenth are near copies
    assert all(after[k] > 0 for k in ("ready_s", "rss_anon_mib", "p50_ms", "register_1000_s"))
    assert "| after | 2,000 |" in markdown(result, "test")
