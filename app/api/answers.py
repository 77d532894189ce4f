"""Every ``/v1`` answer is built and serialised off the event loop, within a budget its request
sets.

The rule (docs/api.md, "Bounded answers"): the work that grows with a request, and building and
serialising its answer, never run on the event loop; and no answer is larger than a stated
function of its request, whatever is stored. Lists whose length depends on the stored data
(matches, hits, cluster members) are listed while they fit the request's ``Budget``:
``PER_REQUEST_BYTE`` bytes per byte of the request plus ``BASE_BYTES`` (their counts are always
complete, and ``truncated`` says a list was cut). What each result must say besides (an id, a
root, a status, a count) is at most ``PER_ITEM_BYTES`` per item of the request.

A route answers with ``await answer(request, build)``: ``build`` makes the response (a model, or
its plain JSON values) from the budget in a worker thread, and ``dump_json`` serialises it
there, a list item at a time (one
C call over a 50 MB answer would hold the GIL, and so the loop, however it was started).
``StrictJSONRoute`` refuses, when the app is built, a route that returns anything but a
prebuilt ``Response``: a new route cannot build its answer on the loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pydantic_core
from fastapi import Request, Response
from pydantic import BaseModel

__all__ = [
    "BASE_BYTES",
    "PER_ITEM_BYTES",
    "PER_REQUEST_BYTE",
    "Budget",
    "JSONObject",
    "answer",
    "answer_bound",
    "budget_bytes",
    "dump_json",
    "json_bytes",
    "note_request_bytes",
]

#: Bytes of listed items (matches, hits, members, n-grams) an answer may hold per request byte.
PER_REQUEST_BYTE = 8
#: ... plus this many, whatever the request (a one-text query lists its MAX_MATCHES in full).
BASE_BYTES = 1 << 20
#: The most an answer says per item of its request besides its lists (an echoed id, a cluster
#: root of up to 256 characters of 4 bytes, a status, counts, the JSON around them).
PER_ITEM_BYTES = 2304
#: Lists at least this long are serialised an item at a time (the GIL is released between).
_PIECEWISE = 64
_STATE_KEY = "request_bytes"
_T = TypeVar("_T")
#: An answer built as plain JSON values (a response model's shape): a list of many small
#: models costs ~10 us an item to build, plain dicts well under 1 us.
JSONObject = dict[str, Any]


def answer_bound(request_bytes: int, items: int = 0) -> int:
    """The most bytes an answer to a request of ``request_bytes`` bytes and ``items`` items
    (texts, documents) may hold: docs/api.md's bound of every list-bearing endpoint."""
    return BASE_BYTES + PER_REQUEST_BYTE * request_bytes + PER_ITEM_BYTES * items


class Budget:
    """Bytes an answer's lists may still take; ``truncated`` once one was cut."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.truncated = False

    def take(self, size: int) -> bool:
        """Spend ``size`` bytes if they are left (else spend nothing and mark truncated)."""
        if size > self.left:
            self.truncated = True
            return False
        self.left -= size
        return True

    def prefix(self, items: Sequence[_T], size: Callable[[_T], int]) -> list[_T]:
        """The longest prefix of ``items`` whose sizes fit, spent."""
        out: list[_T] = []
        for item in items:
            if not self.take(size(item)):
                break
            out.append(item)
        return out


def json_bytes(value: str) -> int:
    """The bytes ``value`` takes as a JSON string, at most (control characters as ``\\uXXXX``),
    plus one for the comma that follows it."""
    size = len(value.encode("utf-8", "surrogatepass")) + 3
    if value.isprintable() and '"' not in value and "\\" not in value:  # nothing escaped
        return size
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")) + 1


def note_request_bytes(request: Request, body_bytes: int) -> None:
    """Remember the request's size (its body, path and query) for its answer's ``Budget``."""
    line = len(request.scope.get("raw_path", b"")) + len(request.scope.get("query_string", b""))
    setattr(request.state, _STATE_KEY, body_bytes + line)


def budget_bytes(request: Request) -> int:
    """The bytes the lists of ``request``'s answer may take (its ``Budget``'s start)."""
    size = getattr(request.state, _STATE_KEY, None)
    if size is None:
        size = int(request.headers.get("content-length") or 0)
    return BASE_BYTES + PER_REQUEST_BYTE * size


def _budget(request: Request) -> Budget:
    return Budget(budget_bytes(request))


async def answer(
    request: Request, build: Callable[[Budget], Any], *, status_code: int = 200
) -> Response:
    """The JSON answer ``build`` makes within the request's budget (a response model, or any
    value pydantic serialises), built and serialised in a worker thread."""
    budget = _budget(request)
    body = await asyncio.to_thread(lambda: dump_json(build(budget)))
    return Response(body, status_code=status_code, media_type="application/json")


def dump_json(value: Any) -> bytes:
    """``value`` (a model, a dict, a list, anything pydantic serialises) as compact JSON, the
    items of a long list one call each: the bytes ``pydantic_core.to_json`` would give, but no
    single C call serialises more than one item of a long list (nor holds the GIL that long)."""
    if isinstance(value, BaseModel):
        value = {name: getattr(value, name) for name in type(value).model_fields}
    if isinstance(value, dict) and any(_is_long(v) for v in value.values()):
        parts = (json.dumps(k).encode("utf-8") + b":" + dump_json(v) for k, v in value.items())
        return b"{" + b",".join(parts) + b"}"
    if _is_long(value):
        return b"[" + b",".join(map(pydantic_core.to_json, value)) + b"]"
    return pydantic_core.to_json(value)


def _is_long(value: Any) -> bool:
    return isinstance(value, list) and len(value) >= _PIECEWISE
