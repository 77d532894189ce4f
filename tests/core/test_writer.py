"""RowWriter: Parquet rows keep their types, and a schema fixed by the first row group takes
later rows that fill in what the hint announced, or says clearly that they do not fit."""

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup.core._writer as writer_module
from neardup.core.engine import CorpusError, RowWriter

REASON = pa.struct([("reason", pa.string()), ("set", pa.string())])


def parquet(rows, hint=None):
    buf = io.BytesIO()
    with RowWriter(buf, ".parquet", "o.parquet", hint) as writer:
        for row in rows:
            writer.write(row)
    buf.seek(0)
    return pq.read_table(buf)


def test_hinted_columns_exist_from_the_first_row_group(monkeypatch):
    monkeypatch.setattr(writer_module, "PARQUET_BATCH", 2)
    hint = pa.schema([("n", pa.int32()), ("why", REASON)])
    rows = [{"n": 1}, {"n": 2}, {"n": 3, "why": {"reason": "contaminated", "set": "eval"}}]
    table = parquet(rows, hint)
    assert table.schema.field("n").type == pa.int32()
    assert table.schema.field("why").type == REASON
    assert table.column("why").to_pylist() == [None, None, {"reason": "contaminated",
                                                             "set": "eval"}]  # fmt: skip


def test_a_field_unknown_to_the_first_row_group_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(writer_module, "PARQUET_BATCH", 2)
    with pytest.raises(CorpusError, match=r"'late' first appears at row 3.*JSON Lines"):
        parquet([{"a": 1}, {"a": 2}, {"a": 3, "late": "x"}])
    with pytest.raises(CorpusError, match="'a' changes type"):
        parquet([{"a": 1}, {"a": 2}, {"a": {"b": 1}}])


def test_an_empty_object_column_is_written_as_nulls():
    assert parquet([{"id": "a", "meta": {}}]).to_pylist() == [{"id": "a", "meta": None}]


def test_a_key_missing_from_the_first_row_is_kept():
    rows = [{"id": "a"}, {"id": "b", "extra": {"x": 1}}]
    assert parquet(rows).to_pylist() == [{"id": "a", "extra": None},
                                         {"id": "b", "extra": {"x": 1}}]  # fmt: skip


def test_rows_given_as_json_text_are_written_as_lines_and_counted():
    out = io.BytesIO()
    with RowWriter(out, ".jsonl", "o.jsonl") as w:
        w.write({"id": "a"})
        w.write_json(['{"id": "b"}', '{"id": "c"}'])
        w.write_json([])
    assert out.getvalue() == b'{"id": "a"}\n{"id": "b"}\n{"id": "c"}\n' and w.count == 3
    with (
        pytest.raises(ValueError, match="JSON Lines"),
        RowWriter(io.BytesIO(), ".parquet", "o") as p,
    ):
        p.write_json(['{"id": "b"}'])


def test_an_integer_beyond_64_bits_is_a_clear_error_not_a_traceback():
    with pytest.raises(CorpusError, match=r"rows do not fit one Parquet schema.*too large"):
        parquet([{"id": "a", "n": 1}, {"id": "b", "n": 2**70}])


def test_table_dumps_and_hint_are_what_the_writer_writes():
    rows = [{"id": "a", "meta": {"k": 1}, "n": 1}, {"id": "b", "n": 2.5, "ü": None}]
    hint = RowWriter.hint(pa.schema([("n", pa.float32()), ("meta", pa.struct([("k", pa.int8())]))]),
                          "tag")  # fmt: skip
    assert hint.field("meta").type == pa.struct([("k", pa.int8()), ("tag", pa.string())])
    rows = [{**r, "meta": {**r.get("meta", {}), "tag": r["id"]}} for r in rows]
    written = parquet(rows, hint)
    assert RowWriter.table(rows, hint).schema == written.schema.remove_metadata()
    out = io.BytesIO()
    with RowWriter(out, ".jsonl", "o.jsonl") as w:
        for row in rows:
            w.write(row)
    assert out.getvalue().decode().splitlines() == [RowWriter.dumps(r) for r in rows]


def test_a_hinted_type_the_first_rows_cannot_take_keeps_theirs():
    hint = pa.schema([("n", pa.int64()), ("m", pa.int64())])
    table = parquet([{"n": "seven", "m": "8"}], hint)
    assert table.schema.field("n").type == pa.string()  # "seven" is no int64: kept as text
    assert table.schema.field("m").type == pa.int64()
    assert table.to_pylist() == [{"n": "seven", "m": 8}]


def test_a_field_later_rows_lack_is_null_in_them(monkeypatch):
    monkeypatch.setattr(writer_module, "PARQUET_BATCH", 2)
    rows = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3}, {"a": 4}, {"a": 5, "b": "z"}]
    assert parquet(rows).to_pylist() == [
        {"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3, "b": None}, {"a": 4, "b": None},
        {"a": 5, "b": "z"},
    ]  # fmt: skip


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("value", "written", "nulls"),
    [
        ({"id": "a", "n": 1, "t": True, "z": None, "s": "nan"}, None, 0),
        (NAN, None, 1),
        ({"a": [0.5, NAN, {"b": -INF}], "c": (INF, 1.0)}, {"a": [0.5, None, {"b": None}],
                                                          "c": [None, 1.0]}, 3),
        ([[NAN], [INF, NAN]], [[None], [None, None]], 3),
    ],
)  # fmt: skip
def test_nan_as_null_replaces_and_counts_every_nan_and_infinity(value, written, nulls):
    found, count = writer_module.nan_as_null(value)
    assert count == nulls
    if nulls:
        assert found == written
    else:
        assert found is value  # the value itself when it holds none


