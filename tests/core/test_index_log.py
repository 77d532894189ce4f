"""The index's version log and part files (core/_index.py), function by function: the version
file names, the exclusive create, a version file's body, the reader's checks and their exact
messages, the row groups read together and those an id range skips."""

import json
import shutil
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.core import _index, _index_idrows
from neardup.core._index import _spans
from neardup.core._index_commit import _create_exclusive
from neardup.core._index_idrows import find_ids
from neardup.core._index_idrows import groups_in_range as _groups_in_range
from neardup.core._index_log import versions as _versions
from neardup.core.engine import (
    DocIndex,
    IndexChangedError,
    IndexConflictError,
    IndexDamagedError,
    IndexFile,
    IndexIdError,
    IndexMissingError,
    IndexParameterError,
    IndexPart,
    MinhashParams,
    batch_signatures,
    commit_index,
    index_params,
    run_info,
    text_digests,
    write_part,
)

PARAMS = MinhashParams(num_perm=16, bands=4, threshold=0.5, k=2)


def _add(url: str, ids: list[str], params: MinhashParams = PARAMS) -> DocIndex:
    index = DocIndex.open(url, missing_ok=True)
    texts = [f"text of {i} here" for i in ids]
    sigs = batch_signatures(texts, params)
    part = write_part(index, params, ids, text_digests(texts), sigs, run_info("local", "t", []))
    commit_index(index, params, [part])
    return DocIndex.open(url)


def _message(url: str, path: str, problem: str) -> str:
    return f"{url}: the index is damaged: {path} {problem}"


@pytest.mark.parametrize(
    ("sizes", "rows", "spans"),
    [
        ([], 5, []),
        ([1, 1, 1], 2, [[0, 1], [2]]),
        ([3], 1, [[0]]),
        ([2, 2, 2], 4, [[0, 1], [2]]),
        ([2, 2, 2], 3, [[0], [1], [2]]),
        ([5, 1], 5, [[0], [1]]),
        ([1, 5], 5, [[0], [1]]),
        ([0, 0, 3], 2, [[0, 1], [2]]),
        ([1, 1, 1, 1], 100, [[0, 1, 2, 3]]),
    ],
)
def test_spans_are_consecutive_groups_of_about_rows_and_one_at_least(sizes, rows, spans) -> None:
    assert list(_spans(sizes, rows)) == spans


def test_versions_are_the_eight_digit_json_names_ascending(tmp_path: Path) -> None:
    log = tmp_path / "_index"
    log.mkdir()
    for name in ["00000010.json", "00000002.json", "00000001.json", "0000003.json",
                 "000000004.json", "00000005.json.tmp", "x00000006.json", "00000007.jsonX",
                 ".tmp-1-abc", "0000000a.json"]:  # fmt: skip
        (log / name).write_text("{}")
    fs = fsspec.filesystem("file")
    assert _versions(fs, str(tmp_path)) == [1, 2, 10]
    assert _versions(fs, str(tmp_path / "none")) == []
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "_index").write_text("a file, not the log")
    assert _versions(fs, str(tmp_path / "flat")) == []


def test_create_exclusive_on_disk_writes_once_and_leaves_no_temporary(tmp_path: Path) -> None:
    fs = fsspec.filesystem("file")
    path = str(tmp_path / "00000001.json")
    assert _create_exclusive(fs, path, b"first") is True
    assert _create_exclusive(fs, path, b"second") is False
    assert Path(path).read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000001.json"]


def test_create_exclusive_on_an_object_store_writes_once() -> None:
    fs = fsspec.filesystem("memory")
    path = "/neardup-test-exclusive/00000001.json"
    try:
        assert _create_exclusive(fs, path, b"first") is True
        assert _create_exclusive(fs, path, b"second") is False
        assert fs.cat(path) == b"first"
    finally:
        fs.rm("/neardup-test-exclusive", recursive=True)


def test_a_part_round_trips_through_its_json() -> None:
    part = IndexPart("p1", 3, (IndexFile("parts/p1/a.parquet", 2, 10), IndexFile("b", 1, 5)),
                     {"engine": "local"})  # fmt: skip
    item = part.as_json()
    assert item == {
        "name": "p1", "rows": 3, "run": {"engine": "local"},
        "files": [{"path": "parts/p1/a.parquet", "rows": 2, "bytes": 10},
                  {"path": "b", "rows": 1, "bytes": 5}],
    }  # fmt: skip
    assert IndexPart.from_json(item) == part
    bare = IndexPart.from_json({"name": 7, "rows": "2", "files": [{"path": 1, "rows": "2",
                                                                     "bytes": "9"}]})  # fmt: skip
    assert bare == IndexPart("7", 2, (IndexFile("1", 2, 9),), {})
    assert IndexPart.from_json({"name": "a", "rows": 0, "files": [], "run": None}).run == {}


