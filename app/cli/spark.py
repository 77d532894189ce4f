"""``neardup dedup --engine spark``: the flags checked, then the run handed to ``app.spark``."""

from __future__ import annotations

import argparse

from neardup.core.engine import MinhashParams, ParameterError, check_apart

__all__ = ["SPARK_FLAGS", "dedup_spark"]

#: The dedup flags (by argparse dest) the Spark engine takes; any other given is an error.
SPARK_FLAGS = frozenset(
    {
        "command", "inputs", "output", "protected", "num_perm", "bands", "threshold", "k",
        "seed", "ngram", "tokenizer", "manifest", "quiet", "engine", "spark_master",
        "keep_duplicates", "dedup_parser", "index", "index_mode",
    }
)  # fmt: skip


def _unsupported(args: argparse.Namespace) -> list[str]:
    """The option strings of flags given (not at their default) that Spark does not take."""
    parser: argparse.ArgumentParser = args.dedup_parser
    named = []
    for action in parser._actions:
        if action.dest in SPARK_FLAGS or action.dest == argparse.SUPPRESS:
            continue
        if getattr(args, action.dest, action.default) != action.default:
            named.append("/".join(action.option_strings) or action.dest)
    return named


def dedup_spark(args: argparse.Namespace) -> int:
    """Check the flags, run on Spark (exit 0), or raise ParameterError naming what is wrong."""
    unsupported = _unsupported(args)
    if unsupported:
        raise ParameterError(
            f"--engine spark does not take {', '.join(unsupported)}: Spark's executors and "
            "configuration decide those (see docs/spark.md)"
        )
    if args.keep_duplicates and str(args.output).rstrip("/").lower().endswith(".parquet"):
        raise ParameterError(
            "--engine spark writes --keep-duplicates' neardup tags to JSON Lines only, not "
            "Parquet (see docs/spark.md)"
        )
    if args.index is None and args.index_mode != "append":
        raise ParameterError("--index-mode needs --index")
    given = {
        n: getattr(args, n)
        for n in ("num_perm", "bands", "threshold", "k", "seed", "ngram", "tokenizer")
        if getattr(args, n) is not None
    }
    output = str(args.output)
    manifest = output.rstrip("/") + ".manifest.json" if args.manifest is None else args.manifest
    reads = [("INPUT", str(t)) for t in args.inputs]
    reads += [("--protected", str(t)) for t in args.protected]
    index = None if args.index is None else ("--index", str(args.index))
    check_apart(reads, [("--output", output), ("--manifest", str(manifest))], index=index)
    from neardup.app.spark.entry import dedup_on_spark
    from neardup.app.spark.job import SparkParams

    params = SparkParams(
        MinhashParams(**given),
        keep_duplicates=args.keep_duplicates,
        index=None if args.index is None else str(args.index),
        index_mode=args.index_mode,
    )
    dedup_on_spark(
        [str(p) for p in args.inputs],
        str(args.output),
        protected=[str(p) for p in args.protected],
        params=params,
        master=args.spark_master,
        manifest_path=None if args.manifest is None else str(args.manifest),
        quiet=args.quiet,
    )
    return 0
