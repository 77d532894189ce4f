"""When the signature kernel uses the compiled kernels of ``core._jit`` instead of numpy.

Both give identical signatures; the choice is only about speed. Measured on corpus (a) (5,000
documents, 1.4 M shingles, 128 permutations, one core): the numpy FNV and minima take 0.55 s,
the compiled ones 0.10 s, about 2.3 ns less per shingle-permutation pair. But loading them
(importing numba, reading the machine code from numba's cache) takes ~0.5 s, more than a small
batch takes with numpy.

So, as in renting skis until the rent paid would have bought them: numba is loaded once the
pairs this process has hashed, the current batch's included, reach ``LOAD_AFTER`` (~0.5 s of
the difference), and used for every batch from then on. Without numba, where it fails to load,
or with ``NEARDUP_JIT=0`` in the environment, numpy always runs.

The tokeniser follows the same switch without adding to the count: ``core._tokens.Tokens``
runs the compiled one once ``loaded()`` (the batch that loads the kernels is tokenised with
numpy), and its first run builds ``core._tokens.kernel_table`` (~0.2 s, once a process).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["JIT_VARIABLE", "LOAD_AFTER", "Compiled", "compiled", "load", "loaded"]

#: Shingle-permutation pairs hashed with numpy before the compiled kernels are loaded: what
#: loading them costs, in time numpy takes longer (0.5 s / 2.3 ns, on the benchmark machine).
LOAD_AFTER = 1 << 28
#: The environment variable that, set to ``0``, keeps the numpy kernel.
JIT_VARIABLE = "NEARDUP_JIT"


class Compiled(NamedTuple):
    """The compiled kernels (``core._jit``); see there for their arguments. ``tokenise``,
    ``segment`` and ``shingle_spans`` are driven by ``core._tokens``."""

    shingle_values: Callable[..., None]
    minima: Callable[..., None]
    tokenise: Callable[..., Any]
    shingle_spans: Callable[..., None]
    segment: Callable[..., Any]


class _State:
    work = 0
    kernels: Compiled | None = None
    failed = False


_lock = threading.Lock()


def compiled(work: int) -> Compiled | None:
    """The compiled kernels for a batch of ``work`` shingle-permutation pairs, or None: numpy.

    Loaded once this process's work, this batch's included, reaches ``LOAD_AFTER``.
    """
    if _State.kernels is not None or _State.failed:
        return _State.kernels
    _State.work += work
    return load() if _State.work >= LOAD_AFTER else None


def loaded() -> Compiled | None:
    """The compiled kernels if this process has loaded them, else None; never loads them."""
    return _State.kernels


def load() -> Compiled | None:
    """The compiled kernels, loaded now if they are not yet; None if numba is missing, fails to
    compile, or ``NEARDUP_JIT=0``."""
    with _lock:
        if _State.kernels is None and not _State.failed:
            _State.kernels = _load()
            _State.failed = _State.kernels is None
        return _State.kernels


def _load() -> Compiled | None:
    if os.environ.get(JIT_VARIABLE, "").strip() == "0":
        return None
    try:
        from neardup.core import _jit  # numba is imported only when it pays

        kernels = Compiled(
            _jit.shingle_values, _jit.minima, _jit.tokenise, _jit.shingle_spans, _jit.segment
        )
        _jit.warm_up()
    except Exception:  # numba missing, or failing on this platform: numpy computes the same
        return None
    return kernels
