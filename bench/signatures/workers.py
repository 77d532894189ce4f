"""neardup's ``signatures`` with workers=2 against workers=1."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bench.signatures.contenders import run_neardup
from bench.signatures.measure import median_times, pool_peak_rss_mib
from core.engine import spawn_pool
from core.minhash import signatures


def worker_times(
    texts: list[str], repeats: int, round_robin: bool = False
) -> tuple[dict[str, float], bool, float | None]:
    """Median seconds of ``signatures`` with workers=1, workers=2 (own pool) and a warm pool.

    Args:
        texts: the documents.
        repeats: timed calls per case.
        round_robin: interleave the cases in every repeat.

    Returns:
        The medians per case, whether workers=2 gave the same signatures as workers=1, and the
        largest peak RSS in MiB of the warm pool's workers (None where it cannot be read).
    """
    half = (len(texts) + 1) // 2  # each worker's share, to tell batch size from parallelism
    with spawn_pool(2) as pool:
        # Warm-up: start both workers and import the kernel in each before any timing.
        for _ in range(2):
            signatures(texts[:64], pool=pool)
        cases: dict[str, Callable[[], object]] = {
            "workers=1": lambda: signatures(texts, workers=1),
            "workers=1, as 2 batch_signatures calls of half": lambda: run_neardup(texts, half),
            "workers=2, pool spawned by the call": lambda: signatures(texts, workers=2),
            "workers=2, pre-created warm pool": lambda: signatures(texts, pool=pool),
        }
        medians = median_times(cases, repeats, round_robin)
        identical = np.array_equal(signatures(texts, pool=pool), signatures(texts, workers=1))
        worker_peak = pool_peak_rss_mib(pool)
    return medians, bool(identical), worker_peak