@pytest.mark.parametrize(
    ("root", "kept"),
    [("/a/b/", "/a/b"), ("/a/b", "/a/b"), ("/", "/"), ("x//", "x"), ("/a/XX/", "/a/XX")],
)
def test_an_index_root_loses_its_trailing_slash_but_the_root_itself(root: str, kept: str) -> None:
    index = DocIndex("u", fsspec.filesystem("file"), root, 0, {})
    assert index.root == kept
    assert index.path("parts/p/x.parquet") == f"{kept.rstrip('/')}/parts/p/x.parquet"


@pytest.mark.parametrize(
    "parts",
    [[{"name": "p"}], [{"rows": 1, "files": []}], [{"name": "p", "rows": 1, "files": [{}]}],
     [{"name": "p", "rows": "many", "files": []}], [3]],
)  # fmt: skip
def test_a_malformed_version_is_damage_naming_its_file(parts: list) -> None:
    body = {"format": "neardup-index", "format_version": 1, "version": 3,
            "params": index_params(PARAMS), "parts": parts, "rows": 1}  # fmt: skip
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex("u", None, "/r", 3, body)
    assert str(caught.value).startswith(
        "u: the index is damaged: _index/00000003.json is malformed ("
    )


def _version_file(url: str, version: int, body: object) -> None:
    log = Path(url) / "_index"
    log.mkdir(parents=True, exist_ok=True)
    text = body if isinstance(body, str) else json.dumps(body)
    (log / f"{version:08d}.json").write_text(text)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("{not json", "cannot be read ("),
        ("[1, 2]", "is not a neardup-index version file"),
        ({"format": "other", "format_version": 1}, "is not a neardup-index version file"),
        ({"format_version": 1}, "is not a neardup-index version file"),
        ({"format": "neardup-index"}, "has format_version None; this neardup reads 1"),
        ({"format": "neardup-index", "format_version": "1"},
         "has format_version '1'; this neardup reads 1"),
    ],
)  # fmt: skip
def test_a_version_file_not_of_this_format_is_damage(tmp_path: Path, body, problem: str) -> None:
    url = str(tmp_path / "idx")
    _version_file(url, 1, body)
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert str(caught.value).startswith(_message(url, "_index/00000001.json", problem))


