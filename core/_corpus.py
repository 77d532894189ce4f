"""``Doc``, and reading and writing corpus files of ``{"id", "text", "meta"}``; errors name
file:line. Importing this module imports no clustering.

Formats follow the file name: ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` (JSON Lines, plain or
compressed) and ``.parquet`` (columns ``id``, ``text`` and an optional ``meta``, read with
pyarrow, a batch of rows at a time). Reading streams; nothing holds a whole file.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import IO, Any, NamedTuple

from core.errors import CorpusError

__all__ = [
    "FORMATS",
    "Doc",
    "corpus_format",
    "doc_from_json",
    "jsonl_items",
    "read_docs",
    "write_docs",
]

#: File name endings this module reads and writes.
FORMATS = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet")
_PARQUET_BATCH = 8192


class Doc(NamedTuple):
    """One corpus document: ``Doc(id, text, meta)``, positional or by keyword."""

    id: str
    text: str
    meta: dict[str, Any] = {}  # noqa: RUF012 - a NamedTuple default; stages never mutate it


def jsonl_items(lines: Iterable[str], path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line; CorpusError naming a bad line."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(path, number, f"not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise CorpusError(path, number, f"expected a JSON object, got {type(item).__name__}")
        # A \ud800-style escape decodes to a lone surrogate, which no UTF-8 output can carry.
        if "\\u" in line and _has_lone_surrogate(item):
            raise CorpusError(path, number, "a string holds a lone surrogate (\\ud800-\\udfff)")
        yield number, item


def _has_lone_surrogate(value: Any) -> bool:
    """Whether any string in a parsed JSON value (keys included) holds a lone surrogate."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def corpus_format(path: str | PathLike[str]) -> str:
    """The format of a corpus file by its name; CorpusError for any other."""
    name = str(path).lower()
    for ending in FORMATS:
        if name.endswith(ending):
            return ending
    raise CorpusError(str(path), None, f"unknown corpus format; use one of {', '.join(FORMATS)}")


def doc_from_json(item: dict[str, Any], path: str, line: int) -> Doc:
    """A Doc from one parsed line; CorpusError when ``id``/``text`` are not strings."""
    doc_id, text, meta = item.get("id"), item.get("text"), item.get("meta", {})
    if not isinstance(doc_id, str) or not doc_id:
        raise CorpusError(path, line, "'id' must be a non-empty string")
    if not isinstance(text, str):
        raise CorpusError(path, line, "'text' must be a string")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise CorpusError(path, line, "'meta' must be an object when present")
    return Doc(doc_id, text, meta)


@contextmanager
def _text_reader(path: Path, fmt: str) -> Iterator[IO[str]]:
    if fmt == ".jsonl.gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            yield fh
    elif fmt == ".jsonl.zst":
        import zstandard

        with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as z:
            yield io.TextIOWrapper(z, encoding="utf-8")
    else:
        with path.open(encoding="utf-8") as fh:
            yield fh


def read_docs(path: str | PathLike[str]) -> Iterator[Doc]:
    """Stream the documents of a corpus file, in file order."""
    name, fmt = str(path), corpus_format(path)
    if fmt == ".parquet":
        yield from _read_parquet(Path(path))
        return
    try:
        with _text_reader(Path(path), fmt) as fh:
            for line, item in jsonl_items(fh, name):
                yield doc_from_json(item, name, line)
    except UnicodeDecodeError as exc:
        raise CorpusError(name, None, f"not UTF-8 ({exc.reason})") from None
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
            if isinstance(meta, str):
                meta = json.loads(meta)
            yield doc_from_json({**item, "meta": meta}, name, row)


def write_docs(path: str | PathLike[str], docs: Iterable[Doc]) -> int:
    """Write documents in the format of ``path``'s name; returns how many were written."""
    fmt = corpus_format(path)
    if fmt == ".parquet":
        return _write_parquet(Path(path), docs)
    count = 0
    with _text_writer(Path(path), fmt) as fh:
        for doc in docs:
            fh.write(json.dumps({"id": doc.id, "text": doc.text, "meta": doc.meta}))
            fh.write("\n")
            count += 1
    return count


@contextmanager
def _text_writer(path: Path, fmt: str) -> Iterator[IO[str]]:
    if fmt == ".jsonl.gz":
        # mtime=0: the same documents give the same bytes (and the same SHA-256) on every run.
        with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            yield from _wrapped(gz)
    elif fmt == ".jsonl.zst":
        import zstandard

        with path.open("wb") as raw, zstandard.ZstdCompressor().stream_writer(raw) as z:
            yield from _wrapped(z)
    else:
        with path.open("w", encoding="utf-8") as fh:
            yield fh


def _wrapped(binary: Any) -> Iterator[IO[str]]:
    """A text layer over a compressed stream, detached (not closing it) when done."""
    text = io.TextIOWrapper(binary, encoding="utf-8")
    yield text
    text.flush()
    text.detach()


def _write_parquet(path: Path, docs: Iterable[Doc]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("meta", pa.string())])
    count = 0
    with pq.ParquetWriter(path, schema) as writer:
        batch: list[Doc] = []
        for doc in docs:
            batch.append(doc)
            if len(batch) == _PARQUET_BATCH:
                count += _flush(writer, schema, batch)
        count += _flush(writer, schema, batch)
    return count


def _flush(writer: Any, schema: Any, batch: list[Doc]) -> int:
    import pyarrow as pa

    if not batch:
        return 0
    table = pa.table(
        {
            "id": [d.id for d in batch],
            "text": [d.text for d in batch],
            "meta": [json.dumps(d.meta) for d in batch],
        },
        schema=schema,
    )
    writer.write_table(table)
    n = len(batch)
    batch.clear()
    return n
