"""Rows of any schema (``neardup.core._records``), exactly: which ids are refused and why, dotted
fields read and written, the Parquet columns a schema needs, and what a reader says of a row or a
file it cannot read, and of how far it has read."""

import gzip
import io
import json

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.core._records import id_problem
from neardup.core.engine import (
    CorpusError,
    RecordReader,
    Schema,
    expand_inputs,
    set_field,
)


@pytest.mark.parametrize(
    ("doc_id", "problem"),
    [
        ("a", None),
        ("...", None),
        (".a", None),
        ("a b/é", None),
        ("", "is empty"),
        ("a\x07b", "holds a control character (U+0007)"),
        ("ok\x9f", "holds a control character (U+009F)"),
        ("\n", "holds a control character (U+000A)"),
        (".", "is '.', which no URL can carry as a path segment"),
        ("..", "is '..', which no URL can carry as a path segment"),
    ],
)
def test_id_problem_says_why_an_id_cannot_be_one(doc_id, problem):
    assert id_problem(doc_id) == problem


@pytest.mark.parametrize(
    ("row", "name", "written"),
    [
        ({}, "id", {"id": 1}),
        ({"x.y": 0, "x": {"y": 2}}, "x.y", {"x.y": 1, "x": {"y": 2}}),
        ({"a": {"b": 0, "c": 2}, "d": 3}, "a.b", {"a": {"b": 1, "c": 2}, "d": 3}),
        ({"a": {"b": {"c": 0, "e": 4}}}, "a.b.c", {"a": {"b": {"c": 1, "e": 4}}}),
        ({"a": 5}, "a.b", {"a": {"b": 1}}),
        ({"a": {"z": 9}}, "a.b.c", {"a": {"z": 9, "b": {"c": 1}}}),
    ],
)
def test_set_field_writes_where_get_field_reads_keeping_the_rest(row, name, written):
    before = repr(row)
    assert set_field(row, name, 1) == written
    assert repr(row) == before


@pytest.mark.parametrize(
    ("schema", "extra", "columns"),
    [
        (Schema(), (), ["id", "text"]),
        (
            Schema("doc.num", "body"),
            ("meta.a.b", "x.y", "nope.z", "id"),
            ["doc", "body", "meta", "x.y", "id"],
        ),
        (Schema("x.y", "text"), ("x",), ["x.y", "text", "x"]),
        (Schema("body", "body"), ("body.k",), ["body"]),
    ],
)
def test_the_parquet_columns_a_schema_reads_are_the_top_level_ones_named(schema, extra, columns):
    names = ["id", "text", "doc", "body", "meta", "x.y", "x"]
    assert schema.columns(names, *extra) == columns


def reader_error(sources, schema=None):
    with pytest.raises(CorpusError) as caught:
        list(RecordReader(sources, schema or Schema()))
    return caught.value


