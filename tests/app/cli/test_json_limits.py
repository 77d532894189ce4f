"""A row neardup cannot read (an integer longer than Python reads, nesting past MAX_JSON_DEPTH)
in a corpus or a protected file is one line naming file:line, exit 2, nothing written: never a
traceback (issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neardup.app.cli.main import main

GOOD = [{"id": f"g{i}", "text": f"a good row of words number {i}"} for i in range(3)]
BAD = {
    "integer": '{"id": "bad", "text": "some words", "n": ' + "1" * 5_001 + "}",
    "deep": '{"id": "bad", "text": "some words", "n": ' + "[" * 1_000 + "]" * 1_000 + "}",
}
SAYS = {"integer": "an integer of 5,001 digits", "deep": "the JSON nests deeper than 512 levels"}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "good.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GOOD))
    (tmp_path / "eval.jsonl").write_text(  # 13 words or more: a set that protects something
        '{"text": "an eval question long enough to protect an n-gram of thirteen words here"}\n'
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], where: str, says: str) -> None:
    assert main(argv) == 2
    [line] = capsys.readouterr().err.splitlines()
    name = " ".join(argv[:2] if argv[0] == "index" else argv[:1])
    assert line.startswith(f"neardup {name}: error: {where}: {says}"), line


@pytest.mark.parametrize("bad", BAD)
def test_a_corpus_row_is_refused_in_one_line(work: Path, capsys, bad: str):
    (work / "in.jsonl").write_text(json.dumps(GOOD[0]) + "\n\n" + BAD[bad] + "\n")
    for argv in (
        ["dedup", "in.jsonl", "--output", "out.jsonl", "--quiet", "--workers", "1"],
        ["contamination", "in.jsonl", "--protected", "eval.jsonl", "--quiet"],
        ["index", "query", "idx", "in.jsonl", "--quiet", "--workers", "1"],
    ):
        if argv[0] == "index":
            assert main(["dedup", "good.jsonl", "--output", "o.jsonl", "--index", "idx",
                         "--quiet", "--workers", "1"]) == 0  # fmt: skip
            capsys.readouterr()
        _refused(capsys, argv, "in.jsonl:3", SAYS[bad])
    assert not (work / "out.jsonl").exists()


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("name", ["eval.jsonl", "eval.json"])
def test_a_protected_row_is_refused_in_one_line(work: Path, capsys, bad: str, name: str):
    body = BAD[bad] + "\n" if name.endswith(".jsonl") else f"[\n{BAD[bad]}\n]"
    (work / f"p-{name}").write_text(body)
    where = f"p-{name}:1" if name.endswith(".jsonl") else f"p-{name}"
    where += ":2" if bad == "integer" and name.endswith(".json") else ""
    argv = ["dedup", "good.jsonl", "--output", "out.jsonl", "--protected", f"p-{name}"]
    _refused(capsys, argv, where, SAYS[bad])
    argv = ["contamination", "good.jsonl", "--protected", f"p-{name}", "--quiet"]
    _refused(capsys, argv, where, SAYS[bad])
    assert not (work / "out.jsonl").exists()
