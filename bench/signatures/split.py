"""neardup's signature kernel timed stage by stage, from core's internals."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

import core._fnv
import core._permute
import core._tokens
from bench.signatures.contenders import NUM_PERM, PARAMS, SEED, K
from core.engine import batch_signatures


def _split_once(texts: Sequence[str]) -> tuple[dict[str, float], NDArray[np.uint32]]:
    """One pass of the kernel stage by stage, from core's internals."""
    from core._hashing import MERSENNE31, perm_params

    gc.collect()
    t0 = time.perf_counter()
    tokens = core._tokens.Tokens(texts)
    start, end, per_doc = core._tokens.shingle_spans(tokens, K)
    t1 = time.perf_counter()
    h = core._fnv.fnv1a64_spans(tokens.buf, start, end)
    x = h % np.uint64(MERSENNE31)
    t2 = time.perf_counter()
    a, b = perm_params(NUM_PERM, SEED)
    sig = core._permute.minima(x, per_doc, a, b)
    t3 = time.perf_counter()
    stages = {"tokenise + shingle spans": t1 - t0, "FNV-1a 64 + mod P": t2 - t1}
    stages["permutations + minima"] = t3 - t2
    return stages, sig


def neardup_split(texts: Sequence[str], repeats: int) -> tuple[dict[str, float] | None, str]:
    """Median seconds of neardup's stages, or None with the reason if internals changed.

    Args:
        texts: the documents (all in one batch).
        repeats: timed passes.

    Returns:
        The medians per stage (or None), and a note: empty, or why the split is missing or
        differs from ``batch_signatures``.
    """
    try:
        passes = [_split_once(texts) for _ in range(repeats)]
    except (AttributeError, ImportError, TypeError, ValueError) as exc:
        return None, f"split unavailable (core internals changed?): {type(exc).__name__}: {exc}"
    note = ""
    if not np.array_equal(passes[0][1], batch_signatures(texts, PARAMS)):
        note = "the staged pass no longer equals batch_signatures: the split may be stale"
    names = passes[0][0]
    return {name: statistics.median(p[0][name] for p in passes) for name in names}, note
