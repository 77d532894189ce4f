"""The service's compaction policy (core/_index_tiers.py) and the core pieces it commits with
(core/_index_ops.py): the parts stay logarithmic in the rows under any history of flushes,
no compaction exceeds its cap or rewrites a part too large, deleted rows are dropped; a kept
merged part is a leftover as young as its drop; an earlier version is read from its file."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core._index_tiers import tier
from neardup.core.engine import (
    DocIndex,
    IndexConflictError,
    IndexFile,
    IndexPart,
    MinhashParams,
    batch_signatures,
    commit_compaction,
    commit_index,
    compaction_group,
    compaction_run,
    index_leftovers,
    remove_leftovers,
    rewrite_group,
    run_info,
    text_digests,
    write_part,
)

PARAMS = MinhashParams(num_perm=16, bands=8, threshold=0.5, k=1)


def write_index(url: str, docs: list[tuple[str, str]], parts: int = 1) -> None:
    """``docs`` (id, text) appended to the index at ``url`` as ``parts`` parts."""
    for p in range(parts):
        chunk = docs[p::parts]
        ids, texts = [d[0] for d in chunk], [d[1] for d in chunk]
        index = DocIndex.open(url, missing_ok=True)
        part = write_part(
            index, PARAMS, ids, text_digests(texts), batch_signatures(texts, PARAMS),
            run_info("local", "test", []),
        )  # fmt: skip
        commit_index(index, PARAMS, [part])


_counter = iter(range(10**9))


def _part(rows: int, deleted: int = 0) -> IndexPart:
    n = next(_counter)
    name = f"p{1:08d}-{n:012x}"
    vector = IndexFile(f"parts/{name}/deleted.arrow", deleted, 1) if deleted else None
    return IndexPart(name, rows, (IndexFile(f"parts/{name}/data.parquet", rows, 1),), {},
                     None, None, vector)  # fmt: skip


def test_tier_is_the_floor_of_the_log_by_the_factor() -> None:
    assert [tier(r, 10) for r in (0, 1, 9, 10, 99, 100, 999_999, 1_000_000)] == [
        0, 0, 0, 1, 1, 2, 5, 6,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="COMPACT_PARTS"):
        tier(5, 1)


def test_the_lowest_full_tier_is_merged_as_far_as_the_cap_allows() -> None:
    big, small = [_part(500) for _ in range(3)], [_part(3) for _ in range(4)]
    assert compaction_group([*big, *small], 3, 10_000) == small
    # Three of 500 exceed a cap of 1,200: left alone; nothing else is due.
    assert compaction_group([*big, *small[:2]], 3, 1_200) == []
    assert compaction_group(big, 3, 1_200) == []
    # Parts over the cap are never taken.
    assert compaction_group([_part(20_000) for _ in range(5)], 3, 10_000) == []


def test_a_large_part_mostly_deleted_is_rewritten_alone_small_ones_wait() -> None:
    heavy, light = _part(5_000, deleted=3_000), _part(5_000, deleted=100)
    assert compaction_group([light, heavy], 10, 10_000) == [heavy]
    small = _part(40, deleted=39)  # merged with its tier one day: no version for it alone
    assert compaction_group([light, small], 10, 10_000) == []


@given(
    flushes=st.lists(st.integers(1, 5_000), min_size=1, max_size=300),
    factor=st.integers(2, 10),
    cap=st.integers(1_000, 100_000),
)
def test_under_any_flushes_parts_stay_logarithmic_and_each_compaction_is_capped(
    flushes: list[int], factor: int, cap: int
) -> None:
    """Flush parts of any sizes, each followed by compactions until none is due: every
    compaction merges at least ``factor`` parts of at most ``cap`` rows together, and at rest
    every tier below the largest holds fewer than ``factor`` parts."""
    parts: list[IndexPart] = []
    for rows in flushes:
        parts.append(_part(rows))
        while group := compaction_group(parts, factor, cap):
            total = sum(p.live_rows for p in group)
            assert len(group) >= factor and total <= cap
            names = {p.name for p in group}
            parts = [p for p in parts if p.name not in names] + [_part(total)]
    assert sum(p.rows for p in parts) == sum(flushes)
    counts: dict[int, int] = {}
    for p in parts:
        counts[tier(p.rows, factor)] = counts.get(tier(p.rows, factor), 0) + 1
    top = tier(cap // factor, factor) + 1  # tiers whose factor parts may exceed the cap
    assert all(n < factor for t, n in counts.items() if t < top - 1)
    mergeable = sum(n for t, n in counts.items() if t < top - 1)
    assert mergeable <= (factor - 1) * (top - 1)
    assert len(parts) - mergeable <= sum(flushes) * factor // cap + 2 * factor


def test_a_kept_merged_part_is_a_leftover_as_young_as_its_drop(tmp_path: Path) -> None:
    """``commit_compaction(keep_merged=True)`` keeps the dropped parts' files (readers of the
    version before still read them), each a leftover aged from the drop, removed once old
    enough; an earlier version is still read whole from its file."""
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee"), ("b", "cat dog")], parts=2)
    index = DocIndex.open(url)
    old = {p.name: p for p in index.parts}
    past = time.time() - 7200
    for p in index.parts:  # written long ago
        for f in (tmp_path / "idx" / "parts" / p.name).iterdir():
            os.utime(f, (past, past))
    group = list(index.parts)
    part = rewrite_group(index, group, compaction_run("test", group))
    assert part is not None
    version = commit_compaction(index, [group], [part], keep_merged=True)
    latest = DocIndex.open(url)
    assert [p.name for p in latest.parts] == [part.name] and latest.rows == 2
    found = index_leftovers(latest)
    assert sorted(x.path for x in found) == sorted(f"parts/{n}" for n in old)
    assert all(x.age is not None and x.age < 600 for x in found)
    assert remove_leftovers(latest) == ()  # dropped a moment ago: kept
    earlier = latest.at_version(version - 1)
    assert earlier is not None and [p.name for p in earlier.parts] == list(old)
    assert earlier.id_digests(["a"]).keys() == {"a"}  # its files still there
    assert latest.at_version(99) is None
    assert sorted(remove_leftovers(latest, age=0)) == sorted(f"parts/{n}" for n in old)
    assert index_leftovers(DocIndex.open(url)) == []


def test_a_kept_compaction_losing_its_commit_unmarks_the_parts(tmp_path: Path) -> None:
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee"), ("b", "cat dog")], parts=2)
    index = DocIndex.open(url)
    group = list(index.parts)
    part = rewrite_group(index, group, compaction_run("test", group))
    write_index(url, [("c", "eel")])  # another run commits the version first
    with pytest.raises(IndexConflictError):
        commit_compaction(index, [group], [part], keep_merged=True)
    assert not any((tmp_path / "idx" / "parts" / p.name / "_dropped").exists() for p in group)
    assert [x.path for x in index_leftovers(DocIndex.open(url))] == [f"parts/{part.name}"]
