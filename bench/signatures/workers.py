"""neardup's ``signatures`` with workers=2 against workers=1."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bench.signatures.measure import median_times, pool_peak_rss_mib
from core.engine import spawn_pool
from core.minhash import signatures

#: Untimed full calls on the warm pool before timing: its workers load the compiled kernels
#: once they have hashed enough (``core._compiled.LOAD_AFTER``), as a long-lived pool does.
WARM_CALLS = 2


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
    with spawn_pool(2) as pool:
        for _ in range(WARM_CALLS):
            signatures(texts, pool=pool)
        cases: dict[str, Callable[[], object]] = {
            "workers=1": lambda: signatures(texts, workers=1),
            "workers=2, pool spawned by the call": lambda: signatures(texts, workers=2),
            "workers=2, pre-created warm pool": lambda: signatures(texts, pool=pool),
        }
        medians = median_times(cases, repeats, round_robin)
        identical = np.array_equal(signatures(texts, pool=pool), signatures(texts, workers=1))
        worker_peak = pool_peak_rss_mib(pool)
    return medians, bool(identical), worker_peak
