"""The version log (core/_index_log.py): a lost version is damage, never a rollback or a new
index; listings are never served from a cache; every manifest is checked whole."""

import json
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from neardup.core import _index_log
from neardup.core.engine import (
    DocIndex,
    IndexChangedError,
    IndexConflictError,
    IndexDamagedError,
    IndexPart,
    MinhashParams,
    batch_signatures,
    commit_index,
    compact_index,
    index_info,
    index_leftovers,
    index_params,
    run_info,
    text_digests,
    write_part,
)

PARAMS = MinhashParams(num_perm=16, bands=4, threshold=0.5, k=2)


def _add(url: str, ids: list[str]) -> DocIndex:
    index = DocIndex.open(url, missing_ok=True)
    texts = [f"the text of {i} and some more words" for i in ids]
    part = write_part(index, PARAMS, ids, text_digests(texts), batch_signatures(texts, PARAMS),
                      run_info("local", "t", ["in"]))  # fmt: skip
    commit_index(index, PARAMS, [part])
    return DocIndex.open(url)


def _build(url: str, parts: int) -> DocIndex:
    for k in range(parts):
        index = _add(url, [f"d{k}-{i}" for i in range(3)])
    return index


def _tree(root: Path) -> list[tuple[str, bytes]]:
    files = (p for p in root.rglob("*") if p.is_file())
    return sorted((str(p.relative_to(root)), p.read_bytes()) for p in files)


def _damage(url: str, name: str) -> str:
    return f"{url}: the index is damaged: {name} "


def _path(version: int) -> str:
    """Where version ``version`` of an index this neardup made is: the seal (1) in the flat
    log, the others in the grouped log."""
    return f"_index/{version:08d}.json" if version == 1 else f"_index/log/00000/{version:08d}.json"


def _lose(idx: Path, version: int) -> None:
    """Version ``version`` lost: its file (and the seal's copy in the grouped log)."""
    for name in (f"_index/{version:08d}.json", f"_index/log/00000/{version:08d}.json"):
        (idx / name).unlink(missing_ok=True)


# -- a lost version (finding 12) ------------------------------------------------------------


def test_a_lost_newest_version_is_damage_never_a_rollback_nor_a_leftover(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    index = _build(url, 3)
    _lose(tmp_path / "idx", 3)
    before = _tree(tmp_path / "idx")
    expected = (
        _damage(url, _path(3)) + f"is missing but parts/{index.parts[2].name} was "
        "committed as it; restore it: an index is never read as an older version, nor started "
        "again over committed parts"
    )
    for read in (
        lambda: DocIndex.open(url),
        lambda: DocIndex.open(url, missing_ok=True),  # an append: no reuse of version 3
        lambda: index_info(url),  # no "leftovers of killed runs"
        lambda: compact_index(url, neardup="t", leftover_age=0),  # nothing deleted
    ):
        with pytest.raises(IndexDamagedError) as caught:
            read()
        assert str(caught.value) == expected
    assert _tree(tmp_path / "idx") == before


@pytest.mark.parametrize("lost", [1, 2, 3, 4])
def test_any_one_version_lost_of_appends_and_a_compaction_is_damage_naming_it(
    tmp_path: Path, lost: int
) -> None:
    """Versions 1-3 appends, 4 a compaction of them all (their files removed)."""
    url = str(tmp_path / "idx")
    _build(url, 3)
    assert compact_index(url, neardup="t").version == 4
    _lose(tmp_path / "idx", lost)
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url, missing_ok=True)
    assert caught.value.path == _path(lost)
    assert caught.value.problem.startswith("is missing")


def test_every_version_lost_over_committed_parts_is_damage_not_a_new_index(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    index = _build(url, 1)
    _lose(tmp_path / "idx", 1)
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url, missing_ok=True)
    assert str(caught.value).startswith(
        _damage(url, _path(1)) + f"is missing but parts/{index.parts[0].name} "
    )


