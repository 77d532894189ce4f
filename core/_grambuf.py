"""Many n-grams as one UTF-8 buffer, to hash and weigh them all at numpy speed
(``NgramIndex`` and ``Anchors`` build from it: each gram encoded once, no per-gram weighing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from neardup.core._fnv import fnv1a64_spans
from neardup.core._windows import buffer_weights

__all__ = ["GramBuffer", "leading_bytes"]


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


def leading_bytes(buf: NDArray[np.uint8], at: NDArray[np.int64], k: int) -> NDArray[np.uint64]:
    """The first ``k`` (1 to 8) bytes of ``buf`` from every offset ``at`` as one little-endian
    number (bytes past the end read as zeros): one gather through an unaligned view."""
    padded = np.zeros(len(buf) + 8, dtype=np.uint8)
    padded[: len(buf)] = buf
    view = np.ndarray((len(buf) + 1,), dtype="<u8", buffer=padded, strides=(1,))
    found = view.take(at).astype(np.uint64)
    if k < 8:
        found &= np.uint64((1 << (8 * k)) - 1)
    return found
