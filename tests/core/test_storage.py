"""Storage: inputs expand in a fixed order; outputs appear whole or not at all."""

import io
import os
import sys

import fsspec
import pytest

from neardup.core.engine import (
    STDIO,
    CorpusError,
    ParameterError,
    RecordReader,
    Schema,
    atomic_output,
    check_apart,
    check_output,
    expand_inputs,
    get_field,
    parquet_schema,
    set_field,
)


@pytest.fixture
def memfs():
    fs = fsspec.filesystem("memory")
    fs.pipe("/st/z.jsonl", b'{"id": 1, "text": "a"}\n')
    fs.pipe("/st/a/b.jsonl", b'{"id": "b", "text": "b"}\n')
    fs.pipe("/st/notes.txt", b"not a corpus")
    yield fs
    fs.rm("/st", recursive=True)


def test_directories_expand_sorted_to_corpus_files_with_labels(memfs):
    sources = expand_inputs(["memory://st"])
    assert [(s.name, s.label, s.fmt) for s in sources] == [
        ("memory://st/a/b.jsonl", "a/b.jsonl", ".jsonl"),
        ("memory://st/z.jsonl", "z.jsonl", ".jsonl"),
    ]
    assert [s.label for s in expand_inputs(["memory://st"], corpus=False)] == [
        "a/b.jsonl", "notes.txt", "z.jsonl"]  # fmt: skip


def test_a_spark_output_directory_reads_as_its_part_files():
    fs = fsspec.filesystem("memory")
    for name in ("part-00001-x.jsonl", "part-00000-x.jsonl.gz", "_SUCCESS", "._SUCCESS.crc",
                 ".part-00000-x.jsonl.gz.crc", "_temporary/0/part-00009-y.jsonl",
                 ".hidden/part-0.jsonl", "sub/part-2.parquet"):  # fmt: skip
        fs.pipe(f"/sparkout/{name}", b"")
    try:
        sources = expand_inputs(["memory://sparkout"])
        assert [s.label for s in sources] == [
            "part-00000-x.jsonl.gz", "part-00001-x.jsonl", "sub/part-2.parquet"]  # fmt: skip
    finally:
        fs.rm("/sparkout", recursive=True)


def test_integer_ids_are_their_decimal_strings_and_prefixes_rewrite_the_row(memfs):
    reader = RecordReader(expand_inputs(["memory://st/*.jsonl"]), Schema(id_prefix=True))
    [record] = list(reader)
    assert record.id == "z.jsonl/1" and record.row["id"] == "z.jsonl/1"
    assert reader.bytes_done == reader.total_bytes == 23


@pytest.mark.parametrize("bad", ["true", "1.5", '""', "null"])
def test_ids_that_are_not_strings_or_integers_name_the_line(memfs, bad):
    memfs.pipe(
        "/st/bad.jsonl", b'{"id": "ok", "text": "x"}\n{"id": ' + bad.encode() + b', "text": "t"}\n'
    )
    with pytest.raises(CorpusError, match=r"bad\.jsonl:2: 'id' must be a non-empty string"):
        list(RecordReader(expand_inputs(["memory://st/bad.jsonl"]), Schema()))


def test_dotted_fields_read_and_write_nested_values_without_touching_the_row():
    row = {"a": {"b": 1}, "x.y": 2}
    assert get_field(row, "a.b") == 1 and get_field(row, "x.y") == 2
    assert get_field(row, "a.c") is None
    assert set_field(row, "a.b", 5) == {"a": {"b": 5}, "x.y": 2}
    assert row == {"a": {"b": 1}, "x.y": 2}


def test_an_interrupted_output_leaves_nothing(memfs, tmp_path):
    for target in (str(tmp_path / "o.jsonl"), "memory://st/out/o.jsonl"):
        with pytest.raises(RuntimeError), atomic_output(target) as (handle, _):
            handle.write(b"half")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    assert not memfs.exists("/st/out/o.jsonl")
    assert not [p for p in memfs.find("/st") if "partial" in p]
    with atomic_output(str(tmp_path / "o.jsonl")) as (handle, done):
        handle.write(b"whole")
    assert (tmp_path / "o.jsonl").read_bytes() == b"whole" and done.bytes == 5


