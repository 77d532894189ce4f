"""``neardup contamination``: which protected eval items a corpus contains, and where."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli.inputs import batches, read_corpus
from app.cli.progress import Progress
from core.engine import ProtectedSet, read_protected_set

__all__ = ["contamination_report"]

#: Documents per batch.
BATCH = 4096


def contamination_report(
    inputs: Sequence[Path], protected: Sequence[Path], *, n: int = 13, quiet: bool = False
) -> dict[str, Any]:
    """Per protected item with any hit: the documents sharing an n-gram with it and the first
    shared n-gram; and per document, whether it is contaminated."""
    sets = [read_protected_set(p, n) for p in protected]
    items: dict[tuple[str, str], dict[str, Any]] = {}
    documents: dict[str, bool] = {}
    with Progress("contamination", quiet=quiet) as progress:
        for batch in batches(read_corpus(inputs), BATCH):
            texts = [d.text for d in batch]
            documents.update((d.id, False) for d in batch)
            for s in sets:
                for doc, hits in zip(batch, s.hits_many(texts), strict=True):
                    _record(items, s, doc.id, hits)
                    documents[doc.id] |= bool(hits)
            progress.update(len(batch))
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
