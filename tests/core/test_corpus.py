"""JSON Lines corpus files: round trip, and errors that name file:line."""

import pyarrow.parquet as pq
import pytest

from neardup.core.engine import read_docs, write_docs
from neardup.core.errors import CorpusError
from neardup.core.minhash import Doc


def test_corpus_round_trip(tmp_path):
    path = tmp_path / "c.jsonl"
    docs = [Doc("a", "first text", {"lang": "en"}), Doc("b", "ünïcode ✓", {})]
    assert write_docs(path, docs) == 2
    assert list(read_docs(path)) == docs


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"id": 1, "text": "x"}', "'id'"),
        ('{"id": "a", "text": 5}', "'text'"),
        ('{"id": "a", "text": "x", "meta": []}', "'meta'"),
        ("not json", "not valid JSON"),
        ('"a string"', "JSON object"),
    ],
)
def test_bad_corpus_lines_name_file_and_line(tmp_path, line, reason):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "ok", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=rf"c\.jsonl:2: .*{reason}"):
        list(read_docs(path))


def test_a_parquet_corpus_round_trips_and_an_empty_one_has_the_id_and_text_columns(tmp_path):
    path = tmp_path / "c.parquet"
    docs = [Doc("a", "first text", {"lang": "en"}), Doc("b", "ünïcode ✓", {"lang": "fr"})]
    assert write_docs(path, docs) == 2
    assert list(read_docs(path)) == docs
    empty = tmp_path / "empty.parquet"
    assert write_docs(empty, []) == 0
    schema = pq.read_schema(empty)
    assert [(f.name, str(f.type)) for f in schema] == [("id", "string"), ("text", "string")]
    assert list(read_docs(empty)) == []


def test_a_file_that_is_not_parquet_is_a_corpus_error_naming_it(tmp_path):
    path = tmp_path / "c.parquet"
    path.write_bytes(b'{"id": "a", "text": "json, not parquet"}\n')
    with pytest.raises(CorpusError, match=r"c\.parquet: cannot read Parquet: "):
        list(read_docs(path))


def test_a_corpus_that_cannot_be_read_says_why(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(CorpusError, match=r"dir\.jsonl: cannot read: \[Errno 21\] Is a directory"):
        list(read_docs(tmp_path / "dir.jsonl"))
    (tmp_path / "c.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(CorpusError, match=r"c\.jsonl\.gz: cannot read: Not a gzipped file"):
        list(read_docs(tmp_path / "c.jsonl.gz"))
    with pytest.raises(CorpusError, match=r"none\.jsonl: no such file$"):
        list(read_docs(tmp_path / "none.jsonl"))


def test_a_json_array_read_as_json_lines_says_how_to_convert_it(tmp_path):
    path = tmp_path / "c.jsonl"
    hint = "; JSON Lines holds one object per line: if the file is one JSON array, convert it, "
    hint += "e.g. jq -c '.[]' FILE.json > FILE.jsonl"
    path.write_text('  [{"id": "a", "text": "x"},\n{"id": "b", "text": "y"}]\n', encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        list(read_docs(path))
    assert str(caught.value).endswith(hint)
    path.write_text('[{"id": "a", "text": "x"}]\n', encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        list(read_docs(path))
    assert str(caught.value) == f"{path}:1: expected a JSON object, got list{hint}"
    path.write_text('{"id": "a", "text": "x"}\n{"id": }\n', encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        list(read_docs(path))
    assert "jq" not in str(caught.value)


def test_nan_in_a_corpus_line_is_refused_naming_the_line_and_field(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": "y", "meta": {"s": NaN}}\n')
    with pytest.raises(CorpusError) as caught:
        list(read_docs(path))
    assert str(caught.value) == (
        f"{path}:2: NaN is not JSON (field 'meta.s'): write null, a number or a string instead"
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"id": "", "text": "x"}', "'id' must be a non-empty string"),
        ('{"text": "x"}', "no 'id' field (its fields: text)"),
        ('{"id": "a"}', "no 'text' field (its fields: id)"),
        ('{"id": "a", "text": null}', "'text' must be a string"),
        ('{"id": "a", "text": "x", "meta": "m"}', "'meta' must be an object when present"),
    ],
)
def test_bad_documents_are_refused_with_exact_reasons(tmp_path, line, reason):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "ok", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        list(read_docs(path))
    assert (caught.value.path, caught.value.line, caught.value.reason) == (str(path), 2, reason)


def test_meta_absent_or_null_is_empty(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": "y", "meta": null}\n')
    assert list(read_docs(path)) == [Doc("a", "x", {}), Doc("b", "y", {})]


def test_a_corpus_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "a", "text": "caf\xe9"}\n')
    with pytest.raises(CorpusError) as caught:
        list(read_docs(path))
    assert str(caught.value) == (
        f"{path}:1: not UTF-8 (invalid continuation byte at byte 24 of the line, byte 24 of the "
        "file)"
    )


def test_parquet_corpora_number_their_rows_and_read_meta_as_struct_or_old_json_text(tmp_path):
    import pyarrow as pa

    path = tmp_path / "c.parquet"
    table = pa.table({"id": ["a", "b", "c"], "text": ["x", "y", "z"],
                      "meta": ['{"k": 1}', None, '{"k": [2]}'], "extra": [1, 2, 3]})  # fmt: skip
    pq.write_table(table, path)
    assert list(read_docs(path)) == [Doc("a", "x", {"k": 1}), Doc("b", "y", {}),
                                     Doc("c", "z", {"k": [2]})]  # fmt: skip
    pq.write_table(table.drop_columns(["meta"]), path)
    assert list(read_docs(path)) == [Doc("a", "x", {}), Doc("b", "y", {}), Doc("c", "z", {})]
    pq.write_table(table.set_column(0, "id", pa.array(["a", "b", ""])), path)
    with pytest.raises(CorpusError) as caught:
        list(read_docs(path))
    assert str(caught.value) == f"{path}:3: 'id' must be a non-empty string"
    pq.write_table(table.drop_columns(["text"]), path)
    with pytest.raises(CorpusError) as caught:
        list(read_docs(path))
    assert str(caught.value) == f"{path}: a Parquet corpus needs the columns 'id' and 'text'"
    assert caught.value.line is None


def test_written_corpora_take_output_names_only_and_name_the_file_in_errors(tmp_path):
    with pytest.raises(CorpusError) as caught:
        write_docs(tmp_path / "c.ndjson", [])
    assert str(caught.value) == (
        f"{tmp_path / 'c.ndjson'}: unknown output format; write one of .jsonl, .jsonl.gz, "
        ".jsonl.zst, .parquet"
    )
    assert not (tmp_path / "c.ndjson").exists()
    path = tmp_path / "c.parquet"
    with pytest.raises(CorpusError) as caught:
        write_docs(path, [Doc("a", "x", {"n": 1}), Doc("b", "y", {"n": 2**70})])
    assert str(caught.value).startswith(f"{path}: rows do not fit one Parquet schema: ")


def test_a_parquet_corpus_reads_only_its_id_text_and_meta_columns(tmp_path):
    import pyarrow as pa

    # A column Python cannot hold (a timestamp past the year 9999) is never read.
    far = pa.array([2**62], pa.timestamp("us"))
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["x"], "meta": [{"k": 1}], "at": far}), path)
    assert list(read_docs(path)) == [Doc("a", "x", {"k": 1})]
    pq.write_table(pa.table({"id": ["a"], "text": ["x"], "at": far}), path)
    assert list(read_docs(path)) == [Doc("a", "x", {})]
