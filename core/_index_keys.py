"""A part's band-key table: every (key, band, row) of the part, sorted, looked up by page.

One Arrow IPC file per part (``keys-00000.arrow``, docs/index.md) holds, for each row of the
part's data files (numbered across them in listing order), its text digest's first 8 bytes
(band ``DIGEST_BAND``) and its ``bands`` band digests, each as a signed ``int64`` (the same 8
little-endian bytes), sorted by ``(key, row, band)``. Record batches of ``BATCH_ROWS`` rows, and
the schema's metadata ``neardup.fences``: the key at every ``PAGE_ROWS``-th row (the page
table). A lookup of K keys searches the fences in memory, then reads one or two pages of
``PAGE_ROWS`` keys per key (memory-mapped locally, range reads elsewhere): O(K) pages whatever
the part's size. Building spills sorted runs to disk past ``SPILL_ROWS`` keys, so its memory
does not grow with the part.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._index_sorted import FENCES_KEY, SortedBuilder, SortedTable, TableError

__all__ = [
    "BATCH_ROWS",
    "DIGEST_BAND",
    "FENCES_KEY",
    "KEYS_FILE",
    "PAGE_ROWS",
    "SPILL_ROWS",
    "KeyBuilder",
    "KeyTable",
    "KeyTableError",
]

#: The key table's file name in its part's directory.
KEYS_FILE = "keys-00000.arrow"
#: The band number of a text digest's key.
DIGEST_BAND = -1
#: Keys per page (14 KB): a lookup reads one or two pages per key.
PAGE_ROWS = 1 << 10
#: Keys per record batch (a whole number of pages, so no page spans two batches; ~900 KB, one
#: range read on object storage).
BATCH_ROWS = 1 << 16
#: Keys held in memory while building (59 MB); past it, they are spilled to disk by key range
#: (a part of a million documents at 16 bands: 17M keys, in 4 spills), each range then sorted
#: alone: measured faster than one sort in memory, at a third of the peak memory.
SPILL_ROWS = 1 << 22
#: The schema metadata key of the layout (JSON; the fences are under ``FENCES_KEY``).
META_KEY = b"neardup.keys"

_ROW = np.dtype([("key", "<i8"), ("band", "<i2"), ("row", "<i4")])

#: A key table that is not what its part lists (the caller names the file: damage).
KeyTableError = TableError


class KeyBuilder(SortedBuilder):
    """The key table of a part, built from its rows in order (``add``), written by ``write``."""

    def __init__(self, bands: int) -> None:
        super().__init__(_ROW, (META_KEY, PAGE_ROWS, BATCH_ROWS, SPILL_ROWS))
        self.bands = bands
        self.rows = 0

    def add(self, digests: NDArray[np.uint64], band_keys: NDArray[np.uint64]) -> None:
        """The next rows: their text digests ``[n, 2]`` and band digests ``[n, bands]``."""
        n = len(digests)
        if self.rows + n >= 2**31:
            raise ValueError(f"a part holds at most {2**31 - 1} rows; write smaller parts")
        block = np.empty((n, self.bands + 1), dtype=_ROW)
        block["key"][:, 0] = np.ascontiguousarray(digests[:, 0], dtype="<u8").view("<i8")
        block["key"][:, 1:] = np.ascontiguousarray(band_keys, dtype="<u8").view("<i8")
        block["band"] = np.arange(DIGEST_BAND, self.bands, dtype=np.int16)[None, :]
        block["row"] = (self.rows + np.arange(n, dtype=np.int32))[:, None]
        self.rows += n
        self._add(block.reshape(-1))

    def layout(self) -> dict[str, Any]:
        """Pages, batches, bands and keys (in this order: the bytes are part of the format)."""
        return {
            "page_rows": self.page_rows,
            "batch_rows": self.batch_rows,
            "bands": self.bands,
            "rows": self.rows * (self.bands + 1),
        }


class KeyTable(SortedTable):
    """An open key table: ``find`` looks keys up a page at a time.

    Raises KeyTableError (at open) when the file is not a key table of ``rows`` rows."""

    def __init__(self, source: Any, rows: int) -> None:
        layout = (META_KEY, PAGE_ROWS, BATCH_ROWS)
        super().__init__(source, rows, _ROW, layout, ("key table", "keys"))

    def find(
        self, keys: NDArray[np.int64], bands: NDArray[np.int16]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(query, row)`` of every table row whose key and band equal a query's."""
        query, at = self.locate(keys)
        if len(at) == 0:
            return query, at
        band = self.gather(at, 1)
        row = self.gather(at, 2).astype(np.int64)
        same = band == bands[query]
        return query[same], row[same]
