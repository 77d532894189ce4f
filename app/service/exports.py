"""Downloads: a cluster's members and a contamination report, as JSON Lines or CSV.

JSON Lines: one JSON object a line, UTF-8. CSV (RFC 4180): a header row, then one row a record,
lines ended by CRLF; a field holding a comma, a quote, a CR or an LF is quoted, its quotes
doubled; UTF-8 without a byte-order mark; a list or an object in a cell is its JSON; a missing
value is an empty cell. Values are written as they are (a text starting with ``=`` stays so).

A cluster's members are streamed, EXPORT_CHUNK at a time, each chunk's texts read from the store
and encoded off the event loop; a report is as large as the request that made it.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neardup.app.service.operations import Service
from neardup.app.service.views import cluster_rows

__all__ = [
    "EXPORT_CHUNK",
    "FORMATS",
    "MEMBER_COLUMNS",
    "REPORT_COLUMNS",
    "ClusterExport",
    "cluster_export",
    "encode",
    "report_records",
]

#: name -> (media type, file extension)
FORMATS: dict[str, tuple[str, str]] = {
    "jsonl": ("application/x-ndjson", "jsonl"),
    "csv": ("text/csv; charset=utf-8", "csv"),
}
#: Members whose texts are read and encoded at a time.
EXPORT_CHUNK = 512
#: A member's record: its id, its cluster's root, its estimate to the root, the smallest id with
#: exactly its text when that is another one (an exact copy), and its stored text (null when
#: texts are not stored).
MEMBER_COLUMNS = ("id", "cluster", "estimate", "copy_of", "text")
#: The report's records, one table: ``record`` says which kind each is (``report``: the totals
#: and settings, once; ``set``: one per protected set; ``item``: one per matched item); a kind's
#: JSON Lines object holds its own fields only.
REPORT_COLUMNS = (
    "record", "set", "item", "documents", "contaminated", "items", "items_matched", "ngrams",
    "ngrams_found", "share_found", "coverage", "subsets", "clean", "not clean", "not dirty",
    "dirty", "capped_ngrams", "capped_list", "document_ids", "first_ngram", "ngram", "item_cap",
    "clean_below", "dirty_from",
)  # fmt: skip


def report_records(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A contamination report (the ``report`` of ``POST /v1/decontamination``, as the service
    answers it) as flat records: the totals, then each set, then each matched item.

    The one place the export reads the report's fields; the n-grams in it are those the caller
    may see (null without the protect scope), as in the API's answer."""
    thresholds = report["thresholds"]
    out: list[dict[str, Any]] = [{
        "record": "report", "documents": report["documents"],
        "contaminated": report["contaminated"], "ngram": report["ngram"],
        "item_cap": report["item_cap"], "clean_below": thresholds["clean_below"],
        "dirty_from": thresholds["dirty_from"],
    }]  # fmt: skip
    for s in report["sets"]:
        out.append({
            "record": "set", "set": s["set"], "items": s["items"], "ngrams": s["ngrams"],
            "documents": s["documents"], "items_matched": s["items_matched"], **s["subsets"],
            "capped_ngrams": s["capped"]["ngrams"], "capped_list": s["capped"]["list"],
        })  # fmt: skip
    for i in report["items"]:
        out.append({
            "record": "item", "set": i["set"], "item": i["item"], "documents": i["documents"],
            "document_ids": i["document_ids"], "first_ngram": i["first_ngram"],
            "ngrams": i["ngrams"], "ngrams_found": i["ngrams_found"],
            "share_found": i["share_found"], "coverage": i["coverage"], "subsets": i["subsets"],
        })  # fmt: skip
    return out


def encode(
    records: Sequence[Mapping[str, Any]], fmt: str, columns: Sequence[str], header: bool = True
) -> bytes:
    """``records`` in ``fmt`` (a FORMATS name) as UTF-8; CSV with ``columns`` (a header row
    first when ``header``)."""
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    if fmt != "csv":
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    if header:
        writer.writerow(columns)
    for r in records:
        writer.writerow([_cell(r.get(c)) for c in columns])
    return buffer.getvalue().encode("utf-8")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


@dataclass(frozen=True)
class ClusterExport:
    """A cluster's members as a download: how many rows, and the body's chunks."""

    root: str
    rows: int
    body: AsyncIterator[bytes]


async def cluster_export(service: Service, root: str, fmt: str) -> ClusterExport:
    """Every member of the cluster rooted at ``root`` (NotFound if it is not a root), in its
    pages' order (the root first, then by estimate to the root, lowest first), as ``fmt``.
    The members are those of the moment it is asked; one deleted meanwhile keeps its row, with
    no text."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    groups, estimates = await cluster_rows(service, root)
    rows = await asyncio.to_thread(_member_rows, root, groups, estimates)
    return ClusterExport(root, len(rows), _member_chunks(service, rows, fmt))


def _member_rows(
    root: str, groups: list[list[str]], estimates: list[float]
) -> list[dict[str, Any]]:
    return [
        {"id": i, "cluster": root, "estimate": e, "copy_of": g[0] if i != g[0] else None}
        for g, e in zip(groups, estimates, strict=True)
        for i in g
    ]


async def _member_chunks(
    service: Service, rows: list[dict[str, Any]], fmt: str
) -> AsyncIterator[bytes]:
    if fmt == "csv":
        yield encode([], fmt, MEMBER_COLUMNS)
    for lo in range(0, len(rows), EXPORT_CHUNK):
        chunk = rows[lo : lo + EXPORT_CHUNK]
        texts = await service.texts([r["id"] for r in chunk])
        records = [{**r, "text": texts.get(r["id"])} for r in chunk]
        yield await asyncio.to_thread(encode, records, fmt, MEMBER_COLUMNS, False)
