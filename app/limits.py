"""Request limits: the body size (enforced while reading, 413 before a large body is held in
memory), and per batch its size, text lengths, estimated working memory and the batches in
flight (503 with Retry-After past MAX_INFLIGHT, instead of queueing without bound)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings
from core.errors import NeardupError

__all__ = ["BatchLimits", "BodyLimit", "Overloaded", "TooLarge"]

# Working memory of a batch, estimated from its size: the tokeniser and hashing scratch per
# character (UTF-32 codes, masks, byte buffers, 8-byte words) and the per-text arrays.
_WORK_BYTES_PER_CHAR = 48
_WORK_BYTES_PER_TEXT = 8 * 1024


class TooLarge(NeardupError):
    """A batch over MAX_BATCH, a text over MAX_TEXT_CHARS, or a batch over MAX_BATCH_MEMORY."""


class Overloaded(NeardupError):
    """More batches in flight than MAX_INFLIGHT: answered 503 with Retry-After at once."""


class BatchLimits:
    """The per-batch limits of the settings, and the count of batches in flight."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.inflight = 0

    def check_batch(self, size: int) -> None:
        """TooLarge for a batch over MAX_BATCH."""
        if size > self.settings.max_batch:
            raise TooLarge(f"a batch holds at most {self.settings.max_batch} items, got {size}")

    def check_texts(self, texts: Sequence[str]) -> None:
        """TooLarge for too many texts, a text over MAX_TEXT_CHARS, or a batch whose estimated
        working memory is over MAX_BATCH_MEMORY (refused before any work, never an OOM kill)."""
        self.check_batch(len(texts))
        limit = self.settings.max_text_chars
        total = 0
        for i, text in enumerate(texts):
            if len(text) > limit:
                raise TooLarge(f"text {i} has {len(text)} characters; the limit is {limit}")
            total += len(text)
        estimate = _WORK_BYTES_PER_CHAR * total + _WORK_BYTES_PER_TEXT * len(texts)
        if estimate > self.settings.max_batch_memory:
            raise TooLarge(
                f"the batch would need about {estimate >> 20} MiB of working memory; the limit "
                f"is {self.settings.max_batch_memory >> 20} MiB: send smaller batches"
            )

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Hold one of MAX_INFLIGHT places for a batch, or raise Overloaded at once."""
        if self.inflight >= self.settings.max_inflight:
            raise Overloaded(
                f"{self.inflight} batches are in flight (the limit is "
                f"{self.settings.max_inflight}); retry shortly"
            )
        self.inflight += 1
        try:
            yield
        finally:
            self.inflight -= 1


class BodyLimit:
    """Reject bodies over ``max_bytes``: by Content-Length up front, else while reading.

    The body is read here (it is bounded by the limit) and replayed to the app, so the app never
    sees a request it would have to abandon half-way.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: let the app see the disconnect
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                await self._reject(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send: Send) -> None:
        body = json.dumps(
            {"detail": f"the request body is over the limit of {self.max_bytes} bytes"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
            }
        )
        await send({"type": "http.response.body", "body": body})
