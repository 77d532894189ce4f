"""``bench.index.serve`` at a tiny size: the three servers measured, the served index's
documents matched by the near copies among the queries (and by nothing else), and the flushing
one's flush timed."""

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
    assert len(rows) == 3
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert cells[0][:2] == ["`neardup serve`", "0"] and cells[0][7] == "0 of 6"
    assert cells[1][:2] == ["`neardup serve --index IDX`, read only", "5,000"]
    assert cells[1][7] == "3 of 6"
    # The service's own flushed documents are not counted as the index's others.
    assert cells[2][:2] == ["`neardup serve --index IDX --flush-rows 10000`", "5,000"]
    assert cells[2][7] == "3 of 6"
    # Both registration batches (1,000 and 10,000 new documents) were timed on every server,
    # the flush on the flushing one only, and every stop.
    assert all(len(c) == 13 and float(c[8]) > 0 and float(c[9]) > 0 for c in cells)
    assert [c[10] for c in cells[:2]] == ["-", "-"] and float(cells[2][10]) > 0
    assert all(float(c[12]) >= 0 for c in cells)
