"""The request body limit: by Content-Length up front, else while reading; 413 before a large
body is held in memory. Every byte held is reserved in the shared ``Capacity`` until the request
is answered: 503 when the bodies of all requests together would pass MAX_BUFFERED_BYTES. A body
must arrive within CLIENT_TIMEOUT seconds (408), and a request framed by both Content-Length
and Transfer-Encoding (a request-smuggling shape) is refused (400); each closes the connection.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from neardup.app.api.admission import Capacity, reject, then_answered

__all__ = ["BodyLimit"]


class _TooLarge(Exception):
    pass


class _NoRoom(Exception):
    pass


class _Held:
    """The bytes one request has reserved in the shared capacity."""

    def __init__(self, capacity: Capacity) -> None:
        self.capacity = capacity
        self.size = 0

    def grow_to(self, size: int) -> None:
        """Reserve up to ``size`` bytes in all; _NoRoom when the capacity has no room."""
        if size > self.size:
            if not self.capacity.buffer(size - self.size):
                raise _NoRoom
            self.size = size

    def release(self) -> None:
        self.capacity.release(self.size)
        self.size = 0


class BodyLimit:
    """Reject bodies over ``max_bytes``: by Content-Length up front, else while reading.

    The body is read here (it is bounded by the limit) and replayed to the app, so the app never
    sees a request it would have to abandon half-way. Its bytes stay reserved in ``capacity``
    (a declared Content-Length is reserved before reading) until the app has answered.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, capacity: Capacity, timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.capacity = capacity
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        names = {name for name, _ in scope["headers"]}
        if b"content-length" in names and b"transfer-encoding" in names:
            await reject(send, 400, "send Content-Length or Transfer-Encoding, not both")
            return
        held = _Held(self.capacity)
        try:
            try:
                async with asyncio.timeout(self.timeout):
                    body = await self._read(scope, receive, held)
            except TimeoutError:
                await reject(send, 408, f"the body did not arrive within {self.timeout:g} s")
                return
            except _TooLarge:
                detail = f"the request body is over the limit of {self.max_bytes} bytes"
                await reject(send, 413, detail)
                return
            except _NoRoom:
                detail = "too many request bodies are held at once; retry shortly"
                await reject(send, 503, detail)
                return
            if body is None:
                return  # the client went away half-way: nobody to answer
            await self.app(scope, _replay(body, receive), then_answered(send, held.release))
        finally:
            held.release()

    async def _read(self, scope: Scope, receive: Receive, held: _Held) -> bytes | None:
        """The whole body (None if the client went away), its bytes reserved in ``held``."""
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            raise _TooLarge
        held.grow_to(declared or 0)
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                raise _TooLarge
            held.grow_to(seen)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _content_length(scope: Scope) -> int | None:
    length = dict(scope["headers"]).get(b"content-length")
    return int(length) if length is not None and length.isdigit() else None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then defers to the real one."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
