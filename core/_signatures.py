"""The batch signature kernel, in bounded slabs, and the spawn process pool over them.

A batch of texts becomes a ``[len(texts), num_perm]`` uint32 matrix without any per-shingle
Python, in three steps over each slab of texts: tokenise the slab into one buffer where every
shingle is a contiguous slice (``core._tokens``); FNV-1a 64 over all shingle slices, then
``x = h mod P``; the permutations and per-document minima. The last two run compiled
(``core._jit``, chosen by ``core._compiled``) or as numpy (``core._fnv``, ``core._permute``,
the reference); the signatures are identical either way.

Slabs hold at most ``SLAB_TEXTS`` texts and about ``SLAB_CHARS`` characters (a longer text is
a slab of its own), so the memory a call takes does not grow with its input beyond the input
itself and the result. On a pool the same slabs are the tasks: many small ones, so that the
workers take them as they free up and finish together.

Every value is below P < 2**31, so signatures are returned as uint32; ``core.minhash.minhash``
returns the spec's uint64 for a single set.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from neardup.core._compiled import compiled, load
from neardup.core._fanout import ordered_map, pool_size, spawn_pool, stop_pool
from neardup.core._fnv import fnv1a64_spans
from neardup.core._hashing import MERSENNE31, perm_params
from neardup.core._params import MinhashParams, check_signature_params
from neardup.core._permute import minima
from neardup.core._text import check_tokenizer
from neardup.core._tokens import Tokens, Utf8Texts, shingle_spans
from neardup.core.errors import ParameterError

__all__ = [
    "POOL_AFTER_CHARS",
    "SLAB_CHARS",
    "SLAB_TEXTS",
    "batch_signatures",
    "signature_stream",
    "signatures",
    "slab_bounds",
    "warm_worker",
]

_P64 = np.uint64(MERSENNE31)
#: The most texts in one slab of the kernel.
SLAB_TEXTS = 2048
#: About the most characters in one slab (a longer text is a slab of its own): the kernel's
#: scratch is a few bytes a character (a 4 M-character slab of corpus (a) peaks at ~33 MiB).
#: Smaller slabs are faster (their scratch stays in cache and is reused, not fresh pages):
#: 8,000 documents, one process, compiled kernels, medians of 7 interleaved runs, slabs of
#: 256 K / 512 K / 1 M / 4 M characters: corpus (a) 0.330 / 0.319 / 0.324 / 0.355 s, (b)
#: 0.393 / 0.400 / 0.386 / 0.493 s, (c) 0.252 / 0.250 / 0.250 / 0.288 s. On a pool of two,
#: slabs of ~500 texts of (a) beat slabs of 2,000 by ~10 % (the last slab's tail is shorter).
SLAB_CHARS = 1 << 19
#: Characters of text below which signatures are computed in this process, never on a spawn
#: pool: starting one (interpreters importing numpy and numba, loading the compiled kernels,
#: ~0.5 s on a quiet machine, seconds on a busy one) costs more than this much text takes with
#: the numpy kernel here (~200 ns a character: ~0.4 s), and a small batch never loads numba
#: (``core._compiled``). Either way the signatures are the same.
POOL_AFTER_CHARS = 1 << 21
#: Slabs in flight a worker on a pool: enough that a worker never waits for the next while the
#: other finishes an older one (results are taken in slab order).
_AHEAD = 4


def batch_signatures(texts: Sequence[str] | Utf8Texts, params: MinhashParams) -> NDArray[np.uint32]:
    """The ``[len(texts), num_perm]`` uint32 signatures of a batch, in this process; the texts
    as ``str`` or, what a pool's task is best sent as, ``Utf8Texts``."""
    return _kernel(texts, params.num_perm, params.seed, params.k, tokenizer=params.tokenizer)


#: What ``warm_worker`` signs: words with a non-ASCII character, some hundreds of them.
_WARM_TEXTS = [f"warm up {i} with café and Москва " * 40 for i in range(64)]


