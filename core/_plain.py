"""What a text sent as ONE plain text plainly is instead: JSON Lines, a JSON array of objects or
CSV rows, and how many items it holds.

A protected set sent as plain text is one item. Pasting a JSON Lines file into a text box (or
sending it as ``text/plain``) would store its 20 items as one, and every later hit would name
item ``1``; the service asks instead (``plain_text_shape``), unless the caller says "one plain
text" explicitly.

Plainly JSON Lines: the first non-blank line is a JSON object (then every line must be one: a
bad line is a CorpusError naming it). Plainly a JSON array: the whole text is an array of
objects. Plainly CSV: two rows or more with the same number of cells (two or more, by the
sniffed delimiter), the first a header (``question,answer``) or every row at least
``CSV_COLUMNS`` cells wide: prose with a comma or two a line is not CSV.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from neardup.core._formats import parse_jsonl_line
from neardup.core._json import JSONBudget
from neardup.core._protected import (
    ProtectedFormat,
    csv_delimiter,
    is_csv_header,
    protected_items,
)
from neardup.core.errors import CorpusError, JSONError

__all__ = ["CSV_COLUMNS", "PlainShape", "plain_text_shape"]

#: Cells a header-less CSV's rows need, all alike, to be plainly CSV (MMLU's have 6).
CSV_COLUMNS = 4


@dataclass(frozen=True)
class PlainShape:
    """A plain text's plain shape: its format, what to call it, and the items it holds."""

    format: ProtectedFormat
    kind: str
    items: int


def plain_text_shape(name: str, body: str, budget: JSONBudget | None = None) -> PlainShape | None:
    """The shape of ``body`` when it is plainly JSON Lines, a JSON array of objects or CSV (the
    module says when), else None. CorpusError (naming ``name`` and the line) for plain JSON
    Lines with a bad line; with ``budget``, JSONError (kind ``values``) for JSON that holds
    more values than it allows (each reading counted afresh)."""
    start = body.lstrip()[:1]
    fresh = (lambda: None) if budget is None else budget.fresh
    if start == "{" and _first_line_is_object(name, body, fresh()):
        items = protected_items(name, body, ProtectedFormat.JSONL, budget=fresh())
        return PlainShape(ProtectedFormat.JSONL, "JSON Lines", len(items))
    if start == "[":
        try:
            items = protected_items(name, body, ProtectedFormat.JSON, budget=fresh())
        except JSONError as exc:
            if exc.kind == "values":
                raise
            return None
        except (CorpusError, ValueError, RecursionError):
            return None  # "[Verse 1] ...": a text that opens with a bracket
        return PlainShape(ProtectedFormat.JSON, "a JSON array", len(items))
    if _plainly_csv(body):
        items = protected_items(name, body, ProtectedFormat.CSV)
        return PlainShape(ProtectedFormat.CSV, "CSV", len(items))
    return None


def _first_line_is_object(name: str, body: str, budget: JSONBudget | None) -> bool:
    first = next(line for line in body.split("\n") if line.strip())
    try:
        parse_jsonl_line(first, name, 1, budget=budget)
    except JSONError as exc:
        if exc.kind == "values":
            raise
        return False
    except (CorpusError, ValueError, RecursionError):
        return False
    return True


def _plainly_csv(body: str) -> bool:
    rows = csv.reader(io.StringIO(body, newline=""), delimiter=csv_delimiter(body))
    width, header, count = 0, False, 0
    try:
        for cells in rows:
            if not any(cells):
                continue
            count += 1
            if count == 1:
                width, header = len(cells), is_csv_header(cells)
                if width < 2 or not (header or width >= CSV_COLUMNS):
                    return False
            elif len(cells) != width:
                return False
    except csv.Error:
        return False
    return count >= 2
