"""``neardup serve``: check the settings and the store, then run one uvicorn process."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from typing import Any

__all__ = ["serve"]

_SETTINGS = ("host", "port", "allowed_hosts", "data_dir", "workers", "num_perm", "bands",
             "threshold", "k", "seed", "ngram", "max_batch", "max_body_bytes", "max_text_chars",
             "max_inflight", "max_buffered_bytes", "client_timeout", "max_batch_memory",
             "api_keys_file", "store_text")  # fmt: skip


def _given(args: argparse.Namespace) -> dict[str, Any]:
    return {n: getattr(args, n) for n in _SETTINGS if getattr(args, n, None) is not None}


def serve(args: argparse.Namespace) -> int:
    """Run the service; 2 for settings, keys or a store it must refuse."""
    import uvicorn
    from pydantic import ValidationError

    from app.cli.protocol import timed_h11
    from app.config import Settings
    from app.main import create_app
    from app.service import ParameterMismatch
    from app.service.access import KeysFileError
    from app.service.store import SQLiteStore

    try:
        settings = Settings(**_given(args))
    except ValidationError as exc:
        print(f"neardup serve: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    if settings.api_keys_file is None and not _loopback(settings.host) and not args.insecure:
        print(
            f"neardup serve: refusing to listen on {settings.host} with no API keys: set "
            "NEARDUP_API_KEYS_FILE, or pass --insecure to serve it open",
            file=sys.stderr,
        )
        return 2
    try:  # refuse a data directory made with other index parameters before listening
        store = SQLiteStore(settings.data_dir)
        try:
            store.ensure_params(settings.params.index_params())
        finally:
            store.close()
    except ParameterMismatch as exc:
        print(f"neardup serve: refusing to start: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        app = create_app(settings)
    except KeysFileError as exc:
        print(f"neardup serve: {exc}", file=sys.stderr)
        return 2
    # One uvicorn process: the index lives in this process's memory, so more would split it.
    # h11 with a deadline on headers; idle keep-alive connections close after 5 s.
    uvicorn.run(
        app, host=settings.host, port=settings.port, workers=1,
        http=timed_h11(settings.client_timeout), timeout_keep_alive=5,
    )  # fmt: skip
    return 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
