"""The datasketch peer of the service benchmark, run in its own process so its RSS is clean.

It reads the first N signature rows back from the service's SQLite store, measures its RSS
(after a garbage collection and glibc's ``malloc_trim``, so that no freed memory of the load is
reused unseen), inserts them into an in-memory ``datasketch.MinHashLSH`` as
``LeanMinHash(seed=1, hashvalues=row, scheme="affine32")`` under the same ids (``d00000000``
..., created during the insert so they count in its memory, as they do in the service's), and
measures the RSS again (no trim, like the service's reading). The difference over the documents
inserted is its bytes per document.
Then it times ``lsh.query`` for the benchmark's query signatures, in process (no HTTP).

``affine32`` is datasketch 2.0's default scheme: 32-bit hash values, like neardup's. The LSH
alone keeps no signatures, so it returns candidates without estimates; the service's index
keeps the signatures and confirms every match.

If the insert runs past ``--max-seconds`` or the RSS past ``--max-rss-gib``, it stops there
and reports what it measured over the documents inserted so far.

Run by ``bench.service``; by hand::

    python -m bench.service.peer --db DATA_DIR/neardup.sqlite3 --n 100000 --queries Q.npy \
        [--params 16,8]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.common.corpus import doc_id
from bench.common.latency import summarize
from bench.common.machine import REPO_ROOT
from bench.common.memory import proc_memory

__all__ = ["PeerResult", "run_peer"]

NUM_PERM = 128
SCHEME = "affine32"
_CHECK_EVERY = 10_000
_FETCH = 5_000
_GIB = 2**30


@dataclass
class PeerResult:
    """What one datasketch run measured (sizes in bytes, times in seconds, latencies in ms).

    Attributes:
        label: how the LSH was configured, for the tables.
        bands: b.
        rows: r.
        requested: documents asked for.
        inserted: documents inserted (fewer if a limit stopped the insert).
        stopped: why the insert stopped early, or "".
        load_seconds: reading the rows back from SQLite (not part of the insert).
        insert_seconds: building the LSH (LeanMinHash objects and ``insert``).
        rss_before: VmRSS with the rows loaded, before the LSH existed.
        rss_after: VmRSS after the insert (after a garbage collection).
        hwm: VmHWM (peak RSS) of the peer process.
        query: latency summary of ``lsh.query`` (in process).
        queries_with_candidates: queries that got at least one candidate.
    """

    label: str
    bands: int
    rows: int
    requested: int
    inserted: int
    stopped: str
    load_seconds: float
    insert_seconds: float
    rss_before: int
    rss_after: int
    hwm: int
    query: dict[str, Any] = field(default_factory=dict)
    queries_with_candidates: int = 0

    @property
    def bytes_per_doc(self) -> float:
        """(RSS after - RSS before) / documents inserted."""
        return (self.rss_after - self.rss_before) / max(self.inserted, 1)


def load_rows(db: Path, n: int) -> NDArray[np.uint32]:
    """The first ``n`` signature rows of the store, by document number, as ``[n, 128]`` uint32.

    Read into one preallocated array a few thousand rows at a time, so that little freed memory
    is left behind for the LSH to reuse unseen between the two RSS readings.
    """
    out = np.empty((n, NUM_PERM), dtype=np.uint32)
    con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        cursor = con.execute("SELECT sig FROM documents ORDER BY num LIMIT ?", (n,))
        done = 0
        while rows := cursor.fetchmany(_FETCH):
            block = np.frombuffer(b"".join(r[0] for r in rows), dtype="<u4")
            out[done : done + len(rows)] = block.reshape(-1, NUM_PERM)
            done += len(rows)
    finally:
        con.close()
    return out[:done]


def _trim() -> None:
    """Give freed heap memory back to the OS (glibc ``malloc_trim``; a no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _rss(trim: bool) -> int:
    """VmRSS of this process after a garbage collection (and a heap trim if ``trim``)."""
    gc.collect()
    if trim:
        _trim()
    return proc_memory(os.getpid()).get("VmRSS", 0)


def build(
    lsh: Any, rows: NDArray[np.uint32], max_seconds: float, max_rss: int
) -> tuple[int, float, str]:
    """Insert ``rows`` (ids ``doc_id(i)``) until done or a limit is reached.

    Returns:
        (documents inserted, seconds, why it stopped early or "").
    """
    from datasketch import LeanMinHash  # type: ignore[import-untyped]

    started = time.perf_counter()
    for lo in range(0, len(rows), _CHECK_EVERY):
        for i in range(lo, min(lo + _CHECK_EVERY, len(rows))):
            lsh.insert(doc_id(i), LeanMinHash(seed=1, hashvalues=rows[i], scheme=SCHEME))
        elapsed = time.perf_counter() - started
        done = min(lo + _CHECK_EVERY, len(rows))
        rss = proc_memory(os.getpid()).get("VmRSS", 0)
        if done < len(rows) and elapsed > max_seconds:
            return done, elapsed, f"time limit ({max_seconds:.0f} s) after {done} documents"
        if done < len(rows) and rss > max_rss:
            return done, elapsed, f"RSS limit ({max_rss / _GIB:.0f} GiB) after {done} documents"
    return len(rows), time.perf_counter() - started, ""


def query_times(lsh: Any, queries: NDArray[np.uint32]) -> tuple[list[float], int]:
    """Seconds of each ``lsh.query`` (LeanMinHash built beforehand) and how many found any."""
    from datasketch import LeanMinHash

    minhashes = [LeanMinHash(seed=1, hashvalues=q, scheme=SCHEME) for q in queries]
    times: list[float] = []
    hits = 0
    for m in minhashes:
        t0 = time.perf_counter()
        found = lsh.query(m)
        times.append(time.perf_counter() - t0)
        hits += bool(found)
    return times, hits


def measure(args: argparse.Namespace) -> PeerResult:
    """Load rows, build the LSH between two RSS readings, time the queries."""
    from datasketch import MinHashLSH

    t0 = time.perf_counter()
    rows = load_rows(Path(args.db), args.n)
    load_seconds = time.perf_counter() - t0
    queries = np.load(args.queries).astype(np.uint32)
    params = tuple(int(x) for x in args.params.split(",")) if args.params else None
    before = _rss(trim=True)
    lsh = MinHashLSH(threshold=args.threshold, num_perm=NUM_PERM, params=params)
    inserted, seconds, stopped = build(lsh, rows, args.max_seconds, int(args.max_rss_gib * _GIB))
    after = _rss(trim=False)
    label = f"params=({lsh.b}, {lsh.r})" if params else f"threshold={args.threshold}"
    times, hits = query_times(lsh, queries)
    return PeerResult(
        label=f"datasketch MinHashLSH({label}, num_perm={NUM_PERM})",
        bands=lsh.b,
        rows=lsh.r,
        requested=args.n,
        inserted=inserted,
        stopped=stopped,
        load_seconds=load_seconds,
        insert_seconds=seconds,
        rss_before=before,
        rss_after=after,
        hwm=proc_memory(os.getpid()).get("VmHWM", 0),
        query=summarize(times).as_dict(),
        queries_with_candidates=hits,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.service.peer", description=__doc__)
    parser.add_argument("--db", required=True, help="the service's neardup.sqlite3")
    parser.add_argument("--n", type=int, required=True, help="documents to insert")
    parser.add_argument("--queries", required=True, help=".npy of [q, 128] query signatures")
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--params", default="", help="b,r instead of the threshold's choice")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="insert time limit")
    parser.add_argument("--max-rss-gib", type=float, default=12.0, help="RSS limit")
    return parser


def run_peer(
    db: Path,
    n: int,
    queries: Path,
    *,
    params: tuple[int, int] | None = None,
    max_seconds: float = 300.0,
    max_rss_gib: float = 12.0,
) -> PeerResult:
    """Run this module in a fresh interpreter and return what it measured.

    Raises:
        RuntimeError: the peer process failed (its stderr is in the message).
    """
    cmd = [sys.executable, "-m", "bench.service.peer", "--db", str(db), "--n", str(n)]
    cmd += ["--queries", str(queries), "--max-seconds", str(max_seconds)]
    cmd += ["--max-rss-gib", str(max_rss_gib)]
    if params is not None:
        cmd += ["--params", f"{params[0]},{params[1]}"]
    done = subprocess.run(
        cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=max_seconds * 2 + 300
    )
    if done.returncode != 0:
        raise RuntimeError(f"datasketch peer failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return PeerResult(**json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the result as one JSON line."""
    args = _parser().parse_args(argv)
    print(json.dumps(asdict(measure(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
