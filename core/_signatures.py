"""The batch signature kernel, and the spawn process pool over contiguous chunks.

A batch of texts becomes a ``[len(texts), num_perm]`` uint32 matrix without any per-shingle
Python, in three vectorised steps: tokenise the whole batch into one buffer where every shingle
is a contiguous slice (``core._tokens``); FNV-1a 64 over all shingle slices at once, then
``x = h mod P`` (``core._fnv``); the permutations and per-document minima (``core._permute``).

Every value is below P < 2**31, so signatures are returned as uint32; ``core.minhash.minhash``
returns the spec's uint64 for a single set.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from numpy.typing import NDArray

from core._fanout import fan_out, in_order, pool_size, spawn_pool
from core._fnv import fnv1a64_spans
from core._hashing import MERSENNE31, perm_params
from core._params import MinhashParams, check_signature_params
from core._permute import minima
from core._tokens import Tokens, shingle_spans
from core.errors import ParameterError

__all__ = ["batch_signatures", "signatures"]

_P64 = np.uint64(MERSENNE31)


def batch_signatures(texts: Sequence[str], params: MinhashParams) -> NDArray[np.uint32]:
    """The ``[len(texts), num_perm]`` uint32 signatures of a batch, in this process."""
    return _kernel(texts, params.num_perm, params.seed, params.k)


def _kernel(texts: Sequence[str], num_perm: int, seed: int, k: int) -> NDArray[np.uint32]:
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
    check_signature_params(num_perm, seed, k)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ParameterError(f"workers must be a whole number >= 1, got {workers!r}")
    texts = list(texts)
    if pool is None and (workers == 1 or len(texts) < 2):
        return _kernel(texts, num_perm, seed, k)
    if pool is not None:
        return _on_pool(pool, texts, num_perm, seed, k, pool_size(pool))
    with spawn_pool(workers) as own:
        return _on_pool(own, texts, num_perm, seed, k, workers)


def _on_pool(
    pool: ProcessPoolExecutor, texts: list[str], num_perm: int, seed: int, k: int, parts: int
) -> NDArray[np.uint32]:
    chunks = in_order(fan_out(pool, _kernel, texts, parts, num_perm, seed, k))
    if not chunks:
        return np.empty((0, num_perm), dtype=np.uint32)
    return np.concatenate(chunks, axis=0)
