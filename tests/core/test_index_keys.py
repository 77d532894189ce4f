"""The band-key tables (core/_index_keys.py, core/_index_keyed.py): looking new rows up through
them answers exactly what the full scan answers, over indexes of several parts, parts replaced
by a rewrite, parts of the first layout (no key table) and whole first-layout indexes; tables
built with spilled runs are the same bytes; compaction into the new layout keeps every answer."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core import _index_keys
from neardup.core._index_lookup import IndexLookup, lookup_index
from neardup.core._index_sorted import map_local
from neardup.core.engine import (
    DocIndex,
    MinhashParams,
    commit_index,
    compact_index,
    rewrite_without,
    run_info,
    write_part,
)
from tests.indexes import flat_layout

PARAMS = MinhashParams(num_perm=8, bands=4, threshold=0.5, k=1)
#: Signature entries from a small alphabet: band keys shared by many rows, pairs near and far.
ALPHABET = 3


@contextmanager
def _small_pages(page: int = 4, batch: int = 8) -> Iterator[None]:
    """Pages of ``page`` keys and batches of ``batch``: tiny indexes then span many pages and
    batches."""
    with (
        mock.patch.object(_index_keys, "PAGE_ROWS", page),
        mock.patch.object(_index_keys, "BATCH_ROWS", batch),
    ):
        yield


def _rows(draw: st.DrawFn, n: int, prefix: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    ids = [f"{prefix}{i:03d}" for i in draw(st.permutations(range(n)))]
    sigs = np.array(
        draw(st.lists(st.lists(st.integers(0, ALPHABET - 1), min_size=8, max_size=8),
                      min_size=n, max_size=n)),
        dtype=np.uint32,
    ).reshape(n, 8)  # fmt: skip
    sigs[sigs == ALPHABET - 1] = 2**31 - 1 if draw(st.booleans()) else ALPHABET - 1
    # Digests: equal first halves with other second halves, and whole equal ones.
    digests = np.array(
        draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1)), min_size=n, max_size=n)),
        dtype=np.uint64,
    ).reshape(n, 2)
    return ids, digests, sigs


@st.composite
def indexes(draw: st.DrawFn) -> dict:
    """Parts (rows, and whether each is written without a key table), ids replaced later, and
    the new rows: copies and near copies of indexed rows, and others."""
    parts = []
    for p in range(draw(st.integers(1, 4))):
        ids, digests, sigs = _rows(draw, draw(st.integers(1, 30)), f"p{p}-")
        parts.append((ids, digests, sigs, draw(st.booleans())))
    every = [i for ids, *_ in parts for i in ids]
    replaced = draw(st.lists(st.sampled_from(every), max_size=4, unique=True))
    _, q_digests, q_sigs = _rows(draw, draw(st.integers(1, 25)), "q")
    copies = draw(st.lists(st.tuples(st.integers(0, len(parts) - 1), st.integers(0, 29),
                                     st.integers(0, 7)), max_size=8))  # fmt: skip
    for at, (p, row, change) in enumerate(copies[: len(q_sigs)]):
        ids, digests, sigs, _ = parts[p]
        q_sigs[at] = sigs[row % len(ids)]
        q_sigs[at, change] = (q_sigs[at, change] + 1) % ALPHABET
        q_digests[at] = digests[row % len(ids)]
    return {"parts": parts, "replaced": replaced, "sigs": q_sigs, "digests": q_digests}


def _build(url: str, spec: dict) -> DocIndex:
    for ids, digests, sigs, first_layout in spec["parts"]:
        index = DocIndex.open(url, missing_ok=True)
        part = write_part(index, PARAMS, ids, digests, sigs, run_info("local", "t", []))
        if first_layout:  # a part as an older neardup wrote it: no key table, no id table
            (Path(url) / part.keys.path).unlink()
            (Path(url) / part.ids.path).unlink()
            part = dataclasses.replace(part, keys=None, ids=None)
        commit_index(index, PARAMS, [part])
    index = DocIndex.open(url)
    if spec["replaced"]:
        added, dropped = rewrite_without(
            index, PARAMS, spec["replaced"], run_info("local", "t", [])
        )
        commit_index(index, PARAMS, add=added, drop=dropped)
    return DocIndex.open(url)


def _answers(found: IndexLookup, named: bool = True) -> tuple:
    """Everything a lookup says (part names left out for compaction, which renames parts)."""
    return (
        found.ids, found.parts if named else None, found.sigs.tolist(), found.exact.tolist(),
        found.pairs.tolist(), found.estimate.tolist(),
    )  # fmt: skip


def _first_layout(url: str) -> None:
    """Turn the index at ``url`` into one of the first layout: its latest version rewritten as
    format_version 1 without key tables, and their files removed."""
    flat_layout(Path(url))
    latest = max((Path(url) / "_index").glob("[0-9]*.json"))
    body = json.loads(latest.read_text())
    for part in body["parts"]:
        for table in ("keys", "ids"):
            listed = part.pop(table, None)
            if listed is not None:
                (Path(url) / listed["path"]).unlink()
    body["format_version"] = 1
    latest.write_text(json.dumps(body))


@given(spec=indexes())
@settings(max_examples=60)
def test_lookups_through_key_tables_are_the_full_scans(tmp_path_factory, spec) -> None:
    url = str(tmp_path_factory.mktemp("idx") / "idx")
    with _small_pages():
        index = _build(url, spec)
        assert (
            not index.parts
            or any(p.keys is not None for p in index.parts)
            or all(first for *_, first in spec["parts"])
        )  # (no part left: every row replaced)
        keyed = lookup_index(index, spec["sigs"], spec["digests"])
        scanned = lookup_index(index, spec["sigs"], spec["digests"], scan=True)
        assert _answers(keyed) == _answers(scanned)
        _first_layout(url)
        old = DocIndex.open(url)
        assert all(p.keys is None for p in old.parts)
        assert _answers(lookup_index(old, spec["sigs"], spec["digests"])) == _answers(scanned)


@given(spec=indexes())
@settings(max_examples=25)
def test_compaction_into_the_new_layout_keeps_every_answer(tmp_path_factory, spec) -> None:
    url = str(tmp_path_factory.mktemp("idx") / "idx")
    with _small_pages():
        index = _build(url, spec)
        before = lookup_index(index, spec["sigs"], spec["digests"], scan=True)
        _first_layout(url)
        compact_index(url, neardup="t", part_rows=1000)
        after = DocIndex.open(url)
        assert all(p.keys is not None and p.ids is not None for p in after.parts)
        # Committed even with nothing to rewrite: the log migrated (sealed by this version).
        assert (after.manifest["format_version"], after.manifest["sealed"]) == (4, after.version)
        found = lookup_index(after, spec["sigs"], spec["digests"])
        assert _answers(found, named=False) == _answers(before, named=False)


@given(
    keys=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), min_size=1, max_size=80),
    queries=st.lists(st.integers(-4, 4) | st.integers(-(2**63), 2**63 - 1), max_size=20),
)
def test_find_is_every_equal_key_and_band(tmp_path_factory, keys, queries) -> None:
    """Against a brute force, keys with long runs across pages and batches included."""
    import fsspec

    path = str(tmp_path_factory.mktemp("k") / "keys.arrow")
    n = len(keys) // 2 or 1
    table = np.resize(np.array(keys, dtype=np.int64), (n, 2)).view(np.uint64)
    with _small_pages():
        builder = _index_keys.KeyBuilder(1)
        builder.add(table[:, :1].repeat(2, axis=1), table[:, 1:])
        builder.write(fsspec.filesystem("file"), path)
        found = _index_keys.KeyTable(map_local(path), 2 * n)
        q = np.array(queries + [int(k) for k in table.view(np.int64)[:3, 0]], dtype=np.int64)
        bands = np.array([(i % 2) - 1 for i in range(len(q))], dtype=np.int16)
        got = sorted(zip(*(a.tolist() for a in found.find(q, bands)), strict=True))
    flat = table.view(np.int64)
    want = sorted(
        (i, row)
        for i, (k, b) in enumerate(zip(q.tolist(), bands.tolist(), strict=True))
        for row in range(n)
        if flat[row, 0 if b == -1 else 1] == k
    )
    assert got == want


def test_a_spilled_build_writes_the_same_bytes(tmp_path: Path) -> None:
    import fsspec

    rng = np.random.default_rng(1)
    digests = rng.integers(0, 2**64 - 1, size=(300, 2), dtype=np.uint64)
    bands = rng.integers(0, 5, size=(300, 3), dtype=np.uint64)  # many equal keys
    fs = fsspec.filesystem("file")
    written = []
    for spill in (10**9, 50):
        with _small_pages(page=8, batch=32), mock.patch.object(_index_keys, "SPILL_ROWS", spill):
            builder = _index_keys.KeyBuilder(3)
            for lo in range(0, 300, 70):
                builder.add(digests[lo : lo + 70], bands[lo : lo + 70])
            path = tmp_path / f"{spill}.arrow"
            assert builder.write(fs, str(path)) == 1200
            written.append(path.read_bytes())
    assert written[0] == written[1]


def test_a_key_table_of_other_rows_is_damage_naming_it(tmp_path: Path) -> None:
    from neardup.core.engine import IndexDamagedError

    url = str(tmp_path / "idx")
    ids, digests, sigs = ["a", "b"], np.zeros((2, 2), np.uint64), np.ones((2, 8), np.uint32)
    index = DocIndex.open(url, missing_ok=True)
    part = write_part(index, PARAMS, ids, digests, sigs, run_info("local", "t", []))
    other = write_part(index, PARAMS, ["c"], digests[:1], sigs[:1], run_info("local", "t", []))
    (Path(url) / part.keys.path).write_bytes((Path(url) / other.keys.path).read_bytes())
    size = (Path(url) / part.keys.path).stat().st_size
    part = dataclasses.replace(part, keys=dataclasses.replace(part.keys, bytes=size))
    commit_index(index, PARAMS, [part])
    with pytest.raises(
        IndexDamagedError, match=f"{part.keys.path} holds 5 keys, the index lists 10"
    ):
        DocIndex.open(url).lookup(sigs, digests)


def test_a_garbled_key_table_is_damage_for_info_compact_and_lookups(tmp_path: Path) -> None:
    from neardup.core.engine import IndexDamagedError, index_info

    url = str(tmp_path / "idx")
    ids, digests, sigs = ["a", "b"], np.zeros((2, 2), np.uint64), np.ones((2, 8), np.uint32)
    index = DocIndex.open(url, missing_ok=True)
    part = write_part(index, PARAMS, ids, digests, sigs, run_info("local", "t", []))
    commit_index(index, PARAMS, [part])
    path = Path(url) / part.keys.path
    path.write_bytes(b"x" * path.stat().st_size)  # the listed size: only reading tells
    for read in (
        lambda: index_info(url),
        lambda: compact_index(url, neardup="t"),
        lambda: DocIndex.open(url).lookup(sigs, digests),
    ):
        with pytest.raises(IndexDamagedError, match=f"{part.keys.path} is not a readable key"):
            read()
    assert lookup_index(DocIndex.open(url), sigs, digests, scan=True).ids == ["a", "b"]


def test_key_tables_on_another_filesystem_are_read_by_range_and_answer_as_the_scan() -> None:
    """An fsspec URL (memory://): the tables are read a batch at a time through the file."""
    import uuid

    url = f"memory://keys-{uuid.uuid4().hex}/idx"
    rng = np.random.default_rng(5)
    for p in range(2):
        index = DocIndex.open(url, missing_ok=True)
        ids = [f"p{p}-{i:05d}" for i in range(3000)]
        sigs = rng.integers(0, 3, size=(3000, 8), dtype=np.uint32)
        digests = rng.integers(0, 4, size=(3000, 2), dtype=np.uint64)
        part = write_part(index, PARAMS, ids, digests, sigs, run_info("local", "t", []))
        commit_index(index, PARAMS, [part])
    index = DocIndex.open(url)
    assert all(p.keys is not None for p in index.parts)
    keyed = lookup_index(index, sigs[:40], digests[:40])
    assert len(keyed.ids) > 40
    assert _answers(keyed) == _answers(lookup_index(index, sigs[:40], digests[:40], scan=True))
