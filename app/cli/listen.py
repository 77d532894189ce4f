"""The service's listening sockets, bound before anything else starts.

``neardup serve`` binds its address first, so a port in use (or a host that is not this
machine's) is one line and exit 2 at once, not a uvicorn log line after the whole store was
recovered; the bound sockets are then handed to uvicorn, so nothing can take the port between
the check and the serving.
"""

from __future__ import annotations

import errno
import socket

__all__ = ["ListenError", "listen"]

#: The backlog uvicorn listens with by default.
BACKLOG = 2048


class ListenError(OSError):
    """The address cannot be listened on; the message names it and the setting to change."""


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound and listening on every address ``host`` resolves to (as asyncio's
    ``create_server`` binds a host: ``localhost`` is 127.0.0.1 and ::1), at ``port``.

    Raises:
        ListenError: an address cannot be bound (in use, not this machine's, a privileged
            port); the sockets bound before it are closed.
    """
    try:
        infos = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )  # fmt: skip
    except socket.gaierror as exc:
        raise ListenError(
            f"cannot listen on {_where(host, port)}: the host is unknown ({exc.strerror}); "
            "choose another with --host or NEARDUP_HOST"
        ) from None
    bound: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio: the IPv4 address gets its own socket
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise ListenError(_why(host, port, exc)) from None
            sock.listen(BACKLOG)
            sock.set_inheritable(True)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _why(host: str, port: int, exc: OSError) -> str:
    """One line: the address, what is wrong with it, and the setting that changes it."""
    where = f"cannot listen on {_where(host, port)}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{where}: the port is in use (another neardup serve, or another program); "
            "choose another with --port or NEARDUP_PORT"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"{where}: {host} is not an address of this machine; choose another with --host or "
            "NEARDUP_HOST"
        )
    if exc.errno == errno.EACCES:
        return (
            f"{where}: permission denied (ports below 1024 need privileges); choose another "
            "with --port or NEARDUP_PORT"
        )
    return f"{where}: {exc.strerror or exc}; choose another with --port or NEARDUP_PORT"
