"""Corpus files as one stream of documents, and that stream in batches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from neardup.core.engine import Doc, read_docs

__all__ = ["batches", "read_corpus"]

_T = TypeVar("_T")


def read_corpus(inputs: Sequence[Path]) -> Iterator[Doc]:
    """The documents of every input, in order: one corpus."""
    for path in inputs:
        yield from read_docs(path)


def batches(items: Iterable[_T], size: int) -> Iterator[list[_T]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    batch: list[_T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
