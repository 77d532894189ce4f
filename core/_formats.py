"""Corpus file formats: which one a name is, JSON Lines parsing, and text layers over the
compressed byte streams (gzip, zstd). No storage, no schema: the bytes in, the objects out.

Formats follow the file name: ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` (JSON Lines, plain or
compressed) and ``.parquet``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import gzip
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from os import PathLike
from typing import IO, Any

from neardup.core.errors import CorpusError

__all__ = [
    "FORMATS",
    "corpus_format",
    "json_default",
    "jsonl_items",
    "jsonl_lines",
    "parse_jsonl_line",
    "text_reader",
    "text_writer",
]

#: File name endings corpora are read from and written to.
FORMATS = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet")


def corpus_format(path: str | PathLike[str]) -> str:
    """The format of a corpus file by its name; CorpusError for any other."""
    name = str(path).lower()
    for ending in FORMATS:
        if name.endswith(ending):
            return ending
    raise CorpusError(str(path), None, f"unknown corpus format; use one of {', '.join(FORMATS)}")


def jsonl_items(lines: Iterable[str], path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line; CorpusError naming a bad line."""
    for number, line in jsonl_lines(lines):
        yield number, parse_jsonl_line(line, path, number)


def jsonl_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of every non-blank line, unparsed (``parse_jsonl_line`` parses)."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, line


# Only a \uD800-\uDFFF escape (any case) can decode to a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


# The C scanner json.loads runs (an attribute every JSONDecoder sets on itself).
_SCAN: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]
_SPACE = re.compile(r"[ \t\n\r]*")  # json.decoder.WHITESPACE: what JSON calls space


def _past_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _loads(text: str) -> Any:
    """``json.loads(text)`` for a str, without its per-call Python layers: the same scanner,
    the same value and the same errors."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        value, end = _SCAN(text, _past_space(text, 0))
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    end = _past_space(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def parse_jsonl_line(line: str, path: str, number: int) -> dict[str, Any]:
    """The JSON object on one line; CorpusError naming the line if it is not one."""
    try:
        item = _loads(line)
    except json.JSONDecodeError as exc:
        raise CorpusError(path, number, f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise CorpusError(path, number, "not valid JSON here: nested too deeply") from None
    if not isinstance(item, dict):
        raise CorpusError(path, number, f"expected a JSON object, got {type(item).__name__}")
    # A \ud800-style escape decodes to a lone surrogate, which no UTF-8 output can carry.
    # ("\\" in line is one memchr: most lines have no escape at all.)
    if "\\" in line and _SURROGATE_ESCAPE.search(line) and _has_lone_surrogate(item):
        raise CorpusError(path, number, "a string holds a lone surrogate (\\ud800-\\udfff)")
    return item


def _has_lone_surrogate(value: Any) -> bool:
    """Whether any string in a parsed JSON value (keys included) holds a lone surrogate."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@contextmanager
def text_reader(raw: IO[bytes], fmt: str) -> Iterator[IO[str]]:
    """UTF-8 text over a binary stream of format ``fmt`` (``.jsonl``, ``.gz`` or ``.zst``)."""
    if fmt.endswith(".gz"):
        with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            yield from _read_detached(gz)
    elif fmt.endswith(".zst"):
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(raw, closefd=False) as z:
            yield from _read_detached(z)
    else:
        yield from _read_detached(raw)


def _read_detached(binary: Any) -> Iterator[IO[str]]:
    """A text layer for reading, detached (not closing the stream under it) when done."""
    text = io.TextIOWrapper(binary, encoding="utf-8")
    try:
        yield text
    finally:
        text.detach()


@contextmanager
def text_writer(raw: IO[bytes], fmt: str) -> Iterator[IO[str]]:
    """UTF-8 text onto a binary stream, compressed as ``fmt`` says; ``raw`` is left open."""
    if fmt.endswith(".gz"):
        # mtime=0: the same rows give the same bytes (and the same SHA-256) on every run.
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            yield from _detached(gz)
    elif fmt.endswith(".zst"):
        import zstandard

        with zstandard.ZstdCompressor().stream_writer(raw, closefd=False) as z:
            yield from _detached(z)
    else:
        yield from _detached(raw)


def _detached(binary: Any) -> Iterator[IO[str]]:
    """A text layer over a binary stream, detached (not closing it) when done."""
    text = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
    yield text
    text.flush()
    text.detach()


def json_default(value: Any) -> Any:
    """JSON for the values Parquet columns hold and JSON does not: dates and times in ISO 8601,
    decimals as strings, bytes in base64."""
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"a {type(value).__name__} cannot be written as JSON")
