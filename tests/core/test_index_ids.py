"""The id tables (core/_index_ids.py, core/_index_idrows.py): the ids found through them are
exactly the brute-force intersection of the asked ids with the index, with their parts, digests
and signatures, over many parts (empty ones, parts without id tables), interleaving ids and
forced hash collisions; a damaged or missing id table is an error naming it, never absence."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core import _index_ids
from neardup.core._hashing import fnv1a64
from neardup.core._index_idrows import find_ids
from neardup.core.engine import (
    DocIndex,
    IndexDamagedError,
    MinhashParams,
    commit_index,
    compact_index,
    index_id_hashes,
    index_info,
    run_info,
    write_part,
)

PARAMS = MinhashParams(num_perm=8, bands=4, threshold=0.5, k=1)


@contextmanager
def _small_pages(page: int = 2, batch: int = 4) -> Iterator[None]:
    """Pages of ``page`` ids and batches of ``batch``: tiny parts span many of each."""
    with (
        mock.patch.object(_index_ids, "PAGE_ROWS", page),
        mock.patch.object(_index_ids, "BATCH_ROWS", batch),
    ):
        yield


@contextmanager
def _colliding(buckets: int) -> Iterator[None]:
    """Every id hashed into one of ``buckets`` values (its UTF-8 length modulo ``buckets``):
    most ids collide, in the tables and in the lookups alike."""

    def weak(chunk: object) -> np.ndarray:
        values = chunk.to_pylist()  # type: ignore[attr-defined]
        return np.array([len(v.encode()) % buckets for v in values], dtype=np.int64)

    with mock.patch.object(_index_ids, "_chunk_hashes", weak):
        yield


def test_the_id_hash_is_fnv1a64_of_the_utf8_bytes_read_signed() -> None:
    ids = ["foobar", "", "https://example.com/a?b=1", "é", "日本語", "a" * 300]
    want = [int.from_bytes(fnv1a64(i.encode()).to_bytes(8, "little"), "little", signed=True)
            for i in ids]  # fmt: skip
    assert index_id_hashes(ids).tolist() == want
    assert index_id_hashes(["foobar"]).tolist() == [np.int64(0x85944171F73967E8 - 2**64)]
    chunked = pa.chunked_array([pa.array(ids[:2]), pa.array(ids[2:])])
    assert index_id_hashes(chunked).tolist() == want
    assert index_id_hashes(pa.array(ids, pa.large_string())).tolist() == want
    assert index_id_hashes(pa.array(ids).slice(2, 3)).tolist() == want[2:5]
    assert index_id_hashes([]).tolist() == []


def _digest(doc_id: str) -> bytes:
    return hashlib.sha256(doc_id.encode()).digest()[:16]


def _sig(doc_id: str) -> list[int]:
    return list(hashlib.sha256(b"s" + doc_id.encode()).digest()[: PARAMS.num_perm])


def _build(url: str, parts: list[tuple[list[str], bool]]) -> DocIndex:
    """An index of ``parts`` (ids, whether its id table is left out: a part of format 2)."""
    for ids, without in parts:
        index = DocIndex.open(url, missing_ok=True)
        digests = np.frombuffer(b"".join(map(_digest, ids)), dtype="<u8").reshape(-1, 2)
        sigs = np.array([_sig(i) for i in ids], dtype=np.uint32).reshape(-1, PARAMS.num_perm)
        part = write_part(index, PARAMS, ids, digests.astype(np.uint64), sigs,
                          run_info("local", "t", []))  # fmt: skip
        if without:
            (Path(url) / part.ids.path).unlink()
            part = dataclasses.replace(part, ids=None)
        commit_index(index, PARAMS, [part])
    return DocIndex.open(url)


#: Ids of a few sites: drawn ids interleave across parts, and share lengths (collisions).
_IDS = st.builds(lambda site, n: f"https://s{site}.example/{n}", st.integers(0, 3),
                 st.integers(0, 40))  # fmt: skip


@st.composite
def corpora(draw: st.DrawFn) -> dict:
    """Parts of distinct interleaving ids (some empty, some without id tables), and asked ids:
    some indexed, some not."""
    every = draw(st.lists(_IDS, unique=True, max_size=60))
    cuts = sorted(draw(st.lists(st.integers(0, len(every)), min_size=0, max_size=4)))
    bounds = [0, *cuts, len(every)]
    parts = [(every[a:b], draw(st.booleans())) for a, b in itertools.pairwise(bounds)]
    asked = draw(st.lists(_IDS, max_size=20)) + draw(
        st.lists(st.sampled_from(every), max_size=10) if every else st.just([])
    )
    return {"parts": parts, "asked": asked, "buckets": draw(st.sampled_from([0, 1, 3]))}


def _answers(index: DocIndex, asked: list[str], scan: bool = False) -> tuple:
    found = find_ids(index, asked, scan=scan)
    return found.ids, found.parts, found.digests.tolist(), found.sigs.tolist()


@given(spec=corpora())
@settings(max_examples=60, deadline=None)
def test_find_ids_is_the_brute_force_intersection(tmp_path_factory, spec) -> None:
    url = str(tmp_path_factory.mktemp("idx") / "idx")
    collide = _colliding(spec["buckets"]) if spec["buckets"] else contextlib.nullcontext()
    with _small_pages(), collide:
        index = _build(url, spec["parts"])
        found = find_ids(index, spec["asked"])
        by_id = index.id_digests(spec["asked"]), index.id_signatures(spec["asked"])
        named = index.id_parts(spec["asked"])
        assert _answers(index, spec["asked"]) == _answers(index, spec["asked"], scan=True)
    names = [p.name for p in index.parts]
    want = sorted(
        (i, names[k]) for k, (ids, _) in enumerate(spec["parts"]) if ids
        for i in ids if i in set(spec["asked"])
    )  # fmt: skip
    if any(not ids for ids, _ in spec["parts"]):  # an empty part is committed like any other
        assert len(names) == len(spec["parts"])
    assert list(zip(found.ids, found.parts, strict=True)) == want
    assert [bytes(np.ascontiguousarray(d, "<u8").tobytes()) for d in found.digests] == [
        _digest(i) for i, _ in want
    ]
    assert found.sigs.tolist() == [_sig(i) for i, _ in want]
    assert by_id[0] == {i: _digest(i) for i, _ in want}
    assert {i: s.tolist() for i, s in by_id[1].items()} == {i: _sig(i) for i, _ in want}
    assert named == dict(want)


def test_a_hash_shared_by_two_ids_never_makes_one_count_as_the_other(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    with _colliding(1):  # every id has hash 0
        index = _build(url, [(["a", "b", "c"], False)])
        assert index.id_parts(["b", "zz", "q"]) == {"b": index.parts[0].name}
        assert index.id_parts(["zz"]) == {}
        assert find_ids(index, ["x", "y"]).ids == []


def test_compaction_gives_parts_without_id_tables_one(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    index = _build(url, [(["a", "c"], True), (["b"], True)])
    assert all(p.ids is None for p in index.parts)
    before = _answers(index, ["a", "b", "x"])
    compact_index(url, neardup="t")
    after = DocIndex.open(url)
    assert [p.ids is not None for p in after.parts] == [True]
    assert _answers(after, ["a", "b", "x"])[::2] == before[::2]  # part names change
    assert index_info(url)["parts"][0]["layout"] == 3


def _damaged(tmp_path: Path, how: str) -> tuple[DocIndex, str]:
    url = str(tmp_path / "idx")
    index = _build(url, [(["a", "b", "c", "d"], False), (["e", "f", "g", "h"], False)])
    part, other = index.parts
    path = Path(url) / part.ids.path
    if how == "missing":
        path.unlink()
    elif how == "garbage":
        path.write_bytes(b"\0" * path.stat().st_size)
    elif how == "swapped":  # another part's table of as many rows: its rows name other ids
        path.write_bytes((Path(url) / other.ids.path).read_bytes())
    return index, part.ids.path


@pytest.mark.parametrize(
    ("how", "problem"),
    [
        ("missing", "is missing"),
        ("garbage", "is not a readable id table"),
        ("swapped", "does not hold the hash of the id"),
    ],
)
def test_a_damaged_id_table_is_an_error_naming_it_never_absence(
    tmp_path: Path, how: str, problem: str
) -> None:
    index, name = _damaged(tmp_path, how)
    asked = ["a", "b", "c", "d", "e", "f", "g", "h"]
    with pytest.raises(IndexDamagedError) as caught:
        index.id_parts(asked)
    assert str(caught.value).startswith(f"{index.url}: the index is damaged: {name} {problem}")
    if how != "swapped":  # info reads every table's footer, layout and fences
        with pytest.raises(IndexDamagedError, match=name):
            index_info(index.url)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda p, body: p["ids"].update(rows=3), "lists 3 ids, not 1 a row (2)"),
        (lambda p, body: p["ids"].update(path="parts/elsewhere/ids-00000.arrow"),
         "lists ids 'parts/elsewhere/ids-00000.arrow', not a file under"),
        (lambda p, body: body.update(format_version=2),
         "lists an id table, which format_version 2 has not"),
        (lambda p, body: p["ids"].update(path=p["keys"]["path"]), "is listed twice"),
    ],
)  # fmt: skip
def test_a_manifest_listing_a_wrong_id_table_is_damage(tmp_path: Path, change, problem) -> None:
    url = str(tmp_path / "idx")
    _build(url, [(["a", "b"], False)])
    version = Path(url) / "_index" / "00000001.json"
    body = json.loads(version.read_text())
    change(body["parts"][0], body)
    version.write_text(json.dumps(body))
    with pytest.raises(IndexDamagedError, match=r"_index/00000001\.json is malformed") as caught:
        DocIndex.open(url)
    assert problem in str(caught.value)
