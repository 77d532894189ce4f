"""The ``neardup`` command's flags and dispatch (serve, dedup, contamination, push, query,
index).

Heavy imports happen inside the commands: a usage error and ``--help`` load neither the engine
(numpy) nor ``importlib.metadata``, ``--version`` only the latter. Exit codes: 0 done, 2 bad
input or usage (a message naming the file and line), 3 another run committed to the same
``--index`` first (rerun), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from neardup.app.cli import paths

__all__ = ["MINHASH_DEFAULTS", "build_parser", "main"]

#: ``neardup.core.engine.TOKENIZERS`` (tests hold them equal; core is not imported up front).
TOKENIZERS = ("words", "multilingual")
#: ``neardup.core.engine.RECRAWL_POLICIES``, the default first (tests hold them equal).
RECRAWL_POLICIES = ("keep-both", "keep-indexed", "replace")
_TOKENIZER_HELP = (
    "how texts are cut into words: words (\\w+ runs), or multilingual (normalized text, whole "
    "words with their marks in every script, and a word per grapheme cluster in scripts written "
    "without spaces: Chinese, Japanese, Thai, ...)"
)

_DESCRIPTION = "neardup: near-duplicate detection and decontamination for LLM training data"

_Sub = argparse._SubParsersAction  # the type argparse gives add_subparsers()


class _Version(argparse.Action):
    """``--version``: argparse's version action, the version looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings, dest, default=argparse.SUPPRESS, nargs=0,
            help="show program's version number and exit",
        )  # fmt: skip

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from neardup.app.cli.version import neardup_version

        parser._print_message(f"neardup {neardup_version()}\n", sys.stdout)
        parser.exit()


def _index_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-perm", type=int, help="signature length (default 128)")
    parser.add_argument("--bands", type=int, help="LSH bands (default 16)")
    parser.add_argument("--threshold", type=float, help="confirmation threshold (default 0.8)")
    parser.add_argument("--k", type=int, help="words per shingle (default 5)")
    parser.add_argument("--seed", type=int, help="hash-parameter seed (default 0)")
    parser.add_argument("--ngram", type=int, help="contamination n-gram length (default 13)")
    parser.add_argument(
        "--tokenizer", choices=TOKENIZERS, help=_TOKENIZER_HELP + " (default words)"
    )


def _tokenizer_flag(parser: argparse.ArgumentParser) -> None:
    """``--tokenizer`` of a batch command: unset, ``main`` takes ``NEARDUP_TOKENIZER``, else
    ``words`` (``app.config.env_tokenizer``), for every command that adds it here."""
    parser.add_argument(
        "--tokenizer", choices=TOKENIZERS,
        help=_TOKENIZER_HELP + " (default: NEARDUP_TOKENIZER, else words)",
    )  # fmt: skip
    parser.set_defaults(tokenizer_from_env=True)


