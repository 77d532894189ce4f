"""Peak memory of one ``signatures()`` call, above the memory in use before it.

Measured with ``tracemalloc``, which counts Python objects and numpy's array buffers (numpy
reports them to it): unlike the resident set, it is not hidden by memory that earlier work freed
and the allocator kept, and it does not depend on what else ran in the process.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Sequence

from bench.common.memory import MIB
from neardup.core.minhash import signatures

__all__ = ["signatures_peak_mib"]


def signatures_peak_mib(texts: Sequence[str], times: int = 1) -> float:
    """The peak memory allocated by one ``signatures()`` call over ``texts`` repeated ``times``
    times (the repeated list holds references, not copies), in MiB.

    The code-point tables and the compiled kernels are loaded before, by a warm-up call.
    """
    batch = list(texts) * times
    signatures(batch[:64])
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        result = signatures(batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return (peak - before) / MIB
