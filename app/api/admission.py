"""Admission before any body is read: at most MAX_INFLIGHT heavy requests (POST, PUT and PATCH
under ``/v1``, and the ``/ui`` pages' forms) at once, and at most MAX_BUFFERED_BYTES of request
bodies held across all requests. Past either, 503 with ``Retry-After`` at once, so overload
costs the server almost nothing (shedding after reading and parsing cut successful writes
tenfold at 128 clients).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Admission", "Capacity", "reject", "then_answered"]

_HEAVY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class Capacity:
    """The shared counts: heavy requests admitted, and bytes of bodies buffered.

    ``on_shed(reason)`` is called for every request refused for lack of capacity.
    """

    def __init__(
        self,
        max_inflight: int,
        max_buffered_bytes: int,
        on_shed: Callable[[str], None] | None = None,
    ) -> None:
        self.max_inflight = max_inflight
        self.max_buffered_bytes = max_buffered_bytes
        self.admitted = 0
        self.buffered = 0
        self.shed = 0
        self._on_shed = on_shed

    def enter(self) -> bool:
        """Take one of the MAX_INFLIGHT places; False (and counted as shed) when none is free."""
        if self.admitted >= self.max_inflight:
            self._count_shed("inflight")
            return False
        self.admitted += 1
        return True

    def leave(self) -> None:
        """Give back a place taken by ``enter``."""
        self.admitted -= 1

    def buffer(self, size: int) -> bool:
        """Reserve ``size`` bytes of body; False (and counted as shed) when over the budget."""
        if self.buffered + size > self.max_buffered_bytes:
            self._count_shed("buffered_bytes")
            return False
        self.buffered += size
        return True

    def release(self, size: int) -> None:
        """Give back bytes reserved by ``buffer``."""
        self.buffered -= size

    def stats(self) -> dict[str, int]:
        """``admitted`` (heavy requests reading, parsing or being served), ``buffered_bytes``
        and ``shed`` (refused for capacity since the start), for /v1/stats and /metrics."""
        return {"admitted": self.admitted, "buffered_bytes": self.buffered, "shed": self.shed}

    def _count_shed(self, reason: str) -> None:
        self.shed += 1
        if self._on_shed is not None:
            self._on_shed(reason)


class Admission:
    """Admit heavy requests into ``capacity`` before their bodies are read, or 503 at once."""

    def __init__(self, app: ASGIApp, capacity: Capacity) -> None:
        self.app = app
        self.capacity = capacity

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _heavy(scope):
            await self.app(scope, receive, send)
            return
        if not self.capacity.enter():
            limit = self.capacity.max_inflight
            await reject(send, 503, f"{limit} requests are in flight (the limit); retry shortly")
            return
        leave = _once(self.capacity.leave)
        try:
            await self.app(scope, receive, then_answered(send, leave))
        finally:
            leave()


def _heavy(scope: Scope) -> bool:
    return (
        scope["type"] == "http"
        and scope["method"] in _HEAVY_METHODS
        and str(scope["path"]).startswith(("/v1/", "/ui/"))
    )


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done = False

    def run() -> None:
        nonlocal done
        if not done:
            done = True
            action()

    return run


def then_answered(send: Send, action: Callable[[], None]) -> Send:
    """``send`` that runs ``action`` just before the response's last body message goes out: a
    client sending its next request on receiving the answer finds the capacity given back."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            action()
        await send(message)

    return sending


async def reject(send: Send, status: int, detail: str) -> None:
    """Answer ``{"detail": ...}`` with ``status`` and close the connection (the body may be
    unread); a 503 says ``Retry-After: 1``."""
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    if status == 503:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"detail": detail}).encode()})
