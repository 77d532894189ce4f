"""Strict JSON request bodies: UTF-8 only, no NaN/Infinity, no duplicate keys, bounded depth.

FastAPI's default parsing accepts ``NaN``, silently keeps the last of duplicate keys and turns
some malformed bodies into 500s; ``StrictJSONRoute`` parses every JSON body itself first and
answers 400 (malformed) or 415 (not JSON) with a clear ``detail`` before any handler runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute

__all__ = ["StrictJSONRoute"]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in one object")
        out[key] = value
    return out


class _StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if not body.strip():
                raise HTTPException(400, "the request body is empty; send a JSON object")
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise HTTPException(
                    400, f"the body is not valid UTF-8 (byte {exc.start})"
                ) from None
            try:
                self._json = json.loads(
                    text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys
                )
            except json.JSONDecodeError as exc:
                msg = f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
                raise HTTPException(400, msg) from None
            except RecursionError:
                raise HTTPException(400, "the JSON is nested too deeply") from None
            except ValueError as exc:  # NaN/Infinity, duplicate keys, over-long integers
                raise HTTPException(400, f"invalid JSON: {exc}") from None
        return self._json


def _is_json(content_type: str) -> bool:
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return False
    charset = params.strip().lower().removeprefix("charset=").strip('"') if params else "utf-8"
    return charset in ("utf-8", "utf8")


class StrictJSONRoute(APIRoute):
    """A route whose JSON body must be ``application/json`` (UTF-8) and strictly valid."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()
        has_body = self.body_field is not None

        async def handler(request: Request) -> Response:
            strict = _StrictJSONRequest(request.scope, request.receive)
            if has_body:
                if not _is_json(strict.headers.get("content-type", "")):
                    raise HTTPException(415, "send the body as application/json (UTF-8)")
                await strict.json()  # malformed bodies fail here, as 400
            return await original(strict)

        return handler
