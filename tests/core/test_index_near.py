"""``DocIndex.near`` (core/_index_keyed.py ``near_matches``), the service's lookup of an index by
key, against a brute-force oracle over every indexed signature: the pairs it confirms are those
of a shared band (its rows equal) and an estimate of at least the threshold, never of an empty
signature on either side, whatever the parts, copies and pages; ``id_digests`` and
``id_signatures`` find exactly the indexed ids asked for, with their digests and signatures."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core.engine import (
    DocIndex,
    IndexLayoutError,
    MinhashParams,
    commit_index,
    run_info,
    write_part,
)
from tests.core.test_index_keys import ALPHABET, _small_pages

PARAMS = MinhashParams(num_perm=8, bands=4, threshold=0.5, k=1)
EMPTY = 2**31 - 1


def _sigs(draw: st.DrawFn, n: int) -> np.ndarray:
    sigs = np.array(
        draw(st.lists(st.lists(st.integers(0, ALPHABET - 1), min_size=8, max_size=8),
                      min_size=n, max_size=n)),
        dtype=np.uint32,
    ).reshape(n, 8)  # fmt: skip
    if draw(st.booleans()):  # entries of P: bands of P shared with empty signatures
        sigs[sigs == ALPHABET - 1] = EMPTY
    empty = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    sigs[np.array(empty, dtype=bool)] = EMPTY
    return sigs


@st.composite
def corpora(draw: st.DrawFn) -> dict:
    """Parts of indexed rows (an empty signature now and then), and queries: copies and near
    copies of indexed rows, empty ones, and others; a threshold."""
    parts = []
    for p in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 20))
        ids = [f"p{p}-{i:03d}" for i in draw(st.permutations(range(n)))]
        parts.append((ids, _sigs(draw, n)))
    every = np.concatenate([s for _, s in parts])
    queries = _sigs(draw, draw(st.integers(1, 15)))
    for at, (row, change) in enumerate(
        draw(st.lists(st.tuples(st.integers(0, 200), st.integers(-1, 7)), max_size=10))[
            : len(queries)
        ]
    ):
        queries[at] = every[row % len(every)]
        if change >= 0:
            queries[at, change] = (queries[at, change] + 1) % ALPHABET
    if draw(st.booleans()):  # a query of P but one entry: it shares bands with empty rows
        queries[0] = EMPTY
        queries[0, 7] = 0
    threshold = draw(st.sampled_from([0.25, 0.5, 0.75, 1.0]))
    return {"parts": parts, "queries": queries, "threshold": threshold}


def _oracle(spec: dict) -> list[list[tuple[str, float]]]:
    """Per query, every (indexed id, estimate) the service's rule confirms, by brute force."""
    rows = PARAMS.rows
    out = []
    for q in spec["queries"].tolist():
        found = []
        for ids, sigs in spec["parts"]:
            for doc_id, s in zip(ids, sigs.tolist(), strict=True):
                if all(v == EMPTY for v in q) or all(v == EMPTY for v in s):
                    continue
                banded = any(
                    q[b * rows : (b + 1) * rows] == s[b * rows : (b + 1) * rows]
                    for b in range(PARAMS.bands)
                )
                est = sum(x == y for x, y in zip(q, s, strict=True)) / len(q)
                if banded and est >= spec["threshold"]:
                    found.append((doc_id, est))
        out.append(sorted(found))
    return out


def _digest(doc_id: str) -> bytes:
    return hashlib.sha256(doc_id.encode()).digest()[:16]


def _build(url: str, spec: dict) -> DocIndex:
    for ids, sigs in spec["parts"]:
        index = DocIndex.open(url, missing_ok=True)
        digests = np.frombuffer(b"".join(map(_digest, ids)), dtype="<u8").reshape(-1, 2)
        run = run_info("local", "t", [])
        part = write_part(index, PARAMS, ids, digests.astype(np.uint64), sigs, run)
        commit_index(index, PARAMS, [part])
    return DocIndex.open(url)


@given(spec=corpora())
@settings(max_examples=80, deadline=None)
def test_near_is_the_brute_force_oracle(tmp_path_factory, spec) -> None:
    url = str(tmp_path_factory.mktemp("idx") / "idx")
    with _small_pages():
        index = _build(url, spec)
        found = index.near(spec["queries"], spec["threshold"])
    assert (found.exact == -1).all()
    got: list[list[tuple[str, float]]] = [[] for _ in spec["queries"]]
    for (row, at), est in zip(found.pairs.tolist(), found.estimate.tolist(), strict=True):
        got[row].append((found.ids[at], est))
        position = [i for ids, _ in spec["parts"] for i in ids].index(found.ids[at])
        every = np.concatenate([s for _, s in spec["parts"]])
        assert found.sigs[at].tolist() == every[position].tolist()
    assert [sorted(g) for g in got] == _oracle(spec)


@given(spec=corpora(), asked=st.lists(st.text("p0123-x", min_size=1, max_size=7), max_size=12))
@settings(max_examples=40, deadline=None)
def test_id_digests_are_the_indexed_ids_asked_for(tmp_path_factory, spec, asked) -> None:
    url = str(tmp_path_factory.mktemp("idx") / "idx")
    every = [i for ids, _ in spec["parts"] for i in ids]
    asked = [*asked, *every[:: max(len(every) // 3, 1)], "p0-\ud800"]  # no UTF-8 form
    with _small_pages():
        index = _build(url, spec)
        found = index.id_digests(asked)
        parts = index.id_parts(asked)
        sigs = index.id_signatures(asked)
    assert found == {i: _digest(i) for i in asked if i in every}
    assert set(parts) == set(found)
    rows = np.concatenate([s for _, s in spec["parts"]])
    assert {i: s.tolist() for i, s in sigs.items()} == {
        i: rows[every.index(i)].tolist() for i in found
    }


def test_near_refuses_a_part_without_a_key_table(tmp_path: Path) -> None:
    import dataclasses

    import pytest

    url = str(tmp_path / "idx")
    index = DocIndex.open(url, missing_ok=True)
    sigs = np.zeros((2, 8), dtype=np.uint32)
    digests = np.zeros((2, 2), dtype=np.uint64)
    part = write_part(index, PARAMS, ["a", "b"], digests, sigs, run_info("local", "t", []))
    (Path(url) / part.keys.path).unlink()
    commit_index(index, PARAMS, [dataclasses.replace(part, keys=None)])
    with pytest.raises(IndexLayoutError) as caught:
        DocIndex.open(url).near(sigs, 0.5)
    assert str(caught.value) == (
        f"{url}: part {part.name} has no key table (the first layout): run "
        f"`neardup index compact {url}`"
    )
