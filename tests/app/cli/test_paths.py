"""Every file flag of every command is declared (read, written or an index), and every command
that writes is refused, before any work, when a written file is a file it reads: whatever the
command, the flags and the spellings (paths, ``..``, ``file:`` URLs, links, hard links,
directories, globs, chained URLs). A new command or flag that is not declared fails here."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from neardup.app.cli import paths
from neardup.app.cli.main import build_parser, main

#: String flags that name no file the command reads or writes over, by command and dest: a new
#: string flag must be declared in the parser (``paths.reads``/``writes``/``index``) or named
#: here on purpose.
NOT_FILES = {
    "serve": {"host", "allowed_hosts", "forwarded_allow_ips", "store_url", "store_schema",
              "data_dir"},  # the store's own directory: the store writes in it, never over a file
    "store-settings": {"data_dir", "store_url", "store_schema"},
    "dedup": {"id_field", "text_field", "id_prefix", "keep", "spark_master"},
    "contamination": {"id_field", "text_field"},
    "push": {"url", "api_key", "id_field", "text_field"},
    "query": {"url", "api_key", "id_field", "text_field"},
    "index info": set(),
    "index compact": set(),
    "index delete": set(),
    "index query": {"id_field", "text_field"},
}  # fmt: skip

#: A minimal command line of each command that writes files; ``{in}`` is where its positional
#: inputs go.
BASE = {
    "dedup": "dedup {in} --output out.jsonl",
    "contamination": "contamination {in} --protected eval.jsonl",
    "index query": "index query idx {in}",
}
_SKIPPED = (
    argparse._HelpAction, argparse._StoreTrueAction, argparse._StoreFalseAction,
    argparse.BooleanOptionalAction, argparse._SubParsersAction,
)  # fmt: skip


def _commands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> list[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of every command, ``index query`` and the other subcommands included."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = _commands(sub, f"{prefix}{name} ")
                out += nested or [(f"{prefix}{name}", sub)]
    return out


COMMANDS = _commands(build_parser())


def _string_flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The flags whose value is a string (a name, a path, a URL): no switch, number or choice."""
    return [
        a for a in parser._actions
        if not isinstance(a, _SKIPPED) and a.nargs != 0 and a.choices is None
        and a.type not in (int, float)
    ]  # fmt: skip


def _flags(role: str) -> list[tuple[str, argparse.Action, list[argparse.Action]]]:
    """(command, flag, the command's read flags) of every flag declared with ``role``."""
    out = []
    for name, parser in COMMANDS:
        read = [a for a in parser._actions if paths.role(a) == paths.READS]
        out += [(name, a, read) for a in parser._actions if paths.role(a) == role]
    return out


def test_every_string_flag_of_every_command_is_declared_or_named_as_no_file():
    undeclared = {
        (name, a.dest)
        for name, parser in COMMANDS
        for a in _string_flags(parser)
        if paths.role(a) is None and a.dest not in NOT_FILES.get(name, ())
    }
    assert undeclared == set(), "declare these flags in app/cli/main.py (paths.reads/writes/index)"
    assert {name for name, _ in COMMANDS} == set(NOT_FILES)


def test_every_command_that_writes_has_a_command_line_here():
    writing = {name for name, _, _ in _flags(paths.WRITES)}
    assert writing == set(BASE)


def test_the_guard_finds_the_parser_of_a_subcommand():
    parser = build_parser()
    args = parser.parse_args(["index", "query", "idx", "a.jsonl", "--output", "o.jsonl"])
    flags = [paths.flag_name(a) for a in paths.command_parser(parser, args)._actions]
    assert {"IDX", "FILE", "--output"} <= set(flags)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "data").mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / "data" / name).write_text('{"id": "x", "text": "some words"}\n')
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "c.jsonl").write_text('{"id": "y", "text": "more words"}\n')
    (tmp_path / "eval.jsonl").write_text('{"text": "an eval question"}\n')
    os.link(tmp_path / "data" / "a.jsonl", tmp_path / "hard.jsonl")
    (tmp_path / "soft.jsonl").symlink_to(tmp_path / "data" / "a.jsonl")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _spellings(root: Path) -> tuple[list[str], list[str]]:
    """How a run may name data/a.jsonl: as a file it reads, and as a file it writes."""
    url = (root / "data" / "a.jsonl").as_uri()
    reads = ["data/a.jsonl", "data", "data/*.jsonl", "soft.jsonl", url]
    writes = ["data/a.jsonl", "./other/../data/a.jsonl", "file:data/a.jsonl", url, "hard.jsonl",
              f"simplecache::{url}"]  # fmt: skip
    return reads, writes


def _command_line(name: str, read: argparse.Action, read_as: str, write: argparse.Action,
                  write_as: str) -> list[str]:  # fmt: skip
    """The command ``name`` reading data/a.jsonl as ``read_as`` through ``read`` and writing
    it as ``write_as`` through ``write``."""
    positional = not read.option_strings
    inputs = f"other/c.jsonl {read_as}" if positional else "other/c.jsonl"
    argv = BASE[name].replace("{in}", inputs).split()
    if not positional:
        argv += [read.option_strings[-1], read_as]
    return [*argv, write.option_strings[-1], write_as]


@pytest.mark.parametrize(
    ("name", "write", "reads"), _flags(paths.WRITES),
    ids=[f"{n} {a.option_strings[-1]}" for n, a, _ in _flags(paths.WRITES)],
)  # fmt: skip
def test_no_written_file_of_any_command_may_be_a_file_it_reads(
    work: Path, capsys: pytest.CaptureFixture[str], name: str, write: argparse.Action,
    reads: list[argparse.Action],
):  # fmt: skip
    before = _files(work)
    read_spellings, write_spellings = _spellings(work)
    ran = 0
    for read in reads:
        for read_as in read_spellings:
            for write_as in write_spellings:
                argv = _command_line(name, read, read_as, write, write_as)
                assert main(argv) == 2, argv
                err = capsys.readouterr().err
                assert "never writes over its inputs" in err, (argv, err)
                assert _files(work) == before, argv
                ran += 1
    assert ran == len(reads) * len(read_spellings) * len(write_spellings) > 0


def test_a_manifest_left_to_its_default_is_checked_too(work: Path, capsys):
    (work / "out.jsonl.manifest.json").write_text('[{"text": "an eval item"}]')
    before = _files(work)
    argv = ["dedup", "data/a.jsonl", "--output", "out.jsonl", "--protected",
            "out.jsonl.manifest.json"]  # fmt: skip
    assert main(argv) == 2
    assert "--manifest out.jsonl.manifest.json is --protected" in capsys.readouterr().err
    assert _files(work) == before
