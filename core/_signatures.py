"""The batch signature kernel, in bounded slabs, and the spawn process pool over them.

A batch of texts becomes a ``[len(texts), num_perm]`` uint32 matrix without any per-shingle
Python, in three steps over each slab of texts: tokenise the slab into one buffer where every
shingle is a contiguous slice (``core._tokens``); FNV-1a 64 over all shingle slices, then
``x = h mod P``; the permutations and per-document minima. The last two run compiled
(``core._jit``, chosen by ``core._compiled``) or as numpy (``core._fnv``, ``core._permute``,
the reference); the signatures are identical either way.

Slabs hold at most ``SLAB_TEXTS`` texts and about ``SLAB_CHARS`` characters (a longer text is
a slab of its own), so the memory a call takes does not grow with its input beyond the input
itself and the result.

Every value is below P < 2**31, so signatures are returned as uint32; ``core.minhash.minhash``
returns the spec's uint64 for a single set.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from numpy.typing import NDArray

from core._compiled import compiled
from core._fanout import ordered_map, pool_size, spawn_pool
from core._fnv import fnv1a64_spans
from core._hashing import MERSENNE31, perm_params
from core._params import MinhashParams, check_signature_params
from core._permute import minima
from core._tokens import Tokens, shingle_spans
from core.errors import ParameterError

__all__ = ["SLAB_CHARS", "SLAB_TEXTS", "batch_signatures", "signatures", "slab_bounds"]

_P64 = np.uint64(MERSENNE31)
#: The most texts in one slab of the kernel.
SLAB_TEXTS = 2048
#: About the most characters in one slab (a longer text is a slab of its own): the kernel's
#: scratch is a few bytes a character (a 4 M-character slab of corpus (a) peaks at ~33 MiB).
#: Smaller slabs are also a little faster (their scratch is reused, not fresh pages): on
#: corpus (a), 4,096 texts a slab 0.32 s, 2,048 0.305 s, 1,024 0.305 s a 8,000 documents.
SLAB_CHARS = 1 << 22


def batch_signatures(texts: Sequence[str], params: MinhashParams) -> NDArray[np.uint32]:
    """The ``[len(texts), num_perm]`` uint32 signatures of a batch, in this process."""
    return _kernel(texts, params.num_perm, params.seed, params.k)


def _kernel(
    texts: Sequence[str], num_perm: int, seed: int, k: int, jit: bool = True
) -> NDArray[np.uint32]:
    """Signatures of ``texts`` slab by slab; ``jit=False`` keeps the numpy reference kernel."""
    a, b = perm_params(num_perm, seed)
    out = np.empty((len(texts), num_perm), dtype=np.uint32)
    for lo, hi in slab_bounds(texts):
        out[lo:hi] = _slab(texts[lo:hi], a, b, k, jit)
    return out


def _slab(
    texts: Sequence[str], a: NDArray[np.uint64], b: NDArray[np.uint64], k: int, jit: bool
) -> NDArray[np.uint32]:
    tokens = Tokens(texts, jit=None if jit else False)
    start, end, per_doc = shingle_spans(tokens, k)
    fast = compiled(len(start) * len(a)) if jit else None
    if fast is not None:
        x = np.empty(len(start), dtype=np.uint64)
        fast.shingle_values(tokens.buf, start, end, x)
        del tokens, start, end
        sig = np.empty((len(per_doc), len(a)), dtype=np.uint32)
        fast.minima(x.astype(np.uint32), per_doc, a.astype(np.uint32), b, sig)
        return sig
    x = fnv1a64_spans(tokens.buf, start, end)
    # Fresh memory costs a page fault a 4 KiB: reuse it, and let go of what is done with.
    del tokens, start, end
    np.remainder(x, _P64, out=x)
    return minima(x, per_doc, a, b)


def slab_bounds(texts: Sequence[str], parts: int = 1) -> list[tuple[int, int]]:
    """Contiguous ``[lo, hi)`` slabs covering ``texts``, each within ``SLAB_TEXTS`` texts and
    ``SLAB_CHARS`` characters, give or take its last text (a longer text is about a slab of its
    own), as few as that allows but a multiple of ``parts`` (for as many workers) where there
    are enough texts, cut where they weigh about the same.

    A text weighs its length, but at least ``SLAB_CHARS / SLAB_TEXTS``, so that a slab within
    ``SLAB_CHARS`` of weight is within both limits.
    """
    n = len(texts)
    if n == 0:
        return []
    weight = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    np.maximum(weight, SLAB_CHARS // SLAB_TEXTS, out=weight)
    cumulative = np.cumsum(weight)
    count = -(-int(cumulative[-1]) // SLAB_CHARS)
    count = min(n, -(-count // parts) * parts)
    # Slab j ends with the text that reaches weight total * j / count.
    ends = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, count) / count) + 1
    bounds = np.unique(np.concatenate(([0], ends, [n])))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))


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

    The texts are computed in contiguous slabs (``slab_bounds``), so the memory the call takes
    beyond its input and result is bounded. With ``workers > 1`` (or a ``pool``), the slabs are
    computed on a spawn process pool with the same parameters, a couple per worker in flight,
    and their rows written in slab order.

    Args:
        texts: the documents.
        num_perm: signature length.
        seed: the PCG32 seed of the permutation parameters.
        k: words per shingle.
        workers: processes for a pool created (and shut down) by this call; 1 computes here.
        pool: an existing pool to reuse (the service keeps one); the slabs are a multiple of
            twice its size in number.

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
    out = np.empty((len(texts), num_perm), dtype=np.uint32)
    # Two slabs a worker at least: each starts computing its first while the next are sent.
    slabs = slab_bounds(texts, 2 * parts)
    rows = ordered_map(pool, _kernel, (texts[lo:hi] for lo, hi in slabs), num_perm, seed, k)
    for (lo, hi), (_, sig) in zip(slabs, rows, strict=True):
        out[lo:hi] = sig
    return out
