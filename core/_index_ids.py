"""A part's id table: the hash of every id with its row, sorted, looked up by page.

One Arrow IPC file per part (``ids-00000.arrow``, docs/index.md) holds, for each row of the
part's data files (numbered across them in listing order), ``id_hash`` of its id and the row,
sorted by ``(hash, row)``, in the layout of every sorted table (``_index_sorted``): record
batches of ``BATCH_ROWS`` rows, the key at every ``PAGE_ROWS``-th row in the schema's metadata
(``neardup.fences``), the layout under ``neardup.ids``. Checking K ids reads O(K) pages of it
whatever the part's size; a hash found is only a candidate: its row's real id is read from the
data files and compared (``_index_idrows``), so two ids of one hash never stand for each other.

**The hash** (part of the format): FNV-1a 64 of the id's UTF-8 bytes (offset basis
``0xcbf29ce484222325``, prime ``0x100000001b3``, ``h = (h ^ byte) * prime mod 2**64`` per byte),
its 8 little-endian bytes read as a signed ``int64``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._arrow import strings
from neardup.core._fnv import fnv1a64_spans
from neardup.core._index_sorted import SortedBuilder, SortedTable

__all__ = [
    "BATCH_ROWS",
    "IDS_FILE",
    "PAGE_ROWS",
    "SPILL_ROWS",
    "IdBuilder",
    "IdTable",
    "id_hashes",
]

#: The id table's file name in its part's directory.
IDS_FILE = "ids-00000.arrow"
#: Ids per page (12 KB): a check reads one or two pages per id.
PAGE_ROWS = 1 << 10
#: Ids per record batch (a whole number of pages; 768 KB, one range read on object storage).
BATCH_ROWS = 1 << 16
#: Ids held in memory while building (48 MB); past it they are spilled by hash range.
SPILL_ROWS = 1 << 22
#: The schema metadata key of the layout (JSON).
META_KEY = b"neardup.ids"

_ROW = np.dtype([("hash", "<i8"), ("row", "<i4")])


def id_hashes(ids: Sequence[str] | Any) -> NDArray[np.int64]:
    """The hash of every id (a sequence of ``str`` that UTF-8 encodes, or an Arrow string
    array, chunked or not, without nulls), as the id table stores it."""
    import pyarrow as pa

    array = ids if isinstance(ids, pa.Array | pa.ChunkedArray) else strings(list(ids))
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    out = [_chunk_hashes(chunk) for chunk in chunks]
    return np.concatenate(out) if out else np.empty(0, dtype=np.int64)


def _chunk_hashes(chunk: Any) -> NDArray[np.int64]:
    import pyarrow as pa

    n = len(chunk)
    if chunk.null_count:
        raise ValueError("an id is null")
    if not (pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type)):
        raise ValueError(f"ids are {chunk.type}, not strings")
    kind = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    _, offsets_buffer, data = chunk.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=kind)[chunk.offset : chunk.offset + n + 1]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    start, end = offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)
    return fnv1a64_spans(raw, start, end).view(np.int64)


class IdBuilder(SortedBuilder):
    """The id table of a part, built from its ids in row order (``add``), written by
    ``write``."""

    def __init__(self) -> None:
        super().__init__(_ROW, (META_KEY, PAGE_ROWS, BATCH_ROWS, SPILL_ROWS))
        self.rows = 0

    def add(self, ids: Sequence[str] | Any) -> None:
        """The next rows' ids (as ``id_hashes`` takes them)."""
        hashes = id_hashes(ids)
        n = len(hashes)
        if self.rows + n >= 2**31:
            raise ValueError(f"a part holds at most {2**31 - 1} rows; write smaller parts")
        block = np.empty(n, dtype=_ROW)
        block["hash"] = hashes
        block["row"] = self.rows + np.arange(n, dtype=np.int32)
        self.rows += n
        self._add(block)


class IdTable(SortedTable):
    """An open id table: ``find`` looks hashes up a page at a time.

    Raises TableError (at open) when the file is not an id table of ``rows`` rows."""

    def __init__(self, source: Any, rows: int) -> None:
        layout = (META_KEY, PAGE_ROWS, BATCH_ROWS)
        super().__init__(source, rows, _ROW, layout, ("id table", "ids"))

    def find(self, hashes: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(query, row)`` of every entry whose hash is ``hashes[query]``: candidates, to be
        confirmed against the real ids."""
        query, at = self.locate(np.ascontiguousarray(hashes, dtype=np.int64))
        if len(at) == 0:
            return query, at
        return query, self.gather(at, 1).astype(np.int64)
