"""Downloads: any record survives CSV (RFC 4180: quoted commas, quotes, CR, LF; UTF-8) and JSON
Lines exactly; a report's records carry its fields."""

import csv
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.service.exports import (
    MEMBER_COLUMNS,
    REPORT_COLUMNS,
    encode,
    report_records,
)

# Any valid Unicode text (no lone surrogates: the service refuses them), with the characters
# CSV must quote drawn often.
TEXT = st.text(
    st.one_of(st.sampled_from([",", '"', "\n", "\r", ";", "=", " ", "é", "中", "😀"]),
              st.characters(exclude_categories=("Cs",))),
    max_size=40,
)  # fmt: skip
MEMBERS = st.lists(
    st.fixed_dictionaries({
        "id": TEXT.filter(bool), "cluster": TEXT.filter(bool),
        "estimate": st.floats(0, 1), "copy_of": st.none() | TEXT.filter(bool),
        "text": st.none() | TEXT,
    }),
    max_size=8,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(MEMBERS)
def test_csv_reads_back_every_field_exactly(records):
    body = encode(records, "csv", MEMBER_COLUMNS)
    rows = list(csv.reader(io.StringIO(body.decode("utf-8"), newline="")))
    assert rows[0] == list(MEMBER_COLUMNS)
    assert len(rows) == len(records) + 1
    for row, record in zip(rows[1:], records, strict=True):
        expected = ["" if record[c] is None else str(record[c]) for c in MEMBER_COLUMNS]
        assert row == expected


@settings(max_examples=200, deadline=None)
@given(MEMBERS)
def test_json_lines_read_back_every_record_exactly(records):
    body = encode(records, "jsonl", MEMBER_COLUMNS).decode("utf-8")
    # One record a line: a newline inside a text is escaped, never a line break.
    lines = body.split("\n")
    assert lines[-1] == "" and len(lines) == len(records) + 1
    assert [json.loads(line) for line in lines[:-1]] == records


def test_csv_quotes_what_it_must_and_ends_lines_with_crlf():
    record = {"id": 'a,"b"', "cluster": "c", "estimate": 0.5, "copy_of": None,
              "text": "line one\nline two, née 中"}  # fmt: skip
    body = encode([record], "csv", MEMBER_COLUMNS)
    assert (
        body
        == (
            'id,cluster,estimate,copy_of,text\r\n"a,""b""",c,0.5,,"line one\nline two, née 中"\r\n'
        ).encode()
    )
    assert not body.startswith(b"\xef\xbb\xbf")  # no byte-order mark


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="jsonl, csv"):
        encode([], "xml", MEMBER_COLUMNS)


REPORT = {
    "ngram": 13, "item_cap": 3, "thresholds": {"clean_below": 0.2, "dirty_from": 0.8},
    "documents": 5, "contaminated": 2,
    "sets": [{"set": "evals", "items": 4, "ngrams": 40, "documents": 2, "items_matched": 1,
              "subsets": {"clean": 3, "not clean": 1, "not dirty": 3, "dirty": 1},
              "capped": {"ngrams": 1, "list": None}, "top_items": []}],
    "items": [{"set": "evals", "item": "q,1", "documents": 2, "document_ids": ["d1", "d2"],
               "first_ngram": None, "ngrams": 10, "ngrams_found": 9, "share_found": 0.9,
               "coverage": 0.85, "subsets": ["not clean", "dirty"]}],
}  # fmt: skip


def test_report_records_carry_the_totals_each_set_and_each_item():
    records = report_records(REPORT)
    assert [r["record"] for r in records] == ["report", "set", "item"]
    total, one_set, item = records
    assert total == {"record": "report", "documents": 5, "contaminated": 2, "ngram": 13,
                     "item_cap": 3, "clean_below": 0.2, "dirty_from": 0.8}  # fmt: skip
    assert one_set["not clean"] == 1 and one_set["capped_ngrams"] == 1
    assert one_set["capped_list"] is None
    assert {k: v for k, v in item.items() if k != "record"} == REPORT["items"][0]
    assert all(set(r) <= set(REPORT_COLUMNS) for r in records)
    rows = list(csv.DictReader(io.StringIO(encode(records, "csv", REPORT_COLUMNS).decode())))
    assert rows[2]["item"] == "q,1" and json.loads(rows[2]["document_ids"]) == ["d1", "d2"]
    assert rows[2]["first_ngram"] == "" and rows[0]["set"] == ""
