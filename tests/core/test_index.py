"""The persistent index (core/_index*.py): format, commits, the parameter lock, damage, lookup."""

import datetime as dt
import json
import os
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import fsspec
import numpy as np
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import _index
from neardup.core._banding import band_digest
from neardup.core._index_lookup import lookup_index
from neardup.core.engine import (
    INDEX_PARAMS_KEY,
    DocIndex,
    IndexChangedError,
    IndexConflictError,
    IndexDamagedError,
    IndexIdError,
    IndexMissingError,
    IndexParameterError,
    MinhashParams,
    batch_signatures,
    commit_index,
    index_params,
    index_record,
    index_record_line,
    run_info,
    text_digests,
    write_part,
)

PARAMS = MinhashParams(num_perm=32, bands=8, threshold=0.5, k=2)
M = "multilingual"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _add(url: str, ids: list[str], texts: list[str], params: MinhashParams = PARAMS) -> DocIndex:
    """Commit one part of ``ids``/``texts`` to the index at ``url``; the index after it."""
    index = DocIndex.open(url, missing_ok=True)
    sigs = batch_signatures(texts, params)
    part = write_part(index, params, ids, text_digests(texts), sigs, run_info("local", "t", ["in"]))
    commit_index(index, params, [part])
    return DocIndex.open(url)


