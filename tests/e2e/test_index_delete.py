"""``neardup index delete`` through real processes: killed with SIGKILL just before its commit,
the index is exactly as it was (the rerun deletes everything); two at once, one wins and the
other is exit 3 in one line; the ids file is never changed; the deleted documents are gone
for every reader (pyarrow by the manifest, ``index query``, ``index info``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.indexes import index_table, latest_manifest, neardup, snapshot, spawn, write_corpora
from tests.procs import stopped_at


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base.jsonl indexed into ``idx`` (version 1), then a.jsonl (version 2: two parts)."""
    tmp = tmp_path_factory.mktemp("index")
    write_corpora(tmp, 3_000, {"a": 2_000})
    for name in ("base", "a"):
        done = neardup("dedup", f"{name}.jsonl", "--output", f"{name}.out.jsonl", "--index",
                       "idx", "--workers", "1", "--quiet", cwd=tmp)  # fmt: skip
        assert done.returncode == 0, done.stderr
    return tmp


def _ids_file(tmp: Path, idx: Path, name: str, every: int) -> tuple[Path, list[str]]:
    """Every ``every``-th indexed id (both parts), and two unknown ones, as a file."""
    ids = index_table(idx).column("id").to_pylist()[::every]
    lines = [*ids[: len(ids) // 2], *(json.dumps({"id": i}) for i in ids[len(ids) // 2 :])]
    path = tmp / name
    path.write_text("\n".join([*lines, "no-such-id", '{"id": "nor-this"}']) + "\n")
    return path, ids


def test_kill_9_before_the_commit_leaves_the_index_as_it_was(built, tmp_path) -> None:
    idx = tmp_path / "idx"
    shutil.copytree(built / "idx", idx)
    before, rows = snapshot(idx), index_table(idx)
    ids_path, ids = _ids_file(tmp_path, idx, "ids.txt", 37)
    given = ids_path.read_bytes(), ids_path.stat().st_mtime_ns
    proc = spawn("index", "delete", idx, "--ids", ids_path, cwd=tmp_path,
                 NEARDUP_TEST_PAUSE="commit")  # fmt: skip
    stopped_at(proc, "commit")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert snapshot(idx) == before and index_table(idx).equals(rows)
    info = neardup("index", "info", idx, "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["leftovers_total"] == 2  # a vector in each part, unlisted

    done = neardup("index", "delete", idx, "--ids", ids_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"deleted {len(ids)} documents" in line and "2 ids not in the index" in line
    assert (ids_path.read_bytes(), ids_path.stat().st_mtime_ns) == given  # never changed
    version, manifest = latest_manifest(idx)
    assert version == before["version"] + 1 and manifest["format_version"] == 4
    left = index_table(idx)
    assert sorted(left.column("id").to_pylist()) == sorted(
        set(rows.column("id").to_pylist()) - set(ids)
    )
    assert manifest["rows"] == len(left) == len(rows) - len(ids)
    # the deleted documents are no longer found by a query of their own texts
    texts = {r["id"]: r["text"] for name in ("base", "a") for r in _read(built / f"{name}.jsonl")}
    (tmp_path / "q.jsonl").write_text(
        "".join(json.dumps({"id": f"q{k}", "text": texts[i]}) + "\n" for k, i in enumerate(ids))
    )
    query = neardup("index", "query", idx, "q.jsonl", "--output", "found.jsonl", "--quiet",
                    cwd=tmp_path)  # fmt: skip
    assert query.returncode == 0, query.stderr
    found = {m["id"] for r in _read(tmp_path / "found.jsonl") for m in r["matches"]}
    assert not found & set(ids)
    again = neardup("index", "delete", idx, "--ids", ids_path, cwd=tmp_path)
    assert again.returncode == 0 and "nothing deleted" in again.stderr
    assert latest_manifest(idx)[0] == version  # idempotent: no new version


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_two_deletes_stopped_before_their_commits_one_wins_the_other_is_exit_3(
    built, tmp_path
) -> None:
    idx = tmp_path / "idx"
    shutil.copytree(built / "idx", idx)
    version = latest_manifest(idx)[0]
    first_ids, _ = _ids_file(tmp_path, idx, "one.txt", 101)
    second_ids, _ = _ids_file(tmp_path, idx, "two.txt", 103)
    runs = [
        spawn("index", "delete", idx, "--ids", path, cwd=tmp_path, NEARDUP_TEST_PAUSE="commit")
        for path in (first_ids, second_ids)
    ]
    for proc in runs:
        stopped_at(proc, "commit")
    os.kill(runs[0].pid, signal.SIGCONT)
    _, err = runs[0].communicate(timeout=60)
    assert runs[0].returncode == 0, err
    os.kill(runs[1].pid, signal.SIGCONT)
    _, err = runs[1].communicate(timeout=60)
    assert runs[1].returncode == 3, err
    [line] = err.strip().splitlines()
    assert line.startswith("neardup index delete: error: ")
    assert f"another run added version {version + 1} (no new part)" in line
    assert "nothing was deleted" in line
    assert latest_manifest(idx)[0] == version + 1
    info = json.loads(neardup("index", "info", idx, "--json", cwd=tmp_path).stdout)
    assert info["leftovers_total"] == 0  # the loser removed its vectors
    rerun = neardup("index", "delete", idx, "--ids", second_ids, cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    assert latest_manifest(idx)[0] == version + 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"id": 7}\n', 'bad.txt:1: has no "id" that is a non-empty string'),
        (b"a\n{not json\n", "bad.txt:2: is not a JSON object"),
        (b"ok\n\xff\xfe\n", "bad.txt:2: is not UTF-8 text"),
    ],
)
def test_a_bad_ids_file_is_one_line_and_exit_2(built, tmp_path, content, message) -> None:
    idx = tmp_path / "idx"
    shutil.copytree(built / "idx", idx)
    before = snapshot(idx)
    (tmp_path / "bad.txt").write_bytes(content)
    done = neardup("index", "delete", idx, "--ids", "bad.txt", cwd=tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("neardup index delete: error: ") and message in line
    assert snapshot(idx) == before
