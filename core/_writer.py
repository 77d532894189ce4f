"""Rows (dicts) out as JSON Lines (plain, gzip, zstd) or Parquet, a batch at a time.

JSON Lines keeps every value as JSON has it (dates and bytes from Parquet as ISO 8601 and
base64), but for the floats JSON has no number for: a NaN or infinite float (a Parquet input's,
or a JSON number beyond the float range such as ``1e999``) is written ``null`` and counted
(``nan_as_null``), so every line is JSON any strict parser reads.

Parquet writes objects as structs (never JSON text); a column's type is inferred from the first
batch of rows, cast back to the input's Arrow type where one is given and fits, and every later
batch is cast to that schema: a column first seen, or changing type, after the first
batch is a CorpusError that says to write JSON Lines instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from contextlib import suppress
from types import TracebackType
from typing import IO, Any

from neardup.core._formats import json_default, text_writer
from neardup.core.errors import CorpusError

__all__ = ["PARQUET_BATCH", "RowWriter", "nan_as_null", "nan_as_null_note"]

#: Rows per Parquet row group written.
PARQUET_BATCH = 8192

# What ``json.dumps(row, default=json_default)`` builds on every call, built once; and the one
# that refuses NaN and infinities (ValueError) rather than write them as JSON does not have them.
_ENCODER = json.JSONEncoder(default=json_default)
_STRICT = json.JSONEncoder(default=json_default, allow_nan=False)


def nan_as_null_note(nulls: int, *, sent: bool = False) -> str:
    """What a run says (one warning line) when a JSON Lines output wrote ``nulls`` NaN or
    infinite floats as null; ``sent``: when ``neardup push`` sent them so to a service."""
    if sent:
        return f"{nulls} NaN or infinite values sent as null (JSON has no number for them)"
    return (
        f"{nulls} NaN or infinite values written as null (JSON has no number for them; a "
        "Parquet output keeps them)"
    )


def nan_as_null(value: Any) -> tuple[Any, int]:
    """``value`` (a row, or any part of one) as a JSON Lines output writes it: every NaN or
    infinite float replaced by None; and how many were (``value`` itself when none).

    >>> nan_as_null({"id": "a", "meta": {"s": [0.5, float("nan")]}})
    ({'id': 'a', 'meta': {'s': [0.5, None]}}, 1)
    """
    nulls = [0]
    found = _finite(value, nulls)
    return (found, nulls[0]) if nulls[0] else (value, 0)


class RowWriter:
    """``with RowWriter(handle, fmt, name) as w: w.write(row)``; ``w.count`` rows written.

    ``w.nan_as_null`` counts the NaN and infinite floats a JSON Lines output wrote as null.

    Args:
        handle: a binary file, left open.
        fmt: one of FORMATS.
        name: the target, for error messages.
        hint: an Arrow schema whose columns a Parquet output has from its first row group, with
            their types where the rows' shape agrees.
    """

    def __init__(self, handle: IO[bytes], fmt: str, name: str, hint: Any = None) -> None:
        self.fmt = fmt
        self.name = name
        self.count = 0
        self.nan_as_null = 0
        self._handle = handle
        self._hint = hint
        self._rows: list[dict[str, Any]] = []
        self._schema: Any = None
        self._parquet: Any = None
        self._text_cm: Any = None
        self._text: IO[str] | None = None

    def __enter__(self) -> RowWriter:
        if self.fmt != ".parquet":
            self._text_cm = text_writer(self._handle, self.fmt)
            self._text = self._text_cm.__enter__()
        return self

    def write(self, row: dict[str, Any]) -> None:
        """Write one row."""
        if self._text is not None:
            text, nulls = self.finite_dumps(row)
            self.nan_as_null += nulls
            self._text.write(text)
            self._text.write("\n")
        else:
            self._rows.append(row)
            if len(self._rows) == PARQUET_BATCH:
                self._flush()
        self.count += 1

    def write_json(self, lines: list[str]) -> None:
        """Write rows given as the JSON texts ``write`` would write for them (no newlines);
        JSON Lines outputs only."""
        if self._text is None:
            raise ValueError(f"{self.name}: write_json needs a JSON Lines output")
        if lines:
            self._text.write("\n".join(lines))
            self._text.write("\n")
            self.count += len(lines)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._text_cm is not None:
            self._text_cm.__exit__(kind, exc, tb)
            return
        if kind is None:
            self._flush()
            if self._parquet is None:  # no rows at all: an empty file still has a schema
                self._open(_empty_schema())
        if self._parquet is not None:
            self._parquet.close()

    @staticmethod
    def dumps(row: dict[str, Any]) -> str:
        """The JSON text of ``row`` as Python's json writes it, NaN and infinities as the tokens
        it reads them back from (a text for another engine to carry a row in, not an output
        line: that is ``finite_dumps``)."""
        return _ENCODER.encode(row)

    @staticmethod
    def finite_dumps(row: dict[str, Any]) -> tuple[str, int]:
        """The JSON text ``write`` writes for ``row`` on a JSON Lines output (no newline), and
        how many NaN or infinite floats it wrote as null."""
        try:
            return _STRICT.encode(row), 0
        except ValueError:  # a float JSON has no number for (the common case costs nothing)
            finite, nulls = nan_as_null(row)
            return _STRICT.encode(finite), nulls

    @staticmethod
    def table(rows: list[dict[str, Any]], hint: Any = None) -> Any:
        """The Arrow table a first batch of ``rows`` is written as (the columns, their order and
        types the output gets): what other engines infer a Parquet output's schema with.
        ArrowInvalid, ArrowTypeError or OverflowError (an integer beyond 64 bits) when the rows
        fit no Arrow schema."""
        return _with_types(_table(rows), hint)

    @staticmethod
    def hint(base: Any, tag: str, extra: Sequence[Any] = ()) -> Any:
        """The ``hint`` of an output whose rows are the inputs' rows tagged: ``base`` (the inputs'
        Arrow schema, or None) with the string field ``tag`` added to a struct ``meta``, then
        the ``extra`` fields."""
        import pyarrow as pa

        fields = list(base) if base is not None else []
        for i, f in enumerate(fields):
            if f.name == "meta" and pa.types.is_struct(f.type) and tag not in f.type.names:
                fields[i] = pa.field("meta", pa.struct([*f.type, pa.field(tag, pa.string())]))
        return pa.schema([*fields, *extra])

    def _open(self, schema: Any) -> None:
        import pyarrow.parquet as pq

        self._schema = schema
        self._parquet = pq.ParquetWriter(self._handle, schema)

    def _flush(self) -> None:
        import pyarrow as pa

        if not self._rows:
            return
        try:
            table = _table(self._rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise CorpusError(
                self.name, None, f"rows do not fit one Parquet schema: {exc}"
            ) from None
        if self._parquet is None:
            table = _with_types(table, self._hint)
            self._open(table.schema)
        else:
            table = self._conform(table)
        self._parquet.write_table(table)
        self._rows.clear()

    def _conform(self, table: Any) -> Any:
        import pyarrow as pa

        start = self.count - len(self._rows) + 1
        extra = [n for n in table.column_names if n not in self._schema.names]
        if extra:
            raise CorpusError(
                self.name, None, f"field {extra[0]!r} first appears at row {start}, after the "
                "first Parquet batch fixed the columns; write JSON Lines instead",
            )  # fmt: skip
        columns = []
        for field in self._schema:
            if field.name not in table.column_names:
                columns.append(pa.nulls(len(table), field.type))
                continue
            column = table[field.name]
            if column.type != field.type:
                try:
                    column = column.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    raise CorpusError(
                        self.name, None, f"field {field.name!r} changes type ({field.type} to "
                        f"{column.type}) by row {start}; write JSON Lines instead",
                    ) from None  # fmt: skip
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=self._schema)


def _finite(value: Any, nulls: list[int]) -> Any:
    """``value`` with every NaN or infinite float replaced by None, counted in ``nulls[0]``."""
    if isinstance(value, float) and not math.isfinite(value):
        nulls[0] += 1
        return None
    if isinstance(value, dict):
        return {key: _finite(item, nulls) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item, nulls) for item in value]
    return value


def _table(rows: list[dict[str, Any]]) -> Any:
    """Rows as a table with every key any row has (``from_pylist`` alone would keep only the
    first row's keys), in order of first appearance; absent values are nulls."""
    import pyarrow as pa

    names = list(dict.fromkeys(key for row in rows for key in row))
    return pa.Table.from_pydict({name: [row.get(name) for row in rows] for name in names})


def _with_types(table: Any, hint: Any) -> Any:
    """The first batch with the hint's column types where the shape is the same, the hint's
    columns it lacks (as nulls, so later rows may hold them), and no empty structs (Parquet
    cannot store a struct without fields: those become null columns)."""
    import pyarrow as pa

    columns, fields = [], []
    for field in table.schema:
        column = table[field.name]
        if hint is not None and field.name in hint.names:
            wanted = hint.field(field.name).type
            # Only where the shape is the same: a cast to a struct without a field drops it.
            with suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                if _shape(column.type) == _shape(wanted):
                    column = column.cast(wanted)
        if pa.types.is_struct(column.type) and column.type.num_fields == 0:
            column = pa.nulls(len(column))
        columns.append(column)
        fields.append(pa.field(field.name, column.type))
    for field in hint if hint is not None else ():
        if field.name not in table.column_names:
            columns.append(pa.nulls(len(table), field.type))
            fields.append(pa.field(field.name, field.type))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _shape(kind: Any) -> Any:
    """The field names of a nested Arrow type, nested ones included; None for a leaf."""
    import pyarrow as pa

    if pa.types.is_struct(kind):
        return tuple((f.name, _shape(f.type)) for f in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return ("list", _shape(kind.value_type))
    if pa.types.is_map(kind):
        return ("map", _shape(kind.key_type), _shape(kind.item_type))
    return None


def _empty_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("id", pa.string()), ("text", pa.string())])
