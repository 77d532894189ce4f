"""One MinHash sketch at a time: shingle hashes, a signature of a shingle set, and the estimate.

The batch kernel in ``core._signatures`` computes the same values for many texts at once.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from neardup.core._fnv import fnv1a64_spans
from neardup.core._hashing import MERSENNE31, perm_params
from neardup.core.errors import SignatureError

__all__ = ["estimate", "minhash", "shingle_hashes"]

_P64 = np.uint64(MERSENNE31)


def shingle_hashes(shingles: Iterable[str]) -> NDArray[np.uint64]:
    """``x(s) = fnv1a64(s.encode("utf-8")) mod P`` for every shingle, in iteration order."""
    encoded = [s.encode("utf-8") for s in shingles]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    end = np.cumsum(lengths)
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return fnv1a64_spans(buf, end - lengths, end) % _P64


def minhash(shingles: Iterable[str], num_perm: int = 128, seed: int = 0) -> NDArray[np.uint64]:
    """The signature of a shingle set: entry i is the minimum of ``h_i(x(s))`` over the shingles.

    ``h_i(x) = (a_i * x + b_i) mod P`` with ``(a, b) = perm_params(num_perm, seed)``. A set
    without shingles has every entry equal to P.
    """
    a, b = perm_params(num_perm, seed)
    x = shingle_hashes(shingles)
    if len(x) == 0:
        return np.full(num_perm, MERSENNE31, dtype=np.uint64)
    # a, x, b < P < 2**31, so a*x + b < 2**63 is exact in uint64.
    return np.asarray(((x[:, None] * a + b) % _P64).min(axis=0), dtype=np.uint64)


def estimate(sig_a: ArrayLike, sig_b: ArrayLike) -> float:
    """The share of positions where the two signatures agree (an unbiased Jaccard estimate).

    Position by position, never as sets. Worked toy (P = 7): minima (0, 0, 0) and (0, 0, 1)
    give 2/3.

    >>> estimate([0, 0, 0], [0, 0, 1])
    0.6666666666666666
    """
    a = np.asarray(sig_a)
    b = np.asarray(sig_b)
    if a.ndim != 1 or a.shape != b.shape or len(a) == 0:
        raise SignatureError(
            f"signatures must be non-empty vectors of one length, got {a.shape} and {b.shape}"
        )
    return float(np.count_nonzero(a == b) / len(a))
