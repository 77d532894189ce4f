"""Permutations and minima: ``min over a document's shingles of (a_i * x + b_i) mod P`` for
every permutation i, over whole blocks of shingles at once, exactly.

A (permutations, shingles) tile is computed in seven numpy passes from an exact low uint32 word
and a float64 quotient (see ``_PermOperands``); the rare minima the quotient may be one off
for are recomputed in uint64. Minima are taken along each permutation's row, one ``reduceat``
segment per document.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from neardup.core._hashing import MERSENNE31

__all__ = ["minima"]

_P64 = np.uint64(MERSENNE31)
_P32 = np.uint32(MERSENNE31)
# Shingles per block and permutations per group. A (32, 16384) tile is 8 MiB of scratch in L3;
# smaller tiles fit L2 but pay numpy's per-call cost more often.
_PERM_BLOCK = 1 << 14
_PERM_GROUP = 32
# numpy's buffered iterator copies a broadcast operand through buffers when rows are shorter
# than the buffer size, which made the (group, block) broadcasts 2-3x slower; rows are longer.
_PERM_BUFSIZE = 1 << 10
# The float quotient's bias (its error is below 2**-20), and the minima (maxima of mirrored
# permutations) that may be off by one and are recomputed: see _PermOperands.
_QUOTIENT_BIAS = 2.0**-19
_NEAR_P = np.uint32(MERSENNE31 - (1 << 13))
_NEAR_ZERO = np.uint32(1 << 13)


def minima(
    x: NDArray[np.uint64],
    per_doc: NDArray[np.int64],
    a: NDArray[np.uint64],
    b: NDArray[np.uint64],
) -> NDArray[np.uint32]:
    """Per document, per permutation, ``min over its shingles of (a*x + b) mod P``.

    Seven passes over each (permutations, shingles) tile, in ``_PermOperands.values``; the
    minima are taken along each permutation's row, one ``reduceat`` segment per document (a
    document cut by a block boundary is finished by the next block).
    """
    operands = _PermOperands(x, a, b)
    acc = np.empty((len(a), len(per_doc)), dtype=np.uint32)
    acc[: operands.n_direct] = MERSENNE31  # identity of min
    acc[operands.n_direct :] = 0  # identity of max, for the mirrored permutations
    ends = np.cumsum(per_doc)
    firsts = ends - per_doc
    old = np.setbufsize(_PERM_BUFSIZE)
    try:
        for s0 in range(0, len(x), _PERM_BLOCK):
            s1 = min(len(x), s0 + _PERM_BLOCK)
            # The documents with shingles in [s0, s1), and where each one starts in the block.
            d0 = int(np.searchsorted(ends, s0, side="right"))
            d1 = int(np.searchsorted(firsts, s1, side="left"))
            docs: slice | NDArray[np.int64] = slice(d0, d1)
            if not per_doc[d0:d1].all():
                docs = np.flatnonzero(per_doc[d0:d1]) + d0
            seg = np.maximum(firsts[docs], s0) - s0
            operands.load(s0, s1)
            for g0, g1 in operands.groups:
                reduce = np.minimum if g0 < operands.n_direct else np.maximum
                least = reduce.reduceat(operands.values(s1 - s0, g0, g1), seg, axis=1)
                acc[g0:g1, docs] = reduce(acc[g0:g1, docs], least)
    finally:
        np.setbufsize(old)
    sig, suspect = operands.finish(acc, per_doc > 0)
    _repair_minima(sig, suspect, x, per_doc, firsts, a, b)
    return sig.T.copy()


class _PermOperands:
    """The permutations of ``_minima`` as it computes them, the shingle operands, and scratch.

    With ``y = a*x + b`` and ``q = y // P``, ``(a*x + b) mod P`` is ``(y + q) mod 2**31`` (as
    ``y = q * 2**31 - q + value``), so ``(a*x mod 2**32 + q + b) & P`` in wrapping uint32. The
    float64 ``x * (a/P) + (b + b/P + bias)``, below 2**31 when a + b < 2**31 - 1, truncates to
    ``q + b``: its error is below 2**-20, so with a bias of 2**-19 the result is exact, or the
    value plus one when the value is above P - 6144 (never a smaller number), and a minimum
    from P - 2**13 up is recomputed. A permutation with a + b >= 2**31 - 1 is mirrored instead:
    ``P - 1 - value`` is the same hash with ``(P - a, P - 1 - b)``, and its minimum is
    ``P - 1 -`` the mirror's maximum. There the bias is -2**-19, so an inexact value is the
    mirror's minus one (or P for 0), near 0: a maximum below 2**13, or P, is recomputed.

    Attributes:
        order: the permutations as computed: the direct ones, then the mirrored ones.
        n_direct: how many are direct.
        groups: ``[g0, g1)`` rows per tile, each all direct or all mirrored.
    """

    def __init__(self, x: NDArray[np.uint64], a: NDArray[np.uint64], b: NDArray[np.uint64]):
        a64 = a.astype(np.int64)
        b64 = b.astype(np.int64)
        mirror = a64 + b64 >= MERSENNE31
        self.order = np.argsort(mirror, kind="stable")
        self.n_direct = int(np.count_nonzero(~mirror))
        a_used = np.where(mirror, MERSENNE31 - a64, a64)[self.order]
        b_used = np.where(mirror, MERSENNE31 - 1 - b64, b64)[self.order]
        bias = np.where(mirror[self.order], -_QUOTIENT_BIAS, _QUOTIENT_BIAS)
        self.a32 = a_used.astype(np.uint32)[:, None]
        self.alpha = (a_used / np.float64(MERSENNE31))[:, None]
        self.gamma = (b_used + b_used / np.float64(MERSENNE31) + bias)[:, None]
        self.groups = _groups(0, self.n_direct) + _groups(self.n_direct, len(a))
        self.x = x
        self.x32 = np.empty(min(_PERM_BLOCK, len(x)), dtype=np.uint32)
        self.xf = np.empty(min(_PERM_BLOCK, len(x)), dtype=np.float64)
        shape = (min(_PERM_GROUP, len(a)), min(_PERM_BLOCK, len(x)))
        self.low = np.empty(shape, dtype=np.uint32)
        self.quot = np.empty(shape, dtype=np.float64)
        self.q32 = np.empty(shape, dtype=np.int32)

    def load(self, s0: int, s1: int) -> None:
        """Take shingles s0:s1 as the block of ``values``."""
        np.copyto(self.x32[: s1 - s0], self.x[s0:s1], casting="unsafe")  # x < P < 2**31
        np.copyto(self.xf[: s1 - s0], self.x[s0:s1], casting="unsafe")  # exact below 2**53

    def values(self, n: int, g0: int, g1: int) -> NDArray[np.uint32]:
        """The hashes of the block's n shingles under computed permutations g0:g1."""
        low = self.low[: g1 - g0, :n]
        quot = self.quot[: g1 - g0, :n]
        q32 = self.q32[: g1 - g0, :n]
        np.multiply(self.a32[g0:g1], self.x32[:n], out=low)
        np.multiply(self.alpha[g0:g1], self.xf[:n], out=quot)
        quot += self.gamma[g0:g1]
        np.copyto(q32, quot, casting="unsafe")  # truncation: quot > -1, and exact below 2**31
        low += q32.view(np.uint32)
        low &= _P32
        return low

    def finish(
        self, acc: NDArray[np.uint32], nonempty: NDArray[np.bool_]
    ) -> tuple[NDArray[np.uint32], NDArray[np.bool_]]:
        """Minima in the original permutation order, and which ones to recompute."""
        direct, mirrored = acc[: self.n_direct], acc[self.n_direct :]
        suspect = np.empty(acc.shape, dtype=np.bool_)
        np.greater_equal(direct, _NEAR_P, out=suspect[: self.n_direct])
        np.less(mirrored, _NEAR_ZERO, out=suspect[self.n_direct :])
        suspect[self.n_direct :] |= mirrored == _P32
        np.subtract(_P32 - np.uint32(1), mirrored, out=mirrored)
        sig = np.empty_like(acc)
        sig[self.order] = acc
        sig[:, ~nonempty] = MERSENNE31
        flagged = np.empty_like(suspect)
        flagged[self.order] = suspect
        flagged &= nonempty
        return sig, flagged


