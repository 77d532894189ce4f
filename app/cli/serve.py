"""``neardup serve``: check the settings and the store, then run one uvicorn process."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import socket
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from neardup.app.cli.listen import ListenError, listen

if TYPE_CHECKING:
    from neardup.app.config import Settings

__all__ = ["serve"]

#: The exit code of a service that failed to start (uvicorn's own).
_STARTUP_FAILURE = 3


def _given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The settings among ``names`` that a flag gave (flags are spelled as the settings are)."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def serve(args: argparse.Namespace) -> int:
    """Run the service; 2 for settings, an address, keys or a store it must refuse."""
    from pydantic import ValidationError

    from neardup.app.config import Settings

    try:
        settings = Settings(**_given(args, Settings.model_fields))
    except ValidationError as exc:
        print(f"neardup serve: invalid settings: {_one_line(exc)}", file=sys.stderr)
        return 2
    if settings.api_keys_file is None and not _loopback(settings.host) and not args.insecure:
        print(
            f"neardup serve: refusing to listen on {settings.host} with no API keys: set "
            "NEARDUP_API_KEYS_FILE, or pass --insecure to serve it open",
            file=sys.stderr,
        )
        return 2
    # The address first: a port in use is one line at once, not after recovering the store;
    # the sockets bound here are the ones uvicorn serves on (no race for the port).
    try:
        sockets = listen(settings.host, settings.port)
    except ListenError as exc:
        print(f"neardup serve: {exc}", file=sys.stderr)
        return 2
    try:
        return _serve_on(sockets, settings)
    finally:
        for sock in sockets:
            sock.close()


def _serve_on(sockets: list[socket.socket], settings: Settings) -> int:
    """Check the store, then serve on ``sockets``; 2 for keys or a store it must refuse, 3 when
    the service failed to start."""
    import uvicorn

    from neardup.app.cli.protocol import timed_h11
    from neardup.app.main import create_app
    from neardup.app.service.access import KeysFileError
    from neardup.app.service.store import lock_settings, open_store
    from neardup.core.engine import NeardupError

    # Before serving, refuse a data directory that another server holds, that is damaged, or
    # that was made with other index parameters (or a STORE_URL that cannot be reached, or was
    # made with others). The store stays open (and the directory locked) for the service.
    try:
        store = open_store(settings)
    except NeardupError as exc:
        print(f"neardup serve: refusing to start: {exc}", file=sys.stderr)
        return 2
    try:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s"
        )
        store.ensure_params(settings.params.store_params())
        settings = lock_settings(store, settings)
        _check_index(settings)
        app = create_app(settings, store)
    except KeysFileError as exc:
        store.close()
        print(f"neardup serve: {exc}", file=sys.stderr)
        return 2
    except NeardupError as exc:
        store.close()
        print(f"neardup serve: refusing to start: {exc}", file=sys.stderr)
        return 2
    try:
        # One uvicorn process: the index lives in this process's memory, so more would split it.
        # h11 with a deadline on headers; idle keep-alive connections close after 5 s; SIGTERM
        # finishes the requests in flight, but within 30 s even when busy.
        config = uvicorn.Config(
            app, host=settings.host, port=settings.port, workers=1,
            http=timed_h11(settings.client_timeout), timeout_keep_alive=5,
            timeout_graceful_shutdown=30, proxy_headers=True,
            forwarded_allow_ips=settings.forwarded_allow_ips,
        )  # fmt: skip
        server = _server_class()(config)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C: a clean stop, as uvicorn.run
            server.run(sockets=sockets)
    finally:
        store.close()  # already closed by the lifespan unless it never ran
    return 0 if server.started else _STARTUP_FAILURE


def _check_index(settings: Settings) -> None:
    """Refuse an index the service cannot serve (missing, damaged, other parameters, a part of
    the first layout) before listening: a NeardupError, one line. Reads its manifest only."""
    from neardup.app.config import redact
    from neardup.app.service.served import ServedIndex
    from neardup.core.engine import NeardupError

    url = settings.index_url
    if url is None:
        return
    try:
        ServedIndex.open(url, settings.params, create=settings.index is None)
    except NeardupError as exc:  # the URL's password, if any, is never printed
        raise NeardupError(" ".join(redact(str(exc), url).split())) from None
    except (OSError, ValueError) as exc:  # an fsspec URL it cannot open: one line all the same
        why = " ".join(redact(f"{url}: cannot open the index ({exc})", url).split())
        raise NeardupError(why) from None


def _server_class() -> type[Any]:
    """uvicorn's Server, saying where it listens once started (as it does when it binds the
    address itself, and not when handed sockets)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            for sock in sockets or []:
                logging.getLogger("uvicorn.error").info(
                    "Uvicorn running on http://%s (Press CTRL+C to quit)", _address(sock)
                )

    return Server


def _one_line(exc: Any) -> str:
    """A pydantic ValidationError as ``field: why; ...`` on one line, never quoting an input
    (STORE_URL may hold a password)."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in error.get("loc", ())) or "settings"
        why = str(error.get("msg", "")).removeprefix("Value error, ")
        parts.append(f"{where}: {' '.join(why.split())}")
    return "; ".join(parts)


def _address(sock: socket.socket) -> str:
    """``HOST:PORT`` a socket listens on (``[HOST]:PORT`` for IPv6)."""
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if sock.family == socket.AF_INET6 else f"{host}:{port}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