def test_index_commit_writes_a_version_readable_without_neardup(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    _add(url, ["b", "a", "c"], ["one two three", "four five six", ""])
    index = _add(url, ["d"], ["seven eight nine"])
    assert index.version == 2
    assert index.rows == 4 and len(index.parts) == 2
    body = json.loads((tmp_path / "idx/_index/log/00000/00000002.json").read_text())
    assert body["format"] == "neardup-index" and body["format_version"] == 4
    assert body["params"] == index_params(PARAMS) and "ngram" not in body["params"]
    assert body["parts"][0]["name"].startswith("p00000001-")
    assert body["parts"][1]["run"]["inputs"] == ["in"]
    table = pq.read_table(index.file_urls())
    assert table.column("id").to_pylist() == ["a", "b", "c", "d"]  # each part sorted by id
    assert table.schema.names == ["id", "digest", "bands", "signature"]
    sig = np.frombuffer(table.column("signature")[0].as_py(), dtype="<u4")
    assert sig.tolist() == batch_signatures(["four five six"], PARAMS)[0].tolist()
    meta = pq.ParquetFile(index.file_urls()[0]).schema_arrow.metadata
    assert json.loads(meta[INDEX_PARAMS_KEY.encode()]) == index_params(PARAMS)


def test_index_missing_is_an_error_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(IndexMissingError, match="no index here"):
        DocIndex.open(str(tmp_path / "nothing"))
    empty = DocIndex.open(str(tmp_path / "nothing"), missing_ok=True)
    assert empty.version == 0 and empty.rows == 0 and empty.params is None


@pytest.mark.parametrize(
    ("name", "value"),
    [("num_perm", 64), ("bands", 4), ("threshold", 0.6), ("k", 3), ("seed", 1),
     ("tokenizer", "multilingual")],
)  # fmt: skip
def test_index_params_are_locked(tmp_path: Path, name: str, value: object) -> None:
    index = _add(str(tmp_path / "idx"), ["a"], ["one two"])
    index.check_params(PARAMS)
    other = MinhashParams(**{**PARAMS.as_dict(), name: value})
    with pytest.raises(IndexParameterError, match=f"parameter {name} is locked") as caught:
        index.check_params(other)
    assert caught.value.name == name and caught.value.given == index_params(other)[name]


# The first multilingual tokenizer recorded its plain name; the second normalized with the
# running Python's unicodedata.
@pytest.mark.parametrize("previous", [M, "multilingual-2@17.0.0"])
def test_an_index_records_the_tokenizer_version_and_refuses_the_previous_one(
    tmp_path: Path, previous: str
):
    url = str(tmp_path / "idx")
    params = MinhashParams(num_perm=32, bands=8, threshold=0.5, k=2, tokenizer="multilingual")
    index = _add(url, ["a"], ["中文 หิน"], params)
    body = json.loads((tmp_path / "idx/_index/00000001.json").read_text())
    assert body["params"]["tokenizer"] == "multilingual-3@17.0.0"
    assert index.minhash_params() == params
    index.check_params(params)
    manifest = tmp_path / "idx/_index/00000001.json"
    manifest.write_text(json.dumps({**body, "params": {**body["params"], "tokenizer": previous}}))
    index = DocIndex.open(url)
    for call in (lambda: index.check_params(params), index.minhash_params):
        with pytest.raises(IndexParameterError) as caught:
            call()
        assert str(caught.value) == (
            f"{url}: parameter tokenizer is locked to the index: the index has '{previous}', "
            "this run 'multilingual-3@17.0.0' (an index is never extended under another "
            "tokenizer version: build it again with this one, or use another index "
            "(docs/index.md))"
        )


def test_index_params_a_key_missing_on_one_side_is_a_mismatch(tmp_path: Path) -> None:
    index = _add(str(tmp_path / "idx"), ["a"], ["one two"])
    del index.manifest["params"]["tokenizer"]
    with pytest.raises(IndexParameterError, match=r"tokenizer.*no value"):
        index.check_params(PARAMS)
    index.manifest["params"]["tokenizer"] = "words"
    index.manifest["params"]["future_knob"] = 3
    with pytest.raises(IndexParameterError, match="future_knob"):
        index.check_params(PARAMS)


def test_index_ids_name_their_part(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    first = _add(url, ["a", "b"], ["one two", "three four"])
    index = _add(url, ["c"], ["five six"])
    assert index.id_parts(["x", "b", "c"]) == {"b": first.parts[0].name, "c": index.parts[1].name}
    with pytest.raises(IndexIdError, match=f"'c' \\(part {index.parts[1].name}\\)"):
        index.check_ids(["c", "z"])
    index.check_ids(["z"])


def test_index_id_error_names_twenty_and_counts_the_rest() -> None:
    found = {f"id{i:02d}": "p1" for i in range(25)}
    every = str(IndexIdError("idx", found))
    # Spark's engine collects the first 20 in id order and counts the rest: the same message.
    first = dict(sorted(found.items())[:20])
    assert str(IndexIdError("idx", first, total=25)) == every
    assert "'id19' (part p1) and 5 more already in the index" in every
    assert "'id20'" not in every
    assert "more" not in str(IndexIdError("idx", first, total=20))


def test_index_commit_race_loses_cleanly(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    base = _add(url, ["a"], ["one two"])
    texts = ["three four"]
    sigs, digests = batch_signatures(texts, PARAMS), text_digests(texts)
    mine = write_part(base, PARAMS, ["m"], digests, sigs, run_info("local", "t", []))
    theirs = write_part(base, PARAMS, ["t"], digests, sigs, run_info("local", "t", []))
    assert commit_index(base, PARAMS, [theirs]) == 2
    with pytest.raises(IndexConflictError, match=f"version 2 \\(part {theirs.name}\\)"):
        commit_index(base, PARAMS, [mine])
    after = DocIndex.open(url)
    assert [p.name for p in after.parts] == [base.parts[0].name, theirs.name]
    assert sorted(os.listdir(tmp_path / "idx/_index")) == ["00000001.json", "log"]
    assert sorted(os.listdir(tmp_path / "idx/_index/log/00000")) == [
        "00000001.json",
        "00000002.json",
    ]  # the seal's copy and version 2
    # The loser's files stay as a leftover no version lists: invisible to readers.
    assert after.id_parts(["m"]) == {}


def test_index_compaction_commit_replaces_parts(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    _add(url, ["a"], ["one two"])
    index = _add(url, ["b"], ["three four"])
    texts = ["one two", "three four"]
    merged = write_part(
        index, PARAMS, ["a", "b"], text_digests(texts), batch_signatures(texts, PARAMS),
        run_info("local", "t", [], mode="compact"),
    )  # fmt: skip
    commit_index(index, PARAMS, [merged], drop=[p.name for p in index.parts])
    after = DocIndex.open(url)
    assert [p.name for p in after.parts] == [merged.name] and after.rows == 2


def _damage(tmp_path: Path, how: str) -> DocIndex:
    index = _add(str(tmp_path / "idx"), ["a", "b"], ["one two", "three four"])
    path = tmp_path / "idx" / index.parts[0].files[0].path
    if how == "missing":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:-10])
    elif how == "garbage":
        path.write_bytes(b"x" * path.stat().st_size)
    elif how == "rows":
        version = tmp_path / "idx/_index/00000001.json"
        body = json.loads(version.read_text())
        body["parts"][0]["files"][0]["rows"] = body["parts"][0]["rows"] = body["rows"] = 3
        body["parts"][0]["keys"]["rows"] = 3 * (PARAMS.bands + 1)
        body["parts"][0]["ids"]["rows"] = 3
        version.write_text(json.dumps(body))  # a whole manifest, but not the file's rows
    return DocIndex.open(str(tmp_path / "idx"))


@pytest.mark.parametrize("how", ["missing", "truncated", "garbage", "rows"])
def test_index_damage_is_an_error_naming_the_file(tmp_path: Path, how: str) -> None:
    index = _damage(tmp_path, how)
    name = index.parts[0].files[0].path
    keys, ids = index.parts[0].keys.path, index.parts[0].ids.path
    sigs = batch_signatures(["one two"], PARAMS)
    # An id check opens the id table first: it holds the rows it was built for too.
    with pytest.raises(IndexDamagedError, match=ids if how == "rows" else name):
        index.id_parts(["a"])
    # A lookup opens the key table first: it holds the rows it was built for, not the listing's.
    with pytest.raises(IndexDamagedError, match=keys if how == "rows" else name):
        index.lookup(sigs, text_digests(["one two"]))
    with pytest.raises(IndexDamagedError, match=name):
        lookup_index(index, sigs, text_digests(["one two"]), scan=True)
    if how in ("missing", "truncated"):  # verify() checks names and sizes only
        with pytest.raises(IndexDamagedError, match=name):
            index.verify()


def test_band_digest_is_frozen() -> None:
    """The on-disk ``bands`` column: these values may never change (docs/index.md)."""
    block = np.array([[0, 1, 2, 3], [2147483647, 5, 7, 11]], dtype=np.uint32)
    assert band_digest(block).tolist() == [2005267190420150794, 9264561801355011679]


def _brute_lookup(
    new: list[str], old: list[str], params: MinhashParams
) -> tuple[dict[int, str], set[tuple[int, str, float]]]:
    """Every (new row, indexed id) by definition: a band's rows equal and estimate >= threshold;
    the smallest indexed id of equal text."""
    ns, os_ = batch_signatures(new, params), batch_signatures(old, params)
    rows = params.rows
    exact: dict[int, str] = {}
    pairs = set()
    for i, text in enumerate(new):
        for j, other in enumerate(old):
            doc_id = f"i{j:03d}"
            if text == other and (i not in exact or doc_id < exact[i]):
                exact[i] = doc_id
            if (ns[i] == 2**31 - 1).all():
                continue
            shared = any(
                (ns[i, b * rows : (b + 1) * rows] == os_[j, b * rows : (b + 1) * rows]).all()
                for b in range(params.bands)
            )
            est = float(np.count_nonzero(ns[i] == os_[j]) / params.num_perm)
            if shared and est >= params.threshold:
                pairs.add((i, doc_id, est))
    return exact, pairs


_texts = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(" ".join), min_size=1,
    max_size=25,
)  # fmt: skip


@st.composite
def _edits(draw, old: list[str]) -> list[str]:
    """New texts: fresh ones, copies of ``old`` and copies with a word replaced and one added
    (estimates spread around the threshold)."""
    out = []
    for _ in range(draw(st.integers(1, 25))):
        how = draw(st.sampled_from(["fresh", "copy", "edit", "edit"]))
        if how == "fresh":
            out.append(" ".join(draw(st.lists(st.sampled_from(WORDS), max_size=6))))
            continue
        words = draw(st.sampled_from(old)).split()
        if how == "edit":
            words.append(draw(st.sampled_from(WORDS)))
            words[draw(st.integers(0, len(words) - 1))] = draw(st.sampled_from(WORDS))
        out.append(" ".join(words))
    return out


@given(data=st.data(), old=_texts)
def test_index_lookup_equals_brute_force(tmp_path_factory, data, old: list[str]) -> None:
    new = data.draw(_edits(old))
    # Tiny row groups and batches sometimes: a lookup then spans many of each.
    group, batch = data.draw(st.sampled_from([(None, None), (2, 3), (3, 7), (1, 1)]))
    with ExitStack() as stack:
        if group is not None:
            stack.enter_context(mock.patch.object(_index, "ROW_GROUP", group))
            stack.enter_context(mock.patch.object(_index, "BATCH_ROWS", batch))
        _check_lookup(tmp_path_factory, old, new)


def _check_lookup(tmp_path_factory, old: list[str], new: list[str]) -> None:
    url = str(tmp_path_factory.mktemp("idx") / "idx")
    half = len(old) // 2
    ids = [f"i{j:03d}" for j in range(len(old))]
    _add(url, ids[:half], old[:half]) if half else None
    index = _add(url, ids[half:], old[half:])
    found = index.lookup(batch_signatures(new, PARAMS), text_digests(new))
    exact, pairs = _brute_lookup(new, old, PARAMS)
    got_exact = {i: found.ids[j] for i, j in enumerate(found.exact.tolist()) if j >= 0}
    assert got_exact == exact
    got = {
        (i, found.ids[j], e)
        for (i, j), e in zip(found.pairs.tolist(), found.estimate.tolist(), strict=True)
    }
    assert got == pairs
    assert found.ids == sorted(found.ids)
    for j, doc_id in enumerate(found.ids):
        k = ids.index(doc_id)
        assert found.sigs[j].tolist() == batch_signatures([old[k]], PARAMS)[0].tolist()
        assert found.parts[j] == index.parts[0 if k < half else len(index.parts) - 1].name


def test_index_lookup_confirms_an_estimate_equal_to_the_threshold(tmp_path: Path) -> None:
    """``estimate >= threshold``, as among new rows: a pair exactly at the threshold counts."""
    texts = [" ".join(WORDS[i : i + 4 + j]) for i in range(6) for j in range(4)]
    sigs = batch_signatures(texts, PARAMS)
    found = None
    for a in range(len(texts)):
        for b in range(len(texts)):
            shared = any(
                (sigs[a, r * 4 : r * 4 + 4] == sigs[b, r * 4 : r * 4 + 4]).all() for r in range(8)
            )
            if a != b and shared and (sigs[a] == sigs[b]).mean() == PARAMS.threshold:
                found = (a, b)
    assert found is not None, "the texts hold a pair at the threshold"
    a, b = found
    index = _add(str(tmp_path / "idx"), ["old"], [texts[b]])
    hit = index.lookup(sigs[a : a + 1], text_digests([texts[a]]))
    assert hit.ids == ["old"] and hit.estimate.tolist() == [PARAMS.threshold]


@given(
    indexed=st.sets(st.from_regex(r"[a-c]{1,3}", fullmatch=True), min_size=1, max_size=20),
    asked=st.sets(st.from_regex(r"[a-c]{1,3}", fullmatch=True), max_size=20),
)
def test_index_id_parts_equal_the_intersection(tmp_path_factory, indexed, asked) -> None:
    """Row groups of 2 ids (a part written 3 rows at a time), skipped by their id range when it
    holds no asked id."""
    url = str(tmp_path_factory.mktemp("idx") / "idx")
    ids = sorted(indexed)
    shuffled = ids[1::2] + ids[::2]
    with mock.patch.object(_index, "ROW_GROUP", 2), mock.patch.object(_index, "BATCH_ROWS", 3):
        index = _add(url, shuffled, [f"text {i}" for i in shuffled])  # written 3 rows at a time
    table = pq.read_table(index.file_urls())
    assert table.column("id").to_pylist() == ids  # sorted across the slices
    meta = pq.ParquetFile(index.file_urls()[0]).metadata
    sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    assert sum(sizes) == len(ids) and max(sizes) <= 2
    assert index.id_parts(sorted(asked)) == {i: index.parts[0].name for i in indexed & asked}


def test_index_on_an_fsspec_url() -> None:
    """memory:// (no os.link there): the same commits, reads and the lost race."""
    url = "memory://neardup-test-index"
    index = _add(url, ["a", "b"], ["one two three", "four five six"])
    index.verify()
    assert index.file_urls()[0].startswith("memory://")
    assert index.id_parts(["a", "z"]) == {"a": index.parts[0].name}
    found = index.lookup(batch_signatures(["one two three"], PARAMS), text_digests(["one two"]))
    assert found.ids == ["a"] and found.exact.tolist() == [-1]
    stale = DocIndex(url, index.fs, index.root, 0, {})
    with pytest.raises(IndexConflictError, match="version 1"):
        commit_index(stale, PARAMS, [])
    index.fs.rm(index.root, recursive=True)


def test_index_files_removed_by_a_newer_version_are_a_change_not_damage(tmp_path: Path) -> None:
    """A compaction committed (and its old files removed) while a run read the version before:
    IndexChangedError (an IndexConflictError: rerun), not IndexDamagedError."""
    url = str(tmp_path / "idx")
    reader = _add(url, ["a"], ["one two"])
    texts = ["one two"]
    merged = write_part(reader, PARAMS, ["a"], text_digests(texts),
                        batch_signatures(texts, PARAMS), run_info("local", "t", []))  # fmt: skip
    commit_index(reader, PARAMS, [merged], drop=[reader.parts[0].name])
    (tmp_path / "idx" / reader.parts[0].files[0].path).unlink()
    with pytest.raises(IndexChangedError, match="removed by version 2") as caught:
        reader.id_parts(["a"])
    assert isinstance(caught.value, IndexConflictError)
    with pytest.raises(IndexChangedError):
        reader.verify()


def test_a_runs_index_record_before_and_after_its_part_and_its_line() -> None:
    record = index_record("idx/", "append", 3, 120, 7, 9)
    assert record == {
        "url": "idx/", "mode": "append", "version_read": 3, "version_written": None,
        "part": None, "rows_added": 0, "indexed_rows": 120, "indexed_rows_matched": 7,
        "rows_matching_index": 9,
    }  # fmt: skip
    assert index_record_line(record) == (
        "neardup dedup: index idx/: read version 3 (120 documents, 7 matched), added nothing"
    )
    record.update(version_written=4, part="part-0004", rows_added=50)
    assert index_record_line(record) == (
        "neardup dedup: index idx/: read version 3 (120 documents, 7 matched), "
        "added 50 rows as version 4 (part part-0004)"
    )


def test_a_lost_commit_race_says_which_version_the_outputs_are_valid_against(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "idx")
    base = _add(url, ["a"], ["one two"])
    sigs, digests = batch_signatures(["x y"], PARAMS), text_digests(["x y"])
    mine = write_part(base, PARAMS, ["m"], digests, sigs, run_info("local", "t", []))
    theirs = write_part(base, PARAMS, ["t"], digests, sigs, run_info("local", "t", []))
    commit_index(base, PARAMS, [theirs])
    with pytest.raises(IndexConflictError) as caught:
        commit_index(base, PARAMS, [mine])
    assert str(caught.value) == (
        f"{url}: another run added version 2 (part {theirs.name}) while this run ran; nothing "
        "was added to the index; this run's outputs are written and valid against version 1; "
        "rerun to dedup against it"
    )


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("digest", b"x" * 15, "has digest values that are not 16 bytes"),
        ("bands", b"x" * 63, "has bands values that are not 64 bytes"),
        ("signature", b"x" * 127, "has signature values that are not 128 bytes"),
        ("id", None, "has a null id"),
    ],
    ids=["digest", "bands", "signature", "id"],
)
def test_index_values_of_the_wrong_width_are_damage_naming_index_file_and_column(
    tmp_path: Path, column: str, value: bytes | None, problem: str
) -> None:
    import pyarrow as pa

    url = str(tmp_path / "idx")
    index = _add(url, ["a", "b"], ["one two three", "four five six"])
    name = index.parts[0].files[0].path
    path = Path(url) / name
    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    values[0] = value
    at = table.schema.get_field_index(column)
    table = table.set_column(at, table.schema.field(column), pa.array(values, table[column].type))
    pq.write_table(table, path)
    version = Path(url) / "_index" / "00000001.json"
    body = json.loads(version.read_text())
    body["parts"][0]["files"][0]["bytes"] = path.stat().st_size
    version.write_text(json.dumps(body))
    sigs = batch_signatures(["one two three"], PARAMS)
    with pytest.raises(IndexDamagedError) as caught:
        # bands are read by a scan only (the key table holds them for a lookup)
        lookup_index(DocIndex.open(url), sigs, text_digests(["one two three"]), scan=True)
    assert str(caught.value) == f"{url}: the index is damaged: {name} {problem}"


