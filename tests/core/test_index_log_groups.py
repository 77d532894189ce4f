"""The grouped version log (format_version 4, core/_index_log.py): the versions after the seal
kept 1,000 (here a few) a directory; an open lists only the newest group, and still never
reads a committed version as an older one; indexes of the flat layout open and migrate."""

import json
import shutil
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from fsspec.implementations.local import LocalFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.core import _index_log, _index_manifest
from neardup.core.engine import (
    DocIndex,
    IndexConflictError,
    IndexDamagedError,
    IndexPart,
    MinhashParams,
    commit_index,
    compact_index,
    index_info,
)
from tests.indexes import flat_layout

PARAMS = MinhashParams(num_perm=16, bands=4, threshold=0.5, k=2)


@pytest.fixture
def small_groups(monkeypatch: pytest.MonkeyPatch) -> int:
    """Groups of 3 versions (1,000 in the format): boundaries within a few commits."""
    monkeypatch.setattr(_index_log, "GROUP", 3)
    return 3


def _commit(url: str, idx: Path) -> int:
    """One version adding an empty part of its own (its directory and marker there, as a
    run's part has them: the proof of its commit)."""
    index = DocIndex.open(url, missing_ok=True)
    name = f"p{index.version + 1:08d}-{index.version + 1:012x}"
    (idx / "parts" / name).mkdir(parents=True)
    return commit_index(index, PARAMS, [IndexPart(name, 0, ())])


def _build(idx: Path, versions: int) -> str:
    url = str(idx)
    for _ in range(versions):
        _commit(url, idx)
    return url


def _path(version: int, group: int = 3) -> str:
    if version == 1:
        return "_index/00000001.json"
    return f"_index/log/{version // group:05d}/{version:08d}.json"


def _lose(idx: Path, version: int, group: int = 3) -> None:
    """Version ``version`` lost (the seal with its copy)."""
    (idx / _path(version, group)).unlink()
    (idx / f"_index/log/{version // group:05d}/{version:08d}.json").unlink(missing_ok=True)


class _Listed(LocalFileSystem):
    """A local filesystem that records the directories listed."""

    listed: ClassVar[list[str]] = []

    def ls(self, path, detail=False, **kwargs):
        self.listed.append(str(path))
        return super().ls(path, detail=detail, **kwargs)


def test_versions_past_the_seal_are_grouped_and_an_open_lists_only_the_newest_group(
    tmp_path: Path, small_groups: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 8)
    found = sorted(str(p.relative_to(idx)) for p in (idx / "_index").rglob("*"))
    assert found == [
        "_index/00000001.json", "_index/log", "_index/log/00000",
        "_index/log/00000/00000001.json", "_index/log/00000/00000002.json",  # the seal's copy
        "_index/log/00001", "_index/log/00001/00000003.json", "_index/log/00001/00000004.json",
        "_index/log/00001/00000005.json", "_index/log/00002", "_index/log/00002/00000006.json",
        "_index/log/00002/00000007.json", "_index/log/00002/00000008.json",
    ]  # fmt: skip
    first = json.loads((idx / "_index/00000001.json").read_text())
    assert (first["format_version"], first["sealed"]) == (4, 1)
    assert json.loads((idx / _path(8)).read_text())["sealed"] == 1
    fs = _Listed()
    monkeypatch.setattr(_Listed, "listed", [])
    index = DocIndex(url, fs, url, 0, {})
    assert _index_log.read_latest(url, fs, str(idx)) == (8, DocIndex.open(url).manifest)
    assert [Path(p).relative_to(idx).as_posix() for p in fs.listed] == [
        "_index/log",
        "_index/log/00002",
        "parts",
    ]  # neither the flat log nor an older group
    assert index.version == 0 and DocIndex.open(url).version == 8
    assert index_info(url)["versions"] == list(range(1, 9))


@pytest.mark.parametrize(
    ("lost", "message"),
    [
        (7, "is missing (versions 5 to 8 must all be there)"),  # in the newest group
        (6, "is missing (versions 5 to 8 must all be there)"),  # its first
        (5, "is missing (versions 5 to 8 must all be there)"),  # the one before it
    ],
)
def test_a_version_missing_in_the_newest_group_or_before_it_is_damage_naming_it(
    tmp_path: Path, small_groups: int, lost: int, message: str
) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 8)
    _lose(idx, lost)
    for read in (lambda: DocIndex.open(url), lambda: DocIndex.open(url, missing_ok=True)):
        with pytest.raises(IndexDamagedError) as caught:
            read()
        assert (caught.value.path, caught.value.problem.split(";")[0]) == (_path(lost), message)