def _serve_parser(sub: _Sub[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="run the HTTP service (one process)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument(
        "--allowed-hosts",
        help="Host header names served, comma-separated, '*' any (default: loopback and HOST)",
    )
    serve.add_argument(
        "--forwarded-allow-ips",
        help="proxies whose X-Forwarded-Proto is believed, comma-separated, '*' any (127.0.0.1)",
    )
    serve.add_argument("--data-dir", help="where the durable store lives (default ./data)")
    paths.index(
        serve.add_argument(
            "--index",
            help="a persistent index (directory or fsspec URL, from `neardup dedup --index`) "
            "whose documents the service also answers for, and into which it writes its own "
            "(NEARDUP_INDEX; see --flush-rows)",
        ),
        writes=True,
    )
    serve.add_argument(
        "--index-refresh",
        type=float,
        help="seconds between readings of the served index's manifest (60; 0: never)",
    )
    serve.add_argument(
        "--flush-rows",
        type=int,
        help="write the service's documents into the served index once this many are new "
        "(100000; 0: not by size; with --flush-seconds 0 too, the index is read only)",
    )
    serve.add_argument(
        "--flush-seconds",
        type=float,
        help="... and once this many seconds passed since the last flush (300; 0: not by age)",
    )
    serve.add_argument(
        "--compact-rows",
        type=int,
        help="the most rows one background compaction of the index's parts rewrites "
        "(1000000, ~750 bytes a row of memory in its process; 0: never compact)",
    )
    serve.add_argument(
        "--compact-parts",
        type=int,
        help="parts of one size tier merged into one by a background compaction (10)",
    )
    serve.add_argument(
        "--store-url", help="postgresql://USER@HOST:PORT/DB: a store shared by replicas"
    )
    serve.add_argument(
        "--store-schema", help="the PostgreSQL schema of the shared store (default public)"
    )
    serve.add_argument(
        "--store-timeout", type=float,
        help="seconds a shared-store call may take before 503 and not ready (default 10)",
    )  # fmt: skip
    serve.add_argument(
        "--log-retention-seconds", type=float,
        help="seconds the shared store keeps its log; a replica further behind reloads (3600)",
    )  # fmt: skip
    serve.add_argument("--workers", type=int, help="signature processes (default: CPUs)")
    _index_flags(serve)
    serve.add_argument("--max-batch", type=int, help="items per request (default 10000)")
    serve.add_argument("--max-body-bytes", type=int, help="request body limit (default 64 MiB)")
    serve.add_argument("--max-text-chars", type=int, help="characters per text (default 16 Mi)")
    serve.add_argument(
        "--max-json-values", type=int, help="values a JSON body may hold (default 16 Mi)"
    )
    serve.add_argument(
        "--max-json-containers", type=int,
        help="arrays and objects a JSON body may hold (default 1 Mi)",
    )  # fmt: skip
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
        "--contamination-texts-per-minute", type=int,
        help="texts a key with protect may check for contamination a minute (10000)",
    )  # fmt: skip
    serve.add_argument(
        "--contamination-words-per-minute", type=int,
        help="words other keys may check for contamination a minute, a text at least NGRAM "
        "(10000)",
    )  # fmt: skip
    # The deprecated name of --contamination-words-per-minute (taken as words, with a warning).
    serve.add_argument(
        "--contamination-ngrams-per-minute", type=int, help=argparse.SUPPRESS
    )  # fmt: skip
    serve.add_argument(
        "--max-protected-bytes", type=int, help="total size of the protected sets (128 MiB)"
    )
    paths.reads(
        serve.add_argument("--api-keys-file", help="'KEY SCOPE[,SCOPE...]' lines; default: open")
    )
    serve.add_argument(
        "--store-text",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep texts on disk for the /ui cluster pages (default: on)",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="allow a non-loopback host with no keys file"
    )


#: Core's defaults, as the batch commands show them (tests hold them to MinhashParams()).
MINHASH_DEFAULTS: dict[str, Any] = {
    "num_perm": 128, "bands": 16, "threshold": 0.8, "k": 5, "seed": 0, "ngram": 13,
    "tokenizer": "words",
}  # fmt: skip

_INPUTS_HELP = (
    "files, directories (their .jsonl, .jsonl.gz, .jsonl.zst and .parquet files; JSON Lines "
    "also as .ndjson and .json.gz), globs, '-' (standard input, JSON Lines) or fsspec URLs "
    "(s3://, gs://, hf://, ...)"
)
_PROTECTED_HELP = (
    "a protected eval set, read as items: .jsonl, .ndjson, .json (an array of objects), .csv "
    "(a header row if its cells are column names), each also .gz/.zst, .parquet; .txt is one "
    "item; a dir, glob or URL. Repeat the flag for more: --protected a.jsonl --protected b.csv"
)


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every flag's default, unless its help already says it or there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def _schema_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--id-field", default="id", help="field (dotted path) holding the id")
    parser.add_argument("--text-field", default="text", help="field (dotted path) holding the text")


