"""An index lives in a directory of its own: ``--index`` over a directory holding corpus files
is refused (exit 2, nothing written), and a directory input skips the index files it holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neardup.app.cli.main import main
from neardup.core.engine import expand_inputs

ROWS = [{"id": f"n{i}", "text": f"a new document about the subject number {i} of many"}
        for i in range(4)]  # fmt: skip


def _jsonl(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _jsonl(tmp_path / "new.jsonl", ROWS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _dedup(*args: str) -> int:
    return main(["dedup", *args, "--workers", "1", "--quiet"])


@pytest.mark.parametrize("corpus", ["old.jsonl", "shards/old.parquet", "deep/er/old.jsonl.gz"])
def test_an_index_in_a_directory_holding_a_corpus_is_refused(work: Path, capsys, corpus: str):
    (work / "d" / corpus).parent.mkdir(parents=True)
    (work / "d" / corpus).write_bytes(b"not read")
    before = _files(work)
    assert _dedup("new.jsonl", "--output", "out.jsonl", "--index", "d") == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        f"neardup dedup: error: --index d holds corpus files ({corpus}): an index directory "
        "holds only its own _index/ and parts/; give the index a directory of its own"
    )
    assert _files(work) == before


def test_an_index_directory_may_hold_other_files_and_its_own(work: Path):
    (work / "d").mkdir()
    (work / "d" / "README.txt").write_text("the team's index")
    (work / "d" / ".hidden.jsonl").write_text("{}\n")
    assert _dedup("new.jsonl", "--output", "out.jsonl", "--index", "d") == 0
    _jsonl(work / "more.jsonl", [{"id": "m", "text": "another one entirely, with other words"}])
    assert _dedup("more.jsonl", "--output", "out2.jsonl", "--index", "d") == 0  # its parts/ too


def test_a_directory_input_skips_the_index_it_holds(work: Path, capsys):
    assert _dedup("new.jsonl", "--output", "out.jsonl", "--index", "top/idx") == 0
    _jsonl(work / "top" / "b.jsonl", ROWS[:2])
    assert sorted(s.name for s in expand_inputs(["top"])) == ["top/b.jsonl"]
    assert sorted(s.name for s in expand_inputs(["top"], corpus=False)) == ["top/b.jsonl"]
    assert _dedup("top", "--output", "o.jsonl") == 0
    assert json.loads((work / "o.jsonl.manifest.json").read_text())["counts"]["read"] == 2
    assert _dedup("top/idx", "--output", "o2.jsonl") == 2
    assert capsys.readouterr().err.strip() == (
        "neardup dedup: error: top/idx: a neardup index, not a corpus: its documents are read "
        "through --index only"
    )


def test_a_folder_named_parts_outside_an_index_is_read(work: Path):
    _jsonl(work / "top" / "parts" / "a.jsonl", ROWS[:1])
    _jsonl(work / "top" / "x" / "_index" / "notes.txt", ROWS[:1])
    assert [s.name for s in expand_inputs(["top"])] == ["top/parts/a.jsonl"]


def test_the_index_folders_skipped_are_the_ones_an_index_writes():
    from neardup.core import _index_log, _storage

    assert _storage.INDEX_DIRS == (_index_log.LOG, _index_log.PARTS)


def test_an_index_beside_a_corpus_is_still_read_but_not_written(work: Path, capsys):
    assert _dedup("new.jsonl", "--output", "out.jsonl", "--index", "d") == 0  # before the corpus
    (work / "d" / "old.jsonl").write_text('{"id": "o", "text": "an old corpus row"}\n')
    assert main(["index", "info", "d"]) == 0
    assert main(["index", "query", "d", "new.jsonl", "--output", "q.jsonl", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["index", "compact", "d"]) == 2
    assert "error: IDX d holds corpus files (old.jsonl)" in capsys.readouterr().err
    read_mode = ["--index", "d", "--index-mode", "read"]
    assert _dedup("new.jsonl", "--output", "out2.jsonl", *read_mode) == 2


def test_an_index_url_is_checked_as_a_directory_is():
    import fsspec

    from neardup.core.engine import ParameterError, check_index_home

    fs = fsspec.filesystem("memory")
    fs.pipe("/home32/idx/_index/00000001.json", b"{}")
    fs.pipe("/home32/idx/parts/p1/data-00000.parquet", b"x")
    fs.pipe("/home32/idx/NOTES.md", b"x")
    check_index_home("--index", "memory://home32/idx")
    check_index_home("--index", "memory://home32/new")  # not there yet: made by the run
    fs.pipe("/home32/idx/shards/a.jsonl.zst", b"x")
    with pytest.raises(ParameterError, match=r"holds corpus files \(shards/a\.jsonl\.zst\)"):
        check_index_home("--index", "memory://home32/idx")
    fs.rm("/home32", recursive=True)
