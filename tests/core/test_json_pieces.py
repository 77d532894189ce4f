"""A long JSON text is read a piece at a time (``core._json_pieces``): the same values and
errors as one scan of the whole text, but no scanner call reads more than a piece (so a thread
reading a 64 MB request body leaves the GIL, and the event loop, free between pieces); values
and containers counted; an unknown top-level key refused before its value is read."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from neardup.core import _json
from neardup.core._json import MAX_JSON_DEPTH, PIECE_CHARS, json_text, read_json
from neardup.core._json_pieces import read_pieces
from neardup.core.errors import JSONError

#: Tokens spliced into valid JSON to make it invalid (or not): each kind of error.
BREAKS = ["", ",", "]", "}", "x", " ", "NaN", "1e999", '"', ":", "[", "{", "-", "01", "\\"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.4:
        return rng.choice([0, 1.5, -3, "a,b]", 'x"}', True, None, "", 10**5, [], {}, 1e300])
    if roll < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 6))]
    return {f"k{rng.randint(0, 9)}": _value(rng, depth + 1) for _ in range(rng.randint(0, 6))}


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        text = json.dumps(_value(rng), indent=rng.choice([None, 1]))
        if rng.random() < 0.6:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(BREAKS) + text[at + rng.randint(0, 2) :]
        out.append(text)
    return out


def _outcome(read: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return "value", json.dumps(read(*args, **kwargs))
    except json.JSONDecodeError as exc:
        return "syntax", str(exc)
    except (ValueError, RecursionError) as exc:
        return "refused", type(exc).__name__


@pytest.mark.parametrize("unique", [False, True], ids=["plain", "strict"])
def test_read_pieces_gives_the_value_and_syntax_errors_of_one_scan(unique: bool):
    """Windows of 1 to 40 characters cut every value, string and number somewhere."""
    scan = _json._scanner("refuse", unique, unique)
    for text in _texts(7, 1500):
        whole = _outcome(_json._loads, text, scan)
        for piece in (1, 3, 8, 40):
            got = _outcome(
                read_pieces, text, scan, max_depth=MAX_JSON_DEPTH, unique_keys=unique, piece=piece
            )
            if whole[0] == "refused":  # NaN, 1e999, a key twice: refused, then named below
                assert got[0] == "refused", (text, piece, got)
            else:
                assert got == whole, (text, piece)


class _Scans:
    """A scanner that records how many characters each of its calls read."""

    def __init__(self) -> None:
        self.scan = _json._scanner("refuse", True, True)
        self.longest = 0

        self.calls = 0

    def __call__(self, text: str, pos: int) -> tuple[Any, int]:
        self.calls += 1
        value, end = self.scan(text, pos)
        self.longest = max(self.longest, end - pos)
        return value, end


@pytest.mark.parametrize(
    "body",
    [
        {"documents": [{"id": f"d{i}", "meta": {"n": list(range(300))}} for i in range(300)]},
        {"texts": ["a"], "junk": [[0]] * 100_000},
        {"documents": [{"id": "x", "meta": {"a": {"b": [1] * 200_000}}}]},
    ],
    ids=["meta", "small-arrays", "one-long-array"],
)
def test_no_scanner_call_reads_more_than_a_piece(
    body: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    text = json.dumps(body)
    scans = _Scans()
    monkeypatch.setattr(_json, "_scanner", lambda *_: scans)
    assert read_json(text, finite=True, unique_keys=True) == body
    assert 0 < scans.longest <= PIECE_CHARS < len(text)


@pytest.mark.parametrize("item", [[0, "x"], [0, "xy"], {"a": 1, "b": 2}, [1, [2, 3]]])
def test_short_items_holding_commas_are_read_a_run_at_a_time(
    item: Any, monkeypatch: pytest.MonkeyPatch
):
    """Whatever the items' length, a window's last comma is not always inside an item: a
    window of ten-character ``[0, "x"]`` items always ended inside one, and each item was then
    read alone (1.8 s for 100,000 items, 20 times a run's cost)."""
    body = {"a": [item] * 100_000}
    scans = _Scans()
    monkeypatch.setattr(_json, "_scanner", lambda *_: scans)
    assert read_json(json.dumps(body)) == body
    # runs of thousands of items, then the window's last (under 64 Ki characters) an item a
    # call: under 5,000 calls; a call an item was over 100,000
    assert scans.calls < 20_000


def test_a_long_string_is_read_in_one_call():
    """A string is a tight C loop however long: read as one value."""
    text = json.dumps({"text": "w " * 100_000})
    assert read_json(text) == json.loads(text)


def _long(inner: str) -> str:
    """A text longer than a piece whose fourth document holds ``inner`` as its score."""
    docs = [f'{{"id": "d{i}", "meta": {{"pad": "{"p" * 30_000}", "score": 1}}}}' for i in range(6)]
    docs[3] = docs[3].replace('"score": 1', f'"score": {inner}')
    text = '{"documents": [' + ", ".join(docs) + "]}"
    assert len(text) > PIECE_CHARS
    return text


def test_a_long_text_names_the_field_of_a_nan_or_a_number_out_of_range():
    with pytest.raises(JSONError) as caught:
        read_json(_long("NaN"))
    assert caught.value.kind == "constant"
    assert "NaN is not JSON (field 'documents[3].meta.score')" in caught.value.reason
    with pytest.raises(JSONError) as caught:
        read_json(_long("1e999"), finite=True)
    assert caught.value.kind == "range"
    field = "(field 'documents[3].meta.score')"
    assert f"1e999 is beyond a float's range {field}" in caught.value.reason


def test_a_long_text_says_where_an_integer_is_too_long_and_refuses_depth():
    with pytest.raises(JSONError) as caught:
        read_json(_long("1" * 5_000))
    assert caught.value.kind == "integer" and caught.value.line == 1
    assert caught.value.column == _long("1" * 5_000).index("1" * 5_000) + 1
    deep = _long("[" * 600 + "]" * 600)
    with pytest.raises(JSONError) as caught:
        read_json(deep)
    assert caught.value.kind == "depth"
    assert read_json(_long("[" * 500 + "]" * 500))["documents"][3]["meta"]["score"] is not None


def test_a_long_text_with_a_key_twice_is_refused():
    text = _long('1, "score": 2')
    with pytest.raises(JSONError) as caught:
        read_json(text, unique_keys=True)
    assert (caught.value.kind, caught.value.reason) == (
        "duplicate",
        "duplicate key 'score' in one object",
    )


@pytest.mark.parametrize("size", [10, 100_000])
def test_values_and_containers_are_counted_and_capped(size: int):
    """Each number, string, array and object is a value (keys are not); arrays and objects are
    also counted apart. Short texts and long ones are counted alike."""
    text = json.dumps({"a": [[0, "x"]] * size, "b": None})
    values, containers = 2 + 3 * size + 1, 2 + size  # the object, a, the pairs and theirs, b
    assert read_json(text, max_values=values, max_containers=containers) == json.loads(text)
    with pytest.raises(JSONError) as caught:
        read_json(text, max_values=values - 1)
    assert (caught.value.kind, caught.value.field) == ("values", "values")
    with pytest.raises(JSONError) as caught:
        read_json(text, max_containers=containers - 1)
    assert (caught.value.kind, caught.value.field) == ("values", "containers")


def test_an_unknown_top_level_key_is_refused_before_its_value_is_read():
    """Its value is not even valid JSON: it is never read."""
    text = '{"texts": ["a"], "junk": [' + "[0]," * 100_000 + "}"
    with pytest.raises(JSONError) as caught:
        read_json(text, keys={"texts"})
    assert (caught.value.kind, caught.value.field) == ("key", "junk")
    assert read_json('{"texts": ["a"]}', keys={"texts"}) == {"texts": ["a"]}
    with pytest.raises(JSONError) as caught:  # a short text too
        read_json('{"texts": ["a"], "junk": [}', keys={"texts"})
    assert (caught.value.kind, caught.value.field) == ("key", "junk")
    assert read_json('{"a": {"junk": 1}}', keys={"a"}) == {"a": {"junk": 1}}  # top level only


def test_a_batch_past_its_items_is_refused_at_the_first_item_over_the_rest_unread():
    """A 60 MB body of 2M documents was read whole (19 s) before its batch was counted."""
    items = '{"id": "d", "text": "a b"},' * 50_000
    text = '{"documents": [' + items + ' {"id": "e", "text": "c"}, ]}'  # broken past the items
    with pytest.raises(JSONError) as caught:
        read_json(text, keys={"documents"}, batches={"documents": 50_000})
    assert (caught.value.kind, caught.value.field) == ("items", "documents")
    whole = '{"documents": [' + items.rstrip(",") + '], "other": [' + "1," * 60_000 + "1]}"
    value = read_json(whole, keys={"documents", "other"}, batches={"documents": 50_000})
    assert len(value["documents"]) == 50_000 and len(value["other"]) == 60_001  # not a batch
    nested = '{"a": {"documents": [' + "1," * 60_000 + "1]}}"
    assert len(read_json(nested, batches={"documents": 10})["a"]["documents"]) == 60_001


def test_json_text_writes_what_json_dumps_writes():
    """Long arrays are encoded a slice at a time (nested ones too), to the same text."""
    values = [
        {"n": list(range(10_000)), "m": [{"a": [1.5] * 5_000}, "x", None], "s": 'é"\n'},
        [[0]] * 5_000,
        list(range(4_097)),
        {"k": float("nan"), "e": [], "o": {}},
        "text",
    ]
    for value in values:
        assert json_text(value) == json.dumps(value)