def _dedup_parser(sub: _Sub[argparse.ArgumentParser]) -> None:
    dedup = sub.add_parser(
        "dedup", help="exact + near dedup and decontamination of corpus files",
        formatter_class=_Formatter,
    )  # fmt: skip
    paths.reads(dedup.add_argument("inputs", nargs="+", metavar="INPUT", help=_INPUTS_HELP))
    paths.writes(
        dedup.add_argument(
            "--output",
            help="survivors, format by name; '-': stdout (JSON Lines); no default: required "
            "unless --dry-run",
        )
    )
    paths.reads(
        dedup.add_argument(
            "--protected", action="append", default=[], metavar="FILE", help=_PROTECTED_HELP
        )
    )
    paths.writes(dedup.add_argument(
        "--removed", metavar="FILE",
        help="write every dropped row there, with why (default: not written)",
    ))  # fmt: skip
    _schema_flags(dedup)
    dedup.add_argument(
        "--id-prefix", default="none", metavar="PREFIX",
        help="'file': prefix each id with its file's name and '/'; any other text is put before "
        "every id, with {file} replaced by the file's name (e.g. 'cc-2024-10/' or "
        "'cc-2024-10/{file}/'); default none",
    )  # fmt: skip
    dedup.add_argument(
        "--keep", default="smallest-id", metavar="POLICY",
        help="which member survives: smallest-id, first, longest or max:FIELD (ties: smallest id)",
    )  # fmt: skip
    dedup.add_argument(
        "--keep-duplicates", action="store_true", help="tag duplicates with why, do not drop them"
    )
    dedup.add_argument(
        "--workers", type=int, help="signature processes (default: the CPUs, as serve)"
    )
    for name, kind, text in (
        ("num-perm", int, "signature length"), ("bands", int, "LSH bands"),
        ("threshold", float, "confirmation threshold"), ("k", int, "words per shingle"),
        ("seed", int, "hash-parameter seed"), ("ngram", int, "contamination n-gram length"),
    ):  # fmt: skip
        default = MINHASH_DEFAULTS[name.replace("-", "_")]
        dedup.add_argument(f"--{name}", type=kind, default=default, help=text)
    _tokenizer_flag(dedup)
    dedup.add_argument(
        "--decontamination", choices=["drop", "cut", "annotate"], default="drop",
        help="a contaminated row: dropped, its matches cut out (GPT-3), or annotated in meta",
    )  # fmt: skip
    dedup.add_argument(
        "--cut-window", type=int, default=200, help="cut: characters removed each side of a match"
    )
    dedup.add_argument("--min-piece", type=int, default=200, help="cut: shorter pieces are dropped")
    dedup.add_argument(
        "--max-pieces", type=int, default=10, help="cut: a row split into more is dropped"
    )
    _cap_flags(dedup)
    paths.index(dedup.add_argument(
        "--index", metavar="IDX",
        help="a persistent index (directory or URL): dedup against every document in it; in "
        "append mode add this run's survivors to it (created by the first run; default: none)",
    ), writes=True)  # fmt: skip
    dedup.add_argument(
        "--index-mode", choices=("append", "read"), default="append",
        help="append: add the survivors to --index as a new part; read: only dedup against it",
    )  # fmt: skip
    dedup.add_argument(
        "--recrawled", choices=RECRAWL_POLICIES, default=RECRAWL_POLICIES[0],
        help="a new row whose id is indexed with a text it neither equals nor near-duplicates: "
        "keep-both (keep it under ID#rev-HASH), keep-indexed (drop it) or replace (it becomes "
        "the indexed document of its id); the same or a near text is dropped as its duplicate",
    )  # fmt: skip
    paths.writes(
        dedup.add_argument(
            "--manifest", help="default: OUTPUT.manifest.json (none when OUTPUT is '-')"
        ),
        derived=_default_manifest,
    )
    dedup.add_argument("--dry-run", action="store_true", help="report the counts, write nothing")
    dedup.add_argument("--quiet", action="store_true", help="no progress on stderr")
    dedup.add_argument(
        "--engine", choices=("local", "spark"), default="local",
        help="where to run; spark takes every flag but --workers, --keep max:FIELD and the "
        "decontamination ones, see docs/spark.md",
    )  # fmt: skip
    dedup.add_argument("--spark-master", help="e.g. local[2]; default: Spark's configuration")
    dedup.set_defaults(dedup_parser=dedup)  # the Spark engine names the flags it does not take


def _default_manifest(args: argparse.Namespace) -> str | None:
    """Where dedup writes its manifest when ``--manifest`` is not given (both engines)."""
    output = str(args.output)
    return None if output == "-" else output.rstrip("/") + ".manifest.json"


def _cap_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--item-cap", type=int, metavar="N",
        help="ignore protected n-grams found in more than N items of their set (default: none)",
    )  # fmt: skip


