"""Protected eval sets: parsing files into word n-grams and the items they come from.

A protected file is read as items, by its name (each text format also ``.gz`` or ``.zst``):

- ``.jsonl``, ``.ndjson``: one item per line (a line that is not a JSON object is a
  CorpusError naming it);
- ``.json``: a JSON array of objects, one item each (a file whose first character is not ``[``
  is read as JSON Lines, as Dolma names them);
- ``.csv``: one item per row, its cells by the header's names. The delimiter is the one
  ``csv.Sniffer`` finds in the first row among ``,`` ``;`` tab and ``|`` (a comma when it finds
  none: a one-column file), so a spreadsheet's semicolon export reads as its columns. The first
  row is a header when
  every cell looks like a column name (a letter or ``_``, then letters, digits and ``_``, up to
  four such words joined by a space, ``.`` or ``-``; at most 64 characters; no two alike), as in
  ``question,A,B,C,D,answer``. Otherwise the file has none (MMLU's release: a question first)
  and the cells are named by position, ``"1"``, ``"2"``, ... A first row misread as a header
  has no cell of more than four words: it would protect nothing at n >= 5 anyway;
- ``.parquet``: one item per row;
- ``.txt``: ONE item, the whole text.

Any other name is refused (CorpusError). An item protects every string value, nested ones
included, except under the keys ``case_id``, ``id``, ``tags``, ``scorer_args`` (labels, not text
a model is tested on). Items are labelled by their ``id``, else ``case_id``, else their line
(JSON Lines), position (JSON array) or data row (CSV, Parquet), counted from 1. The service,
the CLI and ``protected_ngrams`` all parse through here.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import StrEnum
from os import PathLike
from typing import Any

import numpy as np

from neardup.core._formats import (
    PROTECTED_ENDINGS,
    jsonl_items,
    parse_json_array,
    protected_format,
    text_reader,
)
from neardup.core._json import JSONBudget
from neardup.core._ngrams import NgramIndex, check_n, shared_grams
from neardup.core._storage import filesystem
from neardup.core._text import check_tokenizer, words
from neardup.core._utf8 import reread_utf8_error
from neardup.core._windows import is_whole, window_grams, window_version
from neardup.core.errors import CorpusError, ParameterError

__all__ = [
    "CSV_DELIMITERS",
    "NON_TEXT_KEYS",
    "ProtectedFormat",
    "ProtectedSet",
    "csv_delimiter",
    "is_csv_header",
    "item_label",
    "item_strings",
    "parquet_as_jsonl",
    "parse_protected_set",
    "protected_as_jsonl",
    "protected_items",
    "protected_ngrams",
    "protected_paths",
    "read_protected_set",
]

#: Keys whose values are labels, not text a model is tested on: never protected.
NON_TEXT_KEYS = frozenset({"case_id", "id", "tags", "scorer_args"})


class ProtectedFormat(StrEnum):
    """How a protected file's text is read: JSON Lines, a JSON array, CSV rows (items), or one
    plain text. A store keeps JSONL and TEXT only (``protected_as_jsonl`` converts the others)."""

    JSONL = "jsonl"
    TEXT = "text"
    JSON = "json"
    CSV = "csv"

    @classmethod
    def of(cls, path: str | PathLike[str]) -> ProtectedFormat:
        """The format of an uncompressed file by its name (``.jsonl``, ``.ndjson``, ``.json``,
        ``.csv``, ``.txt``); CorpusError for any other, which cannot be read as items."""
        found = protected_format(path)
        if found is None or found[0] == "parquet" or found[1]:
            raise CorpusError(str(path), None, _unreadable(compressed=False))
        return cls(found[0])


def _unreadable(*, compressed: bool) -> str:
    names = ", ".join(PROTECTED_ENDINGS)
    more = " (each also .gz or .zst) or .parquet" if compressed else ""
    return (
        f"cannot read this file as protected items: name it by its format, one of {names}{more} "
        "(.txt is one item)"
    )


def item_strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value, nested ones included, except under NON_TEXT_KEYS."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in NON_TEXT_KEYS:
                yield from item_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from item_strings(item)


def item_label(item: dict[str, Any], line: int) -> str:
    """How a protected item is named in reports: its ``id``, else ``case_id``, else its line."""
    for key in ("id", "case_id"):
        value = item.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return str(line)


@dataclass
class ProtectedSet:
    """One protected set: n-gram -> the labels of the items containing it (first seen first),
    and the n-grams' hashes to find the contaminated texts of a batch at numpy speed."""

    name: str
    items: int
    grams: dict[str, list[str]]
    n: int
    #: Per item, each of its texts as (words, lo, hi): its n-gram windows in order are
    #: ``windows[lo:hi]``. What a report needs for the share of an item's words matches cover.
    layout: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict, repr=False)
    windows: list[str] = field(default_factory=list, repr=False)
    #: How its texts (and the texts checked against it) are cut into words.
    tokenizer: str = "words"
    #: Its n-grams that are whole texts protected as a whole (``core._windows.is_whole``);
    #: None: not known (found by weighing every n-gram).
    wholes: frozenset[str] | None = field(default=None, repr=False)
    index: NgramIndex = field(init=False, repr=False)
    _caps: dict[int, frozenset[str]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.index = NgramIndex(self.grams.keys(), self.n, self.tokenizer, self.wholes)

    def capped_by_items(self, cap: int) -> frozenset[str]:
        """The n-grams in more than ``cap`` items (computed once per cap)."""
        found = self._caps.get(cap)
        if found is None:
            found = frozenset(g for g, labels in self.grams.items() if len(labels) > cap)
            self._caps[cap] = found
        return found

    def why_empty(self) -> str | None:
        """Why the set protects no n-gram (no text at all, or every text under ``n`` words), or
        None when it protects some: a check against such a set always says clean."""
        if self.grams:
            return None
        longest = max((w for texts in self.layout.values() for w, _, _ in texts), default=None)
        if longest is None or longest == 0:
            keys = ", ".join(sorted(NON_TEXT_KEYS))
            return (
                f"it protects nothing: its {self.items} item(s) hold no text (no string outside "
                f"the keys {keys})"
            )
        if self.tokenizer != "words":
            return (
                f"it protects nothing: every text of its {self.items} item(s) is under "
                f"{self.n} English words' worth of text (the longest has {longest} words), and "
                f"a text is protected by its windows of {self.n} English words' worth (words "
                f"weighed by script, {window_version(self.tokenizer)}: a Thai or Chinese "
                "text needs about 70 or 22 characters a window at n = 13, or at least about "
                "31 or 10 to be protected as a whole)"
            )
        return (
            f"it protects nothing: every text of its {self.items} item(s) is under {self.n} "
            f"words (the longest has {longest}), and a text is protected by its {self.n}-word "
            "n-grams"
        )

    @property
    def ngrams(self) -> int:
        """How many distinct n-grams the set protects."""
        return len(self.grams)

    def hits_many(self, texts: Sequence[str]) -> list[list[tuple[str, str]]]:
        """For every text, (item, first shared n-gram) of the items it shares an n-gram with;
        only the texts the hash filter flags are scanned word by word."""
        out: list[list[tuple[str, str]]] = [[] for _ in texts]
        for i in np.flatnonzero(self.index.contaminated_many(texts)).tolist():
            out[i] = self.hits(texts[i])
        return out

    def hits(self, text: str) -> list[tuple[str, str]]:
        """(item, first shared n-gram) for every item sharing an n-gram with ``text``."""
        found: dict[str, str] = {}
        for gram in self._shared(text):
            for item in self.grams[gram]:
                found.setdefault(item, gram)
        return list(found.items())

    def shared(self, text: str) -> set[str]:
        """The n-grams of ``text`` that the set protects."""
        return set(self._shared(text))

    def _shared(self, text: str) -> Iterator[str]:
        w = words(text, self.tokenizer)
        return shared_grams(w, self.grams.keys(), self.n, self.tokenizer, self.index.anchors)


def parse_protected_set(
    name: str,
    body: str,
    fmt: ProtectedFormat,
    n: int = 13,
    tokenizer: str = "words",
    *,
    nan_as_null: bool = False,
    budget: JSONBudget | None = None,
) -> ProtectedSet:
    """Parse a protected file's text into the n-grams of its words by ``tokenizer``;
    CorpusError (naming ``name`` and the line) for a bad line. ``nan_as_null``: a NaN or
    Infinity is read as null, not refused (a body stored before they were refused; they are
    never text, so the n-grams are the same). ``budget``: see ``protected_items``."""
    check_n(n)
    check_tokenizer(tokenizer)
    items = protected_items(name, body, fmt, nan_as_null=nan_as_null, budget=budget)
    return _from_items(name, items, n, tokenizer)


def protected_items(
    name: str,
    body: str,
    fmt: ProtectedFormat,
    *,
    nan_as_null: bool = False,
    budget: JSONBudget | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """``(line, position or row, from 1; item)`` pairs of a protected file's text, as the module
    says; a TEXT body is one item ``(1, {"text": body})``. CorpusError naming ``name`` for a bad
    one. A CSV's or a JSON array's UTF-8 byte order mark (as spreadsheets write) is skipped.
    ``nan_as_null``: NaN and Infinity read as null, not refused. ``budget``: the JSON (an
    array, or all the lines together) is counted against it, JSONError (kind ``values``) past
    it (an upload's MAX_JSON_VALUES and MAX_JSON_CONTAINERS)."""
    if fmt is ProtectedFormat.TEXT:
        return [(1, {"text": body})]
    if fmt is not ProtectedFormat.JSONL:
        body = body.removeprefix("\ufeff")
    if fmt is ProtectedFormat.CSV:
        return _csv_items(name, body)
    if fmt is ProtectedFormat.JSON and body.lstrip().startswith("["):
        return parse_json_array(body, name, nan_as_null=nan_as_null, budget=budget)
    # Lines end at "\n" only, as in a file (str.splitlines would also split at U+2028).
    return list(jsonl_items(body.split("\n"), name, nan_as_null=nan_as_null, budget=budget))


def protected_as_jsonl(
    name: str, body: str, fmt: ProtectedFormat, *, budget: JSONBudget | None = None
) -> tuple[str, ProtectedFormat]:
    """``(body, format)`` as a store keeps them: JSONL and TEXT as given; a JSON array or CSV
    as JSON Lines of its items, one a line (so each keeps its label: its position is its line).
    CorpusError for a bad body; ``budget``: see ``protected_items``."""
    if fmt in (ProtectedFormat.JSONL, ProtectedFormat.TEXT):
        return body, fmt
    body = body.removeprefix("\ufeff")
    if fmt is ProtectedFormat.JSON and not body.lstrip().startswith("["):
        # checked as JSON Lines, kept with its line numbers
        protected_items(name, body, fmt, budget=budget)
        return body, ProtectedFormat.JSONL
    items = protected_items(name, body, fmt, budget=budget)
    lines = [json.dumps(item, ensure_ascii=False) for _, item in items]
    return "".join(f"{line}\n" for line in lines), ProtectedFormat.JSONL


#: A CSV cell that names a column: up to four words of letters, digits and "_" (a letter or "_"
#: first) joined by a space, "." or "-".
_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[ .-][A-Za-z0-9_]+){0,3}")


def is_csv_header(cells: list[str]) -> bool:
    """Whether a CSV's first row names its columns (the module says when)."""
    return len(set(cells)) == len(cells) and all(
        len(c) <= 64 and _COLUMN_NAME.fullmatch(c) for c in cells
    )


#: The rows a CSV's delimiter is sniffed over (one alone can hold a ";" in prose).
_SNIFFED = 5
#: The delimiters a CSV may use (a sniffer choosing among more misreads prose as columns).
CSV_DELIMITERS = ",;\t|"


def csv_delimiter(body: str) -> str:
    r"""The delimiter of a CSV text: what ``csv.Sniffer`` finds among CSV_DELIMITERS in its header
    (its first rows: a delimiter is one the rows use alike; of several, the sniffer prefers
    comma, tab, semicolon), else a comma.

    >>> csv_delimiter("question;answer\nWhat is it;This")
    ';'
    """
    head = "\n".join(itertools.islice((ln for ln in body.splitlines() if ln.strip()), _SNIFFED))
    try:
        found = csv.Sniffer().sniff(head, delimiters=CSV_DELIMITERS).delimiter
    except csv.Error:
        return ","
    return found if found in CSV_DELIMITERS else ","


def _csv_items(name: str, body: str) -> list[tuple[int, dict[str, Any]]]:
    rows = csv.reader(io.StringIO(body, newline=""), delimiter=csv_delimiter(body))
    items: list[tuple[int, dict[str, Any]]] = []
    names: list[str] | None = None
    try:
        for cells in rows:
            if not any(cells):
                continue  # a blank line
            if names is None:
                names = cells if is_csv_header(cells) else []
                if names:
                    continue
            keys = [*names, *(str(i) for i in range(len(names) + 1, len(cells) + 1))]
            items.append((len(items) + 1, dict(zip(keys, cells, strict=False))))
    except csv.Error as exc:
        raise CorpusError(name, rows.line_num, f"not valid CSV ({exc})") from None
    return items


def _from_items(
    name: str, items: list[tuple[int, dict[str, Any]]], n: int, tokenizer: str
) -> ProtectedSet:
    """A ProtectedSet of ``(line, item)`` pairs, each labelled as ``item_label`` says, its
    n-grams of words by ``tokenizer``."""
    grams: dict[str, list[str]] = {}
    layout: dict[str, list[tuple[int, int, int]]] = {}
    windows: list[str] = []
    wholes: set[str] = set()
    for line, item in items:
        label = item_label(item, line)
        for text in item_strings(item):
            _add(grams, layout, windows, wholes, text, label, n, tokenizer)
    return ProtectedSet(name, len(items), grams, n, layout, windows, tokenizer, frozenset(wholes))


def read_protected_set(
    path: str | PathLike[str],
    n: int = 13,
    *,
    name: str | None = None,
    tokenizer: str = "words",
) -> ProtectedSet:
    """Read and parse one protected file (a local path or an fsspec URL), by its name as the
    module says (``.parquet``: string columns, nested ones included, protected as a JSON line's
    would be). ``name`` (default: ``path``) names it in reports and errors. CorpusError if it
    cannot be read as items, read, or parsed.
    """
    check_n(n)
    check_tokenizer(tokenizer)
    name = name or str(path)
    fs, where = filesystem(str(path))
    if not fs.isfile(where):
        reason = "no such file" if not fs.exists(where) else "not a regular file"
        raise CorpusError(name, None, f"{reason}: a protected set must be a readable file")
    fmt = protected_format(path)
    if fmt is None:
        raise CorpusError(name, None, _unreadable(compressed=True))
    try:
        with fs.open(where, "rb") as raw:
            return _parse(raw, fmt, name, n, tokenizer)
    except UnicodeDecodeError as exc:
        raise reread_utf8_error(name, lambda: fs.open(where, "rb"), fmt[1], exc) from None
    except (OSError, EOFError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise CorpusError(name, None, f"cannot read: {why}") from None
    except Exception as exc:  # zstandard and pyarrow raise their own error types
        if type(exc).__module__.split(".")[0] in ("zstandard", "pyarrow"):
            raise CorpusError(name, None, f"cannot read: {exc}") from None
        raise


def _parse(raw: Any, fmt: tuple[str, str], name: str, n: int, tokenizer: str) -> ProtectedSet:
    kind, compression = fmt
    if kind == "parquet":
        return _from_items(name, list(_parquet_items(raw)), n, tokenizer)
    with text_reader(raw, compression or ".txt") as fh:
        if kind == "jsonl":  # streamed, a line at a time
            return _from_items(name, list(jsonl_items(fh, name)), n, tokenizer)
        return parse_protected_set(name, fh.read(), ProtectedFormat(kind), n, tokenizer)


def _parquet_items(raw: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow.parquet as pq

    row = 0
    for batch in pq.ParquetFile(raw).iter_batches():
        for item in batch.to_pylist():
            row += 1
            yield row, item


def protected_ngrams(
    paths: Iterable[str | PathLike[str]], n: int = 13, tokenizer: str = "words"
) -> set[str]:
    """The word n-grams (words joined by one space; words by ``tokenizer``) of protected eval
    or validation files.

    Files are read as items as the module says: every string value of every item, nested ones
    included, except under the keys ``case_id``, ``id``, ``tags``, ``scorer_args``; a line that
    is not a JSON object raises CorpusError with its line number, and so does a name that
    cannot be read as items. A ``.txt`` file is one protected text. A text of fewer than ``n``
    words contributes nothing (under ``multilingual``: of less than ``n`` English words' worth,
    its windows being words weighed by script, ``core._windows``; unless it is protected whole,
    its words joined by single spaces its one n-gram: ``core._windows.is_whole``).
    """
    check_n(n)
    grams: set[str] = set()
    for path in protected_paths(paths):
        grams.update(read_protected_set(path, n, tokenizer=tokenizer).grams)
    return grams


def parquet_as_jsonl(name: str, raw: bytes) -> str:
    """A Parquet file's rows as the JSON Lines a store keeps, one item a line (its row is its
    line, so labels stay). Values JSON has no type for (dates, bytes, decimals; NaN) are not
    text: null, as the CLI, which protects strings only, ignores them. CorpusError if the bytes
    are not Parquet."""
    try:
        rows = [_json_safe(item) for _, item in _parquet_items(io.BytesIO(raw))]
    except Exception as exc:  # pyarrow raises its own error types
        if type(exc).__module__.split(".")[0] != "pyarrow":
            raise
        raise CorpusError(name, None, f"cannot read as Parquet: {exc}") from None
    return "".join(f"{json.dumps(row, ensure_ascii=False)}\n" for row in rows)


def _json_safe(value: Any) -> Any:
    """``value`` with whatever JSON cannot hold as text replaced by null (see parquet_as_jsonl)."""
    if isinstance(value, str | bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return None


def protected_paths(paths: Iterable[str | PathLike[str]]) -> list[str | PathLike[str]]:
    """``paths`` as a list; ParameterError for a lone path, a set of n-grams, or non-paths."""
    if isinstance(paths, str | bytes | PathLike):
        raise ParameterError(
            f"expected a list of protected file paths, got the single path {paths!r}: "
            "wrap it in a list"
        )
    if isinstance(paths, AbstractSet | Mapping):
        raise ParameterError(
            f"expected a list of protected file paths, got a {type(paths).__name__} of "
            f"{len(paths)}; to check against n-grams you already have, build an "
            "NgramIndex(grams, n) and call decontaminate_with(docs, index)"
        )
    found = list(paths)
    wrong = [p for p in found if not isinstance(p, str | PathLike)]
    if wrong:
        raise ParameterError(f"protected files must be paths, got {wrong[0]!r}")
    return found


def _add(
    grams: dict[str, list[str]],
    layout: dict[str, list[tuple[int, int, int]]],
    windows: list[str],
    wholes: set[str],
    text: str,
    label: str,
    n: int,
    tokenizer: str,
) -> None:
    w = words(text, tokenizer)
    lo = len(windows)
    found = window_grams(w, n, tokenizer)
    if not found and is_whole(w, n, tokenizer):
        found = [" ".join(w)]
        wholes.add(found[0])
    windows.extend(found)
    for gram in windows[lo:]:
        labels = grams.setdefault(gram, [])
        # Usually the label is the last one added: skip the scan of the list then.
        if (not labels or labels[-1] != label) and label not in labels:
            labels.append(label)
    layout.setdefault(label, []).append((len(w), lo, len(windows)))
