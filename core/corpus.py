"""Reading and writing JSON Lines corpora of ``{"id", "text", "meta"}``; errors name file:line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import Any

from core.decont import jsonl_items
from core.errors import CorpusError
from core.stages import Doc

__all__ = ["doc_from_json", "read_docs", "write_docs"]


def doc_from_json(item: dict[str, Any], path: str, line: int) -> Doc:
    """A Doc from one parsed line; CorpusError when ``id``/``text`` are not strings."""
    doc_id, text, meta = item.get("id"), item.get("text"), item.get("meta", {})
    if not isinstance(doc_id, str) or not doc_id:
        raise CorpusError(path, line, "'id' must be a non-empty string")
    if not isinstance(text, str):
        raise CorpusError(path, line, "'text' must be a string")
    if not isinstance(meta, dict):
        raise CorpusError(path, line, "'meta' must be an object when present")
    return Doc(doc_id, text, meta)


def read_docs(path: str | PathLike[str]) -> Iterator[Doc]:
    """Stream the documents of a ``.jsonl`` corpus file, one line at a time."""
    name = str(path)
    with Path(path).open(encoding="utf-8") as fh:
        for line, item in jsonl_items(fh, name):
            yield doc_from_json(item, name, line)


def write_docs(path: str | PathLike[str], docs: Iterable[Doc]) -> int:
    """Write documents as JSON Lines; returns how many were written."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps({"id": doc.id, "text": doc.text, "meta": doc.meta}))
            fh.write("\n")
            count += 1
    return count
