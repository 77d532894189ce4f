"""``neardup dedup --engine spark``: the flags checked, then the run handed to ``app.spark``."""

from __future__ import annotations

import argparse

from neardup.core.engine import KeepPolicy, MinhashParams, ParameterError, Schema

__all__ = ["SPARK_FLAGS", "dedup_spark"]

#: The dedup flags (by argparse dest) the Spark engine takes; any other given is an error.
SPARK_FLAGS = frozenset(
    {
        "command", "inputs", "output", "protected", "num_perm", "bands", "threshold", "k",
        "seed", "ngram", "tokenizer", "manifest", "quiet", "engine", "spark_master",
        "keep_duplicates", "dedup_parser", "index", "index_mode", "removed", "id_field",
        "text_field", "id_prefix", "dry_run", "keep", "recrawled",
    }
)  # fmt: skip
#: Why a flag the Spark engine refuses is refused, by argparse dest (default: not on Spark).
_WHY = {
    "workers": "Spark's executors and cores decide the parallelism",
}


def _unsupported(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(option strings, dest) of the flags given (not at their default) Spark does not take."""
    parser: argparse.ArgumentParser = args.dedup_parser
    named = []
    for action in parser._actions:
        if action.dest in SPARK_FLAGS or action.dest == argparse.SUPPRESS:
            continue
        if getattr(args, action.dest, action.default) != action.default:
            named.append(("/".join(action.option_strings) or action.dest, action.dest))
    return named


def dedup_spark(args: argparse.Namespace) -> int:
    """Check the flags, run on Spark (exit 0), or raise ParameterError naming what is wrong.
    Every check here runs before any JVM starts."""
    unsupported = _unsupported(args)
    if unsupported:
        why = "; ".join(
            _WHY.get(dest, f"{flag} runs on --engine local only") for flag, dest in unsupported
        )
        raise ParameterError(
            f"--engine spark does not take {', '.join(f for f, _ in unsupported)}: {why} "
            "(see docs/spark.md)"
        )
    from neardup.app.spark.corpus import dry_format
    from neardup.app.spark.job import check_formats, check_keep

    # An output over an input was named first, whatever else is wrong: the CLI's guard.
    output = str(args.output)
    check_formats(dry_format(output, args.dry_run), args.keep_duplicates, args.removed)
    keep = str(KeepPolicy.parse(args.keep))
    check_keep(keep, args.index)
    if args.index is None and args.index_mode != "append":
        raise ParameterError("--index-mode needs --index")
    from neardup.app.cli.options import id_prefix

    schema = Schema(args.id_field, args.text_field, id_prefix=id_prefix(args.id_prefix))
    given = {
        n: getattr(args, n)
        for n in ("num_perm", "bands", "threshold", "k", "seed", "ngram", "tokenizer")
        if getattr(args, n) is not None
    }
    from neardup.app.cli.progress import StageProgress
    from neardup.app.spark.entry import dedup_on_spark
    from neardup.app.spark.job import SparkParams

    params = SparkParams(
        MinhashParams(**given),
        keep_duplicates=args.keep_duplicates,
        index=None if args.index is None else str(args.index),
        index_mode=args.index_mode,
        recrawled=args.recrawled,
        schema=schema,
        keep=keep,
    )
    dedup_on_spark(
        [str(p) for p in args.inputs],
        output,
        protected=[str(p) for p in args.protected],
        params=params,
        master=args.spark_master,
        manifest_path=None if args.manifest is None else str(args.manifest),
        quiet=args.quiet,
        removed=None if args.removed is None else str(args.removed),
        dry_run=args.dry_run,
        progress=None if args.quiet else StageProgress,
    )
    return 0