def test_a_lost_version_between_the_first_and_the_newest_is_damage(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    _build(url, 3)
    _lose(tmp_path / "idx", 2)
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert str(caught.value) == _damage(url, _path(2)) + (
        "is missing (versions 1 to 3 must all be there); restore it: an index is never read "
        "without one of its versions"
    )
    (tmp_path / "idx" / _path(2)).write_text("{}")
    _lose(tmp_path / "idx", 1)
    with pytest.raises(IndexDamagedError, match=r"_index/00000001\.json is missing"):
        DocIndex.open(url)


def test_a_part_written_against_a_lost_version_proves_it_committed(tmp_path: Path) -> None:
    """A killed run's part (no marker) named for version 4 was written by a run that read
    version 3: with 3 lost, that is damage, though 3's own part lost its marker too."""
    url = str(tmp_path / "idx")
    index = _build(url, 3)
    (tmp_path / "idx" / "parts" / index.parts[2].name / "_committed").unlink()
    _lose(tmp_path / "idx", 3)
    assert DocIndex.open(url).version == 2  # no proof of version 3 left: read as it is
    killed = tmp_path / "idx" / "parts" / "p00000004-0123456789ab"
    killed.mkdir()
    (killed / "data-00000.parquet").write_bytes(b"x")
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert str(caught.value).startswith(
        _damage(url, _path(3)) + f"is missing but parts/{killed.name} was "
        "written by a run that read it; "
    )


def test_parts_of_runs_killed_before_committing_are_leftovers_not_damage(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    fresh = DocIndex.open(url, missing_ok=True)
    texts = ["one two three"]
    args = (PARAMS, ["a"], text_digests(texts), batch_signatures(texts, PARAMS), {})
    first = write_part(fresh, *args)  # a first run killed before its commit
    assert DocIndex.open(url, missing_ok=True).version == 0  # a new index, as it is
    index = _build(url, 2)
    killed = write_part(index, *args)  # named for version 3, never committed
    lost = write_part(index, *args)
    commit_index(index, PARAMS, [lost])
    with pytest.raises(IndexConflictError):
        commit_index(index, PARAMS, [killed])  # the loser of a race: no marker
    assert DocIndex.open(url).version == 3
    names = {x.path for x in index_leftovers(DocIndex.open(url))}
    assert names == {f"parts/{first.name}", f"parts/{killed.name}"}


def test_a_version_committed_while_open_lists_is_read_not_damage(tmp_path, monkeypatch) -> None:
    """The log listed just before a commit, the parts just after (its marker there): read again,
    the newer version is read."""
    url = str(tmp_path / "idx")
    _build(url, 2)
    real = _index_log._newest
    calls = []

    def listed_before_the_commit(url, fs, root):
        calls.append(1)
        return (1, [1]) if len(calls) == 1 else real(url, fs, root)

    monkeypatch.setattr(_index_log, "_newest", listed_before_the_commit)
    assert DocIndex.open(url).version == 2
    assert len(calls) > 1


def test_a_listed_parts_marker_is_no_leftover_and_a_stray_file_beside_it_goes_alone(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "idx")
    index = _build(url, 2)
    part = tmp_path / "idx" / "parts" / index.parts[0].name
    assert json.loads((part / "_committed").read_text()) == {"version": 1}
    (part / ".data-00000.parquet.crc").write_bytes(b"c")
    found = [x.path for x in index_leftovers(index)]
    assert found == [f"parts/{index.parts[0].name}/.data-00000.parquet.crc"]
    compact_index(url, neardup="t", part_rows=3, leftover_age=0)  # nothing to merge
    assert sorted(p.name for p in part.iterdir()) == [
        "_committed",
        "data-00000.parquet",
        "ids-00000.arrow",
        "keys-00000.arrow",
    ]
    assert DocIndex.open(url).rows == 6


def test_a_commit_adds_only_parts_written_for_its_version(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    index = _build(url, 1)
    with pytest.raises(ValueError, match="is not named for version 2"):
        commit_index(index, PARAMS, [IndexPart("p00000001-0123456789ab", 0, ())])
    assert DocIndex.open(url).version == 1


# -- every manifest checked whole (findings 13 and 14) -------------------------------------


def _drop(key: str):
    return lambda body: body.pop(key)


def _set(key: str, value: object):
    return lambda body: body.__setitem__(key, value)


def _param(key: str, value: object):
    return lambda body: body["params"].__setitem__(key, value)


def _twice(body: dict) -> None:
    body["parts"].append(body["parts"][0])
    body["rows"] *= 2


def _file_twice(body: dict) -> None:
    body["parts"][0]["files"].append(body["parts"][0]["files"][0])
    body["parts"][0]["rows"] *= 2
    body["rows"] *= 2


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (_drop("params"), "params is NoneType, not an object"),
        (_set("params", [5]), "params is list, not an object"),
        (_set("params", "k=5"), "params is str, not an object"),
        (lambda b: b["params"].pop("k"), "params lacks k"),
        (_param("k", "2"), "params.k is '2', not a number"),
        (_param("k", True), "params.k is True, not a number"),
        (_param("tokenizer", 1), "params.tokenizer is 1, not a string"),
        (_param("ngram", 13), "params has 'ngram', which this neardup does not know"),
        (_param("bands", 5), "params are not valid: num_perm (16) must be a multiple of bands"),
        (_twice, "part {name} is listed twice"),
        (_file_twice, "parts/{name}/data-00000.parquet is listed twice"),
        (_set("rows", 7), "rows is 7, its parts hold 3"),
        (_set("version", 2), "its version is 2, its name says 1"),
        (_drop("version"), "its version is None, its name says 1"),
        (_set("parts", {}), "parts is not a list"),
        (lambda b: b["parts"][0].__setitem__("name", "p1"),
         "parts[0].name 'p1' is not a part name (p, 8 digits, -, 12 hex digits)"),
        (lambda b: b["parts"][0]["files"][0].__setitem__("path", "parts/../x.parquet"),
         "part {name} lists 'parts/../x.parquet', not a file under parts/{name}/"),
        (lambda b: b["parts"][0]["files"][0].__setitem__("rows", -1),
         "part {name} lists parts/{name}/data-00000.parquet without whole rows and bytes"),
        (lambda b: b["parts"][0].__setitem__("rows", 4), "part {name} has 4 rows but its files 3"),
        (lambda b: b["parts"][0].__setitem__("run", []),
         "part {name} has a run that is not an object"),
        (lambda b: b["parts"][0]["keys"].__setitem__("rows", 3),
         "part {name} lists 3 keys, not 5 a row (15)"),
        (lambda b: b["parts"][0]["keys"].__setitem__("path", "parts/x/keys-00000.arrow"),
         "part {name} lists keys 'parts/x/keys-00000.arrow', not a file under parts/{name}/"),
        (lambda b: b["parts"][0]["keys"].__setitem__("bytes", None),
         "part {name} lists keys parts/{name}/keys-00000.arrow without whole rows and bytes"),
        (lambda b: b["parts"][0]["keys"].__setitem__("path", b["parts"][0]["files"][0]["path"]),
         "parts/{name}/data-00000.parquet is listed twice"),
        (lambda b: b["parts"][0].__setitem__("keys", []), "part {name} has keys without a path"),
        (_set("format_version", 1),
         "part {name} lists a key table, which format_version 1 has not"),
        (_set("sealed", 2), "sealed is 2, not a version from 1 to 1"),
        (_set("sealed", True), "sealed is True, not a version from 1 to 1"),
        (_drop("sealed"), "sealed is None, not a version from 1 to 1"),
        (_set("format_version", 3), "sealed is listed, which format_version 3 has not"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)  # fmt: skip
def test_a_manifest_is_checked_whole_before_use(tmp_path: Path, change, problem: str) -> None:
    url = str(tmp_path / "idx")
    index = _build(url, 1)
    version = tmp_path / "idx" / "_index" / "00000001.json"
    body = json.loads(version.read_text())
    change(body)
    version.write_text(json.dumps(body))
    expected = _damage(url, "_index/00000001.json") + "is malformed (" + problem
    for read in (
        lambda: DocIndex.open(url, missing_ok=True),  # an append: never writes its params in
        lambda: compact_index(url, neardup="t"),  # never duplicates a part's rows
    ):
        with pytest.raises(IndexDamagedError) as caught:
            read()
        assert str(caught.value).startswith(expected.format(name=index.parts[0].name))


def test_a_part_written_for_a_later_version_than_its_manifest_is_malformed(tmp_path) -> None:
    url = str(tmp_path / "idx")
    body = _build(url, 2).manifest
    body["version"] = 1
    with pytest.raises(IndexDamagedError, match="was written for version 2, after this one"):
        DocIndex("u", fsspec.filesystem("file"), url, 1, body)


def test_a_commit_never_writes_a_malformed_manifest(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    index = _build(url, 1)
    index.manifest["params"] = {**index_params(PARAMS), "k": "5"}
    with pytest.raises(ValueError, match=r"00000002\.json would be malformed: it is malformed"):
        commit_index(index, PARAMS)
    found = sorted(str(p.relative_to(tmp_path / "idx")) for p in (tmp_path / "idx").rglob("*.json"))
    assert found == ["_index/00000001.json", "_index/log/00000/00000001.json"]


def test_compacting_a_part_of_corrupt_data_pages_is_damage_and_changes_nothing(tmp_path) -> None:
    url = str(tmp_path / "idx")
    index = _build(url, 2)
    listed = index.parts[1].files[0]
    path = tmp_path / "idx" / listed.path
    data = bytearray(path.read_bytes())
    data[4:200] = b"\xff" * 196  # the first data pages; the footer intact, the size the same
    path.write_bytes(bytes(data))
    before = _tree(tmp_path / "idx")
    with pytest.raises(IndexDamagedError) as caught:
        compact_index(url, neardup="t", leftover_age=0)
    assert str(caught.value).startswith(_damage(url, listed.path) + "cannot be read (")
    assert _tree(tmp_path / "idx") == before


def test_a_losing_compaction_says_what_it_leaves(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    _build(url, 2)
    winner: list[str] = []

    def append() -> None:
        winner.append(_add(url, ["late"]).parts[-1].name)

    with pytest.raises(IndexConflictError) as caught:
        compact_index(url, neardup="t", before_commit=append)
    assert str(caught.value) == (
        f"{url}: another run added version 3 (part {winner[0]}) while this compaction ran; "
        "nothing was committed and the compaction's new parts are removed; the index is as that "
        "run left it; rerun `neardup index compact` to compact it"
    )


# -- listings never from a cache (finding 11) -----------------------------------------------


class _ListingCache(MemoryFileSystem):
    """An object store that keeps listings per process as s3fs does: ``ls`` answers from its
    ``dircache``, ``info`` (``exists``, ``size``) from the parent's cached listing; its own
    writes drop the listings of the path and its parents (``invalidate_cache``), others' do
    not. Another process is ``memory://`` over the same objects."""

    protocol = "listingcache"

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(str(path).replace(f"{cls.protocol}://", "memory://", 1))

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path).rstrip("/")
        if path not in self.dircache or kwargs.get("refresh"):
            self.dircache[path] = super().ls(path, detail=True)
        listed = self.dircache[path]
        return listed if detail else [o["name"] for o in listed]

    def info(self, path, **kwargs):
        path = self._strip_protocol(path).rstrip("/")
        parent = self._parent(path)
        if parent in self.dircache:
            for entry in self.dircache[parent]:
                if entry["name"].rstrip("/") == path:
                    return entry
            raise FileNotFoundError(path)
        return super().info(path, **kwargs)

    def invalidate_cache(self, path=None):
        if path is None:
            self.dircache.clear()
            return
        path = self._strip_protocol(path).rstrip("/")
        while path:
            self.dircache.pop(path, None)
            parent = self._parent(path)
            path = "" if parent == path else parent

    def _open(self, path, mode="rb", *args, **kwargs):
        handle = super()._open(path, mode, *args, **kwargs)  # "xb" of an object there fails
        if mode != "rb":
            self.invalidate_cache(path)
        return handle

    def pipe_file(self, path, value, *args, **kwargs):
        self.invalidate_cache(path)
        return super().pipe_file(path, value, *args, **kwargs)

    def rm_file(self, path):
        self.invalidate_cache(path)
        return super().rm_file(path)

    def rmdir(self, path):
        self.invalidate_cache(path)
        return super().rmdir(path)


@pytest.fixture
def cached():
    """(url as this process reads it, url as another process writes it)."""
    fsspec.register_implementation(_ListingCache.protocol, _ListingCache, clobber=True)
    name = "neardup-test-listing-cache"
    yield f"{_ListingCache.protocol}://{name}", f"memory://{name}"
    fsspec.filesystem("memory").rm(f"/{name}", recursive=True)
    fsspec.filesystem(_ListingCache.protocol).invalidate_cache()


def test_a_compaction_by_another_process_is_a_change_not_damage(cached) -> None:
    mine, theirs = cached
    _build(mine, 2)
    reader = DocIndex.open(mine)
    done = compact_index(theirs, neardup="t")
    with pytest.raises(IndexChangedError) as caught:
        reader.id_parts(["d0-0"])
    assert caught.value.version == done.version == 3
    later = DocIndex.open(mine)  # a long-lived process reads the newest version
    assert (later.version, [p.name for p in later.parts]) == (3, list(done.added))
    assert later.id_parts(["d0-0", "d1-2"]) == {"d0-0": done.added[0], "d1-2": done.added[0]}


def test_a_lost_race_names_the_winners_part_through_a_listing_cache(cached) -> None:
    mine, theirs = cached
    reader = _build(mine, 1)
    texts = ["one two three"]
    part = write_part(reader, PARAMS, ["m"], text_digests(texts),
                      batch_signatures(texts, PARAMS), {})  # fmt: skip
    won = _add(theirs, ["t"]).parts[-1].name
    with pytest.raises(IndexConflictError) as caught:
        commit_index(reader, PARAMS, [part])
    assert caught.value.parts == [won] and f"(part {won})" in str(caught.value)


def test_a_version_lost_behind_a_listing_cache_is_still_damage(cached) -> None:
    """The listing cached while the version was there hides no loss: it is listed again."""
    mine, theirs = cached
    _build(mine, 2)
    assert DocIndex.open(mine).version == 2
    fsspec.filesystem("memory").rm(f"{theirs}/{_path(2)}")
    with pytest.raises(IndexDamagedError, match=r"_index/log/00000/00000002\.json is missing but"):
        DocIndex.open(mine)


@pytest.mark.parametrize(
    "body", ['{"x": ' + "[" * 1000 + "]" * 1000 + "}", '{"version": ' + "9" * 5001 + "}"]
)
def test_a_manifest_nested_deep_or_with_a_huge_integer_is_damage_not_a_traceback(
    tmp_path, body
) -> None:
    url = str(tmp_path / "idx")
    _build(url, 1)
    (tmp_path / "idx" / "_index" / "00000001.json").write_text(body, encoding="utf-8")
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert str(caught.value).startswith(_damage(url, "_index/00000001.json") + "cannot be read (")


def test_files_of_version_lists_what_that_version_listed_for_good(tmp_path: Path) -> None:
    """What the service checks a flush's commit by: an older version's files, still listed
    after a compaction dropped them, and None for a version never committed."""
    url = str(tmp_path / "idx")
    first = _build(url, 2)
    old = {f.path for p in first.parts for f in p.all_files}
    compact_index(url, neardup="t")
    latest = DocIndex.open(url)
    assert latest.files_of_version(2) == old
    assert latest.files_of_version(latest.version) == {
        f.path for p in latest.parts for f in p.all_files
    }
    assert latest.files_of_version(latest.version + 1) is None
    older = latest.at_version(2)  # what a replica serves until a flush is recorded
    assert older is not None
    assert (older.version, [p.name for p in older.parts], older.rows) == (
        2, [p.name for p in first.parts], first.rows,
    )  # fmt: skip
    (tmp_path / "idx" / "_index" / "00000001.json").write_text("{}")
    with pytest.raises(IndexDamagedError, match=r"00000001\.json"):
        latest.files_of_version(1)
