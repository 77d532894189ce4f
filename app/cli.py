"""``neardup``: the command line. Heavy imports happen inside the commands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="run the HTTP service (one process; see --workers)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument("--data-dir", help="where the durable store lives (default ./data)")
    serve.add_argument("--workers", type=int, help="signature processes (default: CPUs)")
    serve.add_argument("--num-perm", type=int)
    serve.add_argument("--bands", type=int)
    serve.add_argument("--threshold", type=float)
    serve.add_argument("--k", type=int)
    serve.add_argument("--seed", type=int)
    serve.add_argument("--ngram", type=int)
    serve.add_argument("--max-batch", type=int, help="items per request (default 10000)")
    serve.add_argument("--max-body-bytes", type=int, help="request body limit (default 64 MiB)")


def _serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn
    from pydantic import ValidationError

    from app.config import Settings
    from app.main import create_app

    given = {
        key: value
        for key, value in vars(args).items()
        if key not in ("command",) and value is not None
    }
    try:
        settings = Settings(**given)
    except ValidationError as exc:
        print(f"neardup serve: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    from app.service import index_params
    from app.store import ParameterMismatch, SQLiteStore

    try:  # refuse a data directory made with other index parameters before listening
        store = SQLiteStore(settings.data_dir)
        try:
            store.ensure_params(index_params(settings))
        finally:
            store.close()
    except ParameterMismatch as exc:
        print(f"neardup serve: refusing to start: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # One uvicorn process: the index lives in this process's memory, so more would split it.
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, workers=1)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neardup`` command."""
    parser = argparse.ArgumentParser(prog="neardup", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":  # spawned workers re-import this module; they must not re-run main
    sys.exit(main())
