"""An index part's Parquet files: one row per indexed document, sorted by id.

Columns (docs/index.md): ``id`` (string), ``digest`` (the text's 16-byte digest), ``bands``
(``band_digests`` as little-endian uint64, 8 bytes per band) and ``signature`` (little-endian
uint32, 4 bytes per entry), the last three as plain ``binary`` of one width, which pyarrow,
DuckDB and Spark all read (Spark writes ``binary`` for its BinaryType; a fixed-size column
would read differently on each engine). The key-value metadata ``neardup.params`` holds the
index parameters as JSON. Columns come back as numpy arrays straight from Arrow's buffers: no
Python object per row but the ids of the rows asked for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._arrow import numbers, strings
from neardup.core._banding import band_digests
from neardup.core.errors import IndexDamagedError

__all__ = [
    "BATCH_ROWS",
    "COLUMNS",
    "PARAMS_KEY",
    "PARQUET_OPTIONS",
    "ROW_GROUP",
    "binary_matrix",
    "part_matrix",
    "part_table",
]

#: The columns of a part file, in order.
COLUMNS = ("id", "digest", "bands", "signature")
#: The Parquet key-value metadata key holding the index parameters (JSON).
PARAMS_KEY = "neardup.params"
#: Rows per Parquet row group (4.3 MB of signatures at 128 permutations): a lookup reads the
#: signatures of a row group holding a lead, so small groups keep that read (and the memory
#: Arrow's allocator keeps after it) small.
ROW_GROUP = 1 << 13
#: Rows of digests and band digests a lookup (or an id check) compares at a time (many groups).
BATCH_ROWS = 1 << 16
#: How a part file is written: digests and signatures are random bits that no codec shrinks,
#: so only ids are compressed, and no column is dictionary-encoded (every value is distinct);
#: decoding is then a copy (a lookup reads the digest columns of the whole index).
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": {"id": "zstd", "digest": "none", "bands": "none", "signature": "none"},
    "use_dictionary": False,
    "write_statistics": ["id"],
}


def _binary(matrix: NDArray[Any]) -> Any:
    """Arrow ``binary`` values, one per row of a matrix (a chunk per ``ROW_GROUP`` rows, so the
    32-bit offsets never overflow), without a Python object per row."""
    import pyarrow as pa

    data = np.ascontiguousarray(matrix)
    width = data.itemsize * (data.shape[1] if data.ndim > 1 else 1)
    chunks = []
    for lo in range(0, max(len(data), 1), ROW_GROUP):
        block = data[lo : lo + ROW_GROUP]
        offsets = np.arange(len(block) + 1, dtype=np.int32) * np.int32(width)
        buffers = [None, pa.py_buffer(offsets), pa.py_buffer(block.tobytes())]
        chunks.append(pa.Array.from_buffers(pa.binary(), len(block), buffers))
    return pa.chunked_array(chunks, type=pa.binary())


def part_table(
    ids: Sequence[str],
    digests: NDArray[np.uint64],
    sigs: NDArray[np.uint32],
    bands: int,
    params: dict[str, Any],
) -> Any:
    """The pyarrow Table of a part: the rows sorted by id, with ``PARAMS_KEY`` metadata."""
    import pyarrow as pa

    id_array = strings(ids)
    # Python's str order (code points: UTF-8 byte order, as Spark and DuckDB sort strings);
    # not pyarrow.compute, whose import alone takes ~0.5 s.
    order = np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.int64)
    sigs = np.ascontiguousarray(sigs[order], dtype="<u4")
    columns = [
        pa.chunked_array([id_array.take(numbers(order))]),
        _binary(np.ascontiguousarray(digests[order], dtype="<u8")),
        _binary(np.ascontiguousarray(band_digests(sigs, bands), dtype="<u8")),
        _binary(sigs),
    ]
    meta = {PARAMS_KEY: json.dumps(params, sort_keys=True)}
    schema = pa.schema(
        [(name, c.type) for name, c in zip(COLUMNS, columns, strict=True)], metadata=meta
    )
    return pa.Table.from_arrays(columns, schema=schema)


def binary_matrix(column: Any, width: int, dtype: str) -> NDArray[Any] | None:
    """A ``binary`` (or ``fixed_size_binary``/``large_binary``) column of values all ``width``
    bytes wide as an ``(n, width // itemsize)`` array of ``dtype``; None if a value is null or
    of another width (the caller says which file is damaged)."""
    import pyarrow as pa

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts: list[NDArray[Any]] = []
    for chunk in chunks:
        n = len(chunk)
        if chunk.null_count:
            return None
        buffers = chunk.buffers()
        data = buffers[-1]  # a fixed_size_binary array has no offsets buffer
        if pa.types.is_fixed_size_binary(chunk.type):
            if chunk.type.byte_width != width:
                return None
            lo, hi = chunk.offset * width, (chunk.offset + n) * width
        else:
            kind = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
            if not (pa.types.is_binary(chunk.type) or pa.types.is_large_binary(chunk.type)):
                return None
            offsets = np.frombuffer(buffers[1], dtype=kind)[chunk.offset : chunk.offset + n + 1]
            if n and not bool((np.diff(offsets) == width).all()):
                return None
            lo, hi = (int(offsets[0]), int(offsets[-1])) if n else (0, 0)
        if n:
            raw = np.frombuffer(data, dtype=np.uint8)[lo:hi]
            values = raw.view(dtype).reshape(n, width // np.dtype(dtype).itemsize)
            # Arrow's buffers need not be aligned for ``dtype``: numpy is slow on unaligned data.
            parts.append(values if values.flags.aligned else values.copy())
    if not parts:
        return np.empty((0, width // np.dtype(dtype).itemsize), dtype=dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def part_matrix(url: str, path: str, table: Any, name: str, width: int, dtype: str) -> NDArray[Any]:
    """Column ``name`` of ``table`` (read from the part file ``path`` of the index at ``url``)
    as ``binary_matrix`` gives it; IndexDamagedError naming the file where a value is null or
    not ``width`` bytes."""
    values = binary_matrix(table.column(name), width, dtype)
    if values is None:
        raise IndexDamagedError(url, path, f"has {name} values that are not {width} bytes")
    return values
