"""The command line every benchmark shares: size options with a full and a ``--quick`` default,
``--quick``, ``--markdown``, and the command as run, for the record."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Size", "command_line", "parser", "sizes"]


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
