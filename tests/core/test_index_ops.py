"""``index_info`` and ``compact_index`` (core/_index_ops.py): what an index holds, and
compaction that keeps every row, commits atomically and loses no race."""

import datetime as dt
import json
import os
import time
from itertools import pairwise
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.core.engine import (
    DocIndex,
    IndexConflictError,
    IndexDamagedError,
    IndexMissingError,
    MinhashParams,
    batch_signatures,
    commit_index,
    compact_index,
    index_info,
    index_leftovers,
    run_info,
    text_digests,
    write_part,
)
from tests.indexes import version_file, version_files

PARAMS = MinhashParams(num_perm=32, bands=8, threshold=0.5, k=2)
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _texts(n: int, salt: int) -> list[str]:
    return [
        " ".join(WORDS[(i * 7 + j + salt) % len(WORDS)] for j in range(3 + i % 5)) for i in range(n)
    ]


def _add(url: str, ids: list[str], texts: list[str] | None = None) -> DocIndex:
    index = DocIndex.open(url, missing_ok=True)
    texts = texts if texts is not None else _texts(len(ids), len(index.parts))
    sigs = batch_signatures(texts, PARAMS)
    part = write_part(index, PARAMS, ids, text_digests(texts), sigs, run_info("local", "t", ["in"]))
    commit_index(index, PARAMS, [part])
    return DocIndex.open(url)


def _rows(url: str) -> list[tuple]:
    """Every row of the latest version, read with pyarrow from the listed files, by id."""
    table = pq.read_table(DocIndex.open(url).file_urls())
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def _build(url: str, sizes: list[int]) -> None:
    n = 0
    for size in sizes:
        _add(url, [f"doc{n + i:04d}" for i in range(size)][::-1])
        n += size


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sizes=st.lists(st.integers(1, 12), min_size=1, max_size=6), part_rows=st.integers(1, 40))
def test_compaction_keeps_every_row_and_merges_runs_of_small_parts(
    tmp_path_factory, sizes, part_rows
):
    url = str(tmp_path_factory.mktemp("idx") / "idx")
    _build(url, sizes)
    before, version = _rows(url), DocIndex.open(url).version
    done = compact_index(url, neardup="t", part_rows=part_rows)
    after = DocIndex.open(url)
    assert _rows(url) == before
    assert after.rows == sum(sizes) == done.rows
    assert after.version == (version + 1 if done.merged else version)
    assert len(after.parts) == done.parts_after
    for part in after.parts:  # every part is one file of at most part_rows, or was left alone
        assert part.rows <= part_rows or part.name not in done.added
        for f in part.files:
            ids = pq.read_table(after.path(f.path), columns=["id"]).column("id").to_pylist()
            assert ids == sorted(ids)
    # consecutive parts that fit in part_rows together are merged
    merged_sizes = [p.rows for p in after.parts]
    assert all(a + b > part_rows for a, b in pairwise(merged_sizes))
    # the old parts' directories are gone, nothing is left over
    assert sorted(os.listdir(Path(url) / "parts")) == sorted(p.name for p in after.parts)
    assert index_leftovers(after) == []
    for name in done.added:
        run = next(p.run for p in after.parts if p.name == name)
        assert run["mode"] == "compact" and run["from_parts"]


def test_compacting_a_compacted_index_changes_nothing(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [3, 4, 5])
    first = compact_index(url, neardup="t")
    assert first.merged and first.parts_after == 1
    again = compact_index(url, neardup="t")
    assert (again.merged, again.added, again.version) == ((), (), first.version)
    assert [p.name for p in version_files(Path(url))] == [f"{v:08d}.json" for v in range(1, 5)]


def test_a_run_committing_during_compaction_makes_it_fail_and_nothing_is_lost(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [3, 4])

    def append() -> None:  # another run commits while compaction is about to
        _add(url, ["zz1", "zz2"])

    with pytest.raises(IndexConflictError, match="another run added version 3"):
        compact_index(url, neardup="t", before_commit=append)
    index = DocIndex.open(url)
    assert index.version == 3 and [p.rows for p in index.parts] == [3, 4, 2]
    assert index.rows == 9 and len(_rows(url)) == 9
    assert index_leftovers(index) == []  # the compaction's own files were removed