def test_a_bad_row_is_named_by_file_and_line_exactly(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": 5}\n')
    error = reader_error(expand_inputs([str(path)]))
    assert (error.path, error.line, error.reason) == (
        str(path),
        2,
        "'text' must be a string, got a number",
    )
    path.write_text('{"id": "a", "text": "x"}\n\n{"id": "b" "text": 5}\n')
    error = reader_error(expand_inputs([str(path)]))
    assert (error.path, error.line) == (str(path), 3)
    assert error.reason == "not valid JSON (Expecting ',' delimiter)"
    # A prefixed id is checked once prefixed, naming where it is.
    path.write_text('{"id": "a", "text": "x"}\n{"id": "b\\u0001", "text": "y"}\n')
    error = reader_error(expand_inputs([str(path)]), Schema(id_prefix=True))
    assert str(error) == f"{path}:2: the id 'c.jsonl/b\\x01' holds a control character (U+0001)"


def test_files_that_cannot_be_read_say_why(tmp_path):
    (tmp_path / "latin.jsonl").write_bytes(b'{"id": "a", "text": "caf\xe9"}\n')
    error = reader_error(expand_inputs([str(tmp_path / "latin.jsonl")]))
    assert str(error) == (
        f"{tmp_path / 'latin.jsonl'}:1: not UTF-8 (invalid continuation byte at byte 24 of the "
        "line, byte 24 of the file)"
    )
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip at all")
    error = reader_error(expand_inputs([str(tmp_path / "bad.jsonl.gz")]))
    assert str(error) == (f"{tmp_path / 'bad.jsonl.gz'}: cannot read: Not a gzipped file (b'no')")
    assert error.line is None
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    error = reader_error(expand_inputs([str(tmp_path / "bad.parquet")]))
    assert (error.path, error.line) == (str(tmp_path / "bad.parquet"), None)
    assert error.reason.startswith("cannot read Parquet: ")
    assert error.reason != "cannot read Parquet: "


def test_parquet_rows_are_numbered_and_read_with_the_fields_asked_for(tmp_path):
    table = pa.table({
        "id": ["a", "b", "c"], "text": ["x", "y", "z"], "meta": [{"k": 1}, {"k": 2}, {"k": 3}],
        "big": ["1", "2", "3"],
    })  # fmt: skip
    pq.write_table(table, tmp_path / "p.parquet")
    sources = expand_inputs([str(tmp_path / "p.parquet")])
    records = list(RecordReader(sources, Schema(), fields=["meta.k"]))
    assert [(r.id, r.line, r.row) for r in records] == [
        ("a", 1, {"id": "a", "text": "x", "meta": {"k": 1}}),
        ("b", 2, {"id": "b", "text": "y", "meta": {"k": 2}}),
        ("c", 3, {"id": "c", "text": "z", "meta": {"k": 3}}),
    ]
    pq.write_table(table.set_column(2, "meta", pa.array([{"k": 1}, {"k": 2}, None])).set_column(
        0, "id", pa.array(["a", "b", ""])), tmp_path / "p.parquet")  # fmt: skip
    error = reader_error(expand_inputs([str(tmp_path / "p.parquet")]))
    assert (
        str(error) == f"{tmp_path / 'p.parquet'}:3: 'id' must be a non-empty string or an integer, "
        "got an empty string"
    )


def test_bytes_done_counts_every_file_read_and_the_current_one(tmp_path):
    fs = fsspec.filesystem("memory")
    fs.pipe("/cio-rec/a.jsonl", b'{"id": "a", "text": "x"}\n' * 3)
    fs.pipe("/cio-rec/b.jsonl", b'{"id": "b", "text": "y"}\n')
    try:
        reader = RecordReader(expand_inputs(["memory://cio-rec"]), Schema())
        assert (reader.bytes_done, reader.total_bytes) == (0, 100)
        seen = []
        for record in reader.unparsed():
            seen.append((record.line, reader.bytes_done))
        # Text is read ahead: the whole small file is read once its first line is.
        assert seen == [(1, 75), (2, 75), (3, 75), (1, 100)]
        assert reader.bytes_done == 100
    finally:
        fs.rm("/cio-rec", recursive=True)


def test_a_gzip_file_counts_its_compressed_bytes(tmp_path):
    data = gzip.compress(b'{"id": "a", "text": "x"}\n', mtime=0)
    (tmp_path / "a.jsonl.gz").write_bytes(data)
    reader = RecordReader(expand_inputs([str(tmp_path / "a.jsonl.gz")]), Schema())
    assert [r.id for r in reader] == ["a"]
    assert reader.bytes_done == reader.total_bytes == len(data)


def test_a_missing_field_names_the_fields_the_row_has_and_the_flag(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{"url": "u", "body": "b", "meta": {"id": 1}}\n')
    error = reader_error(expand_inputs([str(path)]))
    assert str(error) == (
        f"{path}:2: no 'id' field (its fields: url, body, meta); name the id's field with "
        "--id-field"
    )
    path.write_text('{"url": "u", "body": "b"}\n')
    error = reader_error(expand_inputs([str(path)]), Schema(id_field="url"))
    assert str(error) == (
        f"{path}:1: no 'text' field (its fields: url, body); name the text's field with "
        "--text-field"
    )
    wide = {f"f{i}": i for i in range(15)}
    path.write_text(json.dumps({**wide, "text": "x"}) + "\n")
    error = reader_error(expand_inputs([str(path)]), Schema(id_field="meta.id"))
    assert error.reason == (
        "no 'meta.id' field (its fields: f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11 and 4 "
        "more); name the id's field with --id-field"
    )


@pytest.mark.parametrize("fields", [None, ()])
def test_a_parquet_file_without_the_column_names_its_columns_and_the_flag(tmp_path, fields):
    """Read whole or only the id's and text's columns (dedup's first pass), a Parquet file
    without them names the columns it has (was "its fields: none" when projected)."""
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"url": ["u"], "body": ["b"]}), path)
    with pytest.raises(CorpusError) as caught:
        list(RecordReader(expand_inputs([str(path)]), Schema(), fields=fields))
    assert str(caught.value) == (
        f"{path}: no 'id' column (its columns: url, body); name the id's field with --id-field"
    )
    with pytest.raises(CorpusError) as caught:
        list(RecordReader(expand_inputs([str(path)]), Schema(id_field="url.x"), fields=fields))
    assert caught.value.reason == (
        "no 'text' column (its columns: url, body); name the text's field with --text-field"
    )


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"id": None, "text": "x"}, "'id' must be a non-empty string or an integer, got null"),
        ({"id": True, "text": "x"}, "'id' must be a non-empty string or an integer, got a boolean"),
        ({"id": 1.5, "text": "x"}, "'id' must be a non-empty string or an integer, got the "
         "number 1.5"),
        ({"id": [1], "text": "x"}, "'id' must be a non-empty string or an integer, got an array"),
        ({"id": "a", "text": {}}, "'text' must be a string, got an object"),
        ({"meta": {"id": None}, "text": "x"}, "'meta.id' must be a non-empty string or an "
         "integer, got null"),
    ],
)  # fmt: skip
def test_a_field_of_the_wrong_type_says_what_it_holds(row, reason):
    field = "meta.id" if "meta" in row else "id"
    with pytest.raises(CorpusError) as caught:
        Schema(id_field=field).id_and_text(row, "c.jsonl", 7)
    assert (caught.value.line, caught.value.reason) == (7, reason)


def test_first_bad_utf8_finds_the_line_across_blocks(monkeypatch):
    from neardup.core import _utf8

    monkeypatch.setattr(_utf8, "_BLOCK", 4)  # lines, \r\n and characters cut across blocks
    data = "é1\r\nline two\rthree\n".encode() + b"four \xc3\xa9\xff\n"
    found = _utf8.first_bad_utf8(io.BytesIO(data))
    assert found == (4, 7, len(data) - 2, "invalid start byte")
    assert _utf8.first_bad_utf8(io.BytesIO(data[:-2])) is None
    assert _utf8.first_bad_utf8(io.BytesIO(b"a\nb \xe9")) == (2, 2, 4, "unexpected end of data")


def test_a_compressed_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"id": "a", "text": "x"}\n{"id": "b", "text": "\xe9"}\n'))
    error = reader_error(expand_inputs([str(path)]))
    assert (error.line, error.reason) == (
        2, "not UTF-8 (invalid continuation byte at byte 21 of the line, byte 46 of the file)"
    )  # fmt: skip
