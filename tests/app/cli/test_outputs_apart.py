"""A run never writes over what it reads, nor two outputs to one file: refused before any work,
in one line, exit 2, with every file as it was (both engines, dedup and contamination)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from neardup.core.engine import ParameterError, check_apart
from tests.app.cli.test_cli import neardup

ROWS = [{"id": f"d{i}", "text": f"the quick brown fox number {i % 3} jumps over the lazy dog"}
        for i in range(6)]  # fmt: skip


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / "data" / name).write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "eval.jsonl").write_text(json.dumps({"text": "an eval question"}) + "\n")
    os.link(tmp_path / "data" / "a.jsonl", tmp_path / "hard.jsonl")
    (tmp_path / "soft.jsonl").symlink_to(tmp_path / "data" / "b.jsonl")
    return tmp_path


#: What each case runs (split at spaces).
CASES = {
    "output is the input": "dedup data/a.jsonl --output data/a.jsonl",
    "output is the input, spelt otherwise": "dedup data/a.jsonl --output ./data/../data/a.jsonl",
    "output is a hard link to the input": "dedup data/a.jsonl --output hard.jsonl",
    "output is what a link input names": "dedup soft.jsonl --output data/b.jsonl",
    "output is in an input directory": "dedup data --output data/b.jsonl",
    "output is matched by an input glob": "dedup data/*.jsonl --output data/a.jsonl",
    "removed is the input": "dedup data/a.jsonl --output o.jsonl --removed data/a.jsonl",
    "manifest is the input": "dedup data/a.jsonl --output o.jsonl --manifest data/a.jsonl",
    "output is a protected set": "dedup data/a.jsonl --output eval.jsonl --protected eval.jsonl",
    "manifest is the output": "dedup data/a.jsonl --output o.jsonl --manifest o.jsonl",
    "removed is the output": "dedup data/a.jsonl --output o.jsonl --removed o.jsonl",
    "contamination report over its input": "contamination data/a.jsonl --protected eval.jsonl --output data/a.jsonl",  # noqa: E501
    # --ids-file shares the guard (issue 32: file: URLs and hard links overwrote the input)
    "ids file is the input as file:": "contamination data/a.jsonl --protected eval.jsonl --ids-file file:data/a.jsonl",  # noqa: E501
    "ids file is the eval set as file://": "contamination data/a.jsonl --protected eval.jsonl --ids-file file://{root}/eval.jsonl",  # noqa: E501
    "ids file is a hard link to the input": "contamination data/a.jsonl --protected eval.jsonl --ids-file hard.jsonl",  # noqa: E501
    "ids file is what a link input names": "contamination soft.jsonl --protected eval.jsonl --ids-file data/b.jsonl",  # noqa: E501
    "ids file is in an input directory": "contamination data --protected eval.jsonl --ids-file data/b.jsonl",  # noqa: E501
    "ids file is matched by an input glob": "contamination data/*.jsonl --protected eval.jsonl --ids-file ./data/../data/a.jsonl",  # noqa: E501
    "ids file is a sample file": "contamination data/a.jsonl --protected eval.jsonl --sample data/b.jsonl --sample-cap 0.5 --ids-file data/b.jsonl",  # noqa: E501
    "ids file is the report": "contamination data/a.jsonl --protected eval.jsonl --output r.json --ids-file file:r.json",  # noqa: E501
    "index query output over its input": "index query idx data/a.jsonl --output file:data/a.jsonl",
    "spark output over its input": "dedup data/a.jsonl --output data/a.jsonl --engine spark",
    "spark output directory holds the inputs": "dedup data/a.jsonl --output data --engine spark",
}


@pytest.mark.parametrize("command", CASES.values(), ids=CASES.keys())
def test_a_run_that_would_eat_a_file_is_refused_and_touches_nothing(work: Path, command: str):
    args = command.replace("{root}", str(work)).split()
    before = _files(work)
    ran = neardup(*args, cwd=work)
    assert ran.returncode == 2, ran.stderr
    [line] = ran.stderr.splitlines()
    name = " ".join(args[:2] if args[0] == "index" else args[:1])
    assert line.startswith(f"neardup {name}: error: "), line
    assert "never writes over its inputs" in line or "are the same file" in line, line
    assert _files(work) == before  # no output, no partial file, every input as it was


def test_outputs_apart_from_inputs_run(work: Path):
    ran = neardup("dedup", "data", "--output", "out.jsonl", "--removed", "gone.jsonl",
                  "--id-prefix", "file", cwd=work)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert (work / "out.jsonl").exists() and (work / "gone.jsonl").exists()


def test_check_apart_names_both_flags(tmp_path: Path):
    (tmp_path / "in.jsonl").write_text("{}\n")
    with pytest.raises(ParameterError, match=r"--output .*out.jsonl and --removed .*out.jsonl"):
        check_apart([], [("--output", str(tmp_path / "out.jsonl")),
                         ("--removed", str(tmp_path / "x" / ".." / "out.jsonl"))])  # fmt: skip
    with pytest.raises(ParameterError, match=r"--manifest .* is INPUT .*in.jsonl"):
        check_apart([("INPUT", str(tmp_path))], [("--manifest", str(tmp_path / "in.jsonl"))])
    check_apart([("INPUT", "-")], [("--output", "-"), ("--removed", str(tmp_path / "r.jsonl"))])
    check_apart([("INPUT", "memory://a.jsonl")], [("--output", "memory://b.jsonl")])
    with pytest.raises(ParameterError, match=r"memory://a\.jsonl"):
        check_apart([("INPUT", "memory://a.jsonl")], [("--output", "memory://a.jsonl")])


#: Outputs spelt as patterns (a shell quoting a glob, a copied input spelling): issue 32's
#: left item, `--output 'sub/*.jsonl'` wrote a file literally named `*.jsonl`.
PATTERNS = {
    "output glob": "dedup data/a.jsonl --output out/*.jsonl",
    "removed with ?": "dedup data/a.jsonl --output o.jsonl --removed gone?.jsonl",
    "manifest with [": "dedup data/a.jsonl --output o.jsonl --manifest m[1].json",
    "spark output glob": "dedup data/a.jsonl --output out/* --engine spark",
    "report glob": "contamination data/a.jsonl --protected eval.jsonl --output r*.json",
}


@pytest.mark.parametrize("command", PATTERNS.values(), ids=PATTERNS.keys())
def test_an_output_spelt_as_a_pattern_is_refused(work: Path, command: str):
    (work / "out").mkdir()
    before = _files(work)
    ran = neardup(*command.split(), cwd=work)
    assert ran.returncode == 2, ran.stderr
    [line] = ran.stderr.splitlines()
    assert "an output names one file, not a pattern" in line, line
    assert _files(work) == before and not any((work / "out").iterdir())
