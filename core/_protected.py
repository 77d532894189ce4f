"""Protected eval sets: parsing files into word n-grams and the items they come from.

``.jsonl`` (and ``.jsonl.gz``, ``.jsonl.zst``, and ``.parquet`` rows): every string value of
every object, nested ones included, except under the keys ``case_id``, ``id``, ``tags``,
``scorer_args`` (labels, not text a model is tested on); a line that is not a JSON object is a
CorpusError naming it. Any other file is one protected text.
Items are labelled by their ``id``, else ``case_id``, else their line number ("1" for a plain
file). The service, the CLI and ``protected_ngrams`` all parse through here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import StrEnum
from os import PathLike
from typing import Any

import numpy as np

from neardup.core._formats import jsonl_items, text_reader
from neardup.core._ngrams import NgramIndex, check_n
from neardup.core._storage import filesystem
from neardup.core._text import check_tokenizer, ngrams, words
from neardup.core.errors import CorpusError, ParameterError

__all__ = [
    "NON_TEXT_KEYS",
    "ProtectedFormat",
    "ProtectedSet",
    "item_label",
    "item_strings",
    "parse_protected_set",
    "protected_ngrams",
    "protected_paths",
    "read_protected_set",
]

#: Keys whose values are labels, not text a model is tested on: never protected.
NON_TEXT_KEYS = frozenset({"case_id", "id", "tags", "scorer_args"})


class ProtectedFormat(StrEnum):
    """How a protected file is read: JSON Lines items, or one plain text."""

    JSONL = "jsonl"
    TEXT = "text"

    @classmethod
    def of(cls, path: str | PathLike[str]) -> ProtectedFormat:
        """JSONL for a name ending in ``.jsonl``, else TEXT."""
        return cls.JSONL if str(path).lower().endswith(".jsonl") else cls.TEXT


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
    index: NgramIndex = field(init=False, repr=False)
    _caps: dict[int, frozenset[str]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.index = NgramIndex(self.grams.keys(), self.n, self.tokenizer)

    def capped_by_items(self, cap: int) -> frozenset[str]:
        """The n-grams in more than ``cap`` items (computed once per cap)."""
        found = self._caps.get(cap)
        if found is None:
            found = frozenset(g for g, labels in self.grams.items() if len(labels) > cap)
            self._caps[cap] = found
        return found

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
        for gram in ngrams(words(text, self.tokenizer), self.n):
            for item in self.grams.get(gram, ()):
                found.setdefault(item, gram)
        return list(found.items())

    def shared(self, text: str) -> set[str]:
        """The n-grams of ``text`` that the set protects."""
        return {g for g in ngrams(words(text, self.tokenizer), self.n) if g in self.grams}


def parse_protected_set(
    name: str, body: str, fmt: ProtectedFormat, n: int = 13, tokenizer: str = "words"
) -> ProtectedSet:
    """Parse a protected file's text into the n-grams of its words by ``tokenizer``;
    CorpusError (naming ``name`` and the line) for a bad line."""
    check_n(n)
    check_tokenizer(tokenizer)
    if fmt is not ProtectedFormat.JSONL:
        grams: dict[str, list[str]] = {}
        layout: dict[str, list[tuple[int, int, int]]] = {}
        windows: list[str] = []
        _add(grams, layout, windows, body, "1", n, tokenizer)
        return ProtectedSet(name, 1, grams, n, layout, windows, tokenizer)
    return _from_items(name, list(jsonl_items(body.splitlines(), name)), n, tokenizer)


def _from_items(
    name: str, items: list[tuple[int, dict[str, Any]]], n: int, tokenizer: str
) -> ProtectedSet:
    grams: dict[str, list[str]] = {}
    layout: dict[str, list[tuple[int, int, int]]] = {}
    windows: list[str] = []
    for line, item in items:
        label = item_label(item, line)
        for text in item_strings(item):
            _add(grams, layout, windows, text, label, n, tokenizer)
    return ProtectedSet(name, len(items), grams, n, layout, windows, tokenizer)


#: Protected files read as items (one per JSON line or Parquet row); any other name is one text.
_ITEM_FORMATS = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet")


def read_protected_set(
    path: str | PathLike[str],
    n: int = 13,
    *,
    name: str | None = None,
    tokenizer: str = "words",
) -> ProtectedSet:
    """Read and parse one protected file (a local path or an fsspec URL).

    ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``: one item per line; ``.parquet``: one item per
    row, its string columns (nested ones included) protected as a JSON line's would be; any
    other file: one UTF-8 text. ``name`` (default: ``path``) names it in reports and errors.
    CorpusError if it cannot be read or parsed.
    """
    check_n(n)
    check_tokenizer(tokenizer)
    name = name or str(path)
    fs, where = filesystem(str(path))
    if not fs.isfile(where):
        reason = "no such file" if not fs.exists(where) else "not a regular file"
        raise CorpusError(name, None, f"{reason}: a protected set must be a readable file")
    fmt = next((f for f in _ITEM_FORMATS if str(path).lower().endswith(f)), None)
    try:
        with fs.open(where, "rb") as raw:
            return _parse(raw, fmt, name, n, tokenizer)
    except UnicodeDecodeError as exc:
        raise CorpusError(name, None, f"not UTF-8 ({exc.reason})") from None
    except (OSError, EOFError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise CorpusError(name, None, f"cannot read: {why}") from None
    except Exception as exc:  # zstandard and pyarrow raise their own error types
        if type(exc).__module__.split(".")[0] in ("zstandard", "pyarrow"):
            raise CorpusError(name, None, f"cannot read: {exc}") from None
        raise


def _parse(raw: Any, fmt: str | None, name: str, n: int, tokenizer: str) -> ProtectedSet:
    if fmt is None:
        body = raw.read().decode("utf-8")
        return parse_protected_set(name, body, ProtectedFormat.TEXT, n, tokenizer)
    if fmt == ".parquet":
        return _from_items(name, list(_parquet_items(raw)), n, tokenizer)
    with text_reader(raw, fmt) as fh:
        return _from_items(name, list(jsonl_items(fh, name)), n, tokenizer)


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

    ``.jsonl``: every string value of every object, nested ones included, except under the keys
    ``case_id``, ``id``, ``tags``, ``scorer_args``; a line that is not a JSON object raises
    CorpusError with its line number. Any other file is one protected text. A text of fewer
    than ``n`` words contributes nothing.
    """
    check_n(n)
    grams: set[str] = set()
    for path in protected_paths(paths):
        grams.update(read_protected_set(path, n, tokenizer=tokenizer).grams)
    return grams


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
    text: str,
    label: str,
    n: int,
    tokenizer: str,
) -> None:
    w = words(text, tokenizer)
    lo = len(windows)
    windows.extend(ngrams(w, n))
    for gram in windows[lo:]:
        labels = grams.setdefault(gram, [])
        # Usually the label is the last one added: skip the scan of the list then.
        if (not labels or labels[-1] != label) and label not in labels:
            labels.append(label)
    layout.setdefault(label, []).append((len(w), lo, len(windows)))