def _contamination_parser(sub: _Sub[argparse.ArgumentParser]) -> None:
    cont = sub.add_parser(
        "contamination", help="report which eval items a corpus contains",
        formatter_class=_Formatter,
    )  # fmt: skip
    paths.reads(cont.add_argument("inputs", nargs="+", metavar="INPUT", help=_INPUTS_HELP))
    paths.reads(
        cont.add_argument(
            "--protected", action="append", required=True, metavar="FILE", help=_PROTECTED_HELP
        )
    )
    cont.add_argument("--ngram", type=int, default=13, help="n-gram length")
    _tokenizer_flag(cont)
    _cap_flags(cont)
    paths.reads(cont.add_argument(
        "--sample", action="append", default=[], metavar="FILE",
        help="a training-corpus file (repeat the flag for more) whose first --sample-size "
        "documents --sample-cap counts in",
    ))  # fmt: skip
    cont.add_argument(
        "--sample-cap", type=float, metavar="SHARE",
        help="ignore protected n-grams in more than this share of the --sample documents "
        "(default: none)",
    )  # fmt: skip
    cont.add_argument("--sample-size", type=int, default=10_000, help="documents of --sample")
    cont.add_argument(
        "--clean-below", type=float, default=0.2, help="coverage below which an item is clean"
    )
    cont.add_argument(
        "--dirty-from", type=float, default=0.8, help="coverage from which an item is dirty"
    )
    cont.add_argument("--top", type=int, default=10, help="most-matched items listed per set")
    _schema_flags(cont)
    paths.writes(cont.add_argument("--output", default="-", help="the JSON report; '-': stdout"))
    paths.writes(cont.add_argument(
        "--ids-file", metavar="PATH",
        help="every contaminated document's id and items, one JSON line each (the report "
        "lists at most 10 ids a list); default: not written",
    ))  # fmt: skip
    cont.add_argument("--quiet", action="store_true", help="no progress on stderr")


_IDX_HELP = "the index: a directory or an fsspec URL, as `neardup dedup --index` takes it"


def _index_parser(sub: _Sub[argparse.ArgumentParser]) -> None:
    index = sub.add_parser(
        "index",
        help="look at, compact, delete from or query a persistent index (`neardup dedup --index`)",
    )
    cmds = index.add_subparsers(dest="index_command", required=True, metavar="COMMAND")
    info = cmds.add_parser(
        "info", formatter_class=_Formatter,
        help="the parameters, parts (rows, bytes, the run that made each), totals and leftovers",
    )  # fmt: skip
    paths.index(info.add_argument("index", metavar="IDX", help=_IDX_HELP), writes=False)
    info.add_argument("--json", action="store_true", help="one JSON object, for machines")
    info.add_argument(
        "--limit", type=int, default=100, help="parts and leftovers listed at most (all counted)"
    )
    compact = cmds.add_parser(
        "compact", formatter_class=_Formatter,
        help="rewrite many small parts as few, atomically; remove leftovers over an hour old",
    )  # fmt: skip
    paths.index(compact.add_argument("index", metavar="IDX", help=_IDX_HELP), writes=True)
    compact.add_argument(
        "--part-rows", type=int, metavar="N",
        help="documents gathered into one part at most (default 1000000)",
    )  # fmt: skip
    compact.add_argument("--quiet", action="store_true", help="no summary on stderr")
    delete = cmds.add_parser(
        "delete", formatter_class=_Formatter,
        help="take documents out of the index by id (a deletion vector per part), atomically",
    )  # fmt: skip
    paths.index(delete.add_argument("index", metavar="IDX", help=_IDX_HELP), writes=True)
    ids_help = 'the ids: one a line, or JSON Lines objects with an "id" (never changed)'
    paths.reads(delete.add_argument("--ids", required=True, metavar="FILE", help=ids_help))
    delete.add_argument("--quiet", action="store_true", help="no summary on stderr")
    query = cmds.add_parser(
        "query", formatter_class=_Formatter,
        help="for each text of FILE..., the indexed documents it near-duplicates (JSON Lines)",
    )  # fmt: skip
    paths.index(query.add_argument("index", metavar="IDX", help=_IDX_HELP), writes=False)
    paths.reads(query.add_argument("inputs", nargs="+", metavar="FILE", help=_INPUTS_HELP))
    _schema_flags(query)
    query.add_argument(
        "--limit", type=int, default=100, help="matches listed per text at most (all counted)"
    )
    paths.writes(
        query.add_argument("--output", default="-", help="the JSON Lines answer; '-': stdout")
    )
    query.add_argument(
        "--workers", type=int, help="signature processes (default: the CPUs, as dedup)"
    )
    query.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _store_settings_parser(sub: _Sub[argparse.ArgumentParser]) -> None:
    cmd = sub.add_parser(
        "store-settings",
        help="show, or change for every replica, the answer settings a store is locked to",
    )
    cmd.add_argument("--data-dir", help="the SQLite store's directory (default ./data)")
    cmd.add_argument("--store-url", help="postgresql://USER@HOST:PORT/DB: the shared store")
    cmd.add_argument("--store-schema", help="its PostgreSQL schema (default public)")
    cmd.add_argument("--threshold", type=float, help="confirmation threshold")
    cmd.add_argument("--ngram", type=int, help="contamination n-gram length")
    cmd.add_argument("--max-matches", type=int, help="matches listed per result")


