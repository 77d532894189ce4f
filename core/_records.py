"""Corpus rows of any schema: the id and text found by (dotted) field names, every other field
kept as it is, read lazily from many sources with the bytes read so far for progress bars.

Ids: a string, or an integer taken as its decimal string (``7`` is ``"7"``, ordered as a string:
``"10" < "7"``), so every id is a string and orders, repeats and roots the same way everywhere.
Booleans, floats and empty strings are not ids, and neither is an id the service could not
serve back (``id_problem``): one with a control character, or ``.`` or ``..``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, NamedTuple, cast

from neardup.core._formats import jsonl_lines, parse_jsonl_line, text_reader
from neardup.core._storage import Source
from neardup.core._utf8 import reread_utf8_error
from neardup.core.errors import CorpusError, ParameterError

__all__ = [
    "ID_PATTERN",
    "RawLine",
    "Record",
    "RecordReader",
    "Schema",
    "get_field",
    "id_problem",
    "parquet_schema",
    "set_field",
]

_PARQUET_BATCH = 8192

#: What an id may hold: anything but control characters (Unicode category Cc: U+0000-U+001F and
#: U+007F-U+009F), which no log line, URL or terminal shows as they are. The batch engines and
#: the service use this one rule (the service's OpenAPI schema carries it as its pattern).
ID_PATTERN = r"^[^\x00-\x1F\x7F-\x9F]+$"
_ID = re.compile(ID_PATTERN)


def id_problem(doc_id: str) -> str | None:
    """Why ``doc_id`` cannot be an id anywhere in neardup, or None if it can.

    >>> id_problem("deb/libfontenc1") is None
    True
    >>> id_problem("a\\nb")
    'holds a control character (U+000A)'
    >>> id_problem("..")
    "is '..', which no URL can carry as a path segment"
    """
    if not _ID.match(doc_id):
        bad = next((c for c in doc_id if not _ID.match(c)), "")
        return f"holds a control character (U+{ord(bad):04X})" if bad else "is empty"
    if doc_id in (".", ".."):
        return f"is {doc_id!r}, which no URL can carry as a path segment"
    return None


def check_id(doc_id: str, name: str, line: int | None) -> None:
    """CorpusError naming the file and line of an id that ``id_problem`` refuses."""
    problem = id_problem(doc_id)
    if problem is not None:
        raise CorpusError(name, line, f"the id {doc_id!r} {problem}")


def get_field(row: dict[str, Any], name: str) -> Any:
    """The value at ``name``: a top-level key of that exact name, else a dotted path into nested
    objects (``meta.source``); ``None`` when absent."""
    if name in row:
        return row[name]
    value: Any = row
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


#: Field names a "no such field" error lists at most (the rest are counted).
_SHOWN_FIELDS = 12


def field_problem(row: dict[str, Any], field: str, role: str) -> str:
    """Why ``row`` has no usable ``role`` (``id`` or ``text``) at ``field``: the field is absent
    (with the fields the row has, and the flag that names another) or of the wrong type.

    >>> field_problem({"url": "u", "body": "b"}, "id", "id")
    "no 'id' field (its fields: url, body); name the id's field with --id-field"
    >>> field_problem({"id": 1, "text": None}, "text", "text")
    "'text' must be a string, got null"
    """
    if not _has_field(row, field):
        flag = f"--{role}-field"
        return f"{missing_field(row, field)}; name the {role}'s field with {flag}"
    value = get_field(row, field)
    wanted = "a non-empty string or an integer" if role == "id" else "a string"
    return f"'{field}' must be {wanted}, got {_json_kind(value)}"


def missing_field(row: dict[str, Any], field: str) -> str:
    """``no 'FIELD' field (its fields: a, b, ...)``: what a row without ``field`` has instead.

    >>> missing_field({"url": "u"}, "id")
    "no 'id' field (its fields: url)"
    """
    return f"no '{field}' field (its fields: {_shown(list(row))})"


def _shown(names: Sequence[str]) -> str:
    """``a, b, ...``: the first ``_SHOWN_FIELDS`` names, the rest counted."""
    shown = ", ".join(names[:_SHOWN_FIELDS]) or "none"
    if len(names) > _SHOWN_FIELDS:
        shown += f" and {len(names) - _SHOWN_FIELDS} more"
    return shown


def _has_field(row: dict[str, Any], name: str) -> bool:
    """Whether ``get_field`` finds ``name`` in ``row`` (present, even as null)."""
    if name in row:
        return True
    value: Any = row
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def _json_kind(value: Any) -> str:
    """How JSON names ``value``'s type (``""`` as an empty string)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "an empty string"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def set_field(row: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    """A copy of ``row`` with ``name`` (as ``get_field`` finds it) set to ``value``; the nested
    objects on the path are copied, ``row`` is not modified."""
    if name in row or "." not in name:
        return {**row, name: value}
    head, rest = name.split(".", 1)
    inner = row.get(head)
    return {**row, head: set_field(inner if isinstance(inner, dict) else {}, rest, value)}


@dataclass(frozen=True)
class Schema:
    """Where a row's id and text are, and whether ids get their file's label as a prefix.

    Attributes:
        id_field: field name or dotted path of the id (default ``id``).
        text_field: field name or dotted path of the text (default ``text``).
        id_prefix: what goes before every id: nothing (False), ``<file label>/`` (True:
            ``--id-prefix file``), or a template (``--id-prefix cc-2024-10/``,
            ``cc-2024-10/{file}/``): its text, with ``{file}`` the file's label.
    """

    id_field: str = "id"
    text_field: str = "text"
    id_prefix: bool | str = False

    def __post_init__(self) -> None:
        for flag, value in (("id_field", self.id_field), ("text_field", self.text_field)):
            if not value or any(not part for part in value.split(".")):
                raise ParameterError(f"{flag} {value!r} is not a field name or dotted path")
        if isinstance(self.id_prefix, str):
            _check_template(self.id_prefix)

    def prefixed(self, label: str, doc_id: str) -> str:
        """``doc_id`` with the prefix of a file labelled ``label`` (``id_prefix``)."""
        if self.id_prefix is True:
            return f"{label}/{doc_id}"
        if isinstance(self.id_prefix, str):
            return self.id_prefix.replace(FILE_FIELD, label) + doc_id
        return doc_id

    def id_and_text(self, row: dict[str, Any], name: str, line: int | None) -> tuple[str, str]:
        """The row's id (an integer as its decimal string) and text, before any ``id_prefix``;
        CorpusError naming ``name`` and ``line`` when either is missing or of the wrong type."""
        doc_id = get_field(row, self.id_field)
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        elif not isinstance(doc_id, str) or not doc_id:
            raise CorpusError(name, line, field_problem(row, self.id_field, "id"))
        text = get_field(row, self.text_field)
        if not isinstance(text, str):
            raise CorpusError(name, line, field_problem(row, self.text_field, "text"))
        if not self.id_prefix:  # else the id is checked once prefixed (RecordReader)
            check_id(doc_id, name, line)
        return doc_id, text

    def column_problem(self, names: Sequence[str]) -> str | None:
        """Why a Parquet file of the top-level columns ``names`` holds no id or no text (``no
        'id' column (its columns: url, body); name the id's field with --id-field``), or None.
        """
        for field, role in ((self.id_field, "id"), (self.text_field, "text")):
            if field not in names and field.split(".", 1)[0] not in names:
                return (
                    f"no '{field}' column (its columns: {_shown(names)}); "
                    f"name the {role}'s field with --{role}-field"
                )
        return None

    def columns(self, names: Sequence[str], *extra: str) -> list[str]:
        """The top-level Parquet columns the id, the text and ``extra`` fields live in."""
        wanted = []
        for field in (self.id_field, self.text_field, *extra):
            column = field if field in names else field.split(".", 1)[0]
            if column in names and column not in wanted:
                wanted.append(column)
        return wanted


#: What an ``--id-prefix`` template puts the file's label in place of.
FILE_FIELD = "{file}"


def _check_template(template: str) -> None:
    """ParameterError for an ``--id-prefix`` template that is empty, names a field other than
    ``{file}`` (a brace left over), or makes ids no id may be."""
    rest = template.replace(FILE_FIELD, "")
    if not template or "{" in rest or "}" in rest:
        raise ParameterError(
            f"--id-prefix {template!r}: give 'file', or a prefix whose only field is {FILE_FIELD} "
            "(e.g. 'cc-2024-10/' or 'cc-2024-10/{file}/')"
        )
    problem = id_problem(template.replace(FILE_FIELD, "x") + "x")
    if problem is not None:
        raise ParameterError(f"--id-prefix {template!r} makes ids that {problem}")


class Record(NamedTuple):
    """One row: its id (a string), its text, the row as read, where it is (file, line), and
    for JSON Lines the line as read (``raw``, its newline included; None for Parquet)."""

    id: str
    text: str
    row: dict[str, Any]
    name: str
    line: int
    raw: str | None = None


class RawLine(NamedTuple):
    """One JSON Lines row as read and not parsed (``RecordReader.parse`` parses it)."""

    source: Source
    line: int
    raw: str


class RecordReader:
    """The rows of ``sources`` in order, lazily; ``bytes_done`` of ``total_bytes`` for progress.

    ``fields`` (dotted names) restricts Parquet reads to the columns holding the id, the text and
    those fields (the other columns are then absent from ``Record.row``).
    """

    def __init__(
        self, sources: Sequence[Source], schema: Schema, *, fields: Sequence[str] | None = None
    ) -> None:
        self.sources = list(sources)
        self.schema = schema
        self.fields = fields
        self.total_bytes = sum(s.size for s in self.sources)
        self._done = 0
        self._raw: IO[bytes] | None = None

    @property
    def bytes_done(self) -> int:
        """Bytes of the inputs read so far (compressed bytes for compressed files)."""
        current = 0
        if self._raw is not None:
            try:
                current = int(self._raw.tell())
            except (OSError, ValueError):
                current = 0
        return self._done + current

    def __iter__(self) -> Iterator[Record]:
        # parse=True gives Records only.
        return cast(Iterator[Record], self._items(parse=True))

    def unparsed(self) -> Iterator[Record | RawLine]:
        """The rows in order as ``__iter__`` has them, but JSON Lines rows as ``RawLine``s,
        parsed only where the caller asks (``parse``); Parquet rows come as Records."""
        return self._items(parse=False)

    def parse(self, item: RawLine) -> Record:
        """The Record of a ``RawLine`` (the same one ``__iter__`` gives); CorpusError if bad."""
        row = parse_jsonl_line(item.raw, item.source.name, item.line)
        return self._record(item.source, item.line, row, item.raw)

    def _items(self, *, parse: bool) -> Iterator[Record | RawLine]:
        self._done = 0
        for source in self.sources:
            with source.open() as raw:
                self._raw = raw
                try:
                    if source.fmt == ".parquet":
                        for line, row in _parquet_rows(source, raw, self):
                            yield self._record(source, line, row, None)
                    else:
                        yield from self._jsonl(source, raw, parse)
                finally:
                    self._raw = None
            self._done += source.size

    def _jsonl(self, source: Source, raw: IO[bytes], parse: bool) -> Iterator[Record | RawLine]:
        name = source.name
        try:
            with text_reader(raw, source.fmt) as fh:
                for number, line in jsonl_lines(fh):
                    if parse:
                        row = parse_jsonl_line(line, name, number)
                        yield self._record(source, number, row, line)
                    else:
                        yield RawLine(source, number, line)
        except UnicodeDecodeError as exc:
            raise reread_utf8_error(name, source.open, source.fmt, exc) from None
        except (OSError, EOFError) as exc:
            raise CorpusError(name, None, f"cannot read: {exc}") from None

    def _record(self, source: Source, line: int, row: dict[str, Any], raw: str | None) -> Record:
        schema = self.schema
        doc_id, text = schema.id_and_text(row, source.name, line)
        if schema.id_prefix:
            doc_id = schema.prefixed(source.label, doc_id)
            row = set_field(row, schema.id_field, doc_id)
            check_id(doc_id, source.name, line)
        return Record(doc_id, text, row, source.name, line, raw)


def _parquet_rows(
    source: Source, raw: IO[bytes], reader: RecordReader
) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(raw)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise CorpusError(source.name, None, f"cannot read Parquet: {exc}") from None
    names = parquet.schema_arrow.names
    problem = reader.schema.column_problem(names)
    if problem is not None:
        raise CorpusError(source.name, None, problem)
    columns = None
    if reader.fields is not None:
        columns = reader.schema.columns(names, *reader.fields)
    row = 0
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH, columns=columns):
        for item in batch.to_pylist():
            row += 1
            yield row, item


def parquet_schema(sources: Sequence[Source]) -> Any:
    """The Arrow schema shared by the Parquet inputs (unified), or None when there are none:
    what a Parquet output casts its columns back to, so a column keeps its input type."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schemas = []
    for source in sources:
        if source.fmt == ".parquet":
            with source.open() as raw:
                schemas.append(pq.ParquetFile(raw).schema_arrow)
    if not schemas:
        return None
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return schemas[0]
