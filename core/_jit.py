"""The compiled (numba) kernels of the two hot loops; imported only by ``core._compiled.load``,
because importing numba costs more than a small batch takes.

Their numpy counterparts, ``core._fnv.fnv1a64_spans`` (then ``mod P``) and
``core._permute.minima``, are the reference: the values are identical, bit for bit
(tests/core/test_compiled.py).

- ``shingle_values``: FNV-1a 64 of each shingle's bytes, then ``mod P`` (docs/algorithm.md
  section 2), one byte after another: O(bytes) for any length.
- ``minima``: per document and permutation, ``min over its shingles of (a*x + b) mod P``. With
  a, x < 2**31 and b < P, ``a*x + b`` is below 2**62, exact in uint64; two Mersenne folds
  (``(y & P) + (y >> 31)``, each keeping the value mod P) bring it to at most P + 2, and one
  conditional subtraction to ``[0, P)``. Four shingles at a time against the row of
  permutations, a loop LLVM vectorises (vpmuludq, vpminuq).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from core._hashing import FNV_OFFSET, FNV_PRIME, MERSENNE31

__all__ = ["minima", "shingle_values"]

_P = MERSENNE31
_jit = numba.njit(cache=True, nogil=True, boundscheck=False)


@_jit
def shingle_values(buf: Any, start: Any, end: Any, out: Any) -> None:
    """``out[i] = fnv1a64(buf[start[i]:end[i]]) mod P`` (uint8, int64, int64, uint64 arrays)."""
    prime = np.uint64(FNV_PRIME)
    modulus = np.uint64(_P)
    for i in range(start.shape[0]):
        h = np.uint64(FNV_OFFSET)
        for p in range(start[i], end[i]):
            h = (h ^ np.uint64(buf[p])) * prime
        out[i] = h % modulus


@numba.njit(inline="always")
def _hash(a: Any, x: Any, b: Any) -> Any:
    """``(a*x + b) mod P`` as uint32, for uint64 a, x < 2**31 and b < P."""
    mask = np.uint64(_P)
    shift = np.uint64(31)
    y = a * x + b  # < 2**62
    y = (y & mask) + (y >> shift)  # < 2**32 + 2**31
    y = (y & mask) + (y >> shift)  # <= P + 2
    v = np.uint32(y)
    return v - np.uint32(_P) if v >= np.uint32(_P) else v


@_jit
def minima(x: Any, per_doc: Any, a: Any, b: Any, out: Any) -> None:
    """``out[d, i]`` = min over document d's shingles of ``(a[i] * x + b[i]) mod P``; P for a
    document without shingles.

    Args:
        x: uint32 shingle values (below P), the documents' shingles one after another.
        per_doc: int64 shingles per document.
        a: uint32 multipliers; b: uint64 offsets (both below P).
        out: uint32, C-contiguous, documents x permutations.
    """
    n_perm = a.shape[0]
    acc = np.empty(n_perm, dtype=np.uint32)
    first = 0
    for d in range(per_doc.shape[0]):
        end = first + per_doc[d]
        acc[:] = np.uint32(_P)
        j = first
        while j + 4 <= end:
            x0 = np.uint64(x[j])
            x1 = np.uint64(x[j + 1])
            x2 = np.uint64(x[j + 2])
            x3 = np.uint64(x[j + 3])
            for i in range(n_perm):
                ai = np.uint64(a[i])
                bi = b[i]
                low = min(_hash(ai, x0, bi), _hash(ai, x1, bi))
                high = min(_hash(ai, x2, bi), _hash(ai, x3, bi))
                acc[i] = min(acc[i], min(low, high))
            j += 4
        while j < end:
            xj = np.uint64(x[j])
            for i in range(n_perm):
                acc[i] = min(acc[i], _hash(np.uint64(a[i]), xj, b[i]))
            j += 1
        out[d, :] = acc
        first = end


def warm_up() -> None:
    """Compile both kernels for the argument types the signature kernel passes (or read them
    from numba's cache), on a tiny input."""
    x = np.empty(1, dtype=np.uint64)
    one = np.ones(1, dtype=np.int64)
    shingle_values(np.frombuffer(b"a", dtype=np.uint8), one - 1, one, x)
    out = np.empty((1, 1), dtype=np.uint32)
    minima(x.astype(np.uint32), one, np.ones(1, np.uint32), np.zeros(1, np.uint64), out)