def test_a_parts_run_names_its_engine_version_and_first_inputs_and_appends_by_default() -> None:
    inputs = [f"in/{i}.jsonl" for i in range(_index.MAX_RUN_INPUTS + 5)]
    run = run_info("local", "1.2", inputs)
    created = dt.datetime.fromisoformat(run.pop("created"))
    assert created.utcoffset() == dt.timedelta(0) and created.microsecond == 0  # UTC, seconds
    assert run == {
        "engine": "local", "neardup": "1.2", "inputs": inputs[: _index.MAX_RUN_INPUTS],
        "inputs_total": len(inputs), "mode": "append",
    }  # fmt: skip
    assert run_info("spark", "1.2", [], mode="compact")["mode"] == "compact"


class _ObjectStore(MemoryFileSystem):
    """An object store in memory (paths as memory:// keeps them) whose writes are plain puts."""

    protocol = "objectstore"

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(str(path).replace(f"{cls.protocol}://", "memory://", 1))


class _LaggingListing(_ObjectStore):
    """A store whose listing lags its writes (a version file just written does not exist yet
    for ``exists``) but whose create-if-absent (mode "x") sees every object."""

    protocol = "lagging"

    def exists(self, path, **kwargs):
        return not str(path).endswith(".json") and super().exists(path, **kwargs)

    def _open(self, path, mode="rb", *args, **kwargs):
        if mode == "xb" and self._strip_protocol(path) in self.store:
            raise FileExistsError(path)
        return super()._open(path, "wb" if mode == "xb" else mode, *args, **kwargs)