def test_parquet_rows_by_dotted_fields_read_only_the_columns_needed(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"doc": [{"num": 7}], "body": ["some text"], "big": ["not needed"]})
    pq.write_table(table, tmp_path / "p.parquet")
    sources = expand_inputs([str(tmp_path / "p.parquet")])
    [lean] = list(RecordReader(sources, Schema("doc.num", "body"), fields=[]))
    assert (lean.id, lean.text) == ("7", "some text")
    assert lean.row == {"doc": {"num": 7}, "body": "some text"}
    [full] = list(RecordReader(sources, Schema("doc.num", "body")))
    assert full.row["big"] == "not needed"


def test_unparsed_rows_parse_to_the_records_iteration_gives(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = '{"id": "a", "text": "x"}\r\n\n   \n{"id": 2,"text":"y", "meta": null}'
    (tmp_path / "a.jsonl").write_bytes(lines.encode())
    pq.write_table(pa.table({"id": ["p"], "text": ["z"]}), tmp_path / "b.parquet")
    reader = RecordReader(expand_inputs([str(tmp_path)]), Schema())
    records = list(reader)
    items = list(reader.unparsed())
    assert [type(i).__name__ for i in items] == ["RawLine", "RawLine", "Record"]
    assert [i.raw for i in items[:2]] == ['{"id": "a", "text": "x"}\n', lines.split("\n")[-1]]
    assert [reader.parse(i) for i in items[:2]] + items[2:] == records
    assert [(r.id, r.line, r.raw is None) for r in records] == [
        ("a", 1, False), ("2", 4, False), ("p", 1, True)]  # fmt: skip


def test_a_bad_unparsed_line_is_refused_when_parsed_naming_it(memfs):
    memfs.pipe("/st/bad.jsonl", b'{"id": "a", "text": "x"}\n[1]\n')
    reader = RecordReader(expand_inputs(["memory://st/bad.jsonl"]), Schema())
    _, bad = list(reader.unparsed())
    with pytest.raises(CorpusError, match=r"bad\.jsonl:2: expected a JSON object"):
        reader.parse(bad)


def test_two_writers_of_one_process_never_share_a_temporary_name(tmp_path):
    target = str(tmp_path / "out.jsonl")
    with atomic_output(target) as (first, _), atomic_output(target) as (second, _):
        first.write(b"first\n")
        second.write(b"second\n")
        partials = sorted(p.name for p in tmp_path.iterdir())
        assert len(partials) == 2, partials
    assert (tmp_path / "out.jsonl").read_bytes() in (b"first\n", b"second\n")
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_a_directory_gives_no_hidden_file_nor_anything_under_a_hidden_directory(tmp_path):
    for rel in ("a.jsonl", ".b.jsonl", ".git/c.jsonl", "sub/d.jsonl", "sub/.cache/e.jsonl", ".env"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text('{"id": "x", "text": "y"}\n')
    for corpus in (True, False):
        found = [s.label for s in expand_inputs([str(tmp_path)], corpus=corpus)]
        assert found == ["a.jsonl", "sub/d.jsonl"]
    # A hidden file named on its own is read.
    assert [s.label for s in expand_inputs([str(tmp_path / ".b.jsonl")])] == [".b.jsonl"]


def test_json_lines_under_dolmas_and_c4s_names_are_inputs_and_never_outputs():
    fs = fsspec.filesystem("memory")
    for name in ("a.json.gz", "b.ndjson", "c.ndjson.zst", "d.json", "e.parquet", "f.csv"):
        fs.pipe(f"/aliases/{name}", b"")
    try:
        found = [(s.label, s.fmt) for s in expand_inputs(["memory://aliases"])]
        # a plain .json beside them may be a manifest: a directory gives it only when named
        assert found == [("a.json.gz", ".jsonl.gz"), ("b.ndjson", ".jsonl"),
                         ("c.ndjson.zst", ".jsonl.zst"), ("e.parquet", ".parquet")]  # fmt: skip
        assert [s.fmt for s in expand_inputs(["memory://aliases/d.json"])] == [".jsonl"]
        protected = [s.label for s in expand_inputs(["memory://aliases"], corpus=False)]
        assert protected == ["a.json.gz", "b.ndjson", "c.ndjson.zst", "d.json", "e.parquet",
                             "f.csv"]  # fmt: skip
        for name in ("o.json.gz", "o.ndjson", "o.json"):
            with pytest.raises(CorpusError, match="unknown output format"):
                check_output(f"memory://aliases/{name}")
    finally:
        fs.rm("/aliases", recursive=True)


def test_standard_input_is_spooled_to_a_file_read_as_json_lines(monkeypatch):
    data = b'{"id": "a", "text": "from a pipe"}\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    [source] = expand_inputs([STDIO])
    try:
        assert (source.name, source.label, source.fmt) == ("-", "stdin", ".jsonl")
        assert source.size == len(data)
        with source.open() as raw:
            assert raw.read() == data
        [record] = list(RecordReader([source], Schema("id", "text")))
        assert (record.id, record.text) == ("a", "from a pipe")
    finally:
        os.unlink(source.path)


def test_outputs_over_an_input_or_over_each_other_are_refused_naming_both(tmp_path):
    (tmp_path / "in").mkdir()
    data = tmp_path / "in" / "c.jsonl"
    data.write_text('{"id": "a", "text": "x"}\n')
    out, removed = str(tmp_path / "o.jsonl"), str(tmp_path / "r.jsonl")
    check_apart([("INPUT", STDIO), ("INPUT", str(data))], [("--output", out), ("--removed", None)])
    with pytest.raises(ParameterError) as caught:
        check_apart(
            [("INPUT", str(tmp_path / "in"))], [("--output", out), ("--removed", str(data))]
        )
    assert str(caught.value) == (
        f"--removed {data} is INPUT {data}: neardup never writes over its inputs; "
        "give the output another name"
    )
    with pytest.raises(ParameterError, match=rf"^--output {tmp_path / 'in'} holds INPUT {data}:"):
        check_apart([("INPUT", str(data))], [("--output", str(tmp_path / "in"))])
    with pytest.raises(ParameterError) as caught:
        check_apart(
            [("INPUT", STDIO)], [("--output", out), ("--removed", out), ("--manifest", removed)]
        )
    assert str(caught.value) == (
        f"--output {out} and --removed {out} are the same file: give each output its own name"
    )


def test_the_schema_of_parquet_inputs_is_unified_or_the_first_when_they_conflict(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = {
        "a.parquet": pa.table({"id": ["a"], "n": pa.array([1], pa.int32())}),
        "b.parquet": pa.table({"id": ["b"], "n": pa.array([2], pa.int64()), "x": [0.5]}),
        "c.parquet": pa.table({"id": ["c"], "n": pa.array([{"k": 1}])}),
    }
    for name, table in tables.items():
        pq.write_table(table, tmp_path / name)
    (tmp_path / "d.jsonl").write_text('{"id": "d", "text": "x"}\n')

    def schema(*names):
        return parquet_schema(expand_inputs([str(tmp_path / n) for n in names]))

    assert schema("d.jsonl") is None
    assert schema("d.jsonl", "a.parquet") == tables["a.parquet"].schema
    assert schema("a.parquet", "b.parquet") == pa.schema(
        [("id", pa.string()), ("n", pa.int64()), ("x", pa.float64())]
    )
    assert schema("a.parquet", "c.parquet") == tables["a.parquet"].schema


def test_records_say_where_they_are_and_bad_ids_and_fields_are_named(memfs, tmp_path):
    [record] = list(RecordReader(expand_inputs(["memory://st/a/b.jsonl"]), Schema()))
    assert (record.id, record.name, record.line) == ("b", "memory://st/a/b.jsonl", 1)
    memfs.pipe("/st/bad.jsonl", b'{"id": "ok", "text": "x"}\n{"id": "a\\u0007b", "text": "t"}\n')
    with pytest.raises(CorpusError) as caught:
        list(RecordReader(expand_inputs(["memory://st/bad.jsonl"]), Schema()))
    assert str(caught.value) == (
        "memory://st/bad.jsonl:2: the id 'a\\x07b' holds a control character (U+0007)"
    )
    for flag, kwargs in (("id_field", {"id_field": "a..b"}), ("text_field", {"text_field": ""})):
        with pytest.raises(
            ParameterError, match=rf"^{flag} '[a.b]*' is not a field name or dotted"
        ):
            Schema(**kwargs)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("x")
    with pytest.raises(CorpusError, match=r"empty: no corpus file \(\.jsonl, .* in this directory"):
        expand_inputs([str(tmp_path / "empty")])
    with pytest.raises(CorpusError, match=r"empty: no protected file \(\.jsonl, .*\.parquet\) in "):
        expand_inputs([str(tmp_path / "empty")], corpus=False)


def test_an_unknown_url_scheme_is_named_with_its_target():
    with pytest.raises(CorpusError, match=r"^nosuchscheme://x/a\.jsonl: unknown URL scheme \("):
        expand_inputs(["nosuchscheme://x/a.jsonl"])
