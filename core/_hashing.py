"""The exact hash family: FNV-1a 64 for shingles, PCG32 for the permutation parameters.

Both are specified bit for bit in docs/algorithm.md section 2 so that signatures agree across runs,
machines and ports to other languages; Python's ``hash()`` is salted per process and never used.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from neardup.core.errors import ParameterError

__all__ = ["FNV_OFFSET", "FNV_PRIME", "MERSENNE31", "PCG32", "fnv1a64", "perm_params"]

#: The modulus of the universal hashes h_i(x) = (a_i * x + b_i) mod P. A Mersenne prime, so the
#: reduction is two folds instead of a division, and a_i * x + b_i < 2**63 stays exact in uint64.
MERSENNE31 = 2**31 - 1

#: FNV-1a 64 offset basis and prime (the published constants).
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3

_MASK64 = 2**64 - 1
_MASK32 = 2**32 - 1
_PCG_MULT = 6364136223846793005


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64 of ``data``: ``h ^= byte; h *= FNV_PRIME (mod 2**64)`` for each byte.

    This scalar version is the reference; the batch kernel in ``core._fnv`` computes the
    same values for many shingles at once.

    >>> hex(fnv1a64(b"foobar"))
    '0x85944171f73967e8'
    """
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & _MASK64
    return h


class PCG32:
    """PCG-XSH-RR 64/32 with the reference ``pcg32_srandom_r`` seeding.

    >>> rng = PCG32(42)
    >>> hex(rng.next())
    '0xa15c02b7'
    """

    def __init__(self, seed: int, seq: int = 54) -> None:
        self._state = 0
        self._inc = ((seq << 1) | 1) & _MASK64
        self.next()
        self._state = (self._state + seed) & _MASK64
        self.next()

    def next(self) -> int:
        """The next uint32 output."""
        old = self._state
        self._state = (old * _PCG_MULT + self._inc) & _MASK64
        xorshifted = (((old >> 18) ^ old) >> 27) & _MASK32
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & _MASK32

    def below(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)`` by unbiased rejection."""
        if not 1 <= bound <= _MASK32:
            raise ParameterError(f"bound must be in [1, 2**32 - 1], got {bound}")
        threshold = (2**32 - bound) % bound
        while True:
            r = self.next()
            if r >= threshold:
                return r % bound


@lru_cache(maxsize=64)
def perm_params(num_perm: int, seed: int) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    """The universal-hash parameters ``(a, b)``, drawn interleaved from ``PCG32(seed)``.

    ``a_i = 1 + rng.below(P - 1)`` then ``b_i = rng.below(P)``, for i = 0, 1, ...
    The arrays are cached per ``(num_perm, seed)`` and read-only.

    Args:
        num_perm: how many hash functions (the signature length), at least 1.
        seed: the PCG32 seed, in [0, 2**64).
    """
    if num_perm < 1:
        raise ParameterError(f"num_perm must be at least 1, got {num_perm}")
    if not 0 <= seed <= _MASK64:
        raise ParameterError(f"seed must be in [0, 2**64), got {seed}")
    rng = PCG32(seed)
    a = np.empty(num_perm, dtype=np.uint64)
    b = np.empty(num_perm, dtype=np.uint64)
    for i in range(num_perm):
        a[i] = 1 + rng.below(MERSENNE31 - 1)
        b[i] = rng.below(MERSENNE31)
    a.setflags(write=False)
    b.setflags(write=False)
    return a, b
