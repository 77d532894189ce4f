"""The memory of ``neardup index compact``: peak RSS growth per document (docs/index.md).

For each size, a synthetic index (random signatures and digests, ids like a dump's) of that many
documents in ``--parts`` parts is compacted into one part by a fresh process, which first
compacts a small index (imports, compiled kernels) and then reads its peak RSS
(``ru_maxrss``) before and after the compaction measured. Two sizes separate the cost of a
document (the slope between them) from the batches being read and written (the rest).

Run from the repository root::

    python -m bench.index.compact [--docs 100000 400000] [--parts 10] [--num-perm 128]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["build", "main", "measure"]

#: Documents of the warm-up index (compacted before the measured one, in the same process).
WARM_UP = 2_000

_CHILD = """
import json, resource, sys
from neardup.core.engine import DocIndex, compact_index
warm, url = sys.argv[1], sys.argv[2]
compact_index(warm, neardup="bench", part_rows=10**12)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows = DocIndex.open(url).rows
compact_index(url, neardup="bench", part_rows=10**12)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rows": rows, "growth_bytes": (after - before) * 1024}))
"""


def build(url: str, docs: int, parts: int, num_perm: int, seed: int = 0) -> None:
    """A synthetic index of ``docs`` documents in ``parts`` parts at ``url``."""
    from neardup.core.engine import DocIndex, MinhashParams, commit_index, run_info, write_part

    params = MinhashParams(num_perm=num_perm, bands=16 if num_perm % 16 == 0 else 1)
    rng = np.random.default_rng(seed)
    per = max(docs // parts, 1)
    for k in range(0, docs, per):
        n = min(per, docs - k)
        index = DocIndex.open(url, missing_ok=True)
        ids = [f"dump-{k // per:03d}/doc{i:09d}" for i in range(n)]
        sigs = rng.integers(0, 2**31 - 1, size=(n, num_perm), dtype=np.uint32)
        digests = rng.integers(0, 2**63, size=(n, 2), dtype=np.uint64)
        part = write_part(index, params, ids, digests, sigs, run_info("local", "bench", []))
        commit_index(index, params, [part])


def measure(docs: int, parts: int, num_perm: int, work: Path) -> dict[str, int]:
    """``{"rows", "growth_bytes"}``: the peak RSS growth of compacting ``docs`` documents."""
    warm, url = work / f"warm-{docs}", work / f"idx-{docs}"
    build(str(warm), WARM_UP, 2, num_perm)
    build(str(url), docs, parts, num_perm)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(warm), str(url)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, int] = json.loads(done.stdout)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each size; print each growth and the bytes a document between the sizes."""
    parser = argparse.ArgumentParser(prog="python -m bench.index.compact")
    parser.add_argument("--docs", type=int, nargs="+", default=[100_000, 400_000])
    parser.add_argument("--parts", type=int, default=10)
    parser.add_argument("--num-perm", type=int, default=128)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="neardup-bench-compact-") as work:
        found = [measure(n, args.parts, args.num_perm, Path(work)) for n in sorted(args.docs)]
    for r in found:
        print(
            f"{r['rows']:,} documents: peak RSS +{r['growth_bytes'] / 2**20:,.0f} MiB, "
            f"{r['growth_bytes'] / max(r['rows'], 1):,.0f} bytes a document"
        )
    if len(found) > 1:
        first, last = found[0], found[-1]
        slope = (last["growth_bytes"] - first["growth_bytes"]) / (last["rows"] - first["rows"])
        rest = first["growth_bytes"] - slope * first["rows"]
        print(f"between the sizes: {slope:,.0f} bytes a document, plus {rest / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
