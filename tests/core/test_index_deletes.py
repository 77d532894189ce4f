"""Deletion vectors (core/_index_deletes.py): random appends, deletes, replaces and compactions
answer exactly as an index built afresh from the live documents (lookups by key and by scan,
near matches, ids, signature batches, counts); deleted ids are not found; deleting twice
changes nothing; every manifest entry of a vector is checked, a damaged vector refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.core._index_lookup import IndexLookup, lookup_index
from neardup.core.engine import (
    DocIndex,
    IndexDamagedError,
    commit_index,
    compact_index,
    delete_ids,
    deleted_since,
    index_info,
    indexed_documents,
    run_info,
    write_deletes,
    write_part,
)
from tests.core.test_index_keys import _small_pages
from tests.core.test_index_near import PARAMS, _sigs
from tests.indexes import version_file

POOL = [f"d{i:02d}" for i in range(24)]


def _digests(texts: list[int]) -> np.ndarray:
    raw = b"".join(hashlib.sha256(f"t{t}".encode()).digest()[:16] for t in texts)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).astype(np.uint64)


@st.composite
def histories(draw: st.DrawFn) -> dict:
    """Steps on one index: appends of new ids, deletes (of live, deleted and unknown ids),
    replaces (live ids deleted and added again with other values in one version), compactions;
    and queries (copies of rows, others)."""
    steps = []
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["append", "append", "delete", "replace", "compact"]))
        ids = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=8, unique=True))
        n = len(ids)
        texts = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
        steps.append((kind, ids, _sigs(draw, n), texts))
    queries = _sigs(draw, draw(st.integers(1, 8)))
    texts = draw(st.lists(st.integers(0, 5), min_size=len(queries), max_size=len(queries)))
    threshold = draw(st.sampled_from([0.25, 0.5, 1.0]))
    return {"steps": steps, "queries": queries, "texts": texts, "threshold": threshold}


def _append(url: str, docs: dict[str, tuple[np.ndarray, int]], deleted: list[str] = ()) -> None:
    index = DocIndex.open(url, missing_ok=True)
    ids = sorted(docs)
    sigs = np.stack([docs[i][0] for i in ids]).astype(np.uint32) if ids else None
    parts = []
    if ids:
        digests = _digests([docs[i][1] for i in ids])
        parts.append(write_part(index, PARAMS, ids, digests, sigs, run_info("local", "t", [])))
    vectors, found = write_deletes(index, deleted) if index.version else ({}, [])
    assert set(found) == set(deleted) & set(_live_ids(index))
    commit_index(index, PARAMS, parts, deletes=vectors)


def _live_ids(index: DocIndex) -> list[str]:
    return (
        [i for ids, _ in index.signature_batches(index.parts) for i in ids] if index.parts else []
    )


def _same(a: IndexLookup, b: IndexLookup) -> None:
    assert a.ids == b.ids
    assert a.sigs.tolist() == b.sigs.tolist()
    assert a.exact.tolist() == b.exact.tolist()
    assert a.pairs.tolist() == b.pairs.tolist()
    assert a.estimate.tolist() == b.estimate.tolist()


def _check(url: str, fresh_url: str, live: dict, gone: set[str], spec: dict) -> None:
    index = DocIndex.open(url)
    assert index.rows == len(live)
    assert sorted(_live_ids(index)) == sorted(live)
    batches = {i: s.tolist() for ids, sigs in index.signature_batches(index.parts)
               for i, s in zip(ids, sigs, strict=True)}  # fmt: skip
    assert batches == {i: v[0].tolist() for i, v in live.items()}
    every = [*POOL, "zz"]
    assert index.id_digests(every) == {
        i: _digests([v[1]])[0].astype("<u8").tobytes() for i, v in live.items()
    }
    assert {i: s.tolist() for i, s in index.id_signatures(every).items()} == {
        i: v[0].tolist() for i, v in live.items()
    }
    assert not set(index.id_parts(sorted(gone))) & (gone - set(live))
    docs = indexed_documents(index, every)  # the re-crawl check's read
    assert docs.ids == sorted(live)
    assert docs.sigs.tolist() == [live[i][0].tolist() for i in docs.ids]
    queries, digests = spec["queries"], _digests(spec["texts"])
    if not live:
        assert lookup_index(index, queries, digests).ids == []
        return
    _append(fresh_url, live)
    fresh = DocIndex.open(fresh_url)
    _same(index.lookup(queries, digests), fresh.lookup(queries, digests))
    _same(lookup_index(index, queries, digests, scan=True), fresh.lookup(queries, digests))
    _same(index.near(queries, spec["threshold"]), fresh.near(queries, spec["threshold"]))


@given(spec=histories())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_deletes_answer_as_an_index_of_the_live_documents(tmp_path_factory, spec) -> None:
    root = tmp_path_factory.mktemp("deletes")
    url = str(root / "idx")
    live: dict[str, tuple[np.ndarray, int]] = {}
    gone: set[str] = set()
    with _small_pages():
        for k, (kind, ids, sigs, texts) in enumerate(spec["steps"]):
            rows = {i: (s, t) for i, s, t in zip(ids, sigs, texts, strict=True)}
            opened = DocIndex.open(url, missing_ok=True)
            if kind == "append":
                new = {i: v for i, v in rows.items() if i not in live}
                if not new:
                    continue
                _append(url, new)
                live.update(new)
            elif kind == "delete" and opened.version:
                before = opened.version
                done = delete_ids(url, ids)
                assert set(done.deleted) == set(ids) & set(live)
                assert set(done.missing) == set(ids) - set(live)
                assert (done.version > before) == bool(done.deleted)
                for i in ids:
                    live.pop(i, None)
                    gone.add(i)
                again = delete_ids(url, ids)  # idempotent: nothing more, no new version
                assert again.deleted == () and again.version == done.version
                if done.deleted:
                    assert set(deleted_since(opened, DocIndex.open(url))) == set(done.deleted)
            elif kind == "replace" and opened.version:
                swap = {i: v for i, v in rows.items() if i in live}
                if not swap:
                    continue
                _append(url, swap, deleted=sorted(swap))
                live.update(swap)
            elif kind == "compact" and opened.version:
                compact_index(url, neardup="t", part_rows=10 + k)
            if DocIndex.open(url, missing_ok=True).version:
                _check(url, str(root / f"fresh{k}"), live, gone, spec)
        if live:
            compact_index(url, neardup="t", part_rows=10**6)
            index = DocIndex.open(url)
            assert all(p.deleted is None for p in index.parts)
            _check(url, str(root / "fresh-end"), live, gone, spec)


def _one_delete(tmp_path: Path) -> tuple[str, dict]:
    url = str(tmp_path / "idx")
    sigs = np.arange(5 * 8, dtype=np.uint32).reshape(5, 8)
    _append(url, {f"a{i}": (sigs[i], i) for i in range(5)})
    delete_ids(url, ["a1", "a3"])
    return url, json.loads(version_file(Path(url), 2).read_text())


def test_a_version_with_deletion_vectors_is_format_4_and_counts_live_rows(tmp_path) -> None:
    url, body = _one_delete(tmp_path)
    part = body["parts"][0]
    assert body["format_version"] == 4 and body["rows"] == 3 and part["rows"] == 5
    assert part["deleted"]["rows"] == 2
    assert part["deleted"]["path"].startswith(f"parts/{part['name']}/deleted-00000002-")
    import pyarrow as pa  # readable without neardup: one uint32 column "row"

    table = pa.ipc.open_file(str(Path(url) / part["deleted"]["path"])).read_all()
    assert table.column("row").to_pylist() == [1, 3] and table.schema.field(0).type == pa.uint32()
    info = index_info(url)
    assert (info["rows"], info["deleted"], info["parts"][0]["rows"]) == (3, 2, 3)
    compact_index(url, neardup="t")
    after = json.loads(version_file(Path(url), 3).read_text())
    assert after["format_version"] == 4 and "deleted" not in after["parts"][0]
    assert after["rows"] == 3 and after["parts"][0]["rows"] == 3


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda b: [b.update(format_version=2), *(p.pop("ids", None) for p in b["parts"])],
            "lists a deletion vector, which format_version 2",
        ),
        (lambda b: b["parts"][0]["deleted"].update(rows=6), "with rows 6 (1 to 5)"),
        (lambda b: b["parts"][0]["deleted"].update(rows=0), "with rows 0 (1 to 5)"),
        (lambda b: b["parts"][0]["deleted"].update(bytes="9"), "without whole rows and bytes"),
        (lambda b: b["parts"][0]["deleted"].update(path="parts/x/d.arrow"), "not a file under"),
        (lambda b: b["parts"][0]["deleted"].pop("path"), "has deleted without a path"),
        (lambda b: b.update(rows=5), "rows is 5, its parts hold 3"),
        (
            lambda b: b["parts"][0]["deleted"].update(path=b["parts"][0]["keys"]["path"]),
            "is listed twice",
        ),
    ],
)
def test_a_malformed_deletion_entry_is_damage(tmp_path, change, problem) -> None:
    url, body = _one_delete(tmp_path)
    change(body)
    version_file(Path(url), 2).write_text(json.dumps(body))
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert problem in str(caught.value)


def _garble(url: str, how: str) -> None:
    index = DocIndex.open(url)
    path = Path(url) / index.parts[0].deleted.path
    if how == "missing":
        path.unlink()
    elif how == "bytes":
        path.write_bytes(path.read_bytes()[:-8])
    elif how == "other rows":  # another vector of the same size: the rows 0 and 4
        import pyarrow as pa

        from neardup.core._index_deletes import _table

        with pa.ipc.new_file(
            str(path), _table(index.parts[0].name, 5, np.array([0, 4])).schema
        ) as w:
            w.write_table(_table(index.parts[0].name, 5, np.array([4, 0])))


@pytest.mark.parametrize("how", ["missing", "bytes", "other rows"])
def test_a_damaged_deletion_vector_is_refused_never_misread(tmp_path, how) -> None:
    url, _ = _one_delete(tmp_path)
    _garble(url, how)
    index = DocIndex.open(url)
    sigs = np.arange(5 * 8, dtype=np.uint32).reshape(5, 8)
    for read in (
        lambda: index.lookup(sigs, _digests(list(range(5)))),
        lambda: index.id_digests(["a0"]),
        lambda: list(index.signature_batches(index.parts)),
        lambda: index_info(url),
        lambda: compact_index(url, neardup="t"),
    ):
        with pytest.raises(IndexDamagedError) as caught:
            read()
        assert "deleted-00000002-" in str(caught.value)


def test_a_lost_delete_race_commits_nothing_and_removes_its_vectors(tmp_path) -> None:
    from neardup.core.engine import IndexConflictError

    url, _ = _one_delete(tmp_path)

    def race() -> None:
        delete_ids(url, ["a0"])

    with pytest.raises(IndexConflictError) as caught:
        delete_ids(url, ["a2"], before_commit=race)
    assert "while this deletion ran; nothing was deleted" in str(caught.value)
    index = DocIndex.open(url)
    assert index.version == 3 and set(index.id_parts(["a0", "a2"])) == {"a2"}
    listed = {f.path for p in index.parts for f in p.all_files}
    on_disk = {str(p.relative_to(url)) for p in Path(url, "parts").rglob("deleted-*")}
    assert on_disk - listed == {
        f"parts/{index.parts[0].name}/{p.name}"
        for p in Path(url, "parts", index.parts[0].name).glob("deleted-00000002-*")
    }  # only the superseded vector of version 2: the loser's is gone


def test_a_neardup_reading_formats_1_and_2_refuses_an_index_with_deletion_vectors(
    tmp_path, monkeypatch
) -> None:
    from neardup.core import _index_log, _index_manifest

    url, _ = _one_delete(tmp_path)
    # The neardups before format_version 3: only 1 and 2 read, only the flat log listed.
    monkeypatch.setattr(_index_manifest, "FORMAT_VERSIONS", (1, 2))
    monkeypatch.setattr(_index_log, "_groups", lambda fs, root: [])
    with pytest.raises(IndexDamagedError) as caught:
        DocIndex.open(url)
    assert str(caught.value).endswith(
        "_index/00000001.json has format_version 4; this neardup reads 1 and 2"
    )
