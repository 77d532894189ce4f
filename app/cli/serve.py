"""``neardup serve``: check the settings and the store, then run one uvicorn process."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["serve"]


def _given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The settings among ``names`` that a flag gave (flags are spelled as the settings are)."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def serve(args: argparse.Namespace) -> int:
    """Run the service; 2 for settings, keys or a store it must refuse."""
    import uvicorn
    from pydantic import ValidationError

    from neardup.app.cli.protocol import timed_h11
    from neardup.app.config import Settings
    from neardup.app.main import create_app
    from neardup.app.service.access import KeysFileError
    from neardup.app.service.store import lock_settings, open_store
    from neardup.core.engine import NeardupError

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
    # Before listening, refuse a data directory that another server holds, that is damaged, or
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
        store.ensure_params(settings.params.index_params())
        settings = lock_settings(store, settings)
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
        uvicorn.run(
            app, host=settings.host, port=settings.port, workers=1,
            http=timed_h11(settings.client_timeout), timeout_keep_alive=5,
            timeout_graceful_shutdown=30, proxy_headers=True,
            forwarded_allow_ips=settings.forwarded_allow_ips,
        )  # fmt: skip
    finally:
        store.close()  # already closed by the lifespan unless it never ran
    return 0


def _one_line(exc: Any) -> str:
    """A pydantic ValidationError as ``field: why; ...`` on one line, never quoting an input
    (STORE_URL may hold a password)."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in error.get("loc", ())) or "settings"
        why = str(error.get("msg", "")).removeprefix("Value error, ")
        parts.append(f"{where}: {' '.join(why.split())}")
    return "; ".join(parts)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
