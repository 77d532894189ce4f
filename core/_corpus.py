"""``Doc``, and reading and writing corpus files of ``{"id", "text", "meta"}``; errors name
file:line. Importing this module imports no clustering.

Formats follow the file name: ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` (JSON Lines, plain or
compressed; inputs also ``.ndjson`` and ``.json``, plain or compressed) and ``.parquet``
(columns ``id``, ``text`` and an optional ``meta`` struct, read with pyarrow, a batch of rows at
a time). Reading streams; nothing holds a whole file. Rows of any
other schema, and storage other than local files, are ``core._records`` and ``core._storage``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import Any, NamedTuple

from neardup.core._formats import FORMATS, corpus_format, jsonl_items, text_reader
from neardup.core._json import read_json
from neardup.core._records import missing_field
from neardup.core._utf8 import reread_utf8_error
from neardup.core._writer import RowWriter
from neardup.core.errors import CorpusError, JSONError

__all__ = [
    "FORMATS",
    "Doc",
    "corpus_format",
    "doc_from_json",
    "jsonl_items",
    "read_docs",
    "write_docs",
]

_PARQUET_BATCH = 8192


class Doc(NamedTuple):
    """One corpus document: ``Doc(id, text, meta)``, positional or by keyword."""

    id: str
    text: str
    meta: dict[str, Any] = {}  # noqa: RUF012 - a NamedTuple default; stages never mutate it


def doc_from_json(item: dict[str, Any], path: str, line: int) -> Doc:
    """A Doc from one parsed line; CorpusError when ``id``/``text`` are not strings."""
    doc_id, text, meta = item.get("id"), item.get("text"), item.get("meta", {})
    for field in ("id", "text"):
        if field not in item:
            raise CorpusError(path, line, missing_field(item, field))
    if not isinstance(doc_id, str) or not doc_id:
        raise CorpusError(path, line, "'id' must be a non-empty string")
    if not isinstance(text, str):
        raise CorpusError(path, line, "'text' must be a string")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise CorpusError(path, line, "'meta' must be an object when present")
    return Doc(doc_id, text, meta)


def read_docs(path: str | PathLike[str]) -> Iterator[Doc]:
    """Stream the documents of a corpus file, in file order."""
    name, fmt = str(path), corpus_format(path)
    if fmt == ".parquet":
        yield from _read_parquet(Path(path))
        return
    try:
        with Path(path).open("rb") as raw, text_reader(raw, fmt) as fh:
            for line, item in jsonl_items(fh, name):
                yield doc_from_json(item, name, line)
    except UnicodeDecodeError as exc:
        reopen = Path(path).open  # reread_utf8_error opens it again (and closes it)
        raise reread_utf8_error(name, lambda: reopen("rb"), fmt, exc) from None
    except (OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise CorpusError(name, None, "no such file") from None
        raise CorpusError(name, None, f"cannot read: {exc}") from None


def _read_parquet(path: Path) -> Iterator[Doc]:
    import pyarrow.parquet as pq

    name = str(path)
    try:
        reader = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:
        raise CorpusError(name, None, f"cannot read Parquet: {exc}") from None
    columns = set(reader.schema_arrow.names)
    if not {"id", "text"} <= columns:
        raise CorpusError(name, None, "a Parquet corpus needs the columns 'id' and 'text'")
    wanted = ["id", "text"] + (["meta"] if "meta" in columns else [])
    row = 0
    for batch in reader.iter_batches(batch_size=_PARQUET_BATCH, columns=wanted):
        for item in batch.to_pylist():
            row += 1
            meta = item.get("meta")
            if isinstance(meta, str):  # JSON text, as versions before 0.2 wrote it
                try:
                    meta = read_json(meta, constants="null")
                except JSONError as exc:
                    why = f"'meta' is not JSON neardup reads: {exc}"
                    raise CorpusError(name, row, why) from None
            yield doc_from_json({**item, "meta": meta}, name, row)


def write_docs(path: str | PathLike[str], docs: Iterable[Doc]) -> int:
    """Write documents in the format of ``path``'s name (``meta`` as a Parquet struct); returns
    how many were written."""
    fmt = corpus_format(path, output=True)
    with Path(path).open("wb") as raw, RowWriter(raw, fmt, str(path)) as writer:
        for doc in docs:
            writer.write({"id": doc.id, "text": doc.text, "meta": doc.meta})
    return writer.count
