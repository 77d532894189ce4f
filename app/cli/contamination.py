"""``neardup contamination``: which protected eval items a corpus contains, and where."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.cli.inputs import batches
from app.cli.progress import Progress
from core.engine import (
    ParameterError,
    ProtectedSet,
    RecordReader,
    Schema,
    expand_inputs,
    read_protected_set,
)

__all__ = ["contamination_report"]

#: Documents per batch.
BATCH = 4096


def contamination_report(
    inputs: Sequence[str],
    protected: Sequence[str],
    *,
    n: int = 13,
    schema: Schema | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Per protected item with any hit: the documents sharing an n-gram with it and the first
    shared n-gram; and per document, whether it is contaminated."""
    if (*inputs, *protected).count("-") > 1:
        raise ParameterError("standard input ('-') can be read once: name it once")
    sources = expand_inputs(inputs)
    sets = [
        read_protected_set(s.url(), n, name=s.name) for s in expand_inputs(protected, corpus=False)
    ]
    items: dict[tuple[str, str], dict[str, Any]] = {}
    documents: dict[str, bool] = {}
    reader = RecordReader(sources, schema or Schema(), fields=[])
    with Progress("contamination", total=reader.total_bytes, unit="B", quiet=quiet) as progress:
        for batch in batches(reader, BATCH):
            texts = [d.text for d in batch]
            documents.update((d.id, False) for d in batch)
            for s in sets:
                for doc, hits in zip(batch, s.hits_many(texts), strict=True):
                    _record(items, s, doc.id, hits)
                    documents[doc.id] |= bool(hits)
            progress.advance_to(reader.bytes_done)
    return {
        "ngram": n,
        "protected": [{"file": s.name, "items": s.items, "ngrams": s.ngrams} for s in sets],
        "items": list(items.values()),
        "documents": documents,
        "contaminated": sum(documents.values()),
    }


def _record(
    items: dict[tuple[str, str], dict[str, Any]],
    protected: ProtectedSet,
    doc_id: str,
    hits: list[tuple[str, str]],
) -> None:
    for item, gram in hits:
        entry = items.setdefault(
            (protected.name, item),
            {"file": protected.name, "item": item, "documents": [], "first_ngram": gram},
        )
        entry["documents"].append(doc_id)
