"""The one JSON reader (``neardup.core._json.read_json``): what Python's json fails on with a bare
ValueError or RecursionError (integers past the digit limit, deep nesting) is a JSONError
saying what and where, and every reader of JSON in core and app goes through it."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from neardup.core._formats import parse_json_array, parse_jsonl_line
from neardup.core._json import MAX_JSON_DEPTH, PIECE_CHARS, JSONBudget, read_json, same_json
from neardup.core._protected import parse_protected_set
from neardup.core.engine import ProtectedFormat
from neardup.core.errors import CorpusError, JSONError

ROOT = Path(__file__).resolve().parents[2]
LIMIT = sys.get_int_max_str_digits()


def nested(depth: int) -> str:
    """An object ``{"m": [[...]]}`` whose nesting is ``depth`` levels (the object counts)."""
    return '{"m": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_nesting_is_read_to_max_depth_and_refused_past_it():
    assert read_json(nested(MAX_JSON_DEPTH))["m"] is not None
    for depth in (MAX_JSON_DEPTH + 1, 1_000, 100_000):
        with pytest.raises(JSONError) as caught:
            read_json(nested(depth))
        assert (caught.value.kind, caught.value.reason) == (
            "depth",
            f"the JSON nests deeper than {MAX_JSON_DEPTH} levels",
        )


def test_many_brackets_side_by_side_are_not_depth():
    text = json.dumps({"rows": [{"a": [1]} for _ in range(5 * MAX_JSON_DEPTH)], "s": "[" * 900})
    assert read_json(text) == json.loads(text)


def test_an_integer_is_read_to_the_digit_limit_and_refused_past_it_naming_where():
    assert read_json(f'{{"n": {"9" * LIMIT}}}')["n"] == int("9" * LIMIT)
    with pytest.raises(JSONError) as caught:
        read_json('{"id": "a",\n "n": -' + "7" * 5_001 + "}")
    error = caught.value
    assert (error.kind, error.line, error.column) == ("integer", 2, 8)
    assert error.reason == (
        f"an integer of 5,001 digits: at most {LIMIT:,} are read; write a longer one as a string"
    )


@pytest.mark.parametrize(
    ("text", "kwargs", "kind", "reason"),
    [
        ('{"a": 1,}', {}, "syntax", "Expecting property name enclosed in double quotes"),
        ('{"a": [NaN]}', {}, "constant",
         "NaN is not JSON (field 'a[0]'): write null, a number or a string instead"),
        ('{"a": 1e999}', {"finite": True}, "range",
         "1e999 is beyond a float's range (field 'a'): write a smaller number, null or a string "
         "instead"),
        ('{"a": 1, "a": 2}', {"unique_keys": True}, "duplicate",
         "duplicate key 'a' in one object"),
    ],
)  # fmt: skip
def test_every_refusal_has_its_kind_and_reason(text, kwargs, kind, reason):
    with pytest.raises(JSONError) as caught:
        read_json(text, **kwargs)
    assert (caught.value.kind, caught.value.reason) == (kind, reason)
    assert isinstance(caught.value, ValueError)


def test_the_lenient_defaults_read_what_json_loads_reads():
    assert read_json('{"a": 1e999, "a": NaN}', constants="null") == {"a": None}
    assert read_json(" [1, 2.5]\n") == [1, 2.5]


BIG = '{"id": "x", "text": "some words", "n": ' + "1" * 5_001 + "}"
DEEP = '{"id": "x", "text": "some words", "n": ' + "[" * 1_000 + "]" * 1_000 + "}"
DEEPER_THAN_MAX = nested(MAX_JSON_DEPTH + 1)


@pytest.mark.parametrize("line", [BIG, DEEP, DEEPER_THAN_MAX], ids=["integer", "deep", "max+1"])
def test_a_corpus_line_is_a_corpus_error_naming_file_and_line(line):
    with pytest.raises(CorpusError) as caught:
        parse_jsonl_line(line, "in.jsonl", 4)
    assert (caught.value.path, caught.value.line) == ("in.jsonl", 4)
    with pytest.raises(CorpusError) as caught:
        parse_json_array(f"[\n{line}\n]", "p.json")
    assert caught.value.path == "p.json"


@pytest.mark.parametrize("fmt", [ProtectedFormat.JSONL, ProtectedFormat.JSON])
@pytest.mark.parametrize("row", [BIG, DEEP])
def test_a_protected_set_is_a_corpus_error(fmt, row):
    body = row if fmt is ProtectedFormat.JSONL else f"[{row}]"
    says = r"^eval(:1)?: (an integer of 5,001 digits|the JSON nests)"
    with pytest.raises(CorpusError, match=says):
        parse_protected_set("eval", body, fmt)


#: Where json.loads may still run, and why it needs no guard.
ALLOWED = {
    "core/_json.py": "the reader itself",
    "app/service/dirlock.py": "the lock file this process family writes",
    "app/spark/kernels.py": "rows line_documents read through read_json first",
    "app/spark/job.py": "rows line_documents read through read_json first",
}


def _json_calls(path: Path) -> list[int]:
    """Lines of ``json.load(s)``, ``orjson`` and ``ujson`` calls, and of their imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("loads", "load"):
            if isinstance(node.value, ast.Name) and node.value.id in ("json", "orjson", "ujson"):
                found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in ("json", "orjson", "ujson"):
            if any(a.name in ("loads", "load") for a in node.names):
                found.append(node.lineno)
        elif isinstance(node, ast.Import) and {a.name for a in node.names} & {"orjson", "ujson"}:
            found.append(node.lineno)
    return found


