"""The executors' batch functions, without Spark: signatures bit for bit, band rows, bucket stars
against brute force (huge buckets and buckets split across batches), and the rows in and out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.spark import kernels
from neardup.core._ngrams import contaminated
from neardup.core.engine import (
    MinhashParams,
    NgramIndex,
    ProtectedFormat,
    ProtectedSet,
    Protection,
    RowWriter,
    batch_signatures,
    min_label_components,
    parse_protected_set,
)
from tests.app.spark.conftest import run_local
from tests.core.test_windows import multilingual_text, unspaced_run

PARAMS = MinhashParams(num_perm=16, bands=4, threshold=0.5)


def _sigs(seed: int, m: int, shared_band: bool = True) -> np.ndarray:
    """m signatures; with ``shared_band`` all agree on band 0 (one bucket), and each copies a
    random earlier one in a random share of its other entries (some pairs confirm, some not)."""
    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, 50, size=(m, PARAMS.num_perm), dtype=np.uint32)
    for i in range(1, m):
        j = int(rng.integers(0, i))
        mask = rng.random(PARAMS.num_perm) < rng.uniform(0.2, 1.0)
        sigs[i, mask] = sigs[j, mask]
    if shared_band:
        sigs[:, : PARAMS.rows] = sigs[0, : PARAMS.rows]
    return sigs


def _brute_labels(sigs: np.ndarray, threshold: float) -> np.ndarray:
    m = len(sigs)
    i, j = np.triu_indices(m, k=1)
    est = (sigs[i] == sigs[j]).mean(axis=1)
    keep = est >= threshold
    return min_label_components(m, i[keep].astype(np.int64), j[keep].astype(np.int64))


def test_binary_rows_round_trip_including_sliced_arrays() -> None:
    matrix = np.arange(40, dtype=np.uint32).reshape(10, 4)
    column = kernels.binary_rows(matrix)
    assert column.to_pylist()[3] == matrix[3].tobytes()
    assert np.array_equal(kernels._matrix(column.slice(2, 5), 4, np.uint32), matrix[2:7])


def test_signature_batch_is_core_bit_for_bit_and_passes_columns_through() -> None:
    texts = ["the quick brown fox jumps over the lazy dog", "", "!!!", "ünï cödé " * 9]
    batch = pa.RecordBatch.from_pydict(
        {"id": ["a", "b", "c", "d"], "text": texts, "x": [1, 2, 3, 4]}
    )
    params = MinhashParams()
    out = kernels.signature_batch(batch, params)
    assert out.schema.names == ["id", "x", "sig", "live"]
    sigs = kernels._matrix(out.column("sig"), params.num_perm, np.uint32)
    assert np.array_equal(sigs, batch_signatures(texts, params))
    assert out.column("live").to_pylist() == [True, False, False, True]


def test_band_batch_rows_are_the_bands_of_every_class() -> None:
    sigs = _sigs(1, 5, shared_band=False)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(list("abcde")), kernels.binary_rows(sigs)], names=["cid", "sig"]
    )
    out = kernels.band_batch(batch, PARAMS)
    assert len(out) == 5 * PARAMS.bands
    for band, key, cid in zip(
        *(out.column(c).to_pylist() for c in ("band", "key", "cid")), strict=True
    ):
        row = sigs["abcde".index(cid)]
        assert key == row[band * PARAMS.rows : (band + 1) * PARAMS.rows].tobytes()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 60), st.sampled_from([3, 50, 1 << 20]))
def test_bucket_star_equals_brute_force_components(seed: int, m: int, block: int) -> None:
    sigs = _sigs(seed, m)
    original = kernels._BLOCK_PAIRS
    kernels._BLOCK_PAIRS = block  # small blocks: many blocks, pairs skipped once joined
    try:
        got = kernels.bucket_star(sigs, PARAMS.threshold)
    finally:
        kernels._BLOCK_PAIRS = original
    assert np.array_equal(got, _brute_labels(sigs, PARAMS.threshold))


def _bucket_rows(sigs: np.ndarray) -> pa.Table:
    """(band, key, cid, sig) rows of every band of every signature, sorted as Spark sorts them."""
    cids = [f"c{i:03d}" for i in range(len(sigs))]
    rows = []
    for band in range(PARAMS.bands):
        for i, cid in enumerate(cids):
            key = sigs[i, band * PARAMS.rows : (band + 1) * PARAMS.rows].tobytes()
            rows.append((band, key, cid, sigs[i].tobytes()))
    rows.sort()
    return pa.table(
        {
            "band": pa.array([r[0] for r in rows], pa.int32()),
            "key": [r[1] for r in rows],
            "cid": [r[2] for r in rows],
            "sig": [r[3] for r in rows],
        }
    )


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 40), st.integers(1, 64), st.booleans())
def test_bucket_edges_over_any_batching_give_core_components(
    seed: int, m: int, batch_rows: int, big: bool
) -> None:
    sigs = _sigs(seed, m)
    # Every candidate pair shares a band; components of all confirmed candidate pairs:
    bands = sigs.reshape(m, PARAMS.bands, PARAMS.rows)
    i, j = np.triu_indices(m, k=1)
    candidate = (bands[i] == bands[j]).all(axis=2).any(axis=1)
    confirmed = (sigs[i] == sigs[j]).mean(axis=1) >= PARAMS.threshold
    keep = candidate & confirmed
    expected = min_label_components(m, i[keep].astype(np.int64), j[keep].astype(np.int64))
    original = kernels.BIG_BUCKET
    kernels.BIG_BUCKET = 4 if big else original  # the big-bucket path on small buckets
    try:
        batches = _bucket_rows(sigs).to_batches(max_chunksize=batch_rows)
        out = pa.Table.from_batches(list(kernels.BucketEdges(PARAMS)(iter(batches))))
    finally:
        kernels.BIG_BUCKET = original
    child = [int(c[1:]) for c in out.column("child").to_pylist()]
    parent = [int(c[1:]) for c in out.column("parent").to_pylist()]
    got = min_label_components(m, np.array(child, np.int64), np.array(parent, np.int64))
    assert np.array_equal(got, expected)
    assert all(p < c for c, p in zip(child, parent, strict=True))


LINES = [
    '{"id": "x", "text": "t\u00ebxt \\\\ \\"q\\"", '
    '"meta": {"b": [1, 2.5, null], "\u03c3": "\u03c9"}}',
    '{"meta": null, "text": "", "id": 7, "big": 123456789012345678901234567890}',
    "   ",
    '{"id": "z", "text": "t", "meta": {"minhash_cluster": "old", "z": 1.50}, "url": "ü"}',
    '{"id": "w", "text": "t", "meta": [1]}',
    '{"id": "", "text": "t"}',
    "[1, 2]",
]


def test_rows_are_checked_and_written_as_the_local_engine_does(tmp_path: Path) -> None:
    batch = pa.RecordBatch.from_arrays(
        [pa.array(LINES), pa.array(range(len(LINES)))], ["value", "n"]
    )
    docs = kernels.line_documents(batch, None)
    assert docs.column("n").to_pylist() == [0, 1, 3, 4, 5, 6]  # the blank line left out
    assert docs.column("id").to_pylist() == ["x", "7", "z", None, None, None]
    bad = docs.column("bad").to_pylist()
    assert bad[:3] == [None, None, None]
    assert "'meta' must be an object" in bad[3] and "'id' must be a non-empty" in bad[4]
    assert bad[5].startswith("expected a JSON object, got list")  # and the jq hint
    good = tmp_path / "in.jsonl"
    good.write_text("\n".join(LINES[:4]) + "\n", encoding="utf-8")
    expected = run_local([str(good)], tmp_path / "out.jsonl").read_text(encoding="utf-8")
    rows = kernels.tagged_rows(docs.column("row").to_pylist()[:3], ["x", "7", "z"])
    assert [RowWriter.dumps(r) for r in rows] == expected.splitlines()
    assert [kernels.text_of(r) for r in rows] == ['t\u00ebxt \\ "q"', "", "t"]


@pytest.mark.parametrize("texts", [[], ["a b c"]])
def test_clean_batch_without_index_keeps_everything(texts: list[str]) -> None:
    assert kernels.clean_batch(texts, None).tolist() == [True] * len(texts)


def test_contamination_reasons_name_the_first_matchs_set_item_and_ngram() -> None:
    """What ``--removed`` says of a contaminated row (the local engine's reason): the set, the
    first item and the n-gram of the text's first protected window; ``{}`` from an
    ``NgramIndex`` (verdicts only); None for a clean text or without protected sets."""
    sets = [
        ProtectedSet("evals", 2, {"shiny red shell": ["q1", "q2"]}, 3),
        ProtectedSet("bench", 1, {"red shell too": ["b1"]}, 3),
    ]
    texts = ["a clean text", "a shiny red shell too", "the red shell too"]
    assert kernels.contamination_reasons(texts, Protection(sets)) == [
        None,
        {"set": "evals", "item": "q1", "ngram": "shiny red shell"},
        {"set": "bench", "item": "b1", "ngram": "red shell too"},
    ]
    index = NgramIndex({"shiny red shell"}, 3)
    assert kernels.contamination_reasons(texts, index) == [None, {}, None]
    assert kernels.contamination_reasons(texts, None) == [None, None, None]
    assert kernels.contamination_reasons([], Protection(sets)) == []


def test_estimate_batch_is_each_rows_share_of_positions_equal_to_its_roots():
    sigs = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.uint32)
    roots = np.array([[1, 2, 0, 0], [5, 6, 7, 8]], dtype=np.uint32)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["a", "b"]), kernels.binary_rows(sigs), kernels.binary_rows(roots)],
        names=["id", "sig", "root_sig"],
    )
    out = kernels.estimate_batch(batch, 4)
    assert out.schema == pa.schema([("id", pa.string()), ("estimate", pa.float64())])
    assert out.column("id").to_pylist() == ["a", "b"]
    assert out.column("estimate").to_pylist() == [0.5, 1.0]


def test_clean_batch_is_true_for_the_texts_sharing_no_protected_ngram():
    texts = ["x a b c y", "a b d c"]
    everything = kernels.clean_batch(texts, None)
    assert everything.dtype == np.bool_ and everything.tolist() == [True, True]
    assert kernels.clean_batch(texts, NgramIndex({"a b c"}, n=3)).tolist() == [False, True]


@settings(max_examples=30, deadline=None)
@given(
    item=st.one_of(multilingual_text(), unspaced_run),
    others=st.lists(multilingual_text(max_runs=4), min_size=1, max_size=6),
    n=st.integers(1, 13),
)
def test_the_kernels_verdicts_and_reasons_are_the_local_engines_under_weighted_windows(
    item: str, others: list[str], n: int
) -> None:
    """Under ``multilingual`` (windows of n English words' worth, core._windows; short items
    of unspaced scripts protected whole) the executors' batch functions give the local
    engine's verdicts and first matches, quotes among them."""
    body = json.dumps({"id": "q", "text": item})
    protected = parse_protected_set("eval", body, ProtectedFormat.JSONL, n, "multilingual")
    texts = [*others, *(f"{o} {item}" for o in others)]
    protection = Protection([protected])
    clean = kernels.clean_batch(texts, protected.index).tolist()
    assert clean == [not contaminated(t, set(protected.grams), n, "multilingual") for t in texts]
    reasons = kernels.contamination_reasons(texts, protection)
    local = [protection.matches(t) for t in texts]
    assert [r is None for r in reasons] == [not m for m in local] == clean
    assert [r and r["ngram"] for r in reasons] == [m[0].ngram if m else None for m in local]
    assert not any(clean[len(others) :]) or not protected.grams


def test_line_problem_says_why_a_line_is_not_a_document():
    doc = '{"id": "a", "text": "t", "neardup": {}}'
    assert kernels.line_problem("", None) is None
    assert kernels.line_problem(doc, None) is None
    assert kernels.line_problem('{"id": "a", "text": "t"}', "neardup") is None
    assert kernels.line_problem(doc, "neardup") == (
        "the row already has a 'neardup' field, the one neardup says why a row is dropped in"
    )
    assert kernels.line_problem('{"id": "a", "text": "t", "meta": [1]}', None) == (
        f"'meta' must be an object to hold {kernels.CLUSTER_KEY}"
    )