class _NoExclusiveCreate(_ObjectStore):
    """A store without create-if-absent (mode "x"): one writer at a time (docs/index.md)."""

    protocol = "noexclusive"

    def _open(self, path, mode="rb", *args, **kwargs):
        if "x" in mode:
            raise NotImplementedError("no exclusive create here")
        return super()._open(path, mode, *args, **kwargs)


@pytest.mark.parametrize("store", [_LaggingListing, _NoExclusiveCreate])
def test_an_object_store_index_commits_and_refuses_a_version_already_taken(store) -> None:
    fsspec.register_implementation(store.protocol, store, clobber=True)
    url = f"{store.protocol}://neardup-test-{store.protocol}"
    try:
        index = _add(url, ["a"], ["one two"])
        assert (index.version, index.rows) == (1, 1)
        stale = DocIndex(url, index.fs, index.root, 0, {})
        with pytest.raises(IndexConflictError, match="version 1"):
            commit_index(stale, PARAMS, [])
        assert DocIndex.open(url).id_parts(["a"]) == {"a": index.parts[0].name}
    finally:
        fsspec.filesystem("memory").rm(f"/neardup-test-{store.protocol}", recursive=True)


def test_an_index_of_another_format_version_is_refused_naming_both(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    _add(url, ["a"], ["one two"])
    version = Path(url) / "_index" / "00000001.json"
    body = json.loads(version.read_text())
    body["format_version"] = 5
    version.write_text(json.dumps(body))
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert str(caught.value) == (
        f"{url}: the index is damaged: _index/00000001.json has format_version 5; "
        "this neardup reads 1, 2, 3 and 4"
    )
