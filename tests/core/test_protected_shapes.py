"""Protected files as eval owners send them (issue 33): a CSV's delimiter sniffed; Parquet bytes
stored as the JSON Lines of its rows; a text sent as one plain text that is plainly items;
a set that protects nothing says why (issue 32)."""

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.core._protected import csv_delimiter
from neardup.core.engine import (
    CorpusError,
    ProtectedFormat,
    parquet_as_jsonl,
    parse_protected_set,
    plain_text_shape,
    read_protected_set,
)

QUESTION = "which statement about the river crossing near old mill number {i} is true"


@pytest.mark.parametrize(
    ("body", "delimiter"),
    [
        ("question;answer\nWhat is 2, 3?;A\n", ";"),
        ("question,A,B,C,D,answer\n", ","),
        ("id\tquestion\n", "\t"),
        ("id|question\n", "|"),
        ("question\nsome, words\n", ","),  # one column: a comma
        ('"What, is; it?",A,B\n', ","),
        ("Paris is nice; London too\nBerlin is big\n", ","),  # prose: no delimiter alike
        ("a:b\nc:d\n", ","),  # not one of the four
    ],
)
def test_csv_delimiter_is_sniffed_among_four(body, delimiter):
    assert csv_delimiter(body) == delimiter


def test_a_semicolon_csv_is_read_as_its_columns():
    body = "id;question\n" + "".join(f"q{i};{QUESTION.format(i=i)}\n" for i in range(5))
    parsed = parse_protected_set("s", body, ProtectedFormat.CSV)
    assert parsed.items == 5
    assert parsed.hits(QUESTION.format(i=3)) == [("q3", QUESTION.format(i=3))]


@pytest.mark.parametrize(
    ("body", "fmt", "why"),
    [
        ("{}", ProtectedFormat.CSV, "its 1 item(s) hold no text"),
        ('{"id": "a", "tags": ["x y"]}\n', ProtectedFormat.JSONL, "hold no text"),
        ('{"q": ""}\n', ProtectedFormat.JSONL, "hold no text"),
        ('{"q": "five words are here now"}\n{"q": "six"}\n', ProtectedFormat.JSONL,
         "every text of its 2 item(s) is under 13 words (the longest has 5)"),
    ],
)  # fmt: skip
def test_a_set_that_protects_nothing_says_why(body, fmt, why):
    parsed = parse_protected_set("s", body, fmt)
    assert parsed.ngrams == 0 and why in (parsed.why_empty() or "")


def test_a_set_that_protects_something_has_no_why():
    assert parse_protected_set("s", QUESTION.format(i=1), ProtectedFormat.TEXT).why_empty() is None
    thai = parse_protected_set("s", "ก" * 30, ProtectedFormat.TEXT, tokenizer="multilingual")
    assert "under 13 English words' worth of text (the longest has 30 words)" in (
        thai.why_empty() or ""
    )
    assert "weighted-3" in (thai.why_empty() or "")


def _parquet(rows):
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


def test_parquet_bytes_are_stored_as_the_json_lines_the_cli_would_protect(tmp_path):
    rows = [{"id": f"q{i}", "question": QUESTION.format(i=i), "score": float("nan") if i else 0.5,
             "raw": b"\x00\xff", "tags": ["a"]} for i in range(4)]  # fmt: skip
    raw = _parquet(rows)
    (tmp_path / "s.parquet").write_bytes(raw)
    text = parquet_as_jsonl("s", raw)
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0] == {"id": "q0", "question": QUESTION.format(i=0), "score": 0.5, "raw": None,
                        "tags": ["a"]}  # fmt: skip
    assert lines[1]["score"] is None
    stored = parse_protected_set("s", text, ProtectedFormat.JSONL)
    cli = read_protected_set(tmp_path / "s.parquet", name="s")
    assert stored.grams == cli.grams and stored.items == cli.items == 4


def test_bytes_that_are_not_parquet_are_a_corpus_error():
    with pytest.raises(CorpusError, match="cannot read as Parquet"):
        parquet_as_jsonl("s", b"PAR1 nope")


JSONL = "".join(json.dumps({"id": f"q{i}", "q": QUESTION.format(i=i)}) + "\n" for i in range(20))


@pytest.mark.parametrize(
    ("body", "kind", "items"),
    [
        (JSONL, "JSON Lines", 20),
        ("\n\n" + JSONL, "JSON Lines", 20),
        ('{"q": "one object"}', "JSON Lines", 1),
        (json.dumps([{"q": "a"}, {"q": "b"}]), "a JSON array", 2),
        ("question,answer\nWhat is it?,This\nAnd that?,That\n", "CSV", 2),
        ("question;answer\nWhat is it?;This\n", "CSV", 1),
        ('"Is q one true?",a,b,c,d\n"Is q two?",a,b,c,d\n', "CSV", 2),  # MMLU: no header, 5 wide
    ],
)
def test_a_plain_text_that_is_plainly_items_says_what_it_is(body, kind, items):
    shape = plain_text_shape("s", body)
    assert shape is not None and (shape.kind, shape.items) == (kind, items)


@pytest.mark.parametrize(
    "body",
    [
        "It began when Tom found a shell, by the river.",
        "Hello, world.\nAnother, line.\n",  # two cells a row, no header: prose
        "one, two, three\nfour, five, six\n",  # three cells, no header
        "[Verse 1] la la la",
        "[1, 2, 3]",  # an array, but not of objects
        "{not json} at all",
        "question,answer\n",  # a header alone
        "a,b\nc\n",  # rows unlike
    ],
)
def test_a_plain_text_that_is_not_plainly_items_is_none(body):
    assert plain_text_shape("s", body) is None


def test_plain_json_lines_with_a_bad_line_names_it():
    with pytest.raises(CorpusError, match=r"^s:21: not valid JSON"):
        plain_text_shape("s", JSONL + "oops\n")
