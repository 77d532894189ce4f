"""A persistent index under crashes, races and damage, through real ``neardup`` processes.

A run stops where ``NEARDUP_TEST_PAUSE`` says (``app.cli.pause``: it prints a marker and stops
itself); the test then kills it with SIGKILL, or lets it go on (SIGCONT) to race another run.
Whatever happens, a reader of the index sees exactly the version it saw before or the next one,
complete: never a part half there, never a part lost, and a damaged file is an error naming it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.indexes import index_table, latest_manifest, neardup, snapshot, spawn, write_corpora
from tests.procs import stopped_at


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base.jsonl indexed into ``idx`` (version 1); new dumps a.jsonl and b.jsonl (10,000
    documents: three signature batches) with copies of indexed documents."""
    tmp = tmp_path_factory.mktemp("index")
    write_corpora(tmp, 6_000, {"a": 10_000, "b": 3_000})
    done = neardup("dedup", "base.jsonl", "--output", "base.out.jsonl", "--index", "idx",
                   "--workers", "1", "--quiet", cwd=tmp)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return tmp


@pytest.fixture(scope="module")
def appended(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``built``'s index after ``dedup a.jsonl --index`` run without a stop (version 2, two
    parts), its output beside it (``out.jsonl``); tests copy the index, never change it."""
    tmp = tmp_path_factory.mktemp("reference")
    shutil.copytree(built / "idx", tmp / "idx")
    done = _append(built, tmp / "idx", tmp / "out.jsonl")
    assert done.returncode == 0, done.stderr
    return tmp


@pytest.fixture(scope="module")
def uninterrupted(appended: Path) -> tuple[bytes, object]:
    """The output and the index rows of ``dedup a.jsonl --index`` run without a stop."""
    return (appended / "out.jsonl").read_bytes(), index_table(appended / "idx")


def _append(
    built: Path, idx: Path, out: Path, batch: str = "a.jsonl"
) -> subprocess.CompletedProcess[str]:
    return neardup("dedup", built / batch, "--output", out, "--index", idx, "--workers", "1",
                   "--quiet", cwd=out.parent)  # fmt: skip


def _copy(built: Path, tmp: Path) -> Path:
    shutil.copytree(built / "idx", tmp / "idx")
    return tmp / "idx"


@pytest.mark.parametrize("stage", ["read", "signatures", "write", "commit"])
def test_kill_9_leaves_the_index_as_it_was_and_the_next_run_works(
    built, uninterrupted, tmp_path, stage
):
    idx = _copy(built, tmp_path)
    before = snapshot(idx)
    proc = spawn("dedup", built / "a.jsonl", "--output", tmp_path / "out.jsonl", "--index", idx,
                 "--workers", "1", "--quiet", cwd=tmp_path, NEARDUP_TEST_PAUSE=stage)  # fmt: skip
    stopped_at(proc, stage)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert snapshot(idx) == before
    # the outputs are committed before the part is: killed at the commit, they are there
    assert (tmp_path / "out.jsonl").exists() == (stage == "commit")
    info = neardup("index", "info", idx, "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    # killed at the commit, the new part's files are there, listed by no version
    expected_leftovers = 1 if stage == "commit" else 0
    assert json.loads(info.stdout)["leftovers_total"] == expected_leftovers

    done = _append(built, idx, tmp_path / "out.jsonl")
    assert done.returncode == 0, done.stderr
    output, rows = uninterrupted
    assert (tmp_path / "out.jsonl").read_bytes() == output
    assert index_table(idx).equals(rows)
    assert latest_manifest(idx)[0] == before["version"] + 1


def test_two_appends_stopped_before_their_commits_one_wins_the_other_fails_with_exit_3(
    built, tmp_path
):
    idx = _copy(built, tmp_path)
    version = snapshot(idx)["version"]
    runs = {}
    for name in ("a", "b"):
        runs[name] = spawn(
            "dedup", built / f"{name}.jsonl", "--output", tmp_path / f"{name}.out.jsonl",
            "--index", idx, "--workers", "1", "--quiet", cwd=tmp_path, NEARDUP_TEST_PAUSE="commit",
        )  # fmt: skip
    for proc in runs.values():
        stopped_at(proc, "commit")
    first, second = runs["a"], runs["b"]
    os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    won = latest_manifest(idx)[1]["parts"][-1]["name"]
    os.kill(second.pid, signal.SIGCONT)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 3, err
    [line] = err.strip().splitlines()
    assert line.startswith("neardup dedup: error: ")
    assert f"another run added version {version + 1} (part {won})" in line
    assert "nothing was added" in line
    latest, manifest = latest_manifest(idx)
    assert latest == version + 1 and manifest["parts"][-1]["name"] == won
    # the loser's outputs are committed (valid against the version it read); rerun it
    assert (tmp_path / "b.out.jsonl").exists()
    again = _append(built, idx, tmp_path / "b2.out.jsonl", batch="b.jsonl")
    assert again.returncode == 0, again.stderr
    assert latest_manifest(idx)[0] == version + 2
    rows = index_table(idx)
    assert len(rows) == latest_manifest(idx)[1]["rows"]


def test_two_appends_at_once_never_lose_a_part(built, tmp_path):
    idx = _copy(built, tmp_path)
    version, manifest = latest_manifest(idx)
    rows_before = manifest["rows"]
    runs = [
        spawn("dedup", built / f"{name}.jsonl", "--output", tmp_path / f"{name}.out.jsonl",
              "--index", idx, "--workers", "1", "--quiet", cwd=tmp_path)
        for name in ("a", "b")
    ]  # fmt: skip
    codes = []
    for proc in runs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode in (0, 3), err
        codes.append(proc.returncode)
    assert 0 in codes
    latest, manifest = latest_manifest(idx)
    assert latest == version + codes.count(0)
    added = manifest["parts"][len(manifest["parts"]) - codes.count(0) :]
    assert len(manifest["parts"]) == 1 + codes.count(0)
    assert manifest["rows"] == rows_before + sum(p["rows"] for p in added)
    assert len(index_table(idx)) == manifest["rows"]


def test_compact_and_append_racing_one_fails_with_exit_3_and_no_row_is_lost(
    built, appended, tmp_path
):
    idx = _copy(appended, tmp_path)  # two parts
    rows = index_table(idx)
    compact = spawn("index", "compact", idx, cwd=tmp_path, NEARDUP_TEST_PAUSE="commit")
    stopped_at(compact, "commit")
    append = _append(built, idx, tmp_path / "b.out.jsonl", batch="b.jsonl")
    assert append.returncode == 0, append.stderr
    os.kill(compact.pid, signal.SIGCONT)
    _, err = compact.communicate(timeout=60)
    assert compact.returncode == 3, err
    assert "another run added version" in err and "neardup index compact: error: " in err
    _, manifest = latest_manifest(idx)
    assert len(manifest["parts"]) == 3  # nothing compacted, the append's part there
    table = index_table(idx)
    assert len(table) == len(rows) + manifest["parts"][-1]["rows"]
    info = neardup("index", "info", idx, "--json", cwd=tmp_path)
    assert json.loads(info.stdout)["leftovers_total"] == 0  # its files removed


def test_an_append_racing_a_compact_fails_with_exit_3_and_the_compaction_holds(
    built, appended, tmp_path
):
    idx = _copy(appended, tmp_path)  # two parts
    rows = index_table(idx)
    append = spawn(
        "dedup", built / "b.jsonl", "--output", tmp_path / "b.out.jsonl", "--index", idx,
        "--workers", "1", "--quiet", cwd=tmp_path, NEARDUP_TEST_PAUSE="commit",
    )  # fmt: skip
    stopped_at(append, "commit")
    compact = neardup("index", "compact", idx, cwd=tmp_path)
    assert compact.returncode == 0, compact.stderr
    os.kill(append.pid, signal.SIGCONT)
    _, err = append.communicate(timeout=60)
    assert append.returncode == 3, err
    _, manifest = latest_manifest(idx)
    assert len(manifest["parts"]) == 1
    assert index_table(idx).equals(rows)


def _listed_file(idx: Path) -> Path:
    _, manifest = latest_manifest(idx)
    return idx / manifest["parts"][0]["files"][0]["path"]


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(
        bytes(range(256)) * (path.stat().st_size // 256) + b"x" * (path.stat().st_size % 256)
    )


def _footer(path: Path) -> None:
    """Same size, a valid-looking file but for its last 100 bytes (the footer)."""
    data = bytearray(path.read_bytes())
    data[-100:-4] = b"\x00" * 96
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncate, _garbage, _footer, Path.unlink])
@pytest.mark.parametrize(
    "command",
    [
        ["dedup", "{b}", "--output", "out.jsonl", "--index", "idx", "--workers", "1", "--quiet"],
        ["dedup", "{b}", "--output", "out.jsonl", "--index", "idx", "--index-mode", "read"],
        ["index", "info", "idx"],
        ["index", "compact", "idx"],
        ["index", "query", "idx", "{b}", "--output", "out.jsonl"],
    ],
    ids=["append", "read", "info", "compact", "query"],
)
def test_a_damaged_or_missing_part_file_is_an_error_naming_it(built, tmp_path, damage, command):
    idx = _copy(built, tmp_path)
    target = _listed_file(idx)
    damage(target)
    before = {p: p.read_bytes() for p in idx.rglob("*") if p.is_file()}
    args = [str(built / "b.jsonl") if a == "{b}" else a for a in command]
    done = neardup(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = [x for x in done.stderr.splitlines() if "error" in x]  # one line, after progress
    assert line.startswith(
        f"neardup {' '.join(command[:2]) if command[0] == 'index' else 'dedup'}: error: "
    )
    assert str(target.relative_to(idx)) in line and "damaged" in line
    assert not (tmp_path / "out.jsonl").exists()
    assert {p: p.read_bytes() for p in idx.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    ("flags", "name"),
    [(["--threshold", "0.7"], "threshold"), (["--num-perm", "64", "--bands", "8"], "bands"),
     (["--tokenizer", "multilingual"], "tokenizer"), (["--seed", "3"], "seed"),
     (["--k", "4"], "k")],
)  # fmt: skip
def test_parameters_differing_from_the_index_are_exit_2_naming_the_parameter(
    built, tmp_path, flags, name
):
    idx = _copy(built, tmp_path)
    before = snapshot(idx)
    done = neardup("dedup", built / "a.jsonl", "--output", "out.jsonl", "--index", idx, *flags,
                   "--workers", "1", "--quiet", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"parameter {name} is locked to the index" in line
    assert not (tmp_path / "out.jsonl").exists()
    assert snapshot(idx) == before


def test_an_id_already_in_the_index_is_decided_against_its_document(built, tmp_path):
    """Issue 33: a re-crawled id is no longer an error: the row is decided against the indexed
    document of its id (here a changed text: --recrawled keep-indexed removes it, naming it)."""
    idx = _copy(built, tmp_path)
    before = snapshot(idx)
    _, manifest = latest_manifest(idx)
    part = manifest["parts"][0]
    indexed = pq.read_table(idx / part["files"][0]["path"], columns=["id"]).column("id")[5].as_py()
    lines = (built / "b.jsonl").read_text().splitlines()
    lines[7] = lines[7].replace(lines[7].split('"')[3], indexed, 1)
    (tmp_path / "clash.jsonl").write_text("\n".join(lines) + "\n")
    done = neardup("dedup", "clash.jsonl", "--output", "out.jsonl", "--removed", "why.jsonl",
                   "--index", idx, "--index-mode", "read", "--recrawled", "keep-indexed",
                   "--workers", "1", "--quiet", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    why = [json.loads(x) for x in (tmp_path / "why.jsonl").read_text().splitlines()]
    (row,) = [w["neardup"] for w in why if w["id"] == indexed]
    assert row["duplicate_of"] == indexed and row["index_part"] == part["name"]
    assert row["reason"] in ("exact", "near", "recrawled")
    out = [json.loads(x)["id"] for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert indexed not in out
    assert snapshot(idx) == before
