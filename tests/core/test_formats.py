"""JSON Lines parsing (``neardup.core._formats``): the same values and errors as ``json.loads``."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core._formats import _loads, parse_jsonl_line
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
    with pytest.raises(CorpusError, match="nested too deeply") as caught:
        parse_jsonl_line(line, "deep.jsonl", 7)
    assert (caught.value.path, caught.value.line) == ("deep.jsonl", 7)
