"""The command line every benchmark shares: size options with a full and a ``--quick`` default,
``--quick``, ``--markdown``, and the command as run, for the record; and the options of the
benchmarks that run neardup as measured subprocesses (seed, workers, timeout, Spark's master and
heap, the corpus cache)."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Size",
    "add_cache",
    "add_runs",
    "add_spark",
    "cache_dir",
    "command_line",
    "parser",
    "sizes",
]


@dataclass(frozen=True)
class Size:
    """A size option: what it counts, its default, and its default under ``--quick``."""

    help: str
    full: int
    quick: int


def parser(
    module: str, doc: str | None, options: Mapping[str, Size], markdown: str
) -> argparse.ArgumentParser:
    """A parser with ``--NAME`` per size option (``_`` spelled ``-``), ``--quick``, ``--markdown``.

    Args:
        module: what ``python -m`` runs (the program's name).
        doc: the module's docstring; its first paragraph is the description.
        options: the size options by attribute name.
        markdown: the help of ``--markdown``.
    """
    out = argparse.ArgumentParser(
        prog=f"python -m {module}", description=(doc or "").split("\n\n")[0]
    )
    for name, size in options.items():
        out.add_argument(
            f"--{name.replace('_', '-')}",
            type=int,
            default=None,
            help=f"{size.help} ({size.full:,}; --quick: {size.quick:,})",
        )
    out.add_argument("--quick", action="store_true", help="the smaller --quick sizes")
    out.add_argument("--markdown", action="store_true", help=markdown)
    return out


def sizes(args: argparse.Namespace, options: Mapping[str, Size]) -> dict[str, int]:
    """Each size option's value where given, else its default (its ``--quick`` one if asked)."""
    return {
        name: given
        if (given := getattr(args, name)) is not None
        else (size.quick if args.quick else size.full)
        for name, size in options.items()
    }


def command_line(module: str, argv: Sequence[str] | None) -> tuple[list[str], str]:
    """The arguments (``sys.argv[1:]`` when ``argv`` is None) and the command, for the record."""
    given = sys.argv[1:] if argv is None else list(argv)
    return given, shlex.join(["python", "-m", module, *given])


def add_runs(
    out: argparse.ArgumentParser, timeout: float, workers: str = "neardup dedup --workers"
) -> None:
    """``--seed`` (the corpora's), ``--workers`` (help ``workers``) and ``--timeout`` (seconds
    per subprocess, default ``timeout``)."""
    out.add_argument("--seed", type=int, default=0)
    out.add_argument("--workers", type=int, default=2, help=workers)
    out.add_argument("--timeout", type=float, default=timeout, help="seconds per subprocess")


def add_spark(out: argparse.ArgumentParser, workers: str) -> None:
    """``add_runs``' options (an hour's timeout) and ``--spark-master`` and ``--driver-memory``
    (the local JVM heap)."""
    add_runs(out, timeout=3600.0, workers=workers)
    out.add_argument("--spark-master", default="local[2]")
    out.add_argument("--driver-memory", default="4g", help="the local JVM heap")


def add_cache(out: argparse.ArgumentParser, default: Path) -> None:
    """``--cache-dir`` (where generated corpora are kept, ``default`` if not given) and
    ``--no-cache`` (a temporary directory instead); read back by ``cache_dir``."""
    out.add_argument(
        "--cache-dir", type=Path, default=None,
        help=f"where generated corpora are kept (default {default})",
    )  # fmt: skip
    out.add_argument("--no-cache", action="store_true", help="write corpora to a temp dir")


def cache_dir(args: argparse.Namespace, default: Path) -> Path | None:
    """The cache directory ``add_cache``'s options name: None with ``--no-cache``."""
    return None if args.no_cache else (args.cache_dir or default)