def test_leftovers_are_listed_and_only_old_ones_removed(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [2, 2])
    old = Path(url) / "parts" / "p00000003-0123456789ab"
    old.mkdir()
    (old / "data-00000.parquet").write_bytes(b"x" * 10)
    young = Path(url) / "parts" / "p00000003-ba9876543210"
    young.mkdir()
    (young / "data-00000.parquet").write_bytes(b"y" * 7)
    temp = Path(url) / "_index" / ".tmp-1-abc"
    temp.write_bytes(b"{}")
    hours_ago = time.time() - 7200
    for path in (old / "data-00000.parquet", temp):
        os.utime(path, (hours_ago, hours_ago))
    found = {x.path: x for x in index_leftovers(DocIndex.open(url))}
    assert set(found) == {"_index/.tmp-1-abc", f"parts/{old.name}", f"parts/{young.name}"}
    assert found[f"parts/{old.name}"].bytes == 10 and found[f"parts/{old.name}"].age > 7000
    assert found[f"parts/{young.name}"].age < 600
    info = index_info(url, limit=1)
    assert info["leftovers_total"] == 3 and len(info["leftovers"]) == 1
    assert info["leftovers_bytes"] == 19
    done = compact_index(url, neardup="t")
    assert sorted(done.removed) == ["_index/.tmp-1-abc", f"parts/{old.name}"]
    assert [x.path for x in index_leftovers(DocIndex.open(url))] == [f"parts/{young.name}"]


def test_info_describes_the_latest_version_capped_and_counted(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [2, 3, 4])
    info = index_info(url, limit=2)
    assert (info["version"], info["rows"], info["parts_total"], info["files"]) == (3, 9, 3, 3)
    assert [p["rows"] for p in info["parts"]] == [2, 3]
    manifest = json.loads(version_file(Path(url), 3).read_text())
    assert info["bytes"] == sum(
        f["bytes"] for p in manifest["parts"] for f in [*p["files"], p["keys"], p["ids"]]
    )
    assert info["params"] == manifest["params"]
    assert info["parts"][0]["run"]["inputs"] == ["in"]
    json.dumps(info)  # all of it is JSON


def test_a_damaged_file_stops_info_and_compaction_before_anything_changes(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [3, 3])
    target = Path(url) / DocIndex.open(url).parts[1].files[0].path
    target.write_bytes(b"\0" * target.stat().st_size)  # same size, not Parquet
    listing = sorted(str(p) for p in Path(url).rglob("*"))
    with pytest.raises(IndexDamagedError, match=str(target.relative_to(url))):
        compact_index(url, neardup="t")
    assert sorted(str(p) for p in Path(url).rglob("*")) == listing
    target.unlink()
    for call in (lambda: index_info(url), lambda: compact_index(url, neardup="t")):
        with pytest.raises(IndexDamagedError, match="is missing"):
            call()


def test_info_and_compaction_of_no_index_are_index_missing(tmp_path):
    for call in (index_info, lambda u: compact_index(u, neardup="t")):
        with pytest.raises(IndexMissingError):
            call(str(tmp_path / "none"))


def test_a_files_age_is_read_from_what_each_filesystem_calls_its_modification_time():
    from neardup.core._index_ops import _mtime

    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert _mtime({"mtime": 1767322800, "created": 1.0}) == 1767322800.0  # local
    assert _mtime({"LastModified": when, "size": 3}) == when.timestamp()  # s3fs
    assert _mtime({"updated": "2026-01-02T03:04:05.000Z"}) == when.timestamp()  # gcsfs
    assert _mtime({"last_modified": "not a time", "created": 1.5}) == 1.5  # memory
    assert _mtime({"size": 3}) is None


def test_info_names_each_part_with_its_rows_bytes_files_and_run(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [2, 3])
    index = DocIndex.open(url)
    info = index_info(url)
    assert info["parts"] == [
        {
            "name": p.name,
            "rows": p.rows,
            "bytes": p.files[0].bytes + p.keys.bytes + p.ids.bytes,
            "files": 1,
            "layout": 3,
            "run": p.run,
            "deleted": 0,
        }
        for p in index.parts
    ]
    assert [p["rows"] for p in info["parts"]] == [2, 3]
    assert info["parts"][0]["name"] != info["parts"][1]["name"]


# --- exact behaviour: file times, leftovers, info, the groups compaction merges, bad widths ---

WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"mtime": 5}, 5.0),
        ({"mtime": 2.5, "LastModified": 9}, 2.5),  # the first key that says wins
        ({"LastModified": 9, "last_modified": 8, "updated": 7, "created": 6}, 9.0),
        ({"last_modified": 8, "updated": 7, "created": 6}, 8.0),
        ({"updated": 7, "created": 6}, 7.0),
        ({"created": 6}, 6.0),
        ({"mtime": None, "LastModified": WHEN}, WHEN.timestamp()),
        ({"last_modified": "2026-01-02T03:04:05+00:00"}, WHEN.timestamp()),
        ({"updated": "2026-01-02T03:04:05Z"}, WHEN.timestamp()),
        ({"mtime": "yesterday", "updated": 7}, 7.0),  # unreadable: the next key is asked
        ({"mtime": [1], "created": "soon"}, None),
        ({}, None),
    ],
)
def test_mtime_reads_the_first_time_a_filesystem_gives(info, expected):
    from neardup.core._index_ops import _mtime

    got = _mtime(info)
    assert got == expected
    assert got is None or type(got) is float


@pytest.mark.parametrize(
    ("rows", "files", "part_rows", "groups"),
    [
        ([3, 4, 5], [1, 1, 1], 10, [[0, 1]]),
        ([5, 5], [1, 1], 10, [[0, 1]]),  # exactly part_rows together: merged
        ([5, 6], [1, 1], 10, []),
        ([3, 20, 3], [1, 1, 1], 10, []),  # a large part stays, and parts it splits stay too
        ([4], [2], 10, [[0]]),  # one part of two files: rewritten as one
        ([4], [1], 10, []),
        ([1, 1, 1, 1, 1], [1, 1, 1, 1, 1], 2, [[0, 1], [2, 3]]),
        ([3, 1, 1, 3], [1, 1, 1, 1], 3, [[1, 2]]),
        ([2, 1, 1, 3], [1, 1, 1, 1], 3, [[0, 1]]),  # greedy, from the first part
        ([], [], 10, []),
        ([4], [-1], 10, [[0]]),  # one part of the first layout (no key table): rewritten
        ([3, 20, 4], [1, -1, 1], 10, [[1]]),  # however large
        ([3, 4, 20], [1, -1, 1], 10, [[0, 1]]),
        ([4], [-2], 10, [[0]]),  # one part with a key table but no id table: rewritten
        ([3, 20, 4], [1, -2, 1], 10, [[1]]),  # however large
    ],
)
def test_groups_are_runs_of_consecutive_parts_that_fit_together(rows, files, part_rows, groups):
    """``files`` -1: one file and no key table (nor id table); -2: one file and a key table but
    no id table."""
    from neardup.core._index import IndexFile, IndexPart
    from neardup.core._index_ops import _groups

    parts = [
        IndexPart(
            f"p{i}",
            n,
            tuple(IndexFile(f"parts/p{i}/{j}", 1, 1) for j in range(1 if k < 0 else k)),
            {},
            None if k == -1 else IndexFile(f"parts/p{i}/keys", 1, 1),
            None if k < 0 else IndexFile(f"parts/p{i}/ids", 1, 1),
        )
        for i, (n, k) in enumerate(zip(rows, files, strict=True))
    ]
    found = _groups(parts, part_rows)
    assert [[int(p.name[1:]) for p in group] for group in found] == groups


