"""An index part's rows read by number: which of its files and row groups hold them, and
those row groups read alone, their ids taken at the rows asked. The one reading of rows by
number that the id lookup (``_index_idrows``), the keyed lookup (``_index_keyed``), the scan
(``_index_lookup``) and deletion vectors (``_index_deletes``) share; a file that cannot be
read, or holds a null id, is IndexDamagedError naming it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from neardup.core.errors import IndexDamagedError

if TYPE_CHECKING:
    from neardup.core._index import DocIndex, IndexFile, IndexPart

__all__ = ["FileRows", "by_file", "group_starts", "ids_at", "read_groups"]

#: Rows of a table past which their ids are read by converting its whole ``id`` column.
FEW_ROWS = 64


@dataclass(frozen=True)
class FileRows:
    """The rows asked of a part that one of its files holds."""

    file: IndexFile
    #: the part's row number of the file's first row
    start: int
    #: which of the rows asked the file holds
    inside: NDArray[np.bool_]
    #: those rows, numbered in the file
    local: NDArray[np.int64]


def by_file(part: IndexPart, rows: NDArray[np.int64]) -> Iterator[FileRows]:
    """The files of ``part`` holding one of ``rows`` (numbered across its files in listing
    order), in that order, with the rows each holds."""
    starts = np.cumsum([0, *(f.rows for f in part.files)])
    for k, f in enumerate(part.files):
        inside = (rows >= starts[k]) & (rows < starts[k + 1])
        if inside.any():
            yield FileRows(f, int(starts[k]), inside, rows[inside] - starts[k])


def group_starts(parquet: Any, groups: Sequence[int] | None = None) -> NDArray[np.int64]:
    """The first row of each of ``groups`` (every row group of the file: None) counted as if
    they were read together, then their rows."""
    meta = parquet.metadata
    chosen = range(meta.num_row_groups) if groups is None else groups
    return np.cumsum([0, *(meta.row_group(g).num_rows for g in chosen)], dtype=np.int64)


def read_groups(
    index: DocIndex, f: IndexFile, parquet: Any, groups: Sequence[int], columns: Sequence[str]
) -> Any:
    """``columns`` of the row groups ``groups`` of ``f``, as one Arrow table."""
    import pyarrow as pa

    try:
        return parquet.read_row_groups(list(groups), columns=list(columns), use_threads=False)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise IndexDamagedError(index.url, f.path, f"cannot be read ({exc})") from None


def ids_at(index: DocIndex, f: IndexFile, table: Any, at: NDArray[np.int64]) -> list[str]:
    """The ids at rows ``at`` of ``table`` (read from ``f``)."""
    column = table.column("id")
    if column.null_count:
        raise IndexDamagedError(index.url, f.path, "has a null id")
    # Not Table.take: it imports pyarrow.compute (~0.5 s of a one-document query).
    if len(at) > FEW_ROWS:
        every = column.to_pylist()
        return [every[i] for i in at.tolist()]
    return [column[i].as_py() for i in at.tolist()]
