"""JSON Lines parsing (``neardup.core._formats``): the same values and errors as ``json.loads``."""

import datetime as dt
import decimal
import io
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core._formats import (
    corpus_format,
    json_default,
    jsonl_items,
    parse_json_array,
    parse_jsonl_line,
    protected_format,
    text_reader,
    text_writer,
)
from neardup.core._json import _loads, constant_problem, finite_value
from neardup.core.errors import CorpusError

FRAGMENTS = [
    "{",
    "}",
    "[",
    "]",
    '"a"',
    '"\\u00e9"',
    '"\\ud800"',
    ":",
    ",",
    " ",
    "\t",
    "\n",
    "\r",
    "1",
    "-0",
    "1.5e3",
    "true",
    "null",
    "NaN",
    "x",
    "\ufeff",
    '"é"',
    "\\",
]


def outcome(parse, text):
    try:
        return "ok", json.dumps(parse(text))
    except json.JSONDecodeError as exc:
        return "error", exc.msg, exc.pos


@settings(max_examples=500)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join))
def test_loads_is_json_loads(text):
    assert outcome(_loads, text) == outcome(json.loads, text)


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3))
def test_loads_is_json_loads_on_objects(row):
    line = json.dumps(row) + "\n"
    assert _loads(line) == json.loads(line) == row


@pytest.mark.parametrize(
    ("line", "ok"),
    [
        ('{"t": "\\ud800"}', False),
        ('{"t": "\\uDC00x"}', False),
        ('{"\\udbff": 1}', False),  # in a key too
        ('{"t": "\\ud83d\\ude00"}', True),  # a pair is one character
        ('{"t": "\\\\ud800"}', True),  # an escaped backslash, then text
        ('{"t": "caf\\u00e9 \\\\ \\""}', True),
    ],
)
def test_a_lone_surrogate_escape_is_refused(line, ok):
    if ok:
        assert parse_jsonl_line(line, "f.jsonl", 3) == json.loads(line)
    else:
        with pytest.raises(CorpusError, match="lone surrogate"):
            parse_jsonl_line(line, "f.jsonl", 3)


def test_json_nested_deeper_than_python_parses_is_a_corpus_error_naming_the_line():
    line = '{"id": "a", "text": "x", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(CorpusError, match="nests deeper than 512 levels") as caught:
        parse_jsonl_line(line, "deep.jsonl", 7)
    assert (caught.value.path, caught.value.line) == ("deep.jsonl", 7)


INPUTS = ".jsonl, .jsonl.gz, .jsonl.zst, .parquet, .ndjson, .ndjson.gz, .ndjson.zst, .json, "
INPUTS += ".json.gz, .json.zst"


@pytest.mark.parametrize(
    ("name", "read", "written"),
    [
        ("a.jsonl", ".jsonl", ".jsonl"),
        ("A.JSONL.GZ", ".jsonl.gz", ".jsonl.gz"),
        ("a.jsonl.zst", ".jsonl.zst", ".jsonl.zst"),
        ("a.parquet", ".parquet", ".parquet"),
        ("a.ndjson", ".jsonl", None),
        ("a.NDJSON.zst", ".jsonl.zst", None),
        ("c4.json.gz", ".jsonl.gz", None),
        ("a.json", ".jsonl", None),
        ("a.csv", None, None),
        ("jsonl", None, None),
    ],
)
def test_a_corpus_format_follows_the_name_and_an_unknown_one_lists_the_known(name, read, written):
    for output, fmt in ((False, read), (True, written)):
        if fmt is not None:
            assert corpus_format(Path("d") / name, output=output) == fmt
            continue
        with pytest.raises(CorpusError) as caught:
            corpus_format(Path("d") / name, output=output)
        error = caught.value
        assert (error.path, error.line) == (f"d/{name}", None)
        assert error.reason == (
            "unknown output format; write one of .jsonl, .jsonl.gz, .jsonl.zst, .parquet"
            if output
            else f"unknown corpus format; inputs are one of {INPUTS}"
        )


def line_error(line, **kwargs):
    with pytest.raises(CorpusError) as caught:
        parse_jsonl_line(line, "f.jsonl", 3, **kwargs)
    assert (caught.value.path, caught.value.line) == ("f.jsonl", 3)
    return caught.value.reason


def test_bad_lines_are_refused_with_exact_reasons():
    hint = (
        "; JSON Lines holds one object per line: if the file is one JSON array, convert it, "
        "e.g. jq -c '.[]' FILE.json > FILE.jsonl"
    )
    assert line_error("{") == "not valid JSON (Expecting property name enclosed in double quotes)"
    assert line_error('"a"') == "expected a JSON object, got str"
    assert line_error(' [{"id": 1},') == f"not valid JSON (Expecting value){hint}"
    assert line_error('[{"id": 1}]') == f"expected a JSON object, got list{hint}"
    assert line_error('{"t": "\\ud800"}') == "a string holds a lone surrogate (\\ud800-\\udfff)"
    deep = '{"m": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert line_error(deep) == "the JSON nests deeper than 512 levels"
    # NaN and the infinities: refused by default, naming the field; a line that is bad after
    # one still names the token.
    assert line_error('{"a": [1, -Infinity]}') == (
        "-Infinity is not JSON (field 'a[1]'): write null, a number or a string instead"
    )
    assert line_error('{"a": NaN,') == "NaN is not JSON"