def test_the_seal_before_the_newest_group_is_checked(tmp_path: Path, small_groups: int) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 2)  # 1 (the seal, flat and copied) and 2 in group 0
    (idx / "_index/00000001.json").unlink()  # its copy stays: no version
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert caught.value.path == "_index/00000001.json"
    assert caught.value.problem.startswith("is missing (versions 1 to 2 must all be there)")


def test_a_group_missing_between_two_is_damage(tmp_path: Path, small_groups: int) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 8)
    shutil.rmtree(idx / "_index/log/00001")  # as on an object store: no empty "directory"
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert str(caught.value) == (
        f"{url}: the index is damaged: _index/log/00001/ is missing (groups 00000 to 00002 "
        "must all be there); restore it: an index is never read without one of its versions"
    )


def test_a_lost_newest_group_is_proved_by_its_committed_parts(
    tmp_path: Path, small_groups: int
) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 8)
    shutil.rmtree(idx / "_index/log/00002")
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url, missing_ok=True)
    assert caught.value.path == _path(6)
    assert caught.value.problem.startswith("is missing but parts/p00000006-")


def test_an_empty_newest_group_of_a_killed_commit_is_passed_over(
    tmp_path: Path, small_groups: int
) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 8)
    (idx / "_index/log/00003").mkdir()  # made, then killed before its version's file
    assert DocIndex.open(url).version == 8
    assert _commit(url, idx) == 9 and DocIndex.open(url).version == 9
    (idx / "_index/log/00004").mkdir()
    (idx / "_index/log/00005").mkdir()
    with pytest.raises(IndexDamagedError, match=r"_index/log/00004/ holds no version"):
        DocIndex.open(url)


def test_a_version_lost_from_an_older_group_is_found_by_info_not_read(
    tmp_path: Path, small_groups: int
) -> None:
    """An open reads the newest version and checks its group and the one before: a file
    lost from a closed group is never read, and ``index info`` lists the whole log."""
    idx = tmp_path / "idx"
    url = _build(idx, 8)
    _lose(idx, 3)
    assert DocIndex.open(url).version == 8
    with pytest.raises(IndexDamagedError) as caught:
        index_info(url)
    assert (caught.value.path, caught.value.problem.split(";")[0]) == (
        _path(3),
        "is missing (versions 1 to 8 must all be there)",
    )
    _lose(tmp_path / "idx", 1)
    with pytest.raises(IndexDamagedError, match=r"_index/00000001\.json is missing"):
        index_info(url)