def test_open_reads_the_highest_version_and_its_parameters(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    base = {"format": "neardup-index", "format_version": 1, "parts": [], "rows": 0}
    small = MinhashParams(num_perm=16, bands=4)
    _version_file(url, 1, {**base, "version": 1, "params": index_params(PARAMS)})
    _version_file(url, 2, {**base, "version": 2, "params": index_params(small)})
    index = DocIndex.open(url)
    assert (index.url, index.version, index.rows) == (url, 2, 0)
    assert index.params == index_params(small) and index.minhash_params() == small
    index.params["bands"] = 1  # a copy
    assert index.params == index_params(small)


def test_a_missing_index_opened_as_allowed_is_version_zero_at_its_url(tmp_path: Path) -> None:
    url = str(tmp_path / "new")
    index = DocIndex.open(url, missing_ok=True)
    assert (index.url, index.version, index.manifest, index.parts) == (url, 0, {}, [])
    assert index.root == url and index.file_urls() == []
    assert index.id_parts(["a"]) == {} and index.lookup(
        np.zeros((2, 16), np.uint32), np.zeros((2, 2), np.uint64)
    ).exact.tolist() == [-1, -1]


def test_commit_writes_the_version_body_byte_for_byte(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    first = _add(url, ["b", "a"])
    part = first.parts[0]
    other = MinhashParams(num_perm=16, bands=4, threshold=0.9, k=2)
    name = "p00000002-0123456789ab"
    extra = IndexPart(name, 5, (IndexFile(f"parts/{name}/x.parquet", 5, 99),), {"k": "é"})
    assert commit_index(first, other, [extra], drop=["nothing"]) == 2
    raw = (Path(url) / "_index" / "log" / "00000" / "00000002.json").read_bytes()
    body = {
        "format": "neardup-index", "format_version": 4, "version": 2,
        "params": index_params(PARAMS),  # the index's, not the committing run's
        "parts": [part.as_json(), extra.as_json()], "rows": 7, "sealed": 1,
    }  # fmt: skip
    assert raw == (json.dumps(body, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()
    assert part.name.startswith("p00000001-") and len(part.name) == len("p00000001-") + 12
    assert part.files[0].path == f"parts/{part.name}/data-00000.parquet"
    assert (part.rows, part.files[0].rows) == (2, 2)
    assert part.files[0].bytes == (Path(url) / part.files[0].path).stat().st_size
    second = DocIndex.open(url)
    assert commit_index(second, PARAMS, [], drop=[part.name, name]) == 3
    third = DocIndex.open(url)
    assert third.parts == [] and third.manifest["rows"] == 0 and third.params == second.params


def test_a_first_commit_locks_the_committing_runs_parameters(tmp_path: Path) -> None:
    index = DocIndex.open(str(tmp_path / "idx"), missing_ok=True)
    assert commit_index(index, PARAMS) == 1
    after = DocIndex.open(str(tmp_path / "idx"))
    assert after.params == index_params(PARAMS) and after.manifest["parts"] == []


def test_a_lost_commit_names_only_the_winners_new_parts(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    base = _add(url, ["a"])
    won, lost = "p00000002-00000000000a", "p00000002-00000000000b"
    commit_index(base, PARAMS, [IndexPart(won, 0, ())])
    with pytest.raises(IndexConflictError) as caught:
        commit_index(base, PARAMS, [IndexPart(lost, 0, ())])
    assert (caught.value.version, caught.value.parts) == (2, [won])
    with pytest.raises(IndexConflictError) as caught:
        commit_index(base, PARAMS)
    assert caught.value.parts == [won]


def test_a_part_of_no_rows_is_a_file_of_no_rows(tmp_path: Path) -> None:
    index = DocIndex.open(str(tmp_path / "idx"), missing_ok=True)
    part = write_part(index, PARAMS, [], np.empty((0, 2), np.uint64),
                      np.empty((0, 16), np.uint32), {})  # fmt: skip
    assert part.rows == 0 and part.files[0].rows == 0
    path = tmp_path / "idx" / part.files[0].path
    assert pq.read_table(path).num_rows == 0 and part.files[0].bytes == path.stat().st_size


def test_a_part_is_written_a_batch_at_a_time_in_row_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_index, "ROW_GROUP", 2)
    monkeypatch.setattr(_index, "BATCH_ROWS", 3)
    ids = [f"d{i}" for i in range(7)][::-1]
    index = _add(str(tmp_path / "idx"), ids)
    meta = pq.ParquetFile(index.file_urls()[0]).metadata
    sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    assert sizes == [2, 1, 2, 1, 1]  # slices of 3, groups of 2 within each
    assert pq.read_table(index.file_urls()[0]).column("id").to_pylist() == sorted(ids)
    options = pq.ParquetFile(index.file_urls()[0]).metadata.row_group(0)
    assert options.column(1).compression == "UNCOMPRESSED"
    assert options.column(0).compression == "ZSTD"
    assert not options.column(1).is_stats_set and options.column(0).is_stats_set
    # Read back about 3 rows (whole groups) at a time, or one group at a time.
    batches = [(g, t.num_rows, t.column_names) for _, _, _, g, t in
               index.row_group_batches(["id"], rows=3)]  # fmt: skip
    assert batches == [([0, 1], 3, ["id"]), ([2, 3], 3, ["id"]), ([4], 1, ["id"])]
    monkeypatch.setattr(_index, "BATCH_ROWS", 4)
    default = [g for _, _, _, g, _ in index.row_group_batches(["digest"])]
    assert default == [[0, 1], [2, 3, 4]]
    groups = [(g, t.num_rows) for _, _, _, g, t in index.row_groups(["id", "bands"])]
    assert groups == [(0, 2), (1, 1), (2, 2), (3, 1), (4, 1)]


def _stats_file(
    path: Path, groups: list[list], kind: pa.DataType | None = None, stats: bool = True
) -> pq.FileMetaData:
    ids = [i for g in groups for i in g]
    table = pa.table({"x": pa.array(range(len(ids))), "id": pa.array(ids, kind or pa.string())})
    with pq.ParquetWriter(path, table.schema, write_statistics=stats) as writer:
        at = 0
        for g in groups:
            writer.write_table(table.slice(at, len(g)))
            at += len(g)
    return pq.ParquetFile(path).metadata


@pytest.mark.parametrize(
    ("asked", "groups"),
    [
        ([], []),
        (["a"], [0]),
        (["b"], [0]),
        (["c"], [0, 1]),
        (["bb"], [0]),
        (["ca"], [1]),
        (["d", "e"], [1]),
        (["ee"], []),
        (["f"], [2]),
        (["h", "i"], [2]),
        (["0", "zz"], []),
        (["a", "g"], [0, 2]),
    ],
)  # fmt: skip
def test_groups_in_range_are_those_whose_id_range_holds_an_asked_id(
    tmp_path: Path, asked: list[str], groups: list[int]
) -> None:
    meta = _stats_file(tmp_path / "s.parquet", [["a", "b", "c"], ["c", "d", "e"], ["f", "h"]])
    assert _groups_in_range(meta, asked) == groups


def test_groups_without_string_statistics_are_always_read(tmp_path: Path) -> None:
    plain = _stats_file(tmp_path / "n.parquet", [["a"], ["b"]], stats=False)
    assert _groups_in_range(plain, ["zz"]) == [0, 1]
    raw = _stats_file(tmp_path / "b.parquet", [[b"a"], [b"b"]], kind=pa.binary())
    assert _groups_in_range(raw, ["zz"]) == [0, 1]


def _group_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The row groups of each ``ParquetFile.read_row_groups`` call from now on, in order."""
    read: list[list[int]] = []
    real = pq.ParquetFile.read_row_groups

    def spy(self, groups, *args, **kwargs):
        read.append(list(groups))
        return real(self, groups, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    return read


def _statistics_parts(index: DocIndex, asked: list[str]) -> dict[str, str]:
    """``id_parts`` through the data files' id statistics (a part without an id table)."""
    found = find_ids(index, asked, (), scan=True)
    return dict(zip(found.ids, found.parts, strict=True))


def test_id_statistics_read_spans_of_groups_and_skip_groups_out_of_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_index, "ROW_GROUP", 2)
    monkeypatch.setattr(_index_idrows, "ROW_GROUP", 2)
    monkeypatch.setattr(_index_idrows, "BATCH_ROWS", 4)
    url = str(tmp_path / "idx")
    first = _add(url, [f"d{i}" for i in range(9)])
    index = _add(url, ["e1", "e2"])
    asked = ["d0", "d5", "d8", "e2", "x"]
    read = _group_reads(monkeypatch)
    found = _statistics_parts(index, asked)
    assert found == {"d0": first.parts[0].name, "d5": first.parts[0].name,
                     "d8": first.parts[0].name, "e2": index.parts[1].name}  # fmt: skip
    # d0-d1 | d2-d3 | d4-d5 | d6-d7 | d8: groups 0, 2 and 4 hold an asked id; two a read.
    assert read == [[0, 2], [4], [0]]
    assert _statistics_parts(index, []) == {}
    read.clear()  # through the id tables: the groups holding a row found, as many a read
    assert index.id_parts(asked) == found
    assert read == [[0, 2], [4], [0]]
    read.clear()
    assert index.id_parts(["d1x", "e0", "x"]) == {}  # no hash found: no group read
    assert read == []


def test_verify_names_a_file_of_another_size_or_missing(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    index = _add(url, ["a"])
    f = index.parts[0].files[0]
    index.verify()
    path = Path(url) / f.path
    path.write_bytes(path.read_bytes() + b"xx")
    with pytest.raises(IndexDamagedError) as caught:
        index.verify()
    assert str(caught.value) == _message(
        url, f.path, f"has {f.bytes + 2} bytes, the index lists {f.bytes}"
    )
    path.unlink()
    with pytest.raises(IndexDamagedError) as caught:
        index.verify()
    assert str(caught.value) == _message(url, f.path, "is missing")


def test_a_missing_file_still_listed_by_a_newer_version_is_damage(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    reader = _add(url, ["a"])
    _add(url, ["b"])  # version 2 lists the file too
    (Path(url) / reader.parts[0].files[0].path).unlink()
    with pytest.raises(IndexDamagedError, match="is missing"):
        reader.verify()
    with pytest.raises(IndexDamagedError, match="is missing"):
        reader.id_parts(["a"])
    current = DocIndex.open(url)
    with pytest.raises(IndexDamagedError, match="is missing") as caught:
        current.id_parts(["a"])
    assert not isinstance(caught.value, IndexChangedError)  # the same version: damage


def test_a_missing_file_of_an_index_whose_log_is_gone_is_damage(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    reader = _add(url, ["a"])
    (Path(url) / reader.parts[0].files[0].path).unlink()
    shutil.rmtree(Path(url) / "_index")
    with pytest.raises(IndexDamagedError, match="is missing"):
        reader.verify()


def test_a_removed_file_is_a_change_naming_both_versions(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    reader = _add(url, ["a"])
    f = reader.parts[0].files[0]
    commit_index(reader, PARAMS, [], drop=[reader.parts[0].name])
    (Path(url) / f.path).unlink()
    with pytest.raises(IndexChangedError) as caught:
        reader.verify()
    assert (caught.value.version, caught.value.path) == (2, f.path)
    assert str(caught.value).startswith(
        f"{url}: {f.path} of version 1, which this run reads, was removed by version 2"
    )


@pytest.mark.parametrize(
    ("how", "problem"),
    [
        ("garbage", "is not readable Parquet ("),
        ("no-bands", "has no column 'bands'"),
        ("no-id", "has no column 'id'"),
        ("rows", "holds 2 rows, the index lists 3"),
    ],
)
def test_a_part_file_not_as_listed_is_damage_naming_it(
    tmp_path: Path, how: str, problem: str
) -> None:
    url = str(tmp_path / "idx")
    index = _add(url, ["a", "b"])
    f = index.parts[0].files[0]
    path = Path(url) / f.path
    if how == "garbage":
        path.write_bytes(b"PAR1" + b"x" * 40)
    elif how.startswith("no-"):
        table = pq.read_table(path)
        pq.write_table(table.drop_columns([how[3:]]), path)
    else:
        f = IndexFile(f.path, 3, f.bytes)
    with pytest.raises(IndexDamagedError) as caught, index.parquet(f):
        pass
    assert str(caught.value).startswith(_message(url, f.path, problem))


def test_a_part_file_on_an_fsspec_url_is_read_through_fsspec() -> None:
    url = "memory://neardup-test-log"
    try:
        index = _add(url, ["a", "b"])
        f = index.parts[0].files[0]
        with index.parquet(f) as parquet:
            assert parquet.metadata.num_rows == 2
        index.fs.rm(index.path(f.path))
        with pytest.raises(IndexDamagedError, match="is missing"), index.parquet(f):
            pass
    finally:
        fsspec.filesystem("memory").rm("/neardup-test-log", recursive=True)


class _Meta:
    """A Parquet file's metadata as ``_groups_in_range`` reads it: one statistics per group."""

    def __init__(self, stats: list[object]) -> None:
        self.schema = type("Schema", (), {"names": ["x", "id"]})()
        self.num_row_groups = len(stats)
        self._stats = stats

    def row_group(self, group: int) -> object:
        stats = self._stats[group]
        column = type("Column", (), {"statistics": stats})()
        return type("Group", (), {"column": lambda self, i: column if i == 1 else None})()


def _minmax(low: object, high: object, has: bool = True) -> object:
    return type("Stats", (), {"min": low, "max": high, "has_min_max": has})()


def test_groups_whose_statistics_are_absent_or_not_strings_are_read() -> None:
    meta = _Meta([
        None, _minmax("a", "b", has=False), _minmax("a", b"b"), _minmax(b"a", "b"),
        _minmax(b"a", b"b"), _minmax("a", "b"), _minmax("y", "z"),
    ])  # fmt: skip
    assert _groups_in_range(meta, ["m"]) == [0, 1, 2, 3, 4]
    assert _groups_in_range(meta, ["b"]) == [0, 1, 2, 3, 4, 5]


def test_a_parameter_or_id_error_names_the_index_and_both_values(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    index = _add(url, ["a", "b"])
    other = MinhashParams(num_perm=16, bands=4, threshold=0.7, k=2)
    with pytest.raises(IndexParameterError) as caught:
        index.check_params(other)
    assert str(caught.value) == (
        f"{url}: parameter threshold is locked to the index: the index has 0.5, this run 0.7 "
        "(run with the index's value, or use another index)"
    )
    with pytest.raises(IndexIdError) as caught:
        index.check_ids(["b", "c"])
    assert str(caught.value).startswith(f"{url}: id 'b' (part {index.parts[0].name}) already")


@pytest.mark.parametrize("read", ["batches", "ids"])
def test_row_groups_that_cannot_be_read_are_damage_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    url = str(tmp_path / "idx")
    index = _add(url, ["a"])

    def broken(self, *args, **kwargs):
        raise OSError("bad page\n")

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", broken)
    with pytest.raises(IndexDamagedError) as caught:
        if read == "batches":
            list(index.row_group_batches(["id"]))
        else:
            index.id_parts(["a"])
    name = index.parts[0].files[0].path
    assert str(caught.value) == _message(url, name, "cannot be read (bad page )")


def test_id_statistics_read_one_group_at_a_time_when_groups_outgrow_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_index, "ROW_GROUP", 2)
    monkeypatch.setattr(_index_idrows, "ROW_GROUP", 2)
    url = str(tmp_path / "idx")
    index = _add(url, [f"d{i}" for i in range(5)])
    monkeypatch.setattr(_index_idrows, "BATCH_ROWS", 1)  # fewer rows than a group: one a read
    read = _group_reads(monkeypatch)
    assert _statistics_parts(index, ["d0", "d2", "d4"]) == dict.fromkeys(
        ["d0", "d2", "d4"], index.parts[0].name
    )
    assert read == [[0], [1], [2]]


def test_a_part_of_one_row_written_a_row_at_a_time_has_one_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_index, "BATCH_ROWS", 1)
    index = _add(str(tmp_path / "idx"), ["only"])
    meta = pq.ParquetFile(index.file_urls()[0]).metadata
    assert (meta.num_rows, meta.num_row_groups) == (1, 1)


def test_create_exclusive_links_a_temporary_beside_the_target_and_ignores_its_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    linked: list[tuple[str, str]] = []
    real_link = os.link

    def link(source, target):
        linked.append((source, target))
        return real_link(source, target)

    def unlink(path):
        raise OSError("busy")

    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "unlink", unlink)  # a temporary left behind fails nothing
    path = str(tmp_path / "00000001.json")
    assert _create_exclusive(fsspec.filesystem("file"), path, b"data") is True
    [(source, target)] = linked
    assert target == path and Path(source).parent == tmp_path
    assert Path(source).name.startswith(f".tmp-{os.getpid()}-")
    assert Path(path).read_bytes() == b"data"


def test_a_missing_index_is_an_error_naming_where_it_looked(tmp_path: Path) -> None:
    url = str(tmp_path / "none")
    with pytest.raises(IndexMissingError) as caught:
        DocIndex.open(url)
    assert str(caught.value) == f"{url}: no index here (no committed version under {url}/_index/)"


def test_no_ids_asked_read_no_file(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    index = _add(url, ["a"])
    (Path(url) / index.parts[0].files[0].path).unlink()  # damage that a read would find
    assert index.id_parts([]) == {}
    index.check_ids([])


def test_id_checks_and_lookups_read_only_the_columns_they_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part file's signatures are most of its bytes: an id check reads none of them, and a
    lookup reads them only for the rows it keeps (with their ids)."""
    index = _add(str(tmp_path / "idx"), ["a", "b"])
    read: list[tuple[str, list[str]]] = []
    many, one = pq.ParquetFile.read_row_groups, pq.ParquetFile.read_row_group

    def spy_many(self, groups, columns=None, **kwargs):
        read.append(("groups", columns))
        return many(self, groups, columns=columns, **kwargs)

    def spy_one(self, group, columns=None, **kwargs):
        read.append(("group", columns))
        return one(self, group, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy_many)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy_one)
    assert index.id_parts(["a"]) == {"a": index.parts[0].name}
    assert read == [("groups", ["id"])]
    read.clear()
    texts = ["text of a here"]
    found = index.lookup(batch_signatures(texts, PARAMS), text_digests(texts))
    assert found.ids == ["a"]
    # Through the key table: no digest or band column read, only the found rows' group.
    assert read == [("groups", ["id", "digest", "signature"])]
    read.clear()
    from neardup.core._index_lookup import lookup_index

    scanned = lookup_index(index, batch_signatures(texts, PARAMS), text_digests(texts), scan=True)
    assert scanned.ids == ["a"]
    assert read == [("groups", ["digest", "bands"]), ("groups", ["id", "digest", "signature"])]