def test_nan_as_null_reads_the_constants_as_null_wherever_it_is_passed():
    line = '{"a": NaN, "b": [Infinity, 1.5]}'
    assert parse_jsonl_line(line, "f.jsonl", 1, nan_as_null=True) == {"a": None, "b": [None, 1.5]}
    lines = ["", line, '{"c": -Infinity}']
    assert list(jsonl_items(lines, "f.jsonl", nan_as_null=True)) == [
        (2, {"a": None, "b": [None, 1.5]}), (3, {"c": None})]  # fmt: skip
    with pytest.raises(CorpusError, match=r"^f\.jsonl:2: NaN is not JSON \(field 'a'\)"):
        list(jsonl_items(lines, "f.jsonl"))
    array = '[{"a": NaN}, {"b": Infinity}]'
    assert parse_json_array(array, "p.json", nan_as_null=True) == [
        (1, {"a": None}),
        (2, {"b": None}),
    ]
    with pytest.raises(CorpusError) as caught:
        parse_json_array(array, "p.json")
    assert str(caught.value) == (
        "p.json: NaN is not JSON (field '[0].a'): write null, a number or a string instead"
    )
    with pytest.raises(CorpusError) as caught:
        parse_json_array('[{"b": Infinity}, ]', "p.json")
    assert str(caught.value) == "p.json: Infinity is not JSON"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ('{"a": 1}', None, "expected a JSON array, got dict"),
        ('[{"a": 1}, 2]', None, "element 2 of the array is not an object (a int)"),
        ('[{"a": 1},\n {"b": [1}]', 2, "not valid JSON (Expecting ',' delimiter)"),
        ('[{"a": "\\n"}, {"b": "\\udc00"}]', None,
         "element 2 of the array holds a lone surrogate (\\ud800-\\udfff)"),
    ],
)  # fmt: skip
def test_bad_json_arrays_are_refused_with_exact_reasons(text, line, reason):
    with pytest.raises(CorpusError) as caught:
        parse_json_array(text, "p.json")
    assert (caught.value.path, caught.value.line, caught.value.reason) == ("p.json", line, reason)


def test_a_json_array_gives_its_objects_numbered_from_one():
    text = '[{"a": "\\n"}, {"b": "\\ud83d\\ude00"}]'
    assert parse_json_array(text, "p.json") == [(1, {"a": "\n"}), (2, {"b": "\U0001f600"})]


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"id": "a", "n": 1, "s": "x", "f": 0.5, "z": None}, None),
        (float("nan"), ""),
        ({"a": {"b": [0.5, 1, float("-inf")]}}, "a.b[2]"),
        ([{"x": float("inf")}], "[0].x"),
        ({"1": [[float("nan")]]}, "1[0][0]"),
    ],
)
def test_finite_value_names_the_first_nan_or_infinity(value, where):
    assert finite_value(value) == where


def test_finite_value_of_a_value_nested_too_deeply_says_so():
    value: list = []
    for _ in range(sys.getrecursionlimit() + 10):
        value = [value]
    assert finite_value(value) == "(nested too deeply to say)"


def test_a_constant_at_the_top_level_is_named_so():
    assert constant_problem("NaN") == (
        "NaN is not JSON (field '(top level)'): write null, a number or a string instead"
    )
    assert constant_problem('{"a": 1}') is None
    assert constant_problem("{") is None


@pytest.mark.parametrize(
    ("value", "json_value"),
    [
        (dt.date(2024, 1, 2), "2024-01-02"),
        (dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05"),
        (dt.time(1, 2, 3), "01:02:03"),
        (dt.timedelta(seconds=90, microseconds=5), 90.000005),
        (decimal.Decimal("1.50"), "1.50"),
        (b"\x00\xff", "AP8="),
    ],
)
def test_parquet_values_json_has_no_type_for_are_written_as_strings_or_numbers(value, json_value):
    assert json_default(value) == json_value


def test_a_value_of_no_json_form_is_a_type_error_naming_its_type():
    with pytest.raises(TypeError) as caught:
        json_default({1, 2})
    assert str(caught.value) == "a set cannot be written as JSON"


@pytest.mark.parametrize("fmt", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_text_round_trips_through_each_compression_leaving_the_stream_open(fmt):
    raw = io.BytesIO()
    with text_writer(raw, fmt) as out:
        out.write("caf\u00e9 \u4e2d\n")
    assert not raw.closed
    if fmt == ".jsonl":
        assert raw.getvalue() == "caf\u00e9 \u4e2d\n".encode()
    raw.seek(0)
    with text_reader(raw, fmt) as text:
        assert text.read() == "caf\u00e9 \u4e2d\n"
    assert not raw.closed


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("mmlu.csv.gz", ("csv", ".gz")),
        ("a.PARQUET", ("parquet", "")),
        ("a.jsonl", ("jsonl", "")),
        ("a.ndjson.zst", ("jsonl", ".zst")),
        ("a.json", ("json", "")),
        ("a.TXT.GZ", ("text", ".gz")),
        ("a.parquet.gz", None),
        ("a.gz", None),
        ("a.md", None),
    ],
)
def test_a_protected_file_is_read_by_its_name(name, how):
    assert protected_format(Path(name)) == how