def _stray(path: Path, size: int, when: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    if when is not None:
        os.utime(path, (when, when))


def test_leftovers_group_by_part_sum_their_bytes_and_age_from_the_newest_file(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [2])
    root = Path(url)
    _stray(root / "parts" / "p9" / "a.parquet", 5, 1000.0)
    _stray(root / "parts" / "p9" / "deep" / "b.parquet", 7, 1500.0)
    _stray(root / "parts" / "stray.txt", 3, 900.0)
    _stray(root / "_index" / ".tmp-2-xyz", 2, 1200.0)
    _stray(root / "_index" / "notes.txt", 4, 1200.0)  # not a temporary file: not a leftover
    found = index_leftovers(DocIndex.open(url + "/"), now=2000.0)
    assert [(x.path, x.bytes, x.age) for x in found] == [
        ("_index/.tmp-2-xyz", 2, 800.0),
        ("parts/p9", 12, 500.0),
        ("parts/stray.txt", 3, 1100.0),
    ]


def test_a_leftover_whose_files_do_not_all_say_their_time_has_no_age(tmp_path, monkeypatch):
    from neardup.core import _index_ops

    url = str(tmp_path / "idx")
    _build(url, [2])
    root = Path(url)
    _stray(root / "parts" / "pa" / "a", 1, 1000.0)
    _stray(root / "parts" / "pa" / "b", 1, 1000.0)
    _stray(root / "parts" / "pb" / "a", 1, 1000.0)
    real = _index_ops._files

    def some_without_time(fs, directory):
        found = real(fs, directory)
        for path, info in found.items():
            if path.endswith(("pa/b", "pb/a")):
                found[path] = {k: v for k, v in info.items() if k not in ("mtime", "created")}
                found[path]["size"] = None
        return found

    monkeypatch.setattr(_index_ops, "_files", some_without_time)
    found = index_leftovers(DocIndex.open(url), now=3000.0)
    assert [(x.path, x.bytes, x.age) for x in found] == [
        ("parts/pa", 1, None), ("parts/pb", 0, None)]  # fmt: skip
    info = index_info(url)
    assert [x["age_seconds"] for x in info["leftovers"]] == [None, None]


def test_info_lists_versions_and_caps_every_list_at_the_limit(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [2, 3, 4])
    info = index_info(url, limit=2)
    assert (info["index"], info["format"], info["format_version"]) == (url, "neardup-index", 4)
    assert (info["versions_total"], info["versions"]) == (3, [2, 3])
    nothing = index_info(url, limit=0)
    assert (nothing["versions"], nothing["parts"], nothing["leftovers"]) == ([], [], [])
    assert (nothing["versions_total"], nothing["parts_total"], nothing["rows"]) == (3, 3, 9)
    for i in range(101):
        _stray(Path(url) / "parts" / f"s{i:03d}", 1)
    info = index_info(url)  # at most 100 of anything by default
    assert (info["leftovers_total"], len(info["leftovers"])) == (101, 100)
    assert info["leftovers_bytes"] == 101
    assert info["versions"] == [1, 2, 3]
    first = info["leftovers"][0]
    assert first["path"] == "parts/s000" and first["bytes"] == 1
    assert type(first["age_seconds"]) is int and 0 <= first["age_seconds"] < 600


def test_compaction_removes_leftovers_from_the_age_given_on(tmp_path, monkeypatch):
    from neardup.core import _index_ops

    url = str(tmp_path / "idx")
    _build(url, [2, 2])
    now = time.time()
    _stray(Path(url) / "parts" / "old", 1, now - 100)
    _stray(Path(url) / "parts" / "young", 1, now - 99)
    monkeypatch.setattr(_index_ops.time, "time", lambda: now)
    done = compact_index(url, neardup="t", leftover_age=100)
    assert done.removed == ("parts/old",)
    assert (done.parts_before, done.parts_after, done.rows) == (2, 1, 4)
    assert len(done.merged) == 2 and len(done.added) == 1
    assert sorted(p.name for p in (Path(url) / "parts").iterdir()) == sorted([*done.added, "young"])


def test_compaction_with_nothing_to_merge_commits_nothing_and_calls_no_hook(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [3, 3])
    called = []
    done = compact_index(url, neardup="t", part_rows=3, before_commit=lambda: called.append(1))
    assert called == []
    assert (done.version, done.merged, done.added, done.parts_before, done.parts_after) == (
        2, (), (), 2, 2)  # fmt: skip


@pytest.mark.parametrize(("column", "width"), [("digest", 8), ("signature", 4 * 31)])
def test_a_part_of_values_of_the_wrong_width_is_damage_and_nothing_changes(tmp_path, column, width):
    import pyarrow as pa

    url = str(tmp_path / "idx")
    _build(url, [2, 2])
    index = DocIndex.open(url)
    listed = index.parts[1].files[0]
    target = Path(url) / listed.path
    table = pq.read_table(target)
    bad = pa.array([b"\1" * width] * table.num_rows, type=pa.binary())
    table = table.set_column(table.column_names.index(column), column, bad)
    pq.write_table(table, target)
    newest = version_file(Path(url), index.version)
    manifest = json.loads(newest.read_text())
    manifest["parts"][1]["files"][0]["bytes"] = target.stat().st_size
    newest.write_text(json.dumps(manifest))
    listing = sorted(str(p) for p in Path(url).rglob("*"))
    with pytest.raises(IndexDamagedError) as caught:
        compact_index(url, neardup="t")
    assert str(caught.value) == (
        f"{url}: the index is damaged: {listed.path} has {column} values that are not "
        f"{16 if column == 'digest' else 4 * 32} bytes"
    )
    assert sorted(str(p) for p in Path(url).rglob("*")) == listing


@pytest.mark.parametrize("name", ["idx ", "idxX"])
def test_leftovers_are_named_relative_to_an_index_whose_name_ends_oddly(tmp_path, name):
    url = str(tmp_path / name)
    _build(url, [2])
    _stray(Path(url) / "parts" / "p9" / "a.parquet", 5, 1000.0)
    found = index_leftovers(DocIndex.open(url), now=1500.0)
    assert [(x.path, x.bytes, x.age) for x in found] == [("parts/p9", 5, 500.0)]


def test_a_compacted_part_names_its_run(tmp_path):
    url = str(tmp_path / "idx")
    _build(url, [2, 3])
    done = compact_index(url, neardup="9.9")
    (part,) = DocIndex.open(url).parts
    assert part.name == done.added[0]
    run = {k: v for k, v in part.run.items() if k != "created"}
    assert run == {
        "engine": "local", "neardup": "9.9", "inputs": [], "inputs_total": 0, "mode": "compact",
        "from_parts": list(done.merged),
    }  # fmt: skip


def test_files_another_run_removed_first_are_no_error(tmp_path):
    from neardup.core._index_ops import _remove_tree

    url = str(tmp_path / "idx")
    _build(url, [2, 3])
    index = DocIndex.open(url)
    gone = Path(url) / index.parts[0].files[0].path
    # a concurrent compaction removed one of the merged parts' files just before the commit
    done = compact_index(url, neardup="t", before_commit=gone.unlink)
    assert done.merged == tuple(p.name for p in index.parts) and done.rows == 5
    assert sorted(os.listdir(Path(url) / "parts")) == list(done.added)
    _remove_tree(index, "parts/never-there")  # nothing to remove: no error


# --- re-crawled ids (issue 33): documents read by id, verdicts, derived ids, rewritten parts --


def test_indexed_documents_reads_the_ids_asked_for_with_their_digest_and_signature(tmp_path):
    from neardup.core.engine import indexed_documents

    url = str(tmp_path / "idx")
    _add(url, ["b", "a"], ["beta text here", "alpha text here"])
    _add(url, ["c"], ["gamma text here"])
    index = DocIndex.open(url)
    found = indexed_documents(index, ["c", "zz", "a"])
    assert found.ids == ["a", "c"]
    assert found.parts == [index.parts[0].name, index.parts[1].name]
    texts = ["alpha text here", "gamma text here"]
    assert (found.digests == text_digests(texts)).all()
    assert (found.sigs == batch_signatures(texts, PARAMS)).all()
    assert indexed_documents(index, []).ids == []


def test_recrawl_verdicts_same_near_changed_and_wordless():
    from neardup.core.engine import RECRAWL_CHANGED, RECRAWL_NEAR, RECRAWL_SAME, recrawl_verdicts

    long = " ".join(WORDS)
    new = [long, long + " omega", "x y z", "!!"]
    old = [long, long, long, "??"]  # "!!" and "??" have no words: never near, though equal sigs
    verdict, estimate = recrawl_verdicts(
        text_digests(new), batch_signatures(new, PARAMS), text_digests(old),
        batch_signatures(old, PARAMS), PARAMS.threshold,
    )  # fmt: skip
    assert verdict.tolist() == [RECRAWL_SAME, RECRAWL_NEAR, RECRAWL_CHANGED, RECRAWL_CHANGED]
    assert estimate[0] == 1.0 and 0.5 <= estimate[1] < 1.0 and estimate[3] == 1.0


def test_derived_id_is_the_id_and_twelve_hex_digits_of_the_texts_sha256():
    import hashlib

    from neardup.core.engine import derived_id, derived_ids

    text = "a page that changed"
    sha = hashlib.sha256(text.encode()).hexdigest()
    assert derived_ids(["https://ex.com/a"], text_digests([text])) == [
        derived_id("https://ex.com/a", sha)
    ] == [f"https://ex.com/a#rev-{sha[:12]}"]  # fmt: skip


def test_rewrite_without_swaps_only_the_parts_holding_the_ids(tmp_path):
    from neardup.core.engine import rewrite_without

    url = str(tmp_path / "idx")
    _add(url, ["a", "b"])
    _add(url, ["c"])
    _add(url, ["d"])
    index = DocIndex.open(url)
    before = _rows(url)
    added, dropped = rewrite_without(index, PARAMS, ["b", "d"], run_info("local", "t", []))
    assert dropped == [index.parts[0].name, index.parts[2].name]  # "d" alone: no empty part
    assert len(added) == 1 and added[0].run["mode"] == "replace"
    assert added[0].run["from_parts"] == [index.parts[0].name]
    commit_index(index, PARAMS, added, dropped)
    assert _rows(url) == [r for r in before if r[0] not in ("b", "d")]
    assert [p.name for p in DocIndex.open(url).parts] == [index.parts[1].name, added[0].name]
    assert rewrite_without(DocIndex.open(url), PARAMS, [], {}) == ([], [])
