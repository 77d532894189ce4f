"""uvicorn's h11 protocol with a deadline on request headers.

uvicorn times out a connection only while it is idle after an answer (``timeout_keep_alive``):
a client that connects and sends nothing, or trickles its request line and headers a byte at a
time, holds the connection forever. Here the headers must all arrive within ``header_timeout``
seconds of the connection opening or of the previous answer; else the connection is closed.
(The body's own deadline is ``app.api.body_limit``'s.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

__all__ = ["timed_h11"]


class _TimedH11Protocol(H11Protocol):
    header_timeout = 60.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._expire, self.cycle)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self, armed: RequestResponseCycle | None) -> None:
        """Close the connection if no request began since arming and none is being served."""
        between = armed is None or armed.response_complete
        if self.cycle is armed and between and not self.transport.is_closing():
            self.transport.close()


def timed_h11(header_timeout: float) -> type[H11Protocol]:
    """The h11 protocol class for ``uvicorn.run(http=...)``, with ``header_timeout`` seconds."""
    attributes: dict[str, Any] = {"header_timeout": header_timeout}
    return type("TimedH11Protocol", (_TimedH11Protocol,), attributes)
