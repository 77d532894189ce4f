"""``bench.index.ids`` at a tiny size: every check and process measured on both paths, and the
index kept for the next run (which builds nothing)."""

import json
import subprocess
import sys

from tests.indexes import ROOT, env, latest_manifest


def _run(tmp_path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "bench.index.ids", "--docs", "3000", "--part-docs", "1000",
         "--repeat", "1", "--keep", str(tmp_path), "--markdown"],
        cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_tiny_run_measures_both_paths_and_keeps_its_index(tmp_path) -> None:
    first = _run(tmp_path)
    [row] = [line for line in first.stdout.splitlines() if line.startswith("| 3,000 |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == 13 and all(float(c.split(" / ")[0]) >= 0 for c in cells[1:])
    result = json.loads(first.stderr.strip().splitlines()[-1])
    assert result["build_s"] > 0
    _, body = latest_manifest(tmp_path / "idx-ids-3000")
    assert body["format_version"] == 4 and all("ids" in p for p in body["parts"])  # restored
    again = json.loads(_run(tmp_path).stderr.strip().splitlines()[-1])
    assert again["build_s"] is None
