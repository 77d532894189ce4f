"""Sorted fixed-width tables of a part, looked up by page: the key table and the id table.

A table is an Arrow IPC file (Feather v2, uncompressed) of fixed-width integer columns, the
first an ``int64`` key, sorted by key (ties in the order rows were added), in record batches of
``batch_rows`` rows (a whole number of pages of ``page_rows``, so no page spans two batches).
The schema's metadata holds the layout (JSON, under the table's own metadata key) and the page
table (``neardup.fences``: the key at every ``page_rows``-th row, little-endian int64). A lookup
of K keys searches the fences in memory, then bisects the one batch each lands in: O(K) pages
read whatever the table's size (memory-mapped locally: the batches are numpy views). Building
spills rows to disk by key range past ``spill_rows`` rows, each range then sorted alone, so its
memory does not grow with the part.
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

__all__ = ["FENCES_KEY", "SPILL_BUCKETS", "SortedBuilder", "SortedTable", "TableError"]

#: Key ranges (buckets of the top key bits) a spilled build sorts one at a time.
SPILL_BUCKETS = 256
#: The schema metadata key of the fences (little-endian int64).
FENCES_KEY = b"neardup.fences"
_ARROW = {"<i8": "int64", "<i4": "int32", "<i2": "int16"}


class TableError(ValueError):
    """A table that is not what its part lists (the caller names the file: damage)."""


def map_local(path: str) -> Any:
    """A local table file, memory-mapped (its batches are then numpy views of the page cache);
    TableError when it cannot be opened."""
    import pyarrow as pa

    try:
        return pa.memory_map(os.fspath(path), "r")
    except (OSError, pa.ArrowException) as exc:
        raise TableError(f"cannot be opened ({exc})") from None


def _schema(dtype: np.dtype[Any], meta: dict[bytes, bytes]) -> Any:
    import pyarrow as pa

    assert dtype.names is not None
    fields = [
        pa.field(name, getattr(pa, _ARROW[dtype.fields[name][0].str])(), nullable=False)  # type: ignore[index]
        for name in dtype.names
    ]
    return pa.schema(fields, metadata=meta)


class SortedBuilder:
    """A table built from blocks of rows in order (``_add``), written sorted by ``write``.

    ``dtype``: a structured dtype whose first field is the ``<i8`` key; ``layout``: the
    metadata key of the layout, the rows of a page and of a batch, and the rows held in
    memory before a spill."""

    def __init__(self, dtype: np.dtype[Any], layout: tuple[bytes, int, int, int]) -> None:
        self.dtype = dtype
        self.meta_key, self.page_rows, self.batch_rows, self.spill_rows = layout
        self.key = str((dtype.names or ("key",))[0])
        self._held: list[NDArray[Any]] = []
        self._held_rows = 0
        self._written = 0
        self._spill: tempfile.TemporaryDirectory[str] | None = None

    def _add(self, block: NDArray[Any]) -> None:
        """The next rows (1-D, of ``dtype``)."""
        self._held.append(block)
        self._held_rows += len(block)
        self._written += len(block)
        if self._held_rows >= self.spill_rows:
            self._flush()

    def _sorted(self, rows: NDArray[Any]) -> NDArray[Any]:
        """Rows held in the order added, sorted by key: one stable sort."""
        return rows[np.argsort(rows[self.key], kind="stable")]

    def _bucket_path(self, bucket: int) -> Path:
        assert self._spill is not None
        return Path(self._spill.name) / f"{bucket:03d}.bin"

    def _flush(self) -> None:
        """Append the held rows to the spill files of their key ranges."""
        if self._spill is None:
            self._spill = tempfile.TemporaryDirectory(prefix="neardup-keys-")
        rows = np.concatenate(self._held)
        self._held, self._held_rows = [], 0
        bucket = _buckets(rows[self.key])
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
                yield np.fromfile(path, dtype=self.dtype)

    def layout(self) -> dict[str, Any]:
        """The layout the file's metadata holds (JSON): pages, batches and rows."""
        return {"page_rows": self.page_rows, "batch_rows": self.batch_rows, "rows": self._written}

    def write(self, fs: Any, path: str) -> int:
        """Write the table at ``path`` on ``fs``; returns its rows."""
        import pyarrow as pa

        try:
            fences = self._fences()
            meta = {
                self.meta_key: json.dumps(self.layout()).encode(),
                FENCES_KEY: fences.astype("<i8").tobytes(),
            }
            schema = _schema(self.dtype, meta)
            with fs.open(path, "wb") as handle, pa.ipc.new_file(handle, schema) as writer:
                rest = np.empty(0, dtype=self.dtype)
                for run in self._runs():
                    rows = np.concatenate((rest, run)) if len(rest) else run
                    whole = len(rows) - len(rows) % self.batch_rows
                    for lo in range(0, whole, self.batch_rows):
                        writer.write_batch(_batch(rows[lo : lo + self.batch_rows], schema))
                    rest = rows[whole:]
                if len(rest):
                    writer.write_batch(_batch(rest, schema))
        finally:
            if self._spill is not None:
                self._spill.cleanup()
                self._spill = None
        return self._written

    def _fences(self) -> NDArray[np.int64]:
        """The key at every ``page_rows``-th row of the sorted table."""
        if self._spill is None:
            empty = np.empty(0, self.dtype)
            rows = self._sorted(np.concatenate(self._held)) if self._held else empty
            self._held, self._held_rows = [rows], len(rows)
            return np.ascontiguousarray(rows[self.key][:: self.page_rows])
        if self._held:
            self._flush()
        fences: list[NDArray[np.int64]] = []
        start = 0
        for b in range(SPILL_BUCKETS):  # sort each run once, in place: writing reads it sorted
            path = self._bucket_path(b)
            if not path.exists():
                continue
            rows = self._sorted(np.fromfile(path, dtype=self.dtype))
            rows.tofile(path)
            first = -start % self.page_rows
            fences.append(rows[self.key][first :: self.page_rows].copy())
            start += len(rows)
        return np.concatenate(fences) if fences else np.empty(0, dtype=np.int64)