def warm_worker(tokenizer: str = "words") -> bool:
    """Make this process ready to sign at full speed: load the compiled kernels now (~0.5 s,
    instead of once it has hashed ``core._compiled.LOAD_AFTER`` pairs) and sign a small batch
    holding non-ASCII text, which builds the code-point tables (~0.15 s) and pays the kernel's
    first-call costs. Whether this process runs the compiled kernels (False: numba missing or
    failing, or ``NEARDUP_JIT=0``). For a long-lived pool: ``spawn_pool(n, warm=warm_worker)``,
    or ``functools.partial(warm_worker, "multilingual")`` to build that tokenizer's tables too.
    """
    kernels = load()
    _kernel(_WARM_TEXTS, 128, 0, 5, tokenizer=tokenizer)
    return kernels is not None


def _kernel(
    texts: Sequence[str] | Utf8Texts,
    num_perm: int,
    seed: int,
    k: int,
    jit: bool = True,
    tokenizer: str = "words",
) -> NDArray[np.uint32]:
    """Signatures of ``texts`` slab by slab; ``jit=False`` keeps the numpy reference kernel."""
    a, b = perm_params(num_perm, seed)
    out = np.empty((len(texts), num_perm), dtype=np.uint32)
    for lo, hi in slab_bounds(texts):
        part = texts.part(lo, hi) if isinstance(texts, Utf8Texts) else texts[lo:hi]
        out[lo:hi] = _slab(part, a, b, k, jit, tokenizer)
    return out


def _slab(
    texts: Sequence[str] | Utf8Texts,
    a: NDArray[np.uint64],
    b: NDArray[np.uint64],
    k: int,
    jit: bool,
    tokenizer: str,
) -> NDArray[np.uint32]:
    tokens = Tokens(texts, jit=None if jit else False, tokenizer=tokenizer)
    start, end, per_doc = shingle_spans(tokens, k)
    fast = compiled(len(start) * len(a)) if jit else None
    if fast is not None:
        x = np.empty(len(start), dtype=np.uint64)
        # Read-only whichever tokeniser wrote it: one compiled specialisation (``_jit.warm_up``).
        buf = tokens.buf.view()
        buf.flags.writeable = False
        fast.shingle_values(buf, start, end, x)
        del buf
        del tokens, start, end
        sig = np.empty((len(per_doc), len(a)), dtype=np.uint32)
        fast.minima(x.astype(np.uint32), per_doc, a.astype(np.uint32), b, sig)
        return sig
    x = fnv1a64_spans(tokens.buf, start, end)
    # Fresh memory costs a page fault a 4 KiB: reuse it, and let go of what is done with.
    del tokens, start, end
    np.remainder(x, _P64, out=x)
    return minima(x, per_doc, a, b)