def _old_neardup(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as a neardup before format_version 4 reading an index whose parts are all
    written for the seal or before (so its lost-version check, which runs first, finds
    nothing): it reads 1 to 3 and lists the flat log only."""
    monkeypatch.setattr(_index_manifest, "FORMAT_VERSIONS", (1, 2, 3))
    monkeypatch.setattr(_index_log, "_groups", lambda fs, root: [])


def test_an_index_of_the_flat_layout_opens_and_its_next_commit_seals_it(
    tmp_path: Path, small_groups: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 4)
    flat_layout(idx)
    assert sorted(p.name for p in (idx / "_index").iterdir()) == [
        f"{v:08d}.json" for v in (1, 2, 3, 4)
    ]
    old = DocIndex.open(url)
    assert (old.version, old.manifest["format_version"], "sealed" in old.manifest) == (4, 3, False)
    assert _commit(url, idx) == 5  # the seal: flat, then copied into the grouped log
    seal = json.loads((idx / "_index/00000005.json").read_text())
    assert (seal["format_version"], seal["sealed"]) == (4, 5)
    assert (idx / "_index/log/00001/00000005.json").read_bytes() == (
        idx / "_index/00000005.json"
    ).read_bytes()
    with monkeypatch.context() as older:
        _old_neardup(older)
        with pytest.raises(IndexDamagedError) as caught:
            DocIndex.open(url)
    assert str(caught.value) == (
        f"{url}: the index is damaged: _index/00000005.json has format_version 4; this "
        "neardup reads 1, 2 and 3"
    )
    assert _commit(url, idx) == 6 and (idx / "_index/log/00002/00000006.json").exists()
    assert DocIndex.open(url).manifest["sealed"] == 5
    assert DocIndex.open(url).files_of_version(5) is not None
    assert DocIndex.open(url).files_of_version(3) is not None
    assert index_info(url)["versions"] == [1, 2, 3, 4, 5, 6]


def test_an_older_neardup_reads_a_flat_index_and_refuses_it_once_compacted(
    tmp_path: Path, small_groups: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    idx = tmp_path / "idx"
    url = str(idx)
    for _ in range(2):  # versions of no part: nothing for a compaction to rewrite
        commit_index(DocIndex.open(url, missing_ok=True), PARAMS)
    flat_layout(idx)
    with monkeypatch.context() as old:
        _old_neardup(old)
        assert DocIndex.open(url).version == 2
    done = compact_index(url, neardup="t")  # nothing to rewrite: committed for the log alone
    assert (done.version, done.merged) == (3, ())
    assert DocIndex.open(url).manifest["sealed"] == 3
    assert (idx / "_index/log/00001/00000003.json").exists()  # the next open lists no flat log
    _old_neardup(monkeypatch)
    with pytest.raises(IndexDamagedError, match=r"_index/00000003\.json has format_version 4"):
        DocIndex.open(url)


def test_two_commits_of_one_version_across_a_group_boundary_race_safely(
    tmp_path: Path, small_groups: int
) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 5)  # version 6 opens group 2
    base = DocIndex.open(url)
    names = ["p00000006-00000000000a", "p00000006-00000000000b"]
    assert commit_index(base, PARAMS, [IndexPart(names[0], 0, ())]) == 6
    with pytest.raises(IndexConflictError) as caught:
        commit_index(base, PARAMS, [IndexPart(names[1], 0, ())])
    assert caught.value.parts == [names[0]]
    assert [p.name for p in DocIndex.open(url).parts][-1] == names[0]


def test_two_commits_of_the_seal_race_safely(tmp_path: Path, small_groups: int) -> None:
    idx = tmp_path / "idx"
    url = _build(idx, 2)
    flat_layout(idx)
    base = DocIndex.open(url)
    names = ["p00000003-00000000000a", "p00000003-00000000000b"]
    assert commit_index(base, PARAMS, [IndexPart(names[0], 0, ())]) == 3
    with pytest.raises(IndexConflictError):
        commit_index(base, PARAMS, [IndexPart(names[1], 0, ())])
    assert [p.name for p in DocIndex.open(url).parts][-1] == names[0]
    assert DocIndex.open(url).manifest["sealed"] == 3


def test_writers_committing_at_once_lose_no_version_and_no_part(
    tmp_path: Path, small_groups: int
) -> None:
    """Threads committing with retries across group boundaries: every part in the newest
    version, every version 1 to N in the log."""
    url = str(tmp_path / "idx")
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for j in range(4):
                while True:
                    index = DocIndex.open(url, missing_ok=True)
                    name = f"p{index.version + 1:08d}-{k:06x}{j:06x}"
                    try:
                        commit_index(index, PARAMS, [IndexPart(name, 0, ())])
                        break
                    except IndexConflictError:
                        continue
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and not any(t.is_alive() for t in threads)
    latest = DocIndex.open(url)
    assert latest.version == 16 and len(latest.parts) == 16
    assert index_info(url)["versions"] == list(range(1, 17))


@given(
    versions=st.integers(1, 10),
    group=st.integers(1, 4),
    lost=st.none() | st.integers(1, 10),
)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_committed_version_is_never_read_as_an_older_one(
    tmp_path_factory, monkeypatch, versions: int, group: int, lost: int | None
) -> None:
    """Whatever version file is lost, an open reads the newest version or is damage naming
    the lost file; ``index info`` (the whole log) names any lost one."""
    monkeypatch.setattr(_index_log, "GROUP", group)
    idx = tmp_path_factory.mktemp("idx") / "idx"
    url = _build(idx, versions)
    lost = None if lost is None or lost > versions else lost
    if lost is not None:
        _lose(idx, lost, group)
    # What an open checks: the newest group from its first version after the seal (1), and
    # the one before that; a version past the newest is proved by its committed part.
    checked = max(versions // group * group, 2) - 1
    try:
        opened = DocIndex.open(url, missing_ok=True)
    except IndexDamagedError as exc:
        assert lost is not None and exc.path == _path(lost, group)
    else:
        assert opened.version == versions
        assert lost is None or lost < checked
    if lost is None:
        assert index_info(url)["versions"] == list(range(1, versions + 1))
    else:
        with pytest.raises(IndexDamagedError) as caught:
            index_info(url)
        assert caught.value.path == _path(lost, group)


def test_a_commits_temporary_file_is_a_leftover_found_without_walking_the_groups(
    tmp_path: Path, small_groups: int
) -> None:
    from neardup.core.engine import index_leftovers

    idx = tmp_path / "idx"
    url = _build(idx, 4)
    (idx / "_index/log/.tmp-1-abc").write_bytes(b"{}")  # where a grouped commit writes it
    (idx / "_index/.tmp-2-def").write_bytes(b"{}")  # where the seal's commit writes it
    found = [x.path for x in index_leftovers(DocIndex.open(url))]
    assert found == ["_index/.tmp-2-def", "_index/log/.tmp-1-abc"]
    assert compact_index(url, neardup="t", leftover_age=0).removed == (
        "_index/.tmp-2-def",
        "_index/log/.tmp-1-abc",
    )
