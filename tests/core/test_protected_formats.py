"""Protected sets in the formats eval sets ship in (issue 22): a JSON array and CSV rows are read
as items, as JSON Lines are; a name that cannot be read as items is refused, not read as text."""

import csv
import errno
import gzip
import io
import json

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core.engine import (
    CorpusError,
    ProtectedFormat,
    parse_protected_set,
    protected_as_jsonl,
    read_protected_set,
)

QUESTIONS = [
    f"question {i}: which of the following statements about the river crossing and the old "
    f"mill {i} is true according to the passage"
    for i in range(60)
]
ITEMS = [
    {"id": f"q{i}", "question": q, "A": "yes", "B": "no", "C": "maybe", "D": "never", "answer": "A"}
    for i, q in enumerate(QUESTIONS)
]


def _csv(rows, header=None):
    out = io.StringIO()
    writer = csv.writer(out)
    if header:
        writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def test_a_json_array_of_60_objects_is_60_items_labelled_by_id(tmp_path):
    path = tmp_path / "evals.json"
    path.write_text(json.dumps(ITEMS, indent=2), encoding="utf-8")
    found = read_protected_set(path)
    assert found.items == 60
    assert sorted(found.layout, key=lambda k: int(k[1:])) == [f"q{i}" for i in range(60)]
    # the id is a label, not protected text; the question is protected under its item
    assert all(labels == ["q7"] for g, labels in found.grams.items() if "mill 7 " in g)
    assert not any(g.startswith("q7") for g in found.grams)


def test_json_array_items_without_ids_are_labelled_by_position():
    body = json.dumps([{"question": q} for q in QUESTIONS[:3]])
    assert sorted(parse_protected_set("e.json", body, ProtectedFormat.JSON).layout) == [
        "1", "2", "3"]  # fmt: skip


def test_mmlus_headerless_csv_is_one_item_a_row(tmp_path):
    """MMLU's release: question, A, B, C, D, answer, and no header row."""
    rows = [[q, "yes", "no", "maybe", "never", "A"] for q in QUESTIONS]
    path = tmp_path / "abstract_algebra_test.csv"
    path.write_text(_csv(rows), encoding="utf-8")
    found = read_protected_set(path)
    assert found.items == 60
    assert sorted(found.layout, key=int) == [str(i) for i in range(1, 61)]
    # the first row is an item, not column names
    assert any(labels == ["1"] for labels in found.grams.values())


def test_a_csv_with_a_header_names_its_cells_and_keeps_label_columns_out():
    header = ["id", "question", "A", "B", "C", "D", "answer"]
    body = _csv([list(item.values()) for item in ITEMS[:5]], header)
    found = parse_protected_set("mmlu.csv", body, ProtectedFormat.CSV)
    assert found.items == 5 and sorted(found.layout) == [f"q{i}" for i in range(5)]
    items = protected_as_jsonl("mmlu.csv", body, ProtectedFormat.CSV)[0].splitlines()
    assert json.loads(items[0]) == ITEMS[0]


def test_a_spreadsheets_byte_order_mark_does_not_hide_the_header(tmp_path):
    path = tmp_path / "excel.csv"
    header = ["case_id", "prompt"]
    path.write_bytes(b"\xef\xbb\xbf" + _csv([["c1", QUESTIONS[0]]], header).encode())
    assert list(read_protected_set(path).layout) == ["c1"]


@pytest.mark.parametrize("name", ["evals.json.gz", "evals.ndjson.gz", "evals.csv.gz"])
def test_compressed_item_files_are_read_by_their_inner_name(tmp_path, name):
    if ".csv" in name:
        body = _csv([list(i.values()) for i in ITEMS], list(ITEMS[0]))
    elif ".json." in name:
        body = json.dumps(ITEMS)
    else:
        body = "".join(json.dumps(i) + "\n" for i in ITEMS)
    path = tmp_path / name
    path.write_bytes(gzip.compress(body.encode()))
    assert read_protected_set(path).items == 60


@pytest.mark.parametrize("name", ["evals.xlsx", "evals.tsv", "notes.md", "README", "a.jsonl.bz2"])
def test_a_file_that_cannot_be_read_as_items_is_refused_naming_the_formats(tmp_path, name):
    path = tmp_path / name
    path.write_text(QUESTIONS[0], encoding="utf-8")
    with pytest.raises(CorpusError, match=r"cannot read this file as protected items.*\.csv"):
        read_protected_set(path)
    with pytest.raises(CorpusError, match="cannot read this file as protected items"):
        ProtectedFormat.of(name)


def test_a_txt_file_is_still_one_item():
    assert ProtectedFormat.of("held_out.txt") is ProtectedFormat.TEXT
    assert parse_protected_set("h.txt", QUESTIONS[0], ProtectedFormat.TEXT).items == 1


