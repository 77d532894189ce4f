"""The batch signature kernel, and the spawn process pool over contiguous chunks.

A batch of texts becomes a ``[len(texts), num_perm]`` uint32 matrix without any per-shingle
Python, in three vectorised steps: tokenise the whole batch into one buffer where every shingle
is a contiguous slice (``core.tokens``); FNV-1a 64 over all shingle slices at once, then
``x = h mod P`` (``core.fnv``); the permutations and per-document minima (``core.permute``).

Every value is below P < 2**31, so signatures are returned as uint32; ``core.minhash.minhash``
returns the spec's uint64 for a single set.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

import numpy as np
from numpy.typing import NDArray

from core.errors import ParameterError, WorkerError
from core.fnv import fnv1a64_spans
from core.hashing import MERSENNE31, perm_params
from core.permute import minima
from core.tokens import Tokens, shingle_spans

__all__ = ["batch_signatures", "chunk_bounds", "signatures", "spawn_pool"]

_P64 = np.uint64(MERSENNE31)


def batch_signatures(
    texts: Sequence[str], num_perm: int = 128, seed: int = 0, k: int = 5
) -> NDArray[np.uint32]:
    """The ``[len(texts), num_perm]`` uint32 signatures of a batch, in this process."""
    _check(num_perm, k)
    a, b = perm_params(num_perm, seed)
    if not texts:
        return np.empty((0, num_perm), dtype=np.uint32)
    tokens = Tokens(texts)
    start, end, per_doc = shingle_spans(tokens, k)
    x = fnv1a64_spans(tokens.buf, start, end)
    # Fresh memory costs a page fault a 4 KiB: reuse it, and let go of what is done with.
    del tokens, start, end
    np.remainder(x, _P64, out=x)
    return minima(x, per_doc, a, b)


def _check(num_perm: int, k: int) -> None:
    if num_perm < 1:
        raise ParameterError(f"num_perm must be at least 1, got {num_perm}")
    if k < 1:
        raise ParameterError(f"k (words per shingle) must be at least 1, got {k}")


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool with the spawn start method (no forked copies of threads or locks)."""
    if workers < 1:
        raise ParameterError(f"workers must be at least 1, got {workers}")
    return ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))


def chunk_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``[lo, hi)`` ranges covering ``range(n)``, sizes differing by <= 1."""
    parts = max(1, min(parts, n))
    q, r = divmod(n, parts)
    bounds = []
    lo = 0
    for i in range(parts):
        hi = lo + q + (1 if i < r else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def signatures(
    texts: Sequence[str],
    *,
    num_perm: int = 128,
    seed: int = 0,
    k: int = 5,
    workers: int = 1,
    pool: ProcessPoolExecutor | None = None,
) -> NDArray[np.uint32]:
    """MinHash signatures of ``texts``, ``[len(texts), num_perm]``, identical for any ``workers``.

    With ``workers > 1`` (or a ``pool``), the texts are split into contiguous chunks, computed on
    a spawn process pool with the same parameters, and concatenated in chunk order.

    Args:
        texts: the documents.
        num_perm: signature length.
        seed: the PCG32 seed of the permutation parameters.
        k: words per shingle.
        workers: processes for a pool created (and shut down) by this call; 1 computes here.
        pool: an existing pool to reuse (the service keeps one); its size sets the chunk count.

    Raises:
        ParameterError: a parameter out of range, or a text that cannot be encoded as UTF-8.
        WorkerError: a worker process died.
    """
    _check(num_perm, k)
    if workers < 1:
        raise ParameterError(f"workers must be at least 1, got {workers}")
    texts = list(texts)
    if pool is None and (workers == 1 or len(texts) < 2):
        return batch_signatures(texts, num_perm, seed, k)
    if pool is not None:
        return _on_pool(pool, texts, num_perm, seed, k, _pool_size(pool))
    with spawn_pool(workers) as own:
        return _on_pool(own, texts, num_perm, seed, k, workers)


def _pool_size(pool: ProcessPoolExecutor) -> int:
    return int(getattr(pool, "_max_workers", 1))


def _on_pool(
    pool: ProcessPoolExecutor,
    texts: list[str],
    num_perm: int,
    seed: int,
    k: int,
    parts: int,
) -> NDArray[np.uint32]:
    bounds = chunk_bounds(len(texts), parts)
    futures = [pool.submit(batch_signatures, texts[lo:hi], num_perm, seed, k) for lo, hi in bounds]
    try:
        # Results are taken in submission (chunk) order, never as they finish.
        chunks = [f.result() for f in futures]
    except BrokenProcessPool as exc:
        raise WorkerError(f"a signature worker process died: {exc}") from exc
    if not chunks:
        return np.empty((0, num_perm), dtype=np.uint32)
    return np.concatenate(chunks, axis=0)
