"""The /ui pages' defences: sign-in sessions kept server-side, the origin check of the sign-in
form, and the response headers that forbid framing and anything but the pages' own resources.

The session cookie holds a random id (256 bits), never the API key: the key's scopes stay in
this process's memory under the id's SHA-256, for ``SESSION_SECONDS`` at most, and are
forgotten at sign-out or restart.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HEADERS", "SESSION_SECONDS", "SecurityHeaders", "Sessions", "same_origin"]

#: A session's lifetime: a working day, then sign in again.
SESSION_SECONDS = 8 * 3600
#: Sessions kept at most (the oldest go first), so sign-ins cannot grow memory without bound.
MAX_SESSIONS = 10_000
#: Sent with every /ui response. The pages use no script and no inline style.
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Sessions:
    """Signed-in browsers: session id -> (scopes, expiry, caller name), in memory. The caller
    name (a digest of the key, as the API names callers) keys per-caller rates."""

    def __init__(
        self,
        lifetime: float = SESSION_SECONDS,
        limit: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lifetime = lifetime
        self.limit = limit
        self._clock = clock
        self._open: dict[str, tuple[frozenset[str], float, str]] = {}

    def __len__(self) -> int:
        return len(self._open)

    def open(self, scopes: frozenset[str], name: str = "open") -> str:
        """A new session with ``scopes`` for the caller ``name``; its id, for the cookie."""
        self._prune()
        while len(self._open) >= self.limit:
            del self._open[next(iter(self._open))]  # the oldest
        token = secrets.token_urlsafe(32)
        self._open[_digest(token)] = (scopes, self._clock() + self.lifetime, name)
        return token

    def scopes(self, token: str) -> frozenset[str] | None:
        """The scopes of a live session, or None (unknown or expired)."""
        found = self._live(token)
        return None if found is None else found[0]

    def name(self, token: str) -> str | None:
        """The caller name of a live session, or None (unknown or expired)."""
        found = self._live(token)
        return None if found is None else found[2]

    def _live(self, token: str) -> tuple[frozenset[str], float, str] | None:
        found = self._open.get(_digest(token))
        if found is not None and found[1] <= self._clock():
            self.close(token)
            return None
        return found

    def close(self, token: str) -> None:
        """Forget a session (sign-out)."""
        self._open.pop(_digest(token), None)

    def _prune(self) -> None:
        now = self._clock()
        for key in [k for k, (_, expires, _) in self._open.items() if expires <= now]:
            del self._open[key]


def same_origin(request: Request) -> bool:
    """Whether a form post comes from this server's own pages: its ``Origin``, else its
    ``Referer``, names the host it was sent to. Browsers send ``Origin`` with every cross-site
    POST, so a request with neither is not a cross-site form and is let through."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    host = request.headers.get("host", "").lower()
    return bool(host) and urlsplit(source).netloc.lower() == host


class SecurityHeaders:
    """Add ``HEADERS`` to every response under ``/ui``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.headers = [(k.encode(), v.encode()) for k, v in HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not (path == "/ui" or path.startswith("/ui/")):
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        await self.app(scope, receive, sending)
