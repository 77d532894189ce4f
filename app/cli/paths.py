"""The files a command reads, writes and indexes, declared on its flags where they are made, and
the guard ``neardup`` runs from those declarations before every command.

A flag that names a file is declared with ``reads``, ``writes`` or ``index`` when it is added to
its parser (``writes`` may say what a flag left out stands for: ``--manifest`` is
``OUTPUT.manifest.json``). ``guard`` collects them from the command's own parser and runs core's
``check_apart`` (no output over an input, in any spelling; no two outputs on one file; the index
apart) and ``check_index_home`` (an index in a directory of its own) before the command starts.
So a command, or a new flag of one, is checked by being declared, not by remembering to check;
tests/app/cli/test_paths.py refuses a file flag that is not.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "INDEX",
    "READS",
    "WRITES",
    "command_parser",
    "flag_name",
    "guard",
    "index",
    "reads",
    "role",
    "writes",
]

#: What a file flag is to its command.
READS, WRITES, INDEX = "reads", "writes", "index"
_ROLE = "neardup_role"
_DERIVED = "neardup_derived"
_HOME = "neardup_home"

Derived = Callable[[argparse.Namespace], "str | None"]


def reads(action: argparse.Action) -> argparse.Action:
    """Declare ``action`` (as ``add_argument`` returned it) a file, directory, glob or URL read."""
    setattr(action, _ROLE, READS)
    return action


def writes(action: argparse.Action, derived: Derived | None = None) -> argparse.Action:
    """Declare ``action`` a file written; ``derived`` gives the file written when the flag is
    not given (None: none)."""
    setattr(action, _ROLE, WRITES)
    setattr(action, _DERIVED, derived)
    return action


def index(action: argparse.Action, *, writes: bool) -> argparse.Action:
    """Declare ``action`` a persistent index (``neardup dedup --index``); ``writes``: the
    command may create or add to it, so it must be in a directory of its own."""
    setattr(action, _ROLE, INDEX)
    setattr(action, _HOME, writes)
    return action


def role(action: argparse.Action) -> str | None:
    """READS, WRITES, INDEX, or None for a flag declared as none of them."""
    found: str | None = getattr(action, _ROLE, None)
    return found


def command_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` were parsed for (``neardup index query``'s own)."""
    current = parser
    while True:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return current
        current = subs[0].choices[getattr(args, subs[0].dest)]


def flag_name(action: argparse.Action) -> str:
    """How a message names the flag: its long option, or a positional's metavar."""
    if action.option_strings:
        return max(action.option_strings, key=len)
    return str(action.metavar or action.dest.upper())


def _named(action: argparse.Action, args: argparse.Namespace) -> Iterator[str]:
    value: Any = getattr(args, action.dest, None)
    if value is None:
        derived: Derived | None = getattr(action, _DERIVED, None)
        value = None if derived is None else derived(args)
    if value is None:
        return
    for one in value if isinstance(value, list | tuple) else [value]:
        yield str(one)


def guard(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """ParameterError, before the command ``args`` run, when it would write over a file it reads
    (or two outputs over one file, or mix its index with its files), or make an index in a
    directory that holds a corpus (a command that writes to it)."""
    from neardup.core.engine import check_apart, check_index_home

    found: dict[str, list[tuple[str, str]]] = {READS: [], WRITES: [], INDEX: []}
    homes: list[tuple[str, str]] = []
    for action in command_parser(parser, args)._actions:
        kind = role(action)
        if kind is not None:
            named = [(flag_name(action), v) for v in _named(action, args)]
            found[kind] += named
            homes += named if getattr(action, _HOME, False) else []
    indexes = found[INDEX]
    check_apart(found[READS], found[WRITES], index=indexes[0] if indexes else None)
    for flag, target in homes:
        check_index_home(flag, target)
