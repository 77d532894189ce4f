"""Strict JSON request bodies: UTF-8 only, no NaN/Infinity (nor 1e999), no duplicate keys,
no integer longer than Python reads, bounded depth (core's ``read_json``).

FastAPI's default parsing accepts ``NaN``, silently keeps the last of duplicate keys and turns
some malformed bodies into 500s; ``StrictJSONRoute`` parses every JSON body itself first and
answers 400 (malformed), 415 (not JSON) or 413 (a batch over MAX_BATCH, counted before pydantic
builds a model per item) with a clear ``detail`` before any handler runs. Bodies over
``THREAD_BYTES`` are decoded and parsed off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, get_type_hints
from urllib.parse import unquote_to_bytes

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from starlette.datastructures import FormData, UploadFile

from neardup.app.api.answers import note_request_bytes
from neardup.core.engine import JSONError, read_json

__all__ = [
    "BATCH_FIELDS",
    "MAX_FORM_FIELDS",
    "THREAD_BYTES",
    "OffLoopFormRoute",
    "StrictJSONRoute",
    "strict_json",
]

#: The top-level lists that are batches: at most MAX_BATCH items.
BATCH_FIELDS = ("documents", "texts")
#: Bodies larger than this are parsed in a thread (a 30 MB body takes seconds to parse).
THREAD_BYTES = 256 * 1024


def strict_json(text: str) -> Any:
    """The JSON value of ``text``, strictly (core's ``read_json``: no NaN, Infinity or number
    beyond a float's range, no integer longer than Python reads, at most MAX_JSON_DEPTH levels,
    no duplicate key); JSONError saying what and where."""
    return read_json(text, finite=True, unique_keys=True)


def _parse(body: bytes) -> Any:
    """The JSON value of ``body``; HTTPException 400 naming what is wrong with it."""
    if not body.strip():
        raise HTTPException(400, "the request body is empty; send a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(400, f"the body is not valid UTF-8 (byte {exc.start})") from None
    try:
        return strict_json(text)
    except JSONError as exc:  # bad syntax, NaN/Infinity, 1e999, duplicate keys, long integers
        where = f" at line {exc.line} column {exc.column}" if exc.kind == "syntax" else ""
        raise HTTPException(400, f"invalid JSON{where}: {exc.reason}") from None


def _check_batch(value: Any, max_batch: int) -> None:
    """413 for a batch field holding over ``max_batch`` items."""
    if not isinstance(value, dict):
        return
    for field in BATCH_FIELDS:
        items = value.get(field)
        if isinstance(items, list) and len(items) > max_batch:
            raise HTTPException(
                413, f"a batch holds at most {max_batch} items, got {len(items)} in '{field}'"
            )


class _StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if len(body) > THREAD_BYTES:
                self._json = await asyncio.to_thread(_parse, body)
            else:
                self._json = _parse(body)
        return self._json


def _is_json(content_type: str) -> bool:
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return False
    charset = params.strip().lower().removeprefix("charset=").strip('"') if params else "utf-8"
    return charset in ("utf-8", "utf8")


class StrictJSONRoute(APIRoute):
    """A route whose JSON body must be ``application/json`` (UTF-8) and strictly valid, and
    whose endpoint returns a prebuilt ``Response`` (``app.api.answers.answer``: built and
    serialised off the event loop, within the request's budget); any other return type is a
    TypeError when the app is built. The request's size is noted for its answer's budget."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        returns = get_type_hints(endpoint).get("return")
        if not (isinstance(returns, type) and issubclass(returns, Response)):
            raise TypeError(
                f"route {path!r} ({endpoint.__name__}) returns {returns!r}: return "
                "`await answer(request, build)` (app.api.answers) and declare response_model"
            )
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()
        has_body = self.body_field is not None

        async def handler(request: Request) -> Response:
            strict = _StrictJSONRequest(request.scope, request.receive)
            size = int(request.headers.get("content-length") or 0)
            if has_body:
                if not _is_json(strict.headers.get("content-type", "")):
                    raise HTTPException(415, "send the body as application/json (UTF-8)")
                body = await strict.json()  # malformed bodies fail here, as 400
                _check_batch(body, request.app.state.settings.max_batch)
                size = len(await strict.body())
            note_request_bytes(strict, size)
            return await original(strict)

        return handler


#: The most fields a posted form may hold (Starlette's own limit).
MAX_FORM_FIELDS = 1000
_FORM_TYPE = "application/x-www-form-urlencoded"


class OffLoopFormRoute(APIRoute):
    """A route whose URL-encoded form is parsed off the event loop.

    Starlette parses a form on the loop as it streams in: a pasted 40 MB form held it for 14 to
    21 s. Here the body is read, parsed in a thread, and left where Starlette keeps the parsed
    form, so that FastAPI's ``Form()`` parameters read it from there.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind == _FORM_TYPE:
                body = await request.body()
                try:
                    pairs = await asyncio.to_thread(_form_fields, body)
                except ValueError as exc:
                    raise HTTPException(400, f"the form cannot be read: {exc}") from None
                request._form = FormData(pairs)  # where Request.form() keeps what it parsed
            return await original(request)

        return handler


def _form_fields(body: bytes) -> list[tuple[str, str | UploadFile]]:
    """The fields of a URL-encoded form: ``+`` a space, percent escapes and the rest as UTF-8
    (undecodable bytes replaced), blank values kept; ValueError past MAX_FORM_FIELDS.

    Unescaped a slice at a time: one C call over a 40 MB field (``urllib.parse.unquote``'s)
    would hold the GIL, and so the event loop, for seconds, thread or not.
    """
    fields: list[tuple[str, str | UploadFile]] = []
    for pair in body.split(b"&"):
        if not pair:
            continue
        if len(fields) == MAX_FORM_FIELDS:
            raise ValueError(f"more than {MAX_FORM_FIELDS} fields")
        name, _, value = pair.partition(b"=")
        fields.append((_unescaped(name), _unescaped(value)))
    return fields


#: Bytes of a form field unescaped at a time (well under a millisecond each).
_SLICE = 1 << 16


def _unescaped(raw: bytes) -> str:
    raw = raw.replace(b"+", b" ")
    if b"%" not in raw:
        return raw.decode("utf-8", "replace")
    parts, start = [], 0
    while start < len(raw):
        end = min(start + _SLICE, len(raw))
        cut = raw.rfind(b"%", max(start, end - 2), end)  # never split a %XX escape
        if cut > start and end < len(raw):
            end = cut
        parts.append(unquote_to_bytes(raw[start:end]))
        start = end
    return b"".join(parts).decode("utf-8", "replace")