def _buckets(keys: NDArray[np.int64]) -> NDArray[np.int64]:
    """The key range of each key: its top bits, in signed order."""
    shift = np.uint64(64 - (SPILL_BUCKETS.bit_length() - 1))
    flipped = keys.view(np.uint64) ^ np.uint64(1 << 63)
    return (flipped >> shift).astype(np.int64)


def _batch(rows: NDArray[Any], schema: Any) -> Any:
    import pyarrow as pa

    columns = [numbers(np.ascontiguousarray(rows[name])) for name in schema.names]
    return pa.record_batch(columns, schema=schema)


class SortedTable:
    """An open table: ``locate`` finds keys a page at a time.

    Raises TableError (at open) when the file is not a table of ``dtype``'s columns, of this
    layout (``page_rows``, ``batch_rows`` in its ``meta_key`` JSON) and of ``rows`` rows;
    ``kind`` and ``unit`` name it in messages ("key table", "keys")."""

    def __init__(
        self, source: Any, rows: int, dtype: np.dtype[Any], layout: tuple[bytes, int, int],
        names: tuple[str, str],
    ) -> None:  # fmt: skip
        import pyarrow as pa

        meta_key, self.page_rows, self.batch_rows = layout
        self.kind, unit = names
        self.dtype = dtype
        try:
            self._reader = pa.ipc.open_file(source)
            meta = self._reader.schema.metadata or {}
            found = read_json(meta[meta_key].decode("utf-8"))
            self.fences = np.frombuffer(meta[FENCES_KEY], dtype="<i8")
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            raise TableError(f"is not a readable {self.kind} ({exc})") from None
        if not isinstance(found, dict):
            raise TableError(f"is not a {self.kind} of this layout ({found!r})")
        columns = self._reader.schema.names
        if columns != list(dtype.names or ()) or found.get("page_rows") != self.page_rows:
            raise TableError(f"is not a {self.kind} of this layout ({columns}, {found})")
        if found.get("batch_rows") != self.batch_rows:
            raise TableError(f"has batches of {found.get('batch_rows')} rows")
        if found.get("rows") != rows:
            raise TableError(f"holds {found.get('rows')} {unit}, the index lists {rows}")
        batches = self._reader.num_record_batches
        self.rows = rows
        expected_batches = -(-rows // self.batch_rows)
        if batches != expected_batches or len(self.fences) != -(-rows // self.page_rows):
            raise TableError(
                f"holds {batches} batches and {len(self.fences)} fences, not those of {rows} rows"
            )
        self._cache: dict[int, tuple[NDArray[Any], ...]] = {}

    def _batch(self, b: int) -> tuple[NDArray[Any], ...]:
        """Batch ``b``'s columns as numpy views of the file (no copy when memory-mapped)."""
        import pyarrow as pa

        if b not in self._cache:
            try:
                batch = self._reader.get_batch(b)
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise TableError(f"cannot be read ({exc})") from None
            want = min(self.batch_rows, self.rows - b * self.batch_rows)
            names = list(self.dtype.names or ())
            if batch.num_rows != want or batch.schema.names != names:
                raise TableError(f"has a batch {b} of {batch.num_rows} rows, not {want}")
            self._cache[b] = tuple(
                _values(batch.column(i), self.dtype.fields[name][0].str)  # type: ignore[index]
                for i, name in enumerate(names)
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
        ``>`` it: the fences name the page, hence the batch, searched by bisection."""
        page = np.maximum(np.searchsorted(self.fences, keys, side=side) - 1, 0)  # type: ignore[call-overload]
        out = np.empty(len(keys), dtype=np.int64)
        for b, span in self._spans(page // (self.batch_rows // self.page_rows)):
            column = self._batch(b)[0]
            found = np.searchsorted(column, keys[span], side=side)  # type: ignore[call-overload]
            out[span] = b * self.batch_rows + found
        return out

    def locate(self, keys: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(query, at)``: every table position ``at`` whose key equals ``keys[query]``, in
        key order."""
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
        return order[query].astype(np.int64), at

    def gather(self, at: NDArray[np.int64], column: int) -> NDArray[Any]:
        """Column ``column``'s values at the table positions ``at`` (nondecreasing)."""
        out = np.empty(len(at), dtype=self.dtype[column])
        for b, sel in self._spans(at // self.batch_rows):
            out[sel] = self._batch(b)[column][at[sel] - b * self.batch_rows]
        return out


def _values(array: Any, dtype: str) -> NDArray[Any]:
    """A non-null primitive Arrow array's values as a numpy view of its buffer (``to_numpy``
    would import pandas: half a second of a one-document query)."""
    width = np.dtype(dtype).itemsize
    return np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * width
    )
