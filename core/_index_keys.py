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

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._arrow import numbers
from neardup.core._json import read_json

__all__ = [
    "BATCH_ROWS",
    "DIGEST_BAND",
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
#: Key ranges (buckets of the top key bits) a spilled build sorts one at a time.
SPILL_BUCKETS = 256
#: Schema metadata keys: the layout (JSON) and the fences (little-endian int64).
META_KEY, FENCES_KEY = b"neardup.keys", b"neardup.fences"

_ROW = np.dtype([("key", "<i8"), ("band", "<i2"), ("row", "<i4")])


class KeyTableError(ValueError):
    """A key table that is not what its part lists (the caller names the file: damage)."""


def _schema(meta: dict[bytes, bytes]) -> Any:
    import pyarrow as pa

    fields = [
        pa.field("key", pa.int64(), nullable=False),
        pa.field("band", pa.int16(), nullable=False),
        pa.field("row", pa.int32(), nullable=False),
    ]
    return pa.schema(fields, metadata=meta)


def _sorted(rows: NDArray[Any]) -> NDArray[Any]:
    """Rows held in ``(row, band)`` order (as added) sorted by ``(key, row, band)``: one stable
    sort by key."""
    return rows[np.argsort(rows["key"], kind="stable")]


class KeyBuilder:
    """The key table of a part, built from its rows in order (``add``), written by ``write``."""

    def __init__(self, bands: int) -> None:
        self.bands = bands
        self.rows = 0
        self._held: list[NDArray[Any]] = []
        self._held_rows = 0
        self._spill: tempfile.TemporaryDirectory[str] | None = None

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
        self._held.append(block.reshape(-1))
        self._held_rows += block.size
        if self._held_rows >= SPILL_ROWS:
            self._flush()

    def _bucket_path(self, bucket: int) -> Path:
        assert self._spill is not None
        return Path(self._spill.name) / f"{bucket:03d}.bin"

    def _flush(self) -> None:
        """Append the held rows to the spill files of their key ranges."""
        if self._spill is None:
            self._spill = tempfile.TemporaryDirectory(prefix="neardup-keys-")
        rows = np.concatenate(self._held)
        self._held, self._held_rows = [], 0
        bucket = _buckets(rows["key"])
        order = np.argsort(bucket, kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange(SPILL_BUCKETS + 1))
        for b in range(SPILL_BUCKETS):
            if bounds[b] < bounds[b + 1]:
                with open(self._bucket_path(b), "ab") as out:
                    rows[order[bounds[b] : bounds[b + 1]]].tofile(out)

    def _runs(self) -> Iterator[NDArray[Any]]:
        """The rows, sorted (by ``_fences``), one key range at a time."""
        if self._spill is None:
            yield from self._held
            return
        for b in range(SPILL_BUCKETS):
            path = self._bucket_path(b)
            if path.exists():
                yield np.fromfile(path, dtype=_ROW)

    def write(self, fs: Any, path: str) -> int:
        """Write the table at ``path`` on ``fs``; returns its rows."""
        import pyarrow as pa

        try:
            fences = self._fences()
            meta = {
                META_KEY: json.dumps(
                    {
                        "page_rows": PAGE_ROWS,
                        "batch_rows": BATCH_ROWS,
                        "bands": self.bands,
                        "rows": self.rows * (self.bands + 1),
                    }
                ).encode(),
                FENCES_KEY: fences.astype("<i8").tobytes(),
            }
            schema = _schema(meta)
            with fs.open(path, "wb") as handle, pa.ipc.new_file(handle, schema) as writer:
                rest = np.empty(0, dtype=_ROW)
                for run in self._runs():
                    rows = np.concatenate((rest, run)) if len(rest) else run
                    whole = len(rows) - len(rows) % BATCH_ROWS
                    for lo in range(0, whole, BATCH_ROWS):
                        writer.write_batch(_batch(rows[lo : lo + BATCH_ROWS], schema))
                    rest = rows[whole:]
                if len(rest):
                    writer.write_batch(_batch(rest, schema))
        finally:
            if self._spill is not None:
                self._spill.cleanup()
                self._spill = None
        return self.rows * (self.bands + 1)

    def _fences(self) -> NDArray[np.int64]:
        """The key at every ``PAGE_ROWS``-th row of the sorted table."""
        if self._spill is None:
            rows = _sorted(np.concatenate(self._held)) if self._held else np.empty(0, _ROW)
            self._held, self._held_rows = [rows], len(rows)
            return np.ascontiguousarray(rows["key"][::PAGE_ROWS])
        if self._held:
            self._flush()
        fences: list[NDArray[np.int64]] = []
        start = 0
        for b in range(SPILL_BUCKETS):  # sort each run once, in place: writing reads it sorted
            path = self._bucket_path(b)
            if not path.exists():
                continue
            rows = _sorted(np.fromfile(path, dtype=_ROW))
            rows.tofile(path)
            first = -start % PAGE_ROWS
            fences.append(rows["key"][first::PAGE_ROWS].copy())
            start += len(rows)
        return np.concatenate(fences) if fences else np.empty(0, dtype=np.int64)


def _buckets(keys: NDArray[np.int64]) -> NDArray[np.int64]:
    """The key range of each key: its top bits, in signed order."""
    shift = np.uint64(64 - (SPILL_BUCKETS.bit_length() - 1))
    flipped = keys.view(np.uint64) ^ np.uint64(1 << 63)
    return (flipped >> shift).astype(np.int64)


def _batch(rows: NDArray[Any], schema: Any) -> Any:
    import pyarrow as pa

    columns = [numbers(rows[name]) for name in ("key", "band", "row")]
    return pa.record_batch(columns, schema=schema)


class KeyTable:
    """An open key table: ``find`` looks keys up a page at a time.

    Raises KeyTableError (at open) when the file is not a key table of ``rows`` rows."""

    def __init__(self, source: Any, rows: int) -> None:
        import pyarrow as pa

        try:
            self._reader = pa.ipc.open_file(source)
            meta = self._reader.schema.metadata or {}
            layout = read_json(meta[META_KEY].decode("utf-8"))
            self.fences = np.frombuffer(meta[FENCES_KEY], dtype="<i8")
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            raise KeyTableError(f"is not a readable key table ({exc})") from None
        if not isinstance(layout, dict):
            raise KeyTableError(f"is not a key table of this layout ({layout!r})")
        names = self._reader.schema.names
        if names != ["key", "band", "row"] or layout.get("page_rows") != PAGE_ROWS:
            raise KeyTableError(f"is not a key table of this layout ({names}, {layout})")
        if layout.get("batch_rows") != BATCH_ROWS:
            raise KeyTableError(f"has batches of {layout.get('batch_rows')} rows")
        if layout.get("rows") != rows:
            raise KeyTableError(f"holds {layout.get('rows')} keys, the index lists {rows}")
        batches = self._reader.num_record_batches
        self.rows = rows
        expected_batches = -(-rows // BATCH_ROWS)
        if batches != expected_batches or len(self.fences) != -(-rows // PAGE_ROWS):
            raise KeyTableError(
                f"holds {batches} batches and {len(self.fences)} fences, not those of {rows} rows"
            )
        self._cache: dict[int, tuple[NDArray[np.int64], NDArray[np.int16], NDArray[np.int32]]] = {}

    def _batch(self, b: int) -> tuple[NDArray[np.int64], NDArray[np.int16], NDArray[np.int32]]:
        """Batch ``b``'s columns as numpy views of the file (no copy when memory-mapped)."""
        import pyarrow as pa

        if b not in self._cache:
            try:
                batch = self._reader.get_batch(b)
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise KeyTableError(f"cannot be read ({exc})") from None
            want = min(BATCH_ROWS, self.rows - b * BATCH_ROWS)
            if batch.num_rows != want or batch.schema.names != ["key", "band", "row"]:
                raise KeyTableError(f"has a batch {b} of {batch.num_rows} rows, not {want}")
            self._cache[b] = (
                _values(batch.column(0), "<i8"),
                _values(batch.column(1), "<i2"),
                _values(batch.column(2), "<i4"),
            )
        return self._cache[b]

    def _spans(self, batch_of: NDArray[np.int64]) -> Iterator[tuple[int, slice]]:
        """``(batch, slice)`` of each run of one batch in ``batch_of`` (nondecreasing)."""
        if len(batch_of) == 0:
            return
        cuts = np.flatnonzero(np.diff(batch_of)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(batch_of)]))
        for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
            yield int(batch_of[lo]), slice(lo, hi)

    def _bound(self, keys: NDArray[np.int64], side: str) -> NDArray[np.int64]:
        """Per key (``keys`` sorted), the first row whose key is ``>=`` it (``side="left"``) or
        ``>`` it: the fences name the page, hence the batch, searched by bisection (16 steps
        within its 64 pages)."""
        page = np.maximum(np.searchsorted(self.fences, keys, side=side) - 1, 0)  # type: ignore[call-overload]
        out = np.empty(len(keys), dtype=np.int64)
        for b, span in self._spans(page // (BATCH_ROWS // PAGE_ROWS)):
            column = self._batch(b)[0]
            found = np.searchsorted(column, keys[span], side=side)  # type: ignore[call-overload]
            out[span] = b * BATCH_ROWS + found
        return out

    def find(
        self, keys: NDArray[np.int64], bands: NDArray[np.int16]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(query, row)`` of every table row whose key and band equal a query's."""
        none = np.empty(0, dtype=np.int64)
        if len(keys) == 0 or self.rows == 0:
            return none, none
        order = np.argsort(keys, kind="stable")
        ordered = np.ascontiguousarray(keys[order], dtype=np.int64)
        lo, hi = self._bound(ordered, "left"), self._bound(ordered, "right")
        span = hi - lo
        hit = np.flatnonzero(span > 0)
        if len(hit) == 0:
            return none, none
        count = span[hit]
        query = np.repeat(hit, count)
        at = (
            np.repeat(lo[hit], count)
            + np.arange(len(query))
            - np.repeat(np.cumsum(count) - count, count)
        )
        band = np.empty(len(at), dtype=np.int16)
        row = np.empty(len(at), dtype=np.int64)
        for b, sel in self._spans(at // BATCH_ROWS):
            _, band_col, row_col = self._batch(b)
            band[sel] = band_col[at[sel] - b * BATCH_ROWS]
            row[sel] = row_col[at[sel] - b * BATCH_ROWS]
        query = order[query]
        same = band == bands[query]
        return query[same].astype(np.int64), row[same]


def _values(array: Any, dtype: str) -> NDArray[Any]:
    """A non-null primitive Arrow array's values as a numpy view of its buffer (``to_numpy``
    would import pandas: half a second of a one-document query)."""
    width = np.dtype(dtype).itemsize
    return np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * width
    )


def open_local(path: str, rows: int) -> KeyTable:
    """A key table of a local file, memory-mapped."""
    import pyarrow as pa

    try:
        source = pa.memory_map(os.fspath(path), "r")
    except (OSError, pa.ArrowException) as exc:
        raise KeyTableError(f"cannot be opened ({exc})") from None
    return KeyTable(source, rows)
