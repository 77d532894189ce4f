"""The ``neardup`` command's flags and dispatch (serve, dedup, contamination, push, query).

Heavy imports happen inside the commands. Exit codes: 0 done, 2 bad input or usage (a message
naming the file and line), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

_DESCRIPTION = "neardup: near-duplicate detection and decontamination for LLM training data"

_Sub = argparse._SubParsersAction  # the type argparse gives add_subparsers()


def _index_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-perm", type=int, help="signature length (default 128)")
    parser.add_argument("--bands", type=int, help="LSH bands (default 16)")
    parser.add_argument("--threshold", type=float, help="confirmation threshold (default 0.8)")
    parser.add_argument("--k", type=int, help="words per shingle (default 5)")
    parser.add_argument("--seed", type=int, help="hash-parameter seed (default 0)")
    parser.add_argument("--ngram", type=int, help="contamination n-gram length (default 13)")


def _serve_parser(sub: _Sub[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="run the HTTP service (one process)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument(
        "--allowed-hosts",
        help="Host header names served, comma-separated, '*' any (default: loopback and HOST)",
    )
    serve.add_argument("--data-dir", help="where the durable store lives (default ./data)")
    serve.add_argument("--workers", type=int, help="signature processes (default: CPUs)")
    _index_flags(serve)
    serve.add_argument("--max-batch", type=int, help="items per request (default 10000)")
    serve.add_argument("--max-body-bytes", type=int, help="request body limit (default 64 MiB)")
    serve.add_argument("--max-text-chars", type=int, help="characters per text (default 16 Mi)")
    serve.add_argument("--max-inflight", type=int, help="batches in flight before 503 (8)")
    serve.add_argument(
        "--max-buffered-bytes", type=int, help="request bodies held at once before 503 (512 MiB)"
    )
    serve.add_argument(
        "--client-timeout", type=float, help="seconds for a request's headers, then its body (60)"
    )
    serve.add_argument("--max-batch-memory", type=int, help="bytes of working memory (4 GiB)")
    serve.add_argument("--max-matches", type=int, help="matches listed per result (100)")
    serve.add_argument("--max-protected-sets", type=int, help="protected sets at most (100)")
    serve.add_argument(
        "--contamination-texts-per-minute", type=int, help="per key, for /v1/contamination (10000)"
    )
    serve.add_argument(
        "--max-protected-bytes", type=int, help="total size of the protected sets (128 MiB)"
    )
    serve.add_argument("--api-keys-file", help="'KEY SCOPE[,SCOPE...]' lines; default: open")
    serve.add_argument(
        "--store-text",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep texts on disk for the /ui cluster pages (default: on)",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="allow a non-loopback host with no keys file"
    )


def _dedup_parser(sub: _Sub[argparse.ArgumentParser]) -> None:
    dedup = sub.add_parser("dedup", help="exact + near dedup and decontamination of corpus files")
    # Strings, not Paths: Path("s3a://b/x") would lose a slash of a Spark engine's URI.
    dedup.add_argument("inputs", nargs="+", metavar="INPUT")
    dedup.add_argument("--output", required=True, help="survivors (format by name)")
    dedup.add_argument("--protected", nargs="*", default=[], type=Path, metavar="FILE")
    dedup.add_argument("--workers", type=int, default=1, help="signature processes")
    _index_flags(dedup)
    dedup.add_argument("--keep-duplicates", action="store_true", help="tag without dropping")
    dedup.add_argument("--manifest", help="default: OUTPUT.manifest.json")
    dedup.add_argument("--quiet", action="store_true", help="no progress on stderr")
    dedup.add_argument(
        "--engine", choices=("local", "spark"), default="local", help="where to run (local)"
    )
    dedup.add_argument("--spark-master", help="e.g. local[2]; default: Spark's configuration")
    dedup.set_defaults(dedup_parser=dedup)  # the Spark engine names the flags it does not take


def _contamination_parser(sub: _Sub[argparse.ArgumentParser]) -> None:
    cont = sub.add_parser("contamination", help="report which eval items a corpus contains")
    cont.add_argument("inputs", nargs="+", type=Path, metavar="TEXT_FILE")
    cont.add_argument("--protected", nargs="+", required=True, type=Path, metavar="FILE")
    cont.add_argument("--ngram", type=int, default=13)
    cont.add_argument("--output", type=Path, help="the JSON report (default: stdout)")
    cont.add_argument("--quiet", action="store_true")


def _client_parsers(sub: _Sub[argparse.ArgumentParser]) -> None:
    commands = [
        ("push", "register a corpus in a running service"),
        ("query", "check a corpus against a running service, registering nothing"),
    ]
    for name, text in commands:
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("inputs", nargs="+", type=Path, metavar="INPUT")
        cmd.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8000")
        cmd.add_argument("--api-key", help="sent as a Bearer token")
        cmd.add_argument("--batch-size", type=int, default=1000)
        cmd.add_argument("--retries", type=int, default=5, help="for 429/503/connection errors")
        cmd.add_argument("--quiet", action="store_true")


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def _serve(args: argparse.Namespace) -> int:
    from app.cli.serve import serve

    return serve(args)


def _dedup(args: argparse.Namespace) -> int:
    if args.engine == "spark":
        from app.cli.spark import dedup_spark

        return dedup_spark(args)
    from app.cli.dedup import DedupParams, run_dedup
    from core.engine import MinhashParams, ParameterError

    if args.spark_master is not None:
        raise ParameterError("--spark-master needs --engine spark")

    params = DedupParams(
        MinhashParams(**_given(args, "num_perm", "bands", "threshold", "k", "seed", "ngram")),
        workers=args.workers,
        keep_duplicates=args.keep_duplicates,
    )
    output = Path(args.output)
    inputs = [Path(p) for p in args.inputs]
    manifest = run_dedup(inputs, output, protected=args.protected, params=params, quiet=args.quiet)
    path = (
        Path(args.manifest) if args.manifest else output.with_name(output.name + ".manifest.json")
    )
    path.write_text(json.dumps(manifest.as_json(), indent=2) + "\n", encoding="utf-8")
    if not args.quiet:
        counts = manifest.counts
        print(
            f"neardup dedup: read {counts['read']}, exact-dropped {counts['exact_dropped']}, "
            f"near-dropped {counts['near_dropped']}, decontaminated {counts['decontaminated']}, "
            f"wrote {counts['written']} to {output} (manifest {path})",
            file=sys.stderr,
        )
    return 0


def _contamination(args: argparse.Namespace) -> int:
    from app.cli.contamination import contamination_report

    report = contamination_report(args.inputs, args.protected, n=args.ngram, quiet=args.quiet)
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _push_or_query(args: argparse.Namespace) -> int:
    from app.cli.remote import Remote, push, query

    remote = Remote(args.url, args.api_key, args.batch_size, args.retries)
    run = push if args.command == "push" else query
    return run(args.inputs, remote, quiet=args.quiet)


_COMMANDS = {
    "serve": _serve,
    "dedup": _dedup,
    "contamination": _contamination,
    "push": _push_or_query,
    "query": _push_or_query,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neardup`` command."""
    from app.client import ClientError
    from core.engine import NeardupError

    parser = argparse.ArgumentParser(prog="neardup", description=_DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    _dedup_parser(sub)
    _contamination_parser(sub)
    _client_parsers(sub)
    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except (NeardupError, ClientError) as exc:
        print(f"neardup {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"neardup {args.command}: interrupted; no partial output left", file=sys.stderr)
        return 130
