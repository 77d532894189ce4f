"""The corpus commands that are not dedup: the contamination report, push and query."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.batch import BATCH, batches, read_corpus
from app.client import Client
from app.progress import Progress
from app.protected import ProtectedSet, parse_protected_set
from core.stages import Doc

__all__ = ["Remote", "contamination_report", "push", "query"]


def _protected_set(path: Path, n: int) -> ProtectedSet:
    text = path.read_text(encoding="utf-8")
    return parse_protected_set(str(path), text, jsonl=path.name.lower().endswith(".jsonl"), n=n)


def contamination_report(
    inputs: Sequence[Path], protected: Sequence[Path], *, n: int = 13, quiet: bool = False
) -> dict[str, Any]:
    """Per protected item with any hit: the documents sharing an n-gram with it and the first
    shared n-gram; and per document, whether it is contaminated."""
    sets = [_protected_set(p, n) for p in protected]
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


@dataclass(frozen=True)
class Remote:
    """Where ``push`` and ``query`` send a corpus, and how."""

    url: str
    api_key: str | None = None
    batch_size: int = 1000
    retries: int = 5


def _remote_batches(
    inputs: Sequence[Path], remote: Remote, stage: str, quiet: bool
) -> Iterator[tuple[Client, list[Doc]]]:
    """The corpus a batch at a time, with a client for the service and progress per batch."""
    client = Client(
        remote.url, api_key=remote.api_key, batch_size=remote.batch_size, retries=remote.retries
    )
    with client, Progress(stage, quiet=quiet) as progress:
        for batch in batches(read_corpus(inputs), remote.batch_size):
            yield client, batch
            progress.update(len(batch))


def push(inputs: Sequence[Path], remote: Remote, *, quiet: bool = False) -> int:
    """Register every document of the inputs in a running service."""
    created = unchanged = 0
    for client, batch in _remote_batches(inputs, remote, "push", quiet):
        docs = [{"id": d.id, "text": d.text, "meta": d.meta} for d in batch]
        for result in client.register(docs):
            created += result["status"] == "created"
            unchanged += result["status"] == "unchanged"
    if not quiet:
        print(f"neardup push: created {created}, unchanged {unchanged}", file=sys.stderr)
    return 0


def query(inputs: Sequence[Path], remote: Remote, *, quiet: bool = False) -> int:
    """Print, as JSON Lines, each document's registered near duplicates (registering nothing)."""
    for client, batch in _remote_batches(inputs, remote, "query", quiet):
        found = client.query([d.text for d in batch])
        for doc, matches in zip(batch, found, strict=True):
            sys.stdout.write(json.dumps({"id": doc.id, "matches": matches}) + "\n")
    return 0