def _client_parsers(sub: _Sub[argparse.ArgumentParser]) -> None:
    commands = [
        ("push", "register a corpus in a running service"),
        ("query", "check a corpus against a running service, registering nothing"),
    ]
    for name, text in commands:
        cmd = sub.add_parser(name, help=text, formatter_class=_Formatter)
        paths.reads(cmd.add_argument("inputs", nargs="+", metavar="INPUT", help=_INPUTS_HELP))
        _schema_flags(cmd)
        cmd.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8000")
        cmd.add_argument(
            "--api-key",
            help="sent as a Bearer token (default: the environment's NEARDUP_API_KEY)",
        )
        cmd.add_argument("--batch-size", type=int, default=1000)
        cmd.add_argument("--retries", type=int, default=5, help="for 429/503/connection errors")
        cmd.add_argument("--quiet", action="store_true")
        if name == "push":
            cmd.add_argument(
                "--if-new",
                action="store_true",
                help="register only documents without a confirmed match (the others are "
                "counted as duplicate, not stored)",
            )
            cmd.add_argument(
                "--changed", choices=["error", "skip", "replace"], default="error",
                help="an id already registered with another text: 'error' stops the push "
                "(exit 2, naming the ids), 'skip' leaves the stored text, 'replace' stores the "
                "new one (PUT); the rest of its batch is registered either way",
            )  # fmt: skip


def _serve(args: argparse.Namespace) -> int:
    from neardup.app.cli.serve import serve

    return serve(args)


def _store_settings(args: argparse.Namespace) -> int:
    from neardup.app.cli.store_settings import store_settings

    return store_settings(args)


def _dedup(args: argparse.Namespace) -> int:
    if args.engine == "spark":
        from neardup.app.cli.spark import dedup_spark

        return dedup_spark(args)
    from neardup.app.cli.dedup import run_dedup
    from neardup.app.cli.options import DedupOptions, DedupParams, default_workers, id_prefix
    from neardup.core.engine import (
        DecontParams,
        KeepPolicy,
        MinhashParams,
        ParameterError,
        Schema,
        index_record_line,
    )

    if args.spark_master is not None:
        raise ParameterError("--spark-master needs --engine spark")
    if args.index is None and args.index_mode != "append":
        raise ParameterError("--index-mode needs --index")

    workers = default_workers() if args.workers is None else args.workers
    if workers < 1:
        raise ParameterError(f"--workers {workers}: give at least 1")
    params = DedupParams(
        MinhashParams(**{name: getattr(args, name) for name in MINHASH_DEFAULTS}),
        workers=workers,
        keep_duplicates=args.keep_duplicates,
        keep=KeepPolicy.parse(args.keep),
        decont=DecontParams(args.decontamination, args.cut_window, args.min_piece, args.max_pieces),
        item_cap=args.item_cap,
    )
    options = DedupOptions(
        inputs=tuple(args.inputs), output=args.output, protected=tuple(args.protected),
        removed=args.removed, manifest=args.manifest,
        schema=Schema(args.id_field, args.text_field, id_prefix=id_prefix(args.id_prefix)),
        params=params, dry_run=args.dry_run, quiet=args.quiet, command=tuple(args.command_line),
        index=args.index, index_mode=args.index_mode, recrawled=args.recrawled,
    )  # fmt: skip
    manifest = run_dedup(options)
    counts = manifest.counts
    if args.dry_run:
        report = {"dry_run": True, "counts": counts, "clusters": manifest.clusters,
                  "cluster_sizes": manifest.cluster_sizes,
                  "singletons": manifest.singletons}  # fmt: skip
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    elif not args.quiet:
        where = f" (manifest {options.manifest_target})" if options.manifest_target else ""
        print(
            f"neardup dedup: read {counts['read']}, exact-dropped {counts['exact_dropped']}, "
            f"near-dropped {counts['near_dropped']}, decontaminated {counts['decontaminated']}, "
            + (f"cut {counts['cut']} into {counts['pieces']} pieces, " if "cut" in counts else "")
            + (f"annotated {counts['annotated']}, " if "annotated" in counts else "")
            + f"wrote {counts['written']} to {args.output}{where}",
            file=sys.stderr,
        )
        if manifest.index is not None:
            print(index_record_line(manifest.index), file=sys.stderr)
    return 0


