"""Many n-grams as one UTF-8 buffer, to hash and weigh them all at numpy speed
(``NgramIndex`` and ``Anchors`` build from it: each gram encoded once, no per-gram weighing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from neardup.core._fnv import fnv1a64_spans
from neardup.core._windows import buffer_weights

__all__ = ["ByteKeys", "GramBuffer"]


@dataclass(frozen=True)
class GramBuffer:
    """``grams`` encoded as UTF-8 and joined by single spaces into ``buf``, each gram
    ``buf[start:end]``; a gram's words are its runs between spaces, as ``gram.split(" ")``."""

    grams: list[str]
    buf: NDArray[np.uint8]
    start: NDArray[np.int64]
    end: NDArray[np.int64]

    @classmethod
    def of(cls, grams: Sequence[str]) -> GramBuffer:
        """The buffer of ``grams``, in their order."""
        encoded = [g.encode("utf-8") for g in grams]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        start = np.zeros(len(encoded), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=start[1:])
        buf = np.frombuffer(b" ".join(encoded), dtype=np.uint8)
        return cls(list(grams), buf, start, start + lengths)

    def hashes(self) -> NDArray[np.uint64]:
        """FNV-1a 64 of every gram's UTF-8 bytes (``core._ngrams.gram_hashes``)."""
        return fnv1a64_spans(self.buf, self.start, self.end)

    def words(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """Every word's ``[start, end)`` in ``buf`` (all the grams' words in a row), and the
        index of each gram's first word; a gram's words run to the next gram's first."""
        spaces = np.flatnonzero(self.buf == 0x20)
        word_start = np.concatenate(([0], spaces + 1)).astype(np.int64)
        word_end = np.concatenate((spaces, [len(self.buf)])).astype(np.int64)
        first = np.searchsorted(spaces, self.start).astype(np.int64)
        return word_start, word_end, first

    def weighed(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """Every word's weight (``buffer_weights``), the words' prefix sums (``total[i]``: the
        words before word i) and each gram's first word."""
        word_start, word_end, first = self.words()
        total = np.zeros(len(word_start) + 1, dtype=np.int64)
        np.cumsum(buffer_weights(self.buf, word_start, word_end), out=total[1:])
        return word_end, total, first


#: Folds a key's second eight bytes into its first (odd: no two values of them alike after).
_FOLD = np.uint64(0x9E3779B97F4A7C15)


class ByteKeys:
    """Keys of the leading bytes of a buffer at many offsets: of up to eight bytes, the
    little-endian number they are; of nine to sixteen, the next ones' number times an odd
    constant added in. Equal bytes make equal keys; unequal bytes rarely do. One or two gathers
    a key through an unaligned view of the buffer (bytes past its end read as zeros)."""

    def __init__(self, buf: NDArray[np.uint8]) -> None:
        padded = np.zeros(len(buf) + 16, dtype=np.uint8)
        padded[: len(buf)] = buf
        self.view = np.ndarray((len(buf) + 9,), dtype="<u8", buffer=padded, strides=(1,))

    def key(self, at: NDArray[np.int64], k: int) -> NDArray[np.uint64]:
        """The key of the ``k`` (1 to 16) bytes from every offset ``at``."""
        found: NDArray[np.uint64] = self.view.take(at).astype(np.uint64)
        if k < 8:
            found &= np.uint64((1 << (8 * k)) - 1)
        if k > 8:
            more = self.view.take(at + 8).astype(np.uint64)
            if k < 16:
                more &= np.uint64((1 << (8 * (k - 8))) - 1)
            found += more * _FOLD
        return found
