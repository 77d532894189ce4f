"""``neardup push`` and ``neardup query``: a corpus through the typed client of a service."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from neardup.app.cli.inputs import batches
from neardup.app.cli.progress import Progress
from neardup.app.client import Changed, Client
from neardup.core.engine import (
    CorpusError,
    Record,
    RecordReader,
    Schema,
    expand_inputs,
    nan_as_null,
    nan_as_null_note,
)

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
    #: push: what to do with an id registered with another text (``Client.register``)
    changed: Changed = "error"


def _remote_batches(
    inputs: Sequence[str], schema: Schema, remote: Remote, stage: str, quiet: bool
) -> Iterator[tuple[Client, list[Record]]]:
    """The corpus (files, directories, globs, URLs, as ``dedup`` reads them) a batch at a
    time, with a client for the service and progress by bytes read."""
    reader = RecordReader(expand_inputs(inputs), schema)
    client = Client(
        remote.url, api_key=remote.api_key, batch_size=remote.batch_size, retries=remote.retries
    )
    progress = Progress(stage, total=reader.total_bytes, unit="B", quiet=quiet)
    with client, progress:
        for batch in batches(reader, remote.batch_size):
            yield client, batch
            progress.advance_to(reader.bytes_done)


def _meta(record: Record) -> dict[str, Any]:
    """The row's ``meta`` object (absent or null: empty), as the service stores it."""
    meta = record.row.get("meta")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise CorpusError(record.name, record.line, "'meta' must be an object when present")
    return meta


def push(
    inputs: Sequence[str], remote: Remote, *, schema: Schema | None = None, quiet: bool = False
) -> int:
    """Register every document of the inputs in a running service. A NaN or infinite float
    of a meta (a Parquet input's; JSON has no number for it) is sent as null, as ``dedup``
    writes it to JSON Lines: counted, with one warning at the end."""
    counts = Counter[str]()
    nulls = 0
    for client, batch in _remote_batches(inputs, schema or Schema(), remote, "push", quiet):
        docs = []
        for r in batch:
            meta, found = nan_as_null(_meta(r))
            nulls += found
            docs.append({"id": r.id, "text": r.text, "meta": meta})
        results = client.register(docs, if_new=remote.if_new, changed=remote.changed)
        counts.update(r["status"] for r in results)
    if nulls:
        print(f"neardup push: warning: {nan_as_null_note(nulls, sent=True)}", file=sys.stderr)
    if not quiet:
        line = f"neardup push: created {counts['created']}, unchanged {counts['unchanged']}"
        if remote.if_new:
            line += f", duplicate (not registered) {counts['duplicate']}"
        if remote.changed == "skip":
            line += f", skipped (registered with another text) {counts['skipped']}"
        if remote.changed == "replace":
            line += f", replaced {counts['replaced']}"
        print(line, file=sys.stderr)
    return 0


def query(
    inputs: Sequence[str], remote: Remote, *, schema: Schema | None = None, quiet: bool = False
) -> int:
    """Print, as JSON Lines, each document's registered near duplicates (registering nothing):
    ``{"id", "match_count", "matches"}``, as ``neardup index query`` writes them."""
    for client, batch in _remote_batches(inputs, schema or Schema(), remote, "query", quiet):
        found = client.query_results([r.text for r in batch])
        for record, result in zip(batch, found, strict=True):
            line = {"id": record.id, "match_count": result["match_count"]}
            sys.stdout.write(json.dumps(line | {"matches": result["matches"]}) + "\n")
    return 0
