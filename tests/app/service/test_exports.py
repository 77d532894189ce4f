"""Downloads: any record survives CSV (RFC 4180: quoted commas, quotes, CR, LF; UTF-8) and JSON
Lines exactly; a report's records carry its fields."""

import asyncio
import csv
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.service import NewDoc, exports
from neardup.app.service.errors import NotFound
from neardup.app.service.exports import (
    MEMBER_COLUMNS,
    REPORT_COLUMNS,
    cluster_export,
    encode,
    report_records,
)
from neardup.app.service.views import cluster_rows

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


WORDS = [f"w{i}" for i in range(40)]
MEMBERS = {
    "r": " ".join(WORDS),
    "s": " ".join(WORDS) + " and more",  # a near copy
    "t": " ".join(WORDS[:-1]),  # another
    "u": " ".join(WORDS) + " and more",  # an exact copy of "s"
    "v": " ".join(WORDS[:-1]),  # and of "t"
}


def test_a_cluster_export_streams_every_member_in_page_order_chunk_by_chunk(
    service_in, monkeypatch
):
    """JSON Lines and CSV (one header) of every member, root first then by estimate, with
    each exact copy's first id, EXPORT_CHUNK members a chunk; a member deleted after the rows
    were read keeps its row with no text."""
    monkeypatch.setattr(exports, "EXPORT_CHUNK", 2)

    async def run():
        async with service_in() as service:
            await service.register([NewDoc("r", MEMBERS["r"], {})])
            await service.register([NewDoc(i, t, {}) for i, t in MEMBERS.items() if i != "r"])
            groups, estimates = await cluster_rows(service, "r")
            jsonl = await cluster_export(service, "r", "jsonl")
            csv_export = await cluster_export(service, "r", "csv")
            jsonl_chunks = [chunk async for chunk in jsonl.body]
            await service.delete("v")
            csv_chunks = [chunk async for chunk in csv_export.body]
            with pytest.raises(ValueError, match=r"^format must be one of jsonl, csv, not 'xml'$"):
                await cluster_export(service, "r", "xml")
            with pytest.raises(NotFound):
                await cluster_export(service, "s", "jsonl")
            return groups, estimates, jsonl, jsonl_chunks, csv_export, csv_chunks

    groups, estimates, jsonl, jsonl_chunks, csv_export, csv_chunks = asyncio.run(run())
    assert groups[0] == ["r"] and estimates[0] == 1.0
    assert sorted(map(sorted, groups)) == [["r"], ["s", "u"], ["t", "v"]]
    expected = [
        {"id": i, "cluster": "r", "estimate": e, "copy_of": None if i == g[0] else g[0],
         "text": MEMBERS[i]}
        for g, e in zip(groups, estimates, strict=True) for i in g
    ]  # fmt: skip
    assert (jsonl.root, jsonl.rows, csv_export.rows) == ("r", 5, 5)
    assert len(jsonl_chunks) == 3 and all(c.count(b"\n") <= 2 for c in jsonl_chunks)
    assert [json.loads(line) for line in b"".join(jsonl_chunks).splitlines()] == expected
    assert len(csv_chunks) == 4 and csv_chunks[0] == b"id,cluster,estimate,copy_of,text\r\n"
    rows = list(csv.DictReader(io.StringIO(b"".join(csv_chunks).decode("utf-8"), newline="")))
    deleted = [
        {**r, "estimate": str(r["estimate"]), "copy_of": r["copy_of"] or ""} for r in expected
    ]
    for r in deleted:
        r["text"] = "" if r["id"] == "v" else r["text"]
    assert rows == deleted


def test_cells_of_booleans_lists_and_objects():
    record = {"id": True, "cluster": False, "estimate": [1, "é"], "copy_of": {"a": "中"}}
    body = encode([record], "csv", MEMBER_COLUMNS, header=False)
    assert body == 'true,false,"[1, ""é""]","{""a"": ""中""}",\r\n'.encode()


def test_json_lines_keep_every_character_as_it_is():
    """UTF-8 text, not ``\\u`` escapes: a reader sees the text."""
    assert encode([{"id": "é中😀"}], "jsonl", MEMBER_COLUMNS) == '{"id": "é中😀"}\n'.encode()