def test_bad_json_arrays_name_what_is_wrong():
    with pytest.raises(CorpusError, match=r"e\.json: element 2 of the array is not an object"):
        parse_protected_set("e.json", '[{"q": "a"}, "b"]', ProtectedFormat.JSON)
    with pytest.raises(CorpusError, match=r"e\.json:3: not valid JSON"):
        parse_protected_set("e.json", '[\n{"q": "a"},\n{"q" "b"}]', ProtectedFormat.JSON)
    with pytest.raises(CorpusError, match=r"element 1 .*lone surrogate"):
        parse_protected_set("e.json", '[{"q": "\\ud800"}]', ProtectedFormat.JSON)


def test_a_json_file_that_is_json_lines_is_read_as_json_lines_and_stored_as_it_is():
    body = "".join(json.dumps({"q": i["question"]}) + "\n\n" for i in ITEMS[:4])
    found = parse_protected_set("dolma.json", body, ProtectedFormat.JSON)
    assert found.items == 4 and sorted(found.layout) == ["1", "3", "5", "7"]  # lines
    assert protected_as_jsonl("dolma.json", body, ProtectedFormat.JSON) == (
        body, ProtectedFormat.JSONL)  # fmt: skip


_cell = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\x00"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_cell, min_size=1, max_size=5), min_size=1, max_size=8))
def test_csv_items_are_their_rows_and_survive_the_stores_conversion(rows):
    """Every non-blank row is one item with its cells in order (by header names or positions);
    the stored JSON Lines of a CSV or a JSON array parse back to the same set."""
    body = _csv(rows)
    found = parse_protected_set("p.csv", body, ProtectedFormat.CSV, n=1)
    data = [r for r in rows if any(r)]
    assert found.items in (len(data), len(data) - 1)  # a name-like first row is a header
    stored, fmt = protected_as_jsonl("p.csv", body, ProtectedFormat.CSV)
    assert fmt is ProtectedFormat.JSONL
    again = parse_protected_set("p.csv", stored, fmt, n=1)
    assert (again.items, again.grams, again.layout) == (found.items, found.grams, found.layout)
    items = [dict(zip(map(str, range(len(r))), r, strict=True)) for r in data]
    array = parse_protected_set("p.json", json.dumps(items), ProtectedFormat.JSON, n=1)
    stored, fmt = protected_as_jsonl("p.json", json.dumps(items), ProtectedFormat.JSON)
    again = parse_protected_set("p.json", stored, fmt, n=1)
    assert (again.items, again.grams, again.layout) == (array.items, array.grams, array.layout)


def test_hits_name_each_item_once_with_the_first_ngram_it_shares_with_a_text():
    body = "\n".join(json.dumps(item) for item in [
        {"id": "q1", "text": "one two three four five"},
        {"id": "q2", "text": "zero one two three"},
        {"id": "q3", "text": "Москва стоит на реке"},
    ])  # fmt: skip
    parsed = parse_protected_set("evals", body, ProtectedFormat.JSONL, 3)
    texts = ["nothing shared here", "ZERO one two three four five!", "в Москва стоит на"]
    assert parsed.hits_many(texts) == [
        [],
        [("q2", "zero one two"), ("q1", "one two three")],
        [("q3", "москва стоит на")],
    ]
    assert parsed.hits(texts[1]) == [("q2", "zero one two"), ("q1", "one two three")]


def test_a_parquet_protected_set_is_cut_into_words_by_its_tokenizer(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "evals.parquet"
    pq.write_table(pa.table({"id": ["c1"], "question": ["请检查路径"]}), path)
    found = read_protected_set(path, 2, tokenizer="multilingual")  # 4 Han characters a window
    assert found.grams == {"请 检 查 路": ["c1"], "检 查 路 径": ["c1"]}
    assert read_protected_set(path, 1).grams == {"请检查路径": ["c1"]}


def test_an_error_while_reading_a_protected_set_gives_the_systems_reason(monkeypatch):
    fs = fsspec.filesystem("memory")
    fs.pipe("/prot/evals.jsonl", b'{"text": "x"}\n')

    def failing(self, path, *args, **kwargs):
        raise OSError(errno.EIO, "Input/output error", path)

    monkeypatch.setattr(type(fs), "_open", failing)
    try:
        with pytest.raises(CorpusError) as caught:
            read_protected_set("memory://prot/evals.jsonl")
    finally:
        monkeypatch.undo()
        fs.rm("/prot", recursive=True)
    assert str(caught.value) == "memory://prot/evals.jsonl: cannot read: Input/output error"


def test_nan_in_a_json_array_is_refused_naming_the_file_and_field():
    with pytest.raises(CorpusError) as caught:
        parse_protected_set("e.json", '[{"q": "a"}, {"q": NaN}]', ProtectedFormat.JSON)
    assert str(caught.value) == (
        "e.json: NaN is not JSON (field '[1].q'): write null, a number or a string instead"
    )
    assert caught.value.line is None
