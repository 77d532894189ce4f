"""Corpus file formats: which one a name is, JSON Lines parsing, and text layers over the
compressed byte streams (gzip, zstd). No storage, no schema: the bytes in, the objects out.

Formats follow the file name: ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` (JSON Lines, plain or
compressed) and ``.parquet``. Inputs may also carry the other names JSON Lines goes by
(``INPUT_ALIASES``: ``.ndjson``, and Dolma's and C4's ``.json.gz``), read as JSON Lines; a JSON
array under such a name is refused with a hint, not read as one row. Outputs take ``FORMATS``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import gzip
import io
import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from os import PathLike
from typing import IO, Any

from neardup.core._json import JSONBudget, read_json
from neardup.core.errors import CorpusError, JSONError

__all__ = [
    "FORMATS",
    "INPUT_ALIASES",
    "PROTECTED_ENDINGS",
    "corpus_format",
    "json_default",
    "jsonl_items",
    "jsonl_lines",
    "parse_json_array",
    "parse_jsonl_line",
    "protected_format",
    "text_reader",
    "text_writer",
]

#: File name endings corpora are read from and written to.
FORMATS = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet")

#: Other names of JSON Lines inputs (NDJSON; Dolma's and C4's ``.json.gz`` shards), by the
#: format they are read as. Inputs only: an output is named by one of FORMATS.
INPUT_ALIASES = {
    f"{name}{zip_}": f".jsonl{zip_}"
    for name in (".ndjson", ".json")
    for zip_ in ("", ".gz", ".zst")
}


def corpus_format(path: str | PathLike[str], *, output: bool = False) -> str:
    """The format of a corpus file by its name (one of FORMATS; an input's INPUT_ALIASES name
    gives the format it is read as); CorpusError for any other."""
    name = str(path).lower()
    for ending in FORMATS:
        if name.endswith(ending):
            return ending
    if not output:
        for alias, fmt in INPUT_ALIASES.items():
            if name.endswith(alias):
                return fmt
        names = ", ".join((*FORMATS, *INPUT_ALIASES))
        raise CorpusError(str(path), None, f"unknown corpus format; inputs are one of {names}")
    raise CorpusError(str(path), None, f"unknown output format; write one of {', '.join(FORMATS)}")


def jsonl_items(
    lines: Iterable[str], path: str, *, nan_as_null: bool = False, budget: JSONBudget | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line; CorpusError naming a bad line
    (``nan_as_null``, ``budget``: see ``parse_jsonl_line``; one budget for all the lines)."""
    for number, line in jsonl_lines(lines):
        yield number, parse_jsonl_line(line, path, number, nan_as_null=nan_as_null, budget=budget)


def jsonl_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of every non-blank line, unparsed (``parse_jsonl_line`` parses)."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, line


#: Protected-set files by name ending, and how each is read (``ProtectedFormat``'s values):
#: JSON Lines, a JSON array (or JSON Lines), CSV rows, one plain text. Each may also be gzip- or
#: zstd-compressed (``.csv.gz``); ``.parquet`` rows are read as items too.
PROTECTED_ENDINGS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".txt": "text",
}  # fmt: skip


def protected_format(path: str | PathLike[str]) -> tuple[str, str] | None:
    """``(how it is read, compression ending or "")`` of a protected file by its name:
    ``("csv", ".gz")`` for ``mmlu.csv.gz``, ``("parquet", "")``; None for any other name."""
    name = str(path).lower()
    if name.endswith(".parquet"):
        return "parquet", ""
    compression = next((c for c in (".gz", ".zst") if name.endswith(c)), "")
    base = name[: len(name) - len(compression)]
    for ending, kind in PROTECTED_ENDINGS.items():
        if base.endswith(ending):
            return kind, compression
    return None


# Only a \uD800-\uDFFF escape (any case) can decode to a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_jsonl_line(
    line: str,
    path: str,
    number: int,
    *,
    nan_as_null: bool = False,
    budget: JSONBudget | None = None,
) -> dict[str, Any]:
    """The JSON object on one line; CorpusError naming the line if it is not one, or is JSON
    neardup does not read (``read_json``: NaN and Infinity, which JSON does not have, named;
    read as null with ``nan_as_null``, for text stored before they were refused; an integer
    longer than Python reads; nesting deeper than MAX_JSON_DEPTH). With ``budget``, its values
    are counted against it: JSONError (kind ``values``) past it, for the caller to word."""
    read = read_json if budget is None else budget.read
    try:
        item = read(line, constants="null" if nan_as_null else "refuse")
    except JSONError as exc:
        if exc.kind == "values":
            raise
        if exc.kind == "syntax":
            why = f"not valid JSON ({exc.reason}){_array_hint(line)}"
            raise CorpusError(path, number, why) from None
        raise CorpusError(path, number, exc.reason) from None
    if not isinstance(item, dict):
        raise CorpusError(
            path, number, f"expected a JSON object, got {type(item).__name__}{_array_hint(line)}"
        )
    # A \ud800-style escape decodes to a lone surrogate, which no UTF-8 output can carry.
    # ("\\" in line is one memchr: most lines have no escape at all.)
    if "\\" in line and _SURROGATE_ESCAPE.search(line) and _has_lone_surrogate(item):
        raise CorpusError(path, number, "a string holds a lone surrogate (\\ud800-\\udfff)")
    return item


def _array_hint(line: str) -> str:
    """What to add when a failed line opens a JSON array (a whole file as one array?)."""
    if not line.lstrip().startswith("["):
        return ""
    return (
        "; JSON Lines holds one object per line: if the file is one JSON array, convert it, "
        "e.g. jq -c '.[]' FILE.json > FILE.jsonl"
    )


def parse_json_array(
    text: str, path: str, *, nan_as_null: bool = False, budget: JSONBudget | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """``(position from 1, object)`` of every element of a JSON array of objects; CorpusError
    naming the line of a syntax error, or the element that is not an object, or what
    ``read_json`` refuses (NaN and Infinity, or read as null with ``nan_as_null``; integers
    longer than Python reads; nesting deeper than MAX_JSON_DEPTH). With ``budget``: its values
    counted against it (JSONError, kind ``values``, past it)."""
    read = read_json if budget is None else budget.read
    try:
        value = read(text, constants="null" if nan_as_null else "refuse")
    except JSONError as exc:
        if exc.kind == "values":
            raise
        if exc.kind == "syntax":
            raise CorpusError(path, exc.line, f"not valid JSON ({exc.reason})") from None
        raise CorpusError(path, exc.line, exc.reason) from None
    if not isinstance(value, list):
        raise CorpusError(path, None, f"expected a JSON array, got {type(value).__name__}")
    for number, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise CorpusError(
                path, None, f"element {number} of the array is not an object (a "
                f"{type(item).__name__})",
            )  # fmt: skip
    if "\\" in text and _SURROGATE_ESCAPE.search(text):
        for number, item in enumerate(value, start=1):
            if _has_lone_surrogate(item):
                raise CorpusError(
                    path, None, f"element {number} of the array holds a lone surrogate "
                    "(\\ud800-\\udfff)",
                )  # fmt: skip
    return list(enumerate(value, start=1))


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
