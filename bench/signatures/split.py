"""neardup's signature kernel timed stage by stage, from core's internals, slab by slab as the
kernel runs: with the compiled tokeniser, FNV and minima, and with the numpy ones."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from bench.signatures.contenders import NUM_PERM, PARAMS, SEED, K
from neardup.core.engine import batch_signatures

#: The stages, in order.
STAGES = (
    "tokenise (UTF-8, lower, classify, words)",
    "shingle spans",
    "FNV-1a 64 + mod P",
    "permutations + minima",
)


def _split_once(texts: Sequence[str], jit: bool) -> tuple[list[float], NDArray[np.uint32]]:
    """One pass of the kernel stage by stage; the seconds per stage and the signatures."""
    import neardup.core._compiled
    import neardup.core._fnv
    import neardup.core._permute
    import neardup.core._signatures
    import neardup.core._tokens
    from neardup.core._hashing import MERSENNE31, perm_params

    a, b = perm_params(NUM_PERM, SEED)
    kernels = neardup.core._compiled.load() if jit else None
    if jit and kernels is None:
        raise ImportError("the compiled kernels do not load")
    seconds = [0.0] * len(STAGES)
    rows = []
    gc.collect()
    for lo, hi in neardup.core._signatures.slab_bounds(texts):
        t0 = time.perf_counter()
        tokens = neardup.core._tokens.Tokens(texts[lo:hi], jit=jit)
        t1 = time.perf_counter()
        start, end, per_doc = neardup.core._tokens.shingle_spans(tokens, K)
        t2 = time.perf_counter()
        if kernels is not None:
            x = np.empty(len(start), dtype=np.uint64)
            kernels.shingle_values(tokens.buf, start, end, x)
            t3 = time.perf_counter()
            sig = np.empty((len(per_doc), NUM_PERM), dtype=np.uint32)
            kernels.minima(x.astype(np.uint32), per_doc, a.astype(np.uint32), b, sig)
        else:
            x = neardup.core._fnv.fnv1a64_spans(tokens.buf, start, end) % np.uint64(MERSENNE31)
            t3 = time.perf_counter()
            sig = neardup.core._permute.minima(x, per_doc, a, b)
        t4 = time.perf_counter()
        for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            seconds[i] += dt
        rows.append(sig)
    return seconds, np.concatenate(rows)


def neardup_split(
    texts: Sequence[str], repeats: int, jit: bool = True
) -> tuple[dict[str, float] | None, str]:
    """Median seconds of neardup's stages, or None with the reason if internals changed.

    Args:
        texts: the documents (one call's worth, cut into the kernel's slabs).
        repeats: timed passes.
        jit: with the compiled tokeniser, FNV and minima, else the numpy ones.

    Returns:
        The medians per stage (or None), and a note: empty, or why the split is missing or
        differs from ``batch_signatures``.
    """
    try:
        passes = [_split_once(texts, jit) for _ in range(repeats)]
    except (AttributeError, ImportError, TypeError, ValueError) as exc:
        return None, f"split unavailable (core internals changed?): {type(exc).__name__}: {exc}"
    note = ""
    if not np.array_equal(passes[0][1], batch_signatures(texts, PARAMS)):
        note = "the staged pass no longer equals batch_signatures: the split may be stale"
    return {s: statistics.median(p[0][i] for p in passes) for i, s in enumerate(STAGES)}, note
