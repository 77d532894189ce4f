"""More of the executors' batch functions, called directly on Arrow batches as ``mapInArrow``
gives them (no Spark session): the index's kernels against core's ``band_digests`` and
``estimates``, the rows read from Parquet, the tags of would-be-dropped rows, and the types of
every column (a column of nulls only must keep the type Spark was promised)."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pytest

from neardup.app.spark import kernels
from neardup.core.engine import (
    CLUSTER_KEY,
    MinhashParams,
    RowWriter,
    Schema,
    band_digests,
    batch_signatures,
    estimates,
)

PARAMS = MinhashParams(num_perm=16, bands=4, threshold=0.5)
STRING = pa.string()


def _sig_rows(seed: int, n: int) -> np.ndarray:
    """n signatures, row i > 0 copying a random share of row i - 1 (some bands equal)."""
    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, 1 << 32, size=(n, PARAMS.num_perm), dtype=np.uint32)
    for i in range(1, n):
        mask = rng.random(PARAMS.num_perm) < 0.6
        sigs[i, mask] = sigs[i - 1, mask]
    return sigs


def _u64(values: np.ndarray) -> bytes:
    return np.asarray(values, dtype="<u8").tobytes()


# --- Fixed-width binary columns ---


def test_binary_rows_and_matrix_of_no_rows_chunks_and_slices() -> None:
    empty = kernels.binary_rows(np.empty((0, 3), dtype=np.uint32))
    assert empty.type == pa.binary() and len(empty) == 0
    back = kernels._matrix(empty, 3, np.uint32)
    assert back.shape == (0, 3) and back.dtype == np.uint32
    matrix = np.arange(24, dtype=np.uint64).reshape(6, 4)
    column = kernels.binary_rows(matrix)
    assert column.type == pa.binary() and len(column) == 6
    assert column.to_pylist() == [row.tobytes() for row in matrix]
    chunked = pa.chunked_array([column.slice(0, 2), column.slice(2)])
    assert np.array_equal(kernels._matrix(chunked, 4, np.uint64), matrix)
    assert np.array_equal(kernels._matrix(column.slice(5), 4, np.uint64), matrix[5:])
    assert kernels._matrix(chunked.slice(6), 4, np.uint64).shape == (0, 4)


def test_band_batch_is_band_major_and_typed_and_takes_no_rows() -> None:
    sigs = _sig_rows(3, 3)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["a", "b", "c"]), kernels.binary_rows(sigs)], names=["cid", "sig"]
    )
    out = kernels.band_batch(batch, PARAMS)
    assert out.schema == pa.schema([("band", pa.int32()), ("key", pa.binary()), ("cid", STRING)])
    assert out.column("band").to_pylist() == [b for b in range(PARAMS.bands) for _ in range(3)]
    assert out.column("cid").to_pylist() == ["a", "b", "c"] * PARAMS.bands
    none = kernels.band_batch(batch.slice(0, 0), PARAMS)
    assert len(none) == 0 and none.schema == out.schema


def test_signature_batch_of_no_rows_has_the_promised_columns() -> None:
    batch = pa.RecordBatch.from_arrays([pa.array([], STRING), pa.array([], STRING)], ["id", "text"])
    out = kernels.signature_batch(batch, PARAMS)
    assert out.schema == pa.schema([("id", STRING), ("sig", pa.binary()), ("live", pa.bool_())])
    assert len(out) == 0


# --- Bucket stars: the edge cases the property tests rarely draw ---


def test_bucket_star_of_one_or_no_member() -> None:
    assert kernels.bucket_star(np.empty((0, 4), dtype=np.uint32), 0.5).tolist() == []
    assert kernels.bucket_star(np.ones((1, 4), dtype=np.uint32), 0.5).tolist() == [0]
    same = np.ones((3, 4), dtype=np.uint32)
    assert kernels.bucket_star(same, 1.0).tolist() == [0, 0, 0]  # >= the threshold


def _rows(*members: tuple[int, bytes, str, np.ndarray]) -> pa.RecordBatch:
    band, key, cid, sig = zip(*members, strict=True)
    return pa.RecordBatch.from_arrays(
        [pa.array(band, pa.int32()), pa.array(key, pa.binary()), pa.array(cid),
         pa.array([s.tobytes() for s in sig], pa.binary())],
        names=["band", "key", "cid", "sig"],
    )  # fmt: skip


def test_bucket_edges_of_no_rows_and_of_a_bucket_at_the_threshold() -> None:
    assert list(kernels.BucketEdges(PARAMS)(iter([]))) == []
    sig = np.arange(16, dtype=np.uint32)
    half = sig.copy()
    half[8:] += 100  # shares 8 of 16 positions: exactly the threshold
    other = sig + 1000
    key = sig[:4].tobytes()
    batch = _rows((0, key, "a", sig), (0, key, "b", half), (0, key, "c", other))
    out = list(kernels.BucketEdges(PARAMS)(iter([batch.slice(0, 0), batch])))
    assert all(o.schema == pa.schema([("child", STRING), ("parent", STRING)]) for o in out)
    table = pa.Table.from_batches(out)
    assert list(zip(*(table.column(c).to_pylist() for c in ("child", "parent")), strict=True)) == [
        ("b", "a")
    ]
    # Equal keys in another band are another bucket: no edge across bands.
    split = _rows((0, key, "a", sig), (1, key, "b", sig))
    assert sum(len(o) for o in kernels.BucketEdges(PARAMS)(iter([split]))) == 0
    # A bucket of more than BIG_BUCKET members (all copies): every one joined to the first.
    m = kernels.BIG_BUCKET + 1
    big = _rows(*((0, key, f"c{i:04d}", sig) for i in range(m)))
    out = pa.Table.from_batches(list(kernels.BucketEdges(PARAMS)(iter([big]))))
    assert out.column("parent").to_pylist() == ["c0000"] * (m - 1)
    assert out.column("child").to_pylist() == [f"c{i:04d}" for i in range(1, m)]


# --- Estimates, confirmations and the index's rows ---


def test_estimate_batch_of_no_rows_and_of_core_estimates() -> None:
    sigs, roots = _sig_rows(5, 6), _sig_rows(6, 6)
    roots[::2] = sigs[::2]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(list("abcdef")), kernels.binary_rows(sigs), kernels.binary_rows(roots)],
        names=["id", "sig", "root_sig"],
    )
    out = kernels.estimate_batch(batch, PARAMS.num_perm)
    rows = np.arange(6, dtype=np.int64)
    expected = estimates(sigs, np.stack((rows, rows), axis=1), roots)
    assert out.column("estimate").to_pylist() == expected.tolist()
    none = kernels.estimate_batch(batch.slice(0, 0), PARAMS.num_perm)
    assert none.schema == out.schema and len(none) == 0


def test_band_key_batch_keys_are_core_band_digests_little_endian() -> None:
    sigs = _sig_rows(7, 3)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["x", "y", "z"]), kernels.binary_rows(sigs)], names=["cid", "sig"]
    )
    out = kernels.band_key_batch(batch, PARAMS)
    assert out.schema == pa.schema([("band", pa.int32()), ("key", pa.binary()), ("cid", STRING)])
    digests = band_digests(sigs, PARAMS.bands)
    expected = [
        (b, _u64(digests[i, b]), cid)
        for b in range(PARAMS.bands)
        for i, cid in enumerate(["x", "y", "z"])
    ]
    got = zip(*(out.column(c).to_pylist() for c in ("band", "key", "cid")), strict=True)
    assert list(got) == expected
    assert len(kernels.band_key_batch(batch.slice(0, 0), PARAMS)) == 0


def test_probe_filter_keys_per_band_and_hits() -> None:
    keys = np.array([[5, 1], [3, 1], [5, 2]], dtype=np.uint64)
    probe = kernels.ProbeFilter(["a"], [b"d"], keys, 2)
    assert [k.tolist() for k in probe.keys] == [[3, 5], [1, 2]]
    assert kernels.ProbeFilter([], [], np.empty((0, 2), np.uint64), 2).keys == []
    column = pa.array(["a", "b", None, "a"])
    assert probe.hits(column, ["a", "c"]).tolist() == [True, False, False, True]
    none = probe.hits(column, [])
    assert none.dtype == np.bool_ and none.tolist() == [False] * 4


def _indexed(sigs: np.ndarray, ids: list[str]) -> pa.RecordBatch:
    """(id, digest, bands, part, file) rows of an index part, as Spark reads them."""
    digests = band_digests(sigs, PARAMS.bands).astype("<u8")
    return pa.RecordBatch.from_arrays(
        [pa.array(ids), pa.array([f"d{i}".encode() for i in ids], pa.binary()),
         kernels.binary_rows(digests), pa.array([f"p{i}" for i in ids]),
         pa.array([f"f{i}" for i in ids])],
        names=["id", "digest", "bands", "part", "file"],
    )  # fmt: skip


def test_probe_batch_finds_ids_digests_and_band_keys() -> None:
    sigs = _sig_rows(8, 4)
    ids = ["i0", "i1", "i2", "i3"]
    batch = _indexed(sigs, ids)
    digests = band_digests(sigs, PARAMS.bands)
    new = digests[[1]].copy()
    new[0, 2] = digests[3, 2]  # band 2 of the new document is i3's
    new[0, 3] += np.uint64(1)  # band 3: nobody's
    probe = kernels.ProbeFilter(["i2", "zz"], [b"di0"], new, PARAMS.bands)
    out = kernels.probe_batch(batch, probe, PARAMS.bands)
    assert out.schema == pa.schema(
        [("band", pa.int32()), ("key", pa.binary()), ("iid", STRING), ("part", STRING),
         ("file", STRING)]
    )  # fmt: skip
    got = list(zip(*(out.column(c).to_pylist() for c in out.schema.names), strict=True))
    expected = [(kernels.PROBE_ID, None, "i2", "pi2", "fi2"),
                (kernels.PROBE_DIGEST, b"di0", "i0", "pi0", "fi0")]  # fmt: skip
    for b in range(PARAMS.bands):
        expected += [
            (b, _u64(digests[i, b]), ids[i], f"p{ids[i]}", f"f{ids[i]}")
            for i in range(4)
            if digests[i, b] == new[0, b]
        ]
    assert got == expected
    assert any(row[0] == 2 and row[2] == "i3" for row in got)


def test_probe_batch_without_a_filter_emits_every_digest_and_band_key() -> None:
    sigs = _sig_rows(9, 3)
    ids = ["a", "b", "c"]
    out = kernels.probe_batch(_indexed(sigs, ids), None, PARAMS.bands)
    digests = band_digests(sigs, PARAMS.bands)
    n = len(ids)
    assert out.column("band").to_pylist() == [kernels.PROBE_DIGEST] * n + [
        b for b in range(PARAMS.bands) for _ in range(n)
    ]
    assert out.column("iid").to_pylist() == ids * (PARAMS.bands + 1)
    keys = out.column("key").to_pylist()
    assert keys[:n] == [b"da", b"db", b"dc"]
    assert keys[n:] == [_u64(digests[i, b]) for b in range(PARAMS.bands) for i in range(n)]
    # the digest rows name their part and file; the band rows do not (the join fallback)
    assert out.column("part").to_pylist() == ["pa", "pb", "pc"] + [None] * (n * PARAMS.bands)
    assert out.column("file").to_pylist() == ["fa", "fb", "fc"] + [None] * (n * PARAMS.bands)


def test_probe_batch_with_a_filter_of_nothing_finds_nothing() -> None:
    sigs = _sig_rows(10, 2)
    probe = kernels.ProbeFilter([], [], np.empty((0, PARAMS.bands), np.uint64), PARAMS.bands)
    out = kernels.probe_batch(_indexed(sigs, ["a", "b"]), probe, PARAMS.bands)
    assert len(out) == 0 and out.schema.names == ["band", "key", "iid", "part", "file"]
    assert out.schema.field("part").type == STRING


def test_confirm_batch_keeps_pairs_sharing_a_band_at_the_threshold() -> None:
    base = np.arange(16, dtype=np.uint32)
    at = base.copy()
    at[8:] += 50  # 8 of 16 equal, bands 0 and 1 equal: confirmed at 0.5
    below = base.copy()
    below[7:] += 50  # 7 of 16: not
    spread = base.copy()
    spread[1::2] += 50  # 8 of 16 equal but no band equal: not (a digest collision)
    isigs = np.stack([at, below, spread, base])
    sigs = np.stack([base] * 4)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["c0", "c1", "c2", "c3"]), kernels.binary_rows(sigs),
         pa.array(["i0", "i1", "i2", "i3"]), kernels.binary_rows(isigs)],
        names=["cid", "sig", "iid", "isig"],
    )  # fmt: skip
    out = kernels.confirm_batch(batch, PARAMS)
    assert out.schema == pa.schema([("cid", STRING), ("iid", STRING), ("estimate", pa.float64())])
    assert out.to_pylist() == [
        {"cid": "c0", "iid": "i0", "estimate": 0.5},
        {"cid": "c3", "iid": "i3", "estimate": 1.0},
    ]


def test_part_batch_is_an_index_parts_rows() -> None:
    sigs = _sig_rows(11, 3)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["a", "b", "c"]), pa.array([b"1", b"2", b"3"], pa.binary()),
         kernels.binary_rows(sigs)],
        names=["id", "digest", "sig"],
    )  # fmt: skip
    out = kernels.part_batch(batch, PARAMS)
    assert out.schema.names == ["id", "digest", "bands", "signature"]
    assert out.column("id").to_pylist() == ["a", "b", "c"]
    assert out.column("digest").to_pylist() == [b"1", b"2", b"3"]
    digests = band_digests(sigs, PARAMS.bands)
    assert out.column("bands").to_pylist() == [_u64(row) for row in digests]
    assert out.column("signature").to_pylist() == [row.astype("<u4").tobytes() for row in sigs]


# --- Rows in: JSON Lines and Parquet, checked as the local reader checks them ---


def test_line_documents_of_only_bad_or_blank_lines_keep_their_types() -> None:
    lines = ['{"id": 1}', "", "  ", '{"text": "t"}']
    batch = pa.RecordBatch.from_arrays([pa.array(lines), pa.array([9, 8, 7, 6])], ["value", "n"])
    docs = kernels.line_documents(batch, None)
    assert docs.schema == pa.schema(
        [("id", STRING), ("text", STRING), ("bad", STRING), ("n", pa.int64()), ("row", STRING)]
    )
    assert docs.column("n").to_pylist() == [9, 6]
    assert docs.column("row").to_pylist() == [lines[0], lines[3]]
    assert docs.column("bad").to_pylist() == [
        "no 'text' field (its fields: id); name the text's field with --text-field",
        "no 'id' field (its fields: text); name the id's field with --id-field",
    ]
    blank = kernels.line_documents(batch.slice(1, 2), None)
    assert len(blank) == 0 and blank.schema == docs.schema
    good = pa.RecordBatch.from_arrays([pa.array(['{"id": "a", "text": "b"}'])], ["value"])
    one = kernels.line_documents(good, "neardup")
    assert one.to_pylist() == [
        {"id": "a", "text": "b", "bad": None, "row": '{"id": "a", "text": "b"}'}
    ]


def test_parquet_documents_check_rows_and_write_them_as_the_local_engine() -> None:
    columns = ["id", "text", "meta", "when", "neardup"]
    batch = pa.RecordBatch.from_pydict(
        {
            "id": ["a", None, "c", "d", "e"],
            "text": ["one", "two", "three", None, "five"],
            "meta": [{"k": 1}, None, None, None, None],
            "when": [dt.date(2024, 1, 2), None, None, None, None],
            "neardup": [None, None, "x", None, None],
            "pos": [10, 11, 12, 13, 14],
        }
    )
    docs = kernels.parquet_documents(batch, columns, None)
    assert docs.schema == pa.schema(
        [("id", STRING), ("text", STRING), ("bad", STRING), ("pos", pa.int64()), ("row", STRING)]
    )
    assert docs.column("pos").to_pylist() == [10, 11, 12, 13, 14]
    assert docs.column("id").to_pylist() == ["a", None, "c", None, "e"]
    assert docs.column("text").to_pylist() == ["one", None, "three", None, "five"]
    assert docs.column("bad").to_pylist() == [
        None, "'id' must be a non-empty string or an integer, got null", None,
        "'text' must be a string, got null", None,
    ]  # fmt: skip
    first = batch.select(columns).to_pylist()[0]
    assert docs.column("row").to_pylist()[0] == RowWriter.dumps(first)
    assert json.loads(docs.column("row").to_pylist()[0])["when"] == "2024-01-02"
    reserved = kernels.parquet_documents(batch, columns, "neardup").column("bad").to_pylist()
    assert reserved[2] == (
        "the row already has a 'neardup' field, the one neardup says why a row is dropped in"
    )
    assert reserved[4] == reserved[2]  # a null field is still the field
    assert reserved[0] == reserved[2]


def test_parquet_documents_name_a_value_json_cannot_hold() -> None:
    uuids = pa.array([bytes(16)], pa.uuid())  # read back as uuid.UUID: no JSON for it
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["a"]), pa.array(["t"]), uuids], ["id", "text", "key"]
    )
    docs = kernels.parquet_documents(batch, ["id", "text", "key"], None)
    assert docs.to_pylist() == [
        {"id": None, "text": None, "bad": "a UUID cannot be written as JSON", "row": None}
    ]
    meta = pa.RecordBatch.from_pydict({"id": ["a"], "text": ["t"], "meta": [[1]]})
    assert kernels.parquet_documents(meta, ["id", "text", "meta"], None).column(
        "bad"
    ).to_pylist() == [f"'meta' must be an object to hold {CLUSTER_KEY}"]


# --- Rows out: tags and the neardup object ---


def test_reason_object_keys_in_the_local_engines_order() -> None:
    plain = kernels.reason_object("near", "a", 0.75)
    assert list(plain.items()) == [
        ("reason", "near"), ("duplicate_of", "a"), ("estimate", 0.75), ("set", None),
        ("item", None), ("ngram", None),
    ]  # fmt: skip
    assert "index_part" not in kernels.reason_object("exact", "a", 1.0, "p1")
    indexed = kernels.reason_object("exact", "a", 1.0, "p1", True)
    assert list(indexed)[-1] == "index_part" and indexed["index_part"] == "p1"
    assert kernels.reason_object("exact", "a", 1.0, indexed=True)["index_part"] is None


def test_tagged_rows_tag_the_cluster_and_say_why_a_row_would_be_dropped() -> None:
    rows = [
        '{"id": "a", "text": "t"}',
        '{"id": "b", "meta": {"x": 1, "minhash_cluster": "old"}, "text": "t"}',
        '{"id": "c", "meta": null, "text": "u"}',
    ]
    reasons = [(None, None, None), ("exact", "a", 1.0), ("near", "a", 0.5)]
    out = kernels.tagged_rows(rows, ["a", "a", "a"], reasons)
    assert [list(r) for r in out] == [
        ["id", "text", "meta"], ["id", "meta", "text", "neardup"], ["id", "meta", "text", "neardup"]
    ]  # fmt: skip
    assert out[0]["meta"] == {CLUSTER_KEY: "a"}
    assert out[1]["meta"] == {"x": 1, CLUSTER_KEY: "a"}
    assert out[2]["neardup"] == kernels.reason_object("near", "a", 0.5)
    assert out[1]["neardup"]["reason"] == "exact"
    parted = kernels.tagged_rows(rows, ["a", "a", "a"], reasons, [None, "p1", None])
    assert "neardup" not in parted[0]
    assert parted[1]["neardup"] == kernels.reason_object("exact", "a", 1.0, "p1", True)
    assert parted[2]["neardup"]["index_part"] is None and "index_part" in parted[2]["neardup"]
    with pytest.raises(ValueError):
        kernels.tagged_rows(rows, ["a"])


def test_row_schema_is_the_local_writers_and_refuses_rows_that_fit_none() -> None:
    rows = [{"id": "a", "text": "t", "n": 1}, {"id": "b", "text": "u", "n": None}]
    assert kernels.row_schema(rows, None) == RowWriter.table(rows, None).schema
    hint = pa.schema([("n", pa.int16())])
    assert kernels.row_schema(rows, hint).field("n").type == pa.int16()
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)):
        kernels.row_schema([{"n": 1}, {"n": "x"}], None)


def test_signature_batch_live_is_core_empty_rows() -> None:
    texts = ["a b c d e f", "", "x"]
    batch = pa.RecordBatch.from_pydict({"text": texts, "id": ["1", "2", "3"]})
    out = kernels.signature_batch(batch, PARAMS)
    sigs = batch_signatures(texts, PARAMS)
    assert out.column("sig").to_pylist() == [row.tobytes() for row in sigs]
    assert out.schema.names == ["id", "sig", "live"]


def test_probe_batch_band_hits_are_every_indexed_row_sharing_a_key_of_its_band() -> None:
    sigs = _sig_rows(12, 5)
    ids = [f"i{i}" for i in range(5)]
    digests = band_digests(sigs, PARAMS.bands)
    rng = np.random.default_rng(13)
    new = rng.integers(0, 1 << 63, size=(3, PARAMS.bands), dtype=np.uint64)
    new[0, 0], new[1, 1], new[2, 1], new[2, 3] = (
        digests[4, 0],
        digests[0, 1],
        digests[3, 1],
        digests[2, 3],
    )
    new[0, 2] = max(digests[:, 2].max(), new[:, 2].max()) + np.uint64(1)  # the largest key
    probe = kernels.ProbeFilter([], [], new, PARAMS.bands)
    out = kernels.probe_batch(_indexed(sigs, ids), probe, PARAMS.bands)
    got = list(zip(out.column("band").to_pylist(), out.column("iid").to_pylist(), strict=True))
    expected = [
        (b, ids[i])
        for b in range(PARAMS.bands)
        for i in range(5)
        if digests[i, b] in set(new[:, b])
    ]
    assert got == expected and (0, "i4") in got and (1, "i3") in got
    assert not any(b == 2 for b, _ in got)
    # an indexed row holding the largest key of its band is found too
    top = digests.copy()
    top[1, 2] = new[0, 2]
    sigs_top = _indexed(sigs, ids).set_column(2, "bands", kernels.binary_rows(top.astype("<u8")))
    found = kernels.probe_batch(sigs_top, probe, PARAMS.bands)
    assert (2, "i1") in zip(
        found.column("band").to_pylist(), found.column("iid").to_pylist(), strict=True
    )


def test_run_starts_of_no_one_and_several_rows() -> None:
    keys = np.array([[1, 2], [1, 2], [1, 3], [1, 3]], dtype=np.uint32)
    band = np.array([0, 0, 0, 1], dtype=np.int32)
    starts = kernels._run_starts(band, keys)
    assert starts.dtype == np.int64 and starts.tolist() == [0, 2, 3]
    assert kernels._run_starts(band[:1], keys[:1]).tolist() == [0]
    # each row against the one before it, not against the first row
    later = np.array([[1, 2], [1, 3], [1, 3], [1, 3]], dtype=np.uint32)
    assert kernels._run_starts(np.array([0, 0, 0, 1], np.int32), later).tolist() == [0, 1, 3]
    assert kernels._run_starts(np.array([0, 1, 1, 1], np.int32), later).tolist() == [0, 1]
    none = kernels._run_starts(band[:0], keys[:0])
    assert none.dtype == np.int64 and none.tolist() == []


def test_id_prefix_labels_each_row_by_its_file_under_the_inputs_root() -> None:
    """``--id-prefix file``: the id is ``LABEL/ID``, the label the row's file (as Spark names it,
    quoted) relative to the root it was found under, or its base name when it was named alone;
    the row holds the new id (JSON Lines and Parquet alike)."""
    schema = Schema(id_prefix=True)
    files = pa.array(["file:/d/sub/x%20y.jsonl", "file:/d/z.jsonl"])
    lines = pa.array(['{"id": "a", "text": "t"}', '{"id": 7, "text": "u"}'])
    batch = pa.RecordBatch.from_arrays([lines, files], ["value", "file"])
    table = pa.RecordBatch.from_arrays([pa.array(["a", "b"]), pa.array(["t", "u"]), files],
                                       ["id", "text", "file"])  # fmt: skip
    for root, labels in (("/d", ["sub/x y.jsonl", "z.jsonl"]), (None, ["x y.jsonl", "z.jsonl"])):
        docs = kernels.line_documents(batch, None, schema, root)
        assert docs.column("id").to_pylist() == [f"{labels[0]}/a", f"{labels[1]}/7"]
        rows = [json.loads(r) for r in docs.column("row").to_pylist()]
        assert [r["id"] for r in rows] == docs.column("id").to_pylist()
        docs = kernels.parquet_documents(table, ["id", "text"], None, schema, root)
        assert docs.column("id").to_pylist() == [f"{labels[0]}/a", f"{labels[1]}/b"]
    unlabelled = kernels.line_documents(batch, None, Schema(), "/d")
    assert unlabelled.column("id").to_pylist() == ["a", "7"]


def test_id_prefix_template_puts_its_text_and_the_label_before_each_id() -> None:
    """``--id-prefix 'cc-2024-10/{file}/'`` (issue 33): the template's text, the file's label in
    place of ``{file}``; a literal prefix without it; as the local reader has them."""
    files = pa.array(["file:/d/sub/x.jsonl", "file:/d/z.jsonl"])
    lines = pa.array(['{"id": "a", "text": "t"}', '{"id": 7, "text": "u"}'])
    batch = pa.RecordBatch.from_arrays([lines, files], ["value", "file"])
    for template, want in (
        ("cc-2024-10/{file}/", ["cc-2024-10/sub/x.jsonl/a", "cc-2024-10/z.jsonl/7"]),
        ("cc-2024-10/", ["cc-2024-10/a", "cc-2024-10/7"]),
    ):
        docs = kernels.line_documents(batch, None, Schema(id_prefix=template), "/d")
        assert docs.column("id").to_pylist() == want
        assert [json.loads(r)["id"] for r in docs.column("row").to_pylist()] == want


def test_line_documents_refuse_the_reserved_field() -> None:
    lines = ['{"id": "a", "text": "t", "neardup": null}', '{"id": "b", "text": "t"}']
    docs = kernels.line_documents(
        pa.RecordBatch.from_arrays([pa.array(lines)], ["value"]), "neardup"
    )
    assert docs.column("id").to_pylist() == [None, "b"]
    assert docs.column("bad").to_pylist()[0] == (
        "the row already has a 'neardup' field, the one neardup says why a row is dropped in"
    )


@pytest.mark.parametrize("extra", [0, 1])
def test_bucket_edges_of_a_bucket_of_exactly_and_just_over_big_bucket(extra: int) -> None:
    sig = np.arange(16, dtype=np.uint32)
    m = kernels.BIG_BUCKET + extra
    rows = _rows(*((0, sig[:4].tobytes(), f"c{i:04d}", sig) for i in range(m)))
    out = pa.Table.from_batches(list(kernels.BucketEdges(PARAMS)(iter([rows]))))
    assert out.column("child").to_pylist() == [f"c{i:04d}" for i in range(1, m)]
    assert out.column("parent").to_pylist() == ["c0000"] * (m - 1)


def test_line_documents_name_a_line_that_is_not_utf8() -> None:
    """Spark's text reader passes a file's bytes on as they are: a line that is not UTF-8 is a
    bad row saying where in the line (it was a UnicodeDecodeError trace, issue 33.6)."""
    raw = pa.array([b'{"id": "a", "text": "x"}', b'{"id": "b", "text": "caf\xe9"}'], pa.binary())
    batch = pa.RecordBatch.from_arrays([raw.view(pa.string())], ["value"])
    docs = kernels.line_documents(batch, None)
    assert docs.column("id").to_pylist() == ["a", None]
    assert docs.column("bad").to_pylist() == [
        None,
        "not UTF-8 (invalid continuation byte at byte 24 of the line)",
    ]
