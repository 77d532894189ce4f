"""``bench.index.serve`` at a tiny size: both servers measured, the served index's documents
matched by the near copies among the queries (and by nothing else)."""

import subprocess
import sys

from tests.indexes import ROOT, env


def test_a_tiny_run_serves_with_and_without_the_index(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.index.serve", "--docs", "3000", "--queries", "6",
         "--warmup", "2", "--work", str(tmp_path), "--markdown"],
        cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| `neardup serve")]
    assert len(rows) == 2
    assert rows[0].startswith("| `neardup serve` | 0 |") and rows[0].endswith("| 0 of 6 |")
    assert rows[1].startswith("| `neardup serve --index IDX` | 5,000 |")
    assert rows[1].endswith("| 3 of 6 |")