def _contamination(args: argparse.Namespace) -> int:
    from neardup.app.cli.contamination import contamination_report
    from neardup.core.engine import Schema, Thresholds, atomic_output

    schema = Schema(args.id_field, args.text_field)
    report = contamination_report(
        args.inputs, args.protected, n=args.ngram, tokenizer=args.tokenizer, schema=schema,
        quiet=args.quiet,
        item_cap=args.item_cap, sample=args.sample, sample_share=args.sample_cap,
        sample_size=args.sample_size, thresholds=Thresholds(args.clean_below, args.dirty_from),
        top=args.top, ids_file=args.ids_file, output=args.output,
    )  # fmt: skip
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    with atomic_output(args.output) as (handle, _):
        handle.write(text.encode("utf-8"))
    return 0


def _index(args: argparse.Namespace) -> int:
    from neardup.app.cli.index import index_command

    return index_command(args)


def _push_or_query(args: argparse.Namespace) -> int:
    # The client's errors are caught here, not in ``main``: other commands do not import httpx.
    from neardup.app.cli.remote import Remote, push, query
    from neardup.app.client import ClientError
    from neardup.core.engine import Schema

    run = push if args.command == "push" else query
    try:
        remote = Remote(
            args.url, args.api_key, args.batch_size, args.retries,
            getattr(args, "if_new", False), getattr(args, "changed", "error"),
        )  # fmt: skip
        schema = Schema(args.id_field, args.text_field)
        return run(args.inputs, remote, schema=schema, quiet=args.quiet)
    except ClientError as exc:
        hint = ""
        if exc.status == 409 and args.command == "push":
            hint = " (--changed skip keeps the stored texts, --changed replace stores these)"
        print(f"neardup {args.command}: error: {exc}{hint}", file=sys.stderr)
        return 2


_COMMANDS = {
    "serve": _serve,
    "store-settings": _store_settings,
    "dedup": _dedup,
    "contamination": _contamination,
    "push": _push_or_query,
    "query": _push_or_query,
    "index": _index,
}


def build_parser() -> argparse.ArgumentParser:
    """The ``neardup`` command's parser, every subcommand included."""
    parser = argparse.ArgumentParser(prog="neardup", description=_DESCRIPTION)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    _dedup_parser(sub)
    _contamination_parser(sub)
    _client_parsers(sub)
    _store_settings_parser(sub)
    _index_parser(sub)
    return parser


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (to report a usage error as argparse would)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]  # type: ignore[no-any-return]
    raise KeyError(name)


#: What a user checks when an object store's client fails before any request is answered.
_STORE_HINT = 'the object store\'s credentials and endpoint: docs/index.md, "Object storage"'


def _store_client_errors() -> tuple[type[BaseException], ...]:
    """The errors of the object stores' clients this run has imported that are not OSError:
    s3fs raises botocore's own for a store it cannot reach (a wrong ``AWS_ENDPOINT_URL``, after
    botocore's retries) or sign for (no credentials); its other failures are OSError."""
    boto = sys.modules.get("botocore.exceptions")
    return (boto.BotoCoreError,) if boto is not None else ()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neardup`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)  # a usage error exits here, no engine imported
    if args.command == "dedup" and args.output is None:
        if not args.dry_run:
            _subcommand(parser, "dedup").error(
                "the following arguments are required: --output (or --dry-run, which writes "
                "nothing)"
            )
        args.output = "-"  # a dry run writes nothing: its report goes to standard output
    from neardup.core.engine import IndexConflictError, NeardupError

    args.command_line = ["neardup", *argv]
    name = " ".join([args.command, *([args.index_command] if args.command == "index" else [])])
    try:
        if getattr(args, "tokenizer_from_env", False) and args.tokenizer is None:
            from neardup.app.config import env_tokenizer

            args.tokenizer = env_tokenizer()
        paths.guard(parser, args)  # every file flag declared in the parser, checked apart here
        return _COMMANDS[args.command](args)
    except IndexConflictError as exc:  # exit 3: "retry", apart from 2, "bad input"
        print(f"neardup {name}: error: {exc}", file=sys.stderr)
        return 3
    except NeardupError as exc:
        print(f"neardup {name}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file the run could not write (permissions, a full disk, ...)
        print(f"neardup {name}: error: {exc}", file=sys.stderr)
        return 2
    except _store_client_errors() as exc:  # an object store without credentials or endpoint
        print(f"neardup {name}: error: {exc} ({_STORE_HINT})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"neardup {name}: interrupted; no partial output left", file=sys.stderr)
        return 130
