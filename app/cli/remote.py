"""``neardup push`` and ``neardup query``: a corpus through the typed client of a service."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from neardup.app.cli.inputs import batches, read_corpus
from neardup.app.cli.progress import Progress
from neardup.app.client import Client
from neardup.core.engine import Doc, nan_as_null, nan_as_null_note

__all__ = ["Remote", "push", "query"]


@dataclass(frozen=True)
class Remote:
    """Where ``push`` and ``query`` send a corpus, and how."""

    url: str
    api_key: str | None = None
    batch_size: int = 1000
    retries: int = 5
    #: push registers only documents without a confirmed match (the service's ``if_new``)
    if_new: bool = False


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
    """Register every document of the inputs in a running service. A NaN or infinite float
    of a meta (a Parquet input's; JSON has no number for it) is sent as null, as ``dedup``
    writes it to JSON Lines: counted, with one warning at the end."""
    counts = Counter[str]()
    nulls = 0
    for client, batch in _remote_batches(inputs, remote, "push", quiet):
        docs = []
        for d in batch:
            meta, found = nan_as_null(d.meta)
            nulls += found
            docs.append({"id": d.id, "text": d.text, "meta": meta})
        counts.update(r["status"] for r in client.register(docs, if_new=remote.if_new))
    if nulls:
        print(f"neardup push: warning: {nan_as_null_note(nulls, sent=True)}", file=sys.stderr)
    if not quiet:
        line = f"neardup push: created {counts['created']}, unchanged {counts['unchanged']}"
        if remote.if_new:
            line += f", duplicate (not registered) {counts['duplicate']}"
        print(line, file=sys.stderr)
    return 0


def query(inputs: Sequence[Path], remote: Remote, *, quiet: bool = False) -> int:
    """Print, as JSON Lines, each document's registered near duplicates (registering nothing)."""
    for client, batch in _remote_batches(inputs, remote, "query", quiet):
        found = client.query([d.text for d in batch])
        for doc, matches in zip(batch, found, strict=True):
            sys.stdout.write(json.dumps({"id": doc.id, "matches": matches}) + "\n")
    return 0
