"""How the signature benchmark measures: median wall times of cases, and peak RSS."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from bench.common.memory import MIB, peak_rss_bytes, proc_memory


def timed(fn: Callable[[], object]) -> float:
    """Seconds taken by one call of ``fn``, after a garbage collection."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_times(
    cases: dict[str, Callable[[], object]], repeats: int, round_robin: bool = False
) -> dict[str, float]:
    """Median seconds of each case.

    Back to back (the default), each case runs in the steady state it would have in a real
    pipeline. Round-robin spreads slow drift of the machine over all cases alike, but each case
    then runs right after another library's allocations: measured here, neardup is ~15 %
    slower right after datasketch's millions of small objects than after itself.

    Args:
        cases: a name and a zero-argument call per case.
        repeats: timed calls per case.
        round_robin: interleave the cases in every repeat.

    Returns:
        The median seconds per case name.
    """
    samples: dict[str, list[float]] = {name: [] for name in cases}
    if round_robin:
        for fn in cases.values():  # untimed: imports, caches, first-touch of memory
            fn()
        for _ in range(repeats):
            for name, fn in cases.items():
                samples[name].append(timed(fn))
    else:
        for name, fn in cases.items():
            fn()  # untimed: imports, caches, first-touch of memory
            samples[name] = [timed(fn) for _ in range(repeats)]
    return {name: statistics.median(times) for name, times in samples.items()}


def peak_rss_mib() -> float:
    """Peak resident set size of this process in MiB."""
    return peak_rss_bytes() / MIB


def pool_peak_rss_mib(pool: ProcessPoolExecutor) -> float | None:
    """The largest peak RSS (VmHWM) in MiB among a live pool's workers, on Linux; else None.

    ``getrusage(RUSAGE_CHILDREN)`` is no use for spawn workers: each is forked from this process
    before it execs, and Linux keeps the forked image's high-water mark, so it reports this
    process's size instead of the worker's.
    """
    peaks = [proc_memory(pid).get("VmHWM", 0) for pid in getattr(pool, "_processes", None) or {}]
    return max(peaks) / MIB if peaks and all(peaks) else None