def test_the_nan_note_says_what_was_written_or_sent():
    assert writer_module.nan_as_null_note(3) == (
        "3 NaN or infinite values written as null (JSON has no number for them; a Parquet "
        "output keeps them)"
    )
    assert writer_module.nan_as_null_note(2, sent=True) == (
        "2 NaN or infinite values sent as null (JSON has no number for them)"
    )


def test_json_lines_outputs_write_nan_as_null_and_count_them_over_all_rows():
    assert RowWriter.finite_dumps({"a": 1.5}) == ('{"a": 1.5}', 0)
    assert RowWriter.finite_dumps({"a": [NAN, INF]}) == ('{"a": [null, null]}', 2)
    out = io.BytesIO()
    with RowWriter(out, ".jsonl", "o.jsonl") as w:
        assert w.nan_as_null == 0
        w.write({"a": NAN})
        w.write({"a": 1.0})
        w.write({"a": [INF, -INF]})
    assert (w.nan_as_null, w.count) == (3, 3)
    assert out.getvalue() == b'{"a": null}\n{"a": 1.0}\n{"a": [null, null]}\n'


def test_parquet_errors_name_the_output(monkeypatch):
    monkeypatch.setattr(writer_module, "PARQUET_BATCH", 2)
    with pytest.raises(CorpusError) as caught:
        parquet([{"a": 1}, {"a": 2}, {"a": 3, "late": "x"}])
    assert str(caught.value) == (
        "o.parquet: field 'late' first appears at row 3, after the first Parquet batch fixed the "
        "columns; write JSON Lines instead"
    )
    with pytest.raises(CorpusError) as caught:
        parquet([{"a": 1}, {"a": 2}, {"a": {"b": 1}}])
    assert str(caught.value) == (
        "o.parquet: field 'a' changes type (int64 to struct<b: int64>) by row 3; write JSON "
        "Lines instead"
    )
    with pytest.raises(CorpusError) as caught:
        parquet([{"a": 1}, {"a": "x"}])
    assert str(caught.value).startswith("o.parquet: rows do not fit one Parquet schema: ")


def test_a_field_later_rows_lack_may_come_first(monkeypatch):
    monkeypatch.setattr(writer_module, "PARQUET_BATCH", 2)
    rows = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"b": "z"}]
    assert parquet(rows).to_pylist() == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"},
                                         {"a": None, "b": "z"}]  # fmt: skip


def test_a_hint_adds_the_tag_to_meta_only_once_and_only_to_a_meta_struct():
    extra = [pa.field("why", pa.string())]
    assert RowWriter.hint(None, "tag", extra) == pa.schema(extra)
    assert RowWriter.hint(None, "tag") == pa.schema([])
    base = pa.schema([
        ("other", pa.struct([("k", pa.int8())])),
        ("meta", pa.struct([("tag", pa.string()), ("k", pa.int8())])),
    ])  # fmt: skip
    assert RowWriter.hint(base, "tag", extra) == pa.schema([*base, *extra])
    flat = pa.schema([("meta", pa.string())])
    assert RowWriter.hint(flat, "tag") == flat


@pytest.mark.parametrize(
    ("kind", "shape"),
    [
        (pa.int64(), None),
        (pa.list_(pa.int8()), ("list", None)),
        (pa.large_list(pa.string()), ("list", None)),
        (pa.list_(pa.struct([("a", pa.int8())]), 2), ("list", (("a", None),))),
        (pa.map_(pa.string(), pa.list_(pa.int8())), ("map", None, ("list", None))),
        (pa.map_(pa.struct([("k", pa.int8())]), pa.int8()), ("map", (("k", None),), None)),
        (pa.struct([("a", pa.int8()), ("b", pa.list_(pa.int8()))]),
         (("a", None), ("b", ("list", None)))),
    ],
)  # fmt: skip
def test_the_shape_of_an_arrow_type_is_its_nested_field_names(kind, shape):
    assert writer_module._shape(kind) == shape


def test_a_hinted_type_no_cast_reaches_is_not_taken():
    hint = pa.schema([("flag", pa.timestamp("s")), ("n", pa.int8()), ("x", pa.int32())])
    table = RowWriter.table([{"flag": True, "n": 5}], hint)
    assert table.schema == pa.schema([("flag", pa.bool_()), ("n", pa.int8()), ("x", pa.int32())])
    assert table.to_pylist() == [{"flag": True, "n": 5, "x": None}]


def test_a_failed_block_hands_its_error_to_the_text_layer_which_writes_nothing_more():
    raw = io.BytesIO()
    with pytest.raises(RuntimeError), RowWriter(raw, ".jsonl", "o.jsonl") as w:
        w.write({"a": 1})
        raise RuntimeError("stopped")
    assert raw.getvalue() == b"" and w.count == 1  # the buffered row is not flushed