def test_every_json_reader_in_core_and_app_goes_through_read_json():
    strays = {}
    for package in ("core", "app"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            lines = _json_calls(path)
            if lines and name not in ALLOWED:
                strays[name] = lines
    assert strays == {}, "read JSON with core.engine.read_json (or say why not in ALLOWED)"
    assert all(_json_calls(ROOT / name) for name in ALLOWED)  # no stale entry


# --- JSONBudget: several texts counted together; same_json: == a slice a call ---------------


def test_a_budget_counts_all_the_lines_of_a_set_together():
    lines = "".join(json.dumps({"text": f"item {i}", "n": [1, 2, 3]}) + "\n" for i in range(10))
    # each line holds 6 values: 60 in all
    assert len(parse_protected_set("s", lines, ProtectedFormat.JSONL, budget=JSONBudget(60, 20))
               .grams) == 0  # fmt: skip
    with pytest.raises(JSONError) as over:
        parse_protected_set("s", lines, ProtectedFormat.JSONL, budget=JSONBudget(59, 20))
    assert (over.value.kind, over.value.field) == ("values", "values")
    assert str(over.value) == "the JSON holds more than 59 JSON values"
    with pytest.raises(JSONError) as over:
        parse_protected_set("s", lines, ProtectedFormat.JSONL, budget=JSONBudget(100, 19))
    assert over.value.field == "containers"
    assert str(over.value) == "the JSON holds more than 19 JSON arrays and objects"


def test_a_budget_stops_a_long_text_as_it_reads_it():
    """A text longer than a piece is read with what is left as its limit."""
    text = json.dumps([{"n": list(range(20_000))}])
    assert len(text) > PIECE_CHARS
    budget = JSONBudget(50_000, 10)
    budget.read('{"a": [' + ",".join(["1"] * 39_990) + "]}")
    with pytest.raises(JSONError, match="more than 50,000 JSON values") as over:
        parse_json_array(text, "s", budget=budget)
    assert over.value.kind == "values"  # not turned into a CorpusError: the caller words it


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"n": list(range(10_000)), "a": 1}, {"a": 1.0, "n": list(range(10_000))}),
        ({"n": list(range(10_000))}, {"n": [*range(9_999), 0]}),
        ({"n": [*range(5_000), [1, {"x": 2}]]}, {"n": [*range(5_000), [1, {"x": 2}]]}),
        ({"n": [*range(5_000), [1, {"x": 2}]]}, {"n": [*range(5_000), [1, {"x": 3}]]}),
        ({"n": [[1]] * 5_000}, {"n": [1] * 5_000}),
        ({"n": [1] * 5_000}, {"n": [[1]] * 5_000}),
        ({"a": [True]}, {"a": [1]}),
        ({"a": []}, {"a": {}}),
        ({"a": 1}, {"b": 1}),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}),
    ],
)
def test_same_json_answers_as_equality_does(a, b):
    assert same_json(a, b) is (a == b)
    assert same_json(b, a) is (b == a)