def _groups(begin: int, stop: int) -> list[tuple[int, int]]:
    """``[begin, stop)`` cut into equal ranges of at most ``_PERM_GROUP``."""
    count = -(-(stop - begin) // _PERM_GROUP)
    size = -(-(stop - begin) // count) if count else 0
    return [(g0, min(g0 + size, stop)) for g0 in range(begin, stop, max(size, 1))]


def _repair_minima(
    sig: NDArray[np.uint32],
    suspect: NDArray[np.bool_],
    x: NDArray[np.uint64],
    per_doc: NDArray[np.int64],
    firsts: NDArray[np.int64],
    a: NDArray[np.uint64],
    b: NDArray[np.uint64],
) -> None:
    """Recompute exactly, in uint64, the suspect minima of ``sig`` (permutation-major)."""
    perm, doc = np.nonzero(suspect)
    if len(doc) == 0:
        return
    lengths = per_doc[doc]
    first = np.zeros(len(doc), dtype=np.int64)
    np.cumsum(lengths[:-1], out=first[1:])
    owner = np.repeat(np.arange(len(doc)), lengths)
    shingle = np.arange(len(owner)) - first[owner] + firsts[doc][owner]
    values = (x[shingle] * a[perm][owner] + b[perm][owner]) % _P64
    sig[perm, doc] = np.minimum.reduceat(values, first)
