"""Protected-set uploads, as ``PUT /v1/protected-sets/{name}`` and the ``/ui/protected-sets``
page take them: the file's bytes and how to read them, then stored by the service.

How a file is read: the caller's ``format`` when given; else the raw body's content type; else
a multipart ``file``'s name (``.jsonl``, ``.ndjson``, ``.json``, ``.csv``, ``.txt``,
``.parquet``), or plain text for a form field without one (Swagger's text box, before it had a
file picker). A text read as ONE plain text only because nothing said otherwise (``text/plain``,
a text field, a ``.txt`` name) that is plainly JSON Lines, a JSON array or CSV is refused
(422 naming the items it holds): stored, it would be one item. ``format=text`` stores it as one
text anyway. Parquet is read into the JSON Lines of its rows, as a JSON array or CSV is.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import Literal

from fastapi import HTTPException, Request
from starlette.datastructures import UploadFile

from neardup.app.service import Service, json_limits
from neardup.core.engine import (
    JSONBudget,
    ProtectedFormat,
    ProtectedSet,
    parquet_as_jsonl,
    plain_text_shape,
    utf8_error,
)

__all__ = [
    "RAW_TYPES",
    "UPLOAD_FORMATS",
    "Upload",
    "UploadFormat",
    "form_upload",
    "read_upload",
    "store_upload",
    "upload_format",
]

#: How the caller may say a file is to be read (``?format=``).
UploadFormat = Literal["jsonl", "json", "csv", "text", "parquet"]
UPLOAD_FORMATS: tuple[UploadFormat, ...] = ("jsonl", "json", "csv", "text", "parquet")
#: Raw bodies by content type: how each is read.
RAW_TYPES: dict[str, UploadFormat] = {
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/json": "json",
    "text/csv": "csv",
    "text/plain": "text",
    "application/vnd.apache.parquet": "parquet",
    "application/x-parquet": "parquet",
}
#: Multipart files by name ending.
_ENDINGS: dict[str, UploadFormat] = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".txt": "text",
    ".parquet": "parquet",
}  # fmt: skip
#: What a refused plain text is told to send it as: (content type, file name ending).
_SEND_AS = {
    ProtectedFormat.JSONL: ("application/x-ndjson", ".jsonl"),
    ProtectedFormat.JSON: ("application/json", ".json"),
    ProtectedFormat.CSV: ("text/csv", ".csv"),
}


@dataclass(frozen=True)
class Upload:
    """An uploaded file's bytes; how they are read; whether the caller named that format."""

    raw: bytes
    format: UploadFormat
    chosen: bool


def upload_format(filename: str) -> UploadFormat:
    """How a multipart file is read, by its name; 415 for a name that cannot be read as items."""
    name = filename.lower()
    for ending, fmt in _ENDINGS.items():
        if name.endswith(ending):
            return fmt
    raise HTTPException(
        415, f"{filename}: cannot read this file as protected items: name it by its format, one "
        f"of {', '.join(_ENDINGS)} (.txt is one item), or say how to read it: format=...",
    )  # fmt: skip


async def read_upload(request: Request, chosen: UploadFormat | None) -> Upload:
    """The uploaded file (raw, or multipart field ``file``) and how to read it (the module
    says); 415 for a body whose format nothing tells, 422 for a form without ``file``."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "multipart/form-data":
        async with request.form() as form:  # closes the files it spooled
            return await form_upload(form.get("file"), chosen)
    if content_type in RAW_TYPES or chosen is not None:
        return _chosen(await request.body(), RAW_TYPES.get(content_type, "text"), chosen)
    raise HTTPException(
        415,
        f"send the file as {', '.join(sorted(RAW_TYPES))}, or multipart/form-data with a "
        "field 'file'; or say how to read it: format=jsonl, json, csv, text or parquet",
    )


async def form_upload(upload: str | UploadFile | None, chosen: UploadFormat | None) -> Upload:
    """A form's ``file`` field (a file, or a text field: the text itself) and how to read it;
    422 without one, 415 for a file whose name cannot be read as items."""
    if isinstance(upload, str):
        return _chosen(upload.encode("utf-8", "surrogatepass"), "text", chosen)
    if not isinstance(upload, UploadFile):
        raise HTTPException(422, "the multipart body needs a file field named 'file'")
    raw = await upload.read()
    if chosen is not None or not upload.filename:
        return _chosen(raw, "text", chosen)
    return Upload(raw, upload_format(upload.filename), False)


def _chosen(raw: bytes, implied: UploadFormat, chosen: UploadFormat | None) -> Upload:
    return Upload(raw, chosen or implied, chosen is not None)


async def store_upload(
    service: Service, name: str, upload: Upload, *, allow_no_ngrams: bool = False
) -> ProtectedSet:
    """Store ``upload`` as protected set ``name`` (read off the event loop); HTTPException
    (400: not UTF-8; 422: empty, or plainly items sent as one text) or the service's errors
    (TooLarge, 413: its JSON over MAX_JSON_VALUES or MAX_JSON_CONTAINERS, here too)."""
    with json_limits("the protected set"):
        text, fmt = await asyncio.to_thread(_as_text, name, upload, service.json_budget())
    return await service.put_protected_set(name, text, fmt, allow_no_ngrams=allow_no_ngrams)


def _as_text(name: str, upload: Upload, budget: JSONBudget) -> tuple[str, ProtectedFormat]:
    if upload.format == "parquet":
        text, fmt = parquet_as_jsonl(name, upload.raw), ProtectedFormat.JSONL
    else:
        try:
            text = upload.raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Its line and byte, as the CLI names a protected file's (an error path only).
            raise HTTPException(400, str(utf8_error(name, io.BytesIO(upload.raw), exc))) from None
        fmt = ProtectedFormat(upload.format)
    if not text.strip():
        raise HTTPException(422, "the protected set is empty")
    if fmt is ProtectedFormat.TEXT and not upload.chosen:
        _refuse_plain_items(name, text, budget)
    return text, fmt


def _refuse_plain_items(name: str, text: str, budget: JSONBudget) -> None:
    """422 if ``text``, sent as one plain text, is plainly items (CorpusError for a bad line
    of what is plainly JSON Lines; JSONError past ``budget``)."""
    shape = plain_text_shape(name, text, budget)
    if shape is None:
        return
    media, ending = _SEND_AS[shape.format]
    raise HTTPException(
        422,
        f"this looks like {shape.kind} with {shape.items} item(s), sent as one plain text (it "
        f"would be stored as ONE item): send it as a file named {ending} (in /docs: choose it "
        f"with the file picker) or as {media}, or set format={shape.format.value}; to store it "
        "as one text, set format=text",
    )
