"""Strict JSON request bodies: UTF-8 only, no NaN/Infinity (nor 1e999), no duplicate keys,
no integer longer than Python reads, bounded depth (core's ``read_json``), bounded values.

FastAPI's default parsing accepts ``NaN``, silently keeps the last of duplicate keys, turns some
malformed bodies into 500s, and validates the model on the event loop; ``StrictJSONRoute``
reads every JSON body into its route's model itself first (``app.api.json_bodies``: a piece
at a time, a batch an item at a time; off the event loop for bodies over ``THREAD_BYTES``) and
answers 400 (malformed), 413 (a batch over MAX_BATCH, counted before pydantic builds a model per
item; more values than MAX_JSON_VALUES), 415 (not JSON) or 422 with a clear ``detail`` before
any handler runs; FastAPI then takes the model as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, get_type_hints
from urllib.parse import unquote_to_bytes

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.datastructures import FormData, UploadFile

from neardup.app.api.answers import note_request_bytes
from neardup.app.api.json_bodies import BATCH_FIELDS, BodyLimits, read_body, strict_json

__all__ = [
    "BATCH_FIELDS",
    "MAX_FORM_FIELDS",
    "THREAD_BYTES",
    "OffLoopFormRoute",
    "StrictJSONRoute",
    "strict_json",
]

#: Bodies larger than this are read in a thread (well under a millisecond's work below it).
THREAD_BYTES = 64 * 1024


class _StrictJSONRequest(Request):
    """A request whose ``json()`` is its body already read into the route's model."""

    async def json(self) -> Any:
        return self._json


def _limits(request: Request) -> BodyLimits:
    settings = request.app.state.settings
    return BodyLimits(settings.max_batch, settings.max_json_values, settings.max_json_containers)


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
        model = _body_model(self)

        async def handler(request: Request) -> Response:
            strict = _StrictJSONRequest(request.scope, request.receive)
            size = int(request.headers.get("content-length") or 0)
            if model is not None:
                if not _is_json(strict.headers.get("content-type", "")):
                    raise HTTPException(415, "send the body as application/json (UTF-8)")
                body = await strict.body()
                limits = _limits(request)
                if len(body) > THREAD_BYTES:  # malformed bodies fail here, as 400, 413 or 422
                    strict._json = await asyncio.to_thread(read_body, body, model, limits)
                else:
                    strict._json = read_body(body, model, limits)
                size = len(body)
            note_request_bytes(strict, size)
            return await original(strict)

        return handler


def _body_model(route: APIRoute) -> type[BaseModel] | None:
    """The model of ``route``'s JSON body (None without one); TypeError for a body that is not
    one pydantic model (it could not be read and validated off the event loop)."""
    params = route.dependant.body_params
    if not params:
        return None
    model = params[0].field_info.annotation
    if len(params) > 1 or not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"route {route.path!r}: take the JSON body as ONE pydantic model")
    return model


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