def slab_bounds(
    texts: Sequence[str] | Utf8Texts, parts: int = 1, chars: int | None = None
) -> list[tuple[int, int]]:
    """Contiguous ``[lo, hi)`` slabs covering ``texts``, each within ``SLAB_TEXTS`` texts and
    ``chars`` characters (default ``SLAB_CHARS``), give or take its last text (a longer text is
    about a slab of its own), as few as that allows but a multiple of ``parts`` (for as many
    workers) where there are enough texts, cut where they weigh about the same.

    A text weighs its length, but at least ``chars / SLAB_TEXTS``, so that a slab within
    ``chars`` of weight is within both limits. Encoded texts weigh their bytes.
    """
    n = len(texts)
    if n == 0:
        return []
    chars = SLAB_CHARS if chars is None else chars
    if isinstance(texts, Utf8Texts):
        weight = texts.sizes()
    else:
        weight = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    np.maximum(weight, max(1, chars // SLAB_TEXTS), out=weight)
    cumulative = np.cumsum(weight)
    count = -(-int(cumulative[-1]) // chars)
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
    tokenizer: str = "words",
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
        workers: processes for a pool created (and shut down) by this call; 1, or texts of
            fewer than ``POOL_AFTER_CHARS`` characters in all, compute here.
        pool: an existing pool to reuse (the service keeps one); the slabs are a multiple of
            its size in number.
        tokenizer: ``words`` or ``multilingual`` (docs/algorithm.md section 1).

    Raises:
        ParameterError: a parameter out of range, or a text that cannot be encoded as UTF-8.
        WorkerError: a worker process died.
    """
    check_signature_params(num_perm, seed, k)
    check_tokenizer(tokenizer)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ParameterError(f"workers must be a whole number >= 1, got {workers!r}")
    texts = list(texts)
    if pool is None and (workers == 1 or len(texts) < 2 or _small(texts)):
        return _kernel(texts, num_perm, seed, k, tokenizer=tokenizer)
    if pool is not None:
        return _on_pool(pool, texts, num_perm, seed, k, pool_size(pool), tokenizer)
    own = spawn_pool(workers)
    try:
        return _on_pool(own, texts, num_perm, seed, k, workers, tokenizer)
    finally:
        stop_pool(own)


def _on_pool(
    pool: ProcessPoolExecutor,
    texts: list[str],
    num_perm: int,
    seed: int,
    k: int,
    parts: int,
    tokenizer: str,
) -> NDArray[np.uint32]:
    out = np.empty((len(texts), num_perm), dtype=np.uint32)
    # The kernel's own slabs, a multiple of the workers in number: small tasks, so a worker
    # slowed down (by the machine, or a slab that takes longer) leaves a short tail.
    slabs = slab_bounds(texts, parts)
    # Sent encoded: one bytes object a slab pickles as a copy, and the worker reads it as it
    # is (a list of str would be encoded by pickle, decoded by the worker, encoded again).
    encoded = (Utf8Texts.encode(texts[lo:hi], lo) for lo, hi in slabs)
    rows = ordered_map(pool, _kernel, encoded, num_perm, seed, k, True, tokenizer, ahead=_AHEAD)
    for (lo, hi), (_, sig) in zip(slabs, rows, strict=True):
        out[lo:hi] = sig
    return out


def _small(texts: Sequence[str]) -> bool:
    """Whether ``texts`` hold fewer than ``POOL_AFTER_CHARS`` characters (stops counting there)."""
    total = 0
    for text in texts:
        total += len(text)
        if total >= POOL_AFTER_CHARS:
            return False
    return True


def signature_stream(
    batches: Iterable[list[str]], params: MinhashParams, workers: int = 1, ahead: int = 2
) -> Generator[NDArray[np.uint32], None, None]:
    """The signatures of every batch, in order, for a stream of unknown length.

    Computed in this process until the texts read reach ``POOL_AFTER_CHARS`` characters; from
    the batch that reaches it on, with ``workers > 1``, on a spawn pool of that many warm
    workers (``warm_worker``) started then, ``ahead`` batches a worker in flight. A small input
    therefore starts no process and loads no numba. The pool is shut down when the stream ends,
    fails or is closed (close it: ``contextlib.closing``).

    Raises:
        WorkerError: a worker process died.
    """
    pool: ProcessPoolExecutor | None = None
    stream = iter(batches)
    chars = 0
    try:
        for batch in stream:
            chars += sum(map(len, batch))
            if workers == 1 or chars < POOL_AFTER_CHARS:
                yield batch_signatures(batch, params)
                continue
            pool = spawn_pool(workers, warm=partial(warm_worker, params.tokenizer))
            # Sent encoded: one bytes object a batch pickles as a copy.
            encoded = (Utf8Texts.encode(b) for b in chain([batch], stream))
            for _, sig in ordered_map(pool, batch_signatures, encoded, params, ahead=ahead):
                yield sig
            return
    finally:
        if pool is not None:  # every result wanted is in (or none will be)
            stop_pool(pool)
