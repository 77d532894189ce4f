"""Arrow arrays built from their buffers, not with ``pyarrow.array``: that one imports pandas
wherever pandas is installed (to ask whether its argument is a pandas object), ~0.35 s of CPU
in a run that never needs it (pandas comes with the Spark extra)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["numbers", "strings"]

_MAX_OFFSET = (1 << 31) - 1


def strings(values: Sequence[str]) -> Any:
    """``pyarrow.array(values, type=pa.string())``, the same array (and, for text UTF-8 cannot
    encode or over 2 GiB, the same call)."""
    import pyarrow as pa

    try:
        encoded = [v.encode("utf-8") for v in values]
    except UnicodeEncodeError:
        return pa.array(values, type=pa.string())  # its own error, as before
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    if offsets[-1] > _MAX_OFFSET:
        return pa.array(values, type=pa.string())
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


def numbers(values: NDArray[Any]) -> Any:
    """``pyarrow.array(values)`` of a one-dimensional numeric numpy array (no nulls)."""
    import pyarrow as pa

    data = np.ascontiguousarray(values)
    buffers = [None, pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), len(data), buffers)
