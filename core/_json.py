"""The one JSON reader: every JSON text neardup reads (corpus lines, protected files, Parquet
``meta`` stored as text, request bodies, pasted forms) goes through ``read_json``.

Python's ``json`` reads NaN and Infinity, which JSON does not have, and fails on some inputs
with a bare ``ValueError`` (an integer longer than ``sys.get_int_max_str_digits()``, 4,300 digits
by default) or ``RecursionError`` (nesting past the interpreter's stack, a depth that depends on
where it is called). ``read_json`` turns each into a ``JSONError`` (core.errors) saying what and,
when known, where, so every reader answers its usual 422, 400 or one-line exit 2:

- bad syntax (line and column);
- NaN, Infinity, -Infinity: refused naming the field, or read as null (``constants="null"``);
- an integer of more digits than Python reads (write it as a string);
- nesting deeper than ``MAX_JSON_DEPTH`` levels of arrays and objects, wherever it is called;
- with ``finite``: a number beyond a float's range (``1e999``, which Python reads as infinity);
- with ``unique_keys``: an object with a key twice.

It runs the C scanner ``json.loads`` runs without its per-call Python layers (a corpus line is
read at ``json.loads``' speed or better): values and syntax errors are ``json.loads``'.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from neardup.core._json_pieces import (
    PIECE_CHARS,
    DuplicateKey,
    TooDeep,
    TooManyItems,
    TooManyValues,
    UnknownKey,
    count_values,
    read_pieces,
)
from neardup.core.errors import JSONError

__all__ = [
    "MAX_JSON_DEPTH",
    "PIECE_CHARS",
    "JSONBudget",
    "constant_problem",
    "finite_value",
    "json_text",
    "read_json",
    "same_json",
]

#: The deepest nesting of arrays and objects read (a row is an object: depth 1). Far past any
#: real row or protected item, and far below the ~1,000 levels Python's stack allows, so a text
#: is read or refused the same wherever it is read, and anything read can be written back.
MAX_JSON_DEPTH = 512

Constants = Literal["refuse", "null"]
_Scan = Callable[[str, int], tuple[Any, int]]


class _Constant(ValueError):
    """A ``NaN``, ``Infinity`` or ``-Infinity`` token."""


class _OutOfRange(ValueError):
    """A number beyond a float's range (``1e999``)."""


_Duplicate = DuplicateKey


def _refuse_constant(token: str) -> Any:
    raise _Constant(token)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange(text)
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(f"duplicate key {key!r} in one object")
        out[key] = value
    return out


@cache
def _scanner(constants: Constants, finite: bool, unique_keys: bool) -> _Scan:
    """The C scanner (an attribute every JSONDecoder sets on itself) of a decoder built once:
    the hooks are called for their tokens only, so a text without them costs nothing more."""
    decoder = json.JSONDecoder(
        parse_constant=_refuse_constant if constants == "refuse" else lambda _token: None,
        parse_float=_finite_float if finite else None,
        object_pairs_hook=_unique_keys if unique_keys else None,
    )
    scan: _Scan = vars(decoder)["scan_once"]
    return scan


#: json.loads' scanner as is (NaN and Infinity read as floats): ``_loads``, what tests compare.
_PLAIN: _Scan = vars(json.JSONDecoder())["scan_once"]
_SPACE = re.compile(r"[ \t\n\r]*")  # json.decoder.WHITESPACE: what JSON calls space


def _past_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _loads(text: str, scan: _Scan = _PLAIN) -> Any:
    """``json.loads(text)`` for a str through ``scan``: the same value and the same errors."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        value, end = scan(text, _past_space(text, 0))
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    end = _past_space(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def read_json(
    text: str,
    *,
    constants: Constants = "refuse",
    finite: bool = False,
    unique_keys: bool = False,
    max_values: int | None = None,
    max_containers: int | None = None,
    keys: Collection[str] | None = None,
    batches: Mapping[str, int] | None = None,
) -> Any:
    """The JSON value of ``text``; JSONError for anything neardup does not read (see the module
    docstring). A text longer than PIECE_CHARS is read a piece at a time (core._json_pieces:
    no C call holds the GIL for more than a piece, so a thread reading a 64 MB request body
    leaves the event loop free); the value and the errors are the same.

    With ``max_values``: JSONError (kind ``values``) once the text holds more values (every
    number, string, true, false, null, array and object counts one); with ``max_containers``,
    more arrays and objects (each is tracked by the garbage collector, whose full passes over
    millions of them hold the GIL for a second). With ``keys``: JSONError
    (kind ``key``) for a key of the top-level object not among them, before its value is read.
    With ``batches`` (top-level member -> most items): JSONError (kind ``items``, ``field``
    the member) as soon as such a member's array holds more items, the rest unread (a text
    short enough to be read in one piece is read whole first: the caller counts its items).

    >>> read_json('{"id": "a", "n": [1, 2.5, null]}')
    {'id': 'a', 'n': [1, 2.5, None]}
    >>> read_json('{"a": NaN}', constants="null")
    {'a': None}
    >>> read_json('{"a": [1, -Infinity]}')
    Traceback (most recent call last):
    ...
    neardup.core.errors.JSONError: -Infinity is not JSON (field 'a[1]'): write null, a number or a string instead
    """  # noqa: E501
    scan = _scanner(constants, finite, unique_keys)
    limited = max_values is not None or max_containers is not None or keys is not None
    piecewise = len(text) > PIECE_CHARS or limited
    try:
        if piecewise:
            if text.startswith("\ufeff"):
                raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
            return read_pieces(
                text, scan, max_depth=MAX_JSON_DEPTH, unique_keys=unique_keys,
                max_values=max_values, max_containers=max_containers, keys=keys,
                batches=batches,
            )  # fmt: skip
        value = _loads(text, scan)
    except TooManyValues as exc:
        field = "values" if exc.what == "JSON values" else "containers"
        raise JSONError(f"the JSON holds {exc}", "values", field=field) from None
    except TooManyItems as exc:
        raise JSONError(str(exc), "items", field=exc.key) from None
    except UnknownKey as exc:
        raise JSONError(str(exc), "key", field=exc.key) from None
    except TooDeep:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        raise JSONError(exc.msg, "syntax", exc.lineno, exc.colno) from None
    except _Constant as exc:
        path: str | None = getattr(exc, "field", None)
        found = _constant_message(str(exc), path) if path is not None else constant_problem(text)
        raise JSONError(found or f"{exc} is not JSON", "constant") from None
    except _OutOfRange as exc:
        path = getattr(exc, "field", None)
        found = _range_message(str(exc), path) if path is not None else None
        raise JSONError(found or _range_problem(text, str(exc)), "range") from None
    except _Duplicate as exc:
        raise JSONError(str(exc), "duplicate") from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:  # the only other one the scanner raises: an integer too long
        raise _long_integer(text, getattr(exc, "pos", 0)) from None
    if _may_nest_deeper(text) and _depth(value) > MAX_JSON_DEPTH:
        raise _too_deep()
    return value


@dataclass
class JSONBudget:
    """Values and arrays-and-objects that several JSON texts may hold together (the lines of
    an uploaded JSON Lines file, or one JSON array): ``read`` reads one more text with
    ``read_json``, counting it against what the texts before it used. JSONError (kind
    ``values``, ``field`` ``values`` or ``containers``, the message naming the whole limit)
    once they hold more: a text longer than PIECE_CHARS is refused as soon as its count passes
    what is left, a shorter one (at most ~32 Ki values) once read.

    >>> budget = JSONBudget(max_values=5, max_containers=10)
    >>> budget.read('{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> budget.read('{"b": 3}')
    Traceback (most recent call last):
    ...
    neardup.core.errors.JSONError: the JSON holds more than 5 JSON values
    """

    max_values: int
    max_containers: int
    values: int = 0
    containers: int = 0

    def read(self, text: str, *, constants: Constants = "refuse") -> Any:
        """The JSON value of ``text`` (``read_json``'s, with ``constants``), counted."""
        if len(text) > PIECE_CHARS:  # read a piece at a time: stopped as soon as it is over
            left = (self.max_values - self.values, self.max_containers - self.containers)
            try:
                value = read_json(
                    text, constants=constants, max_values=left[0], max_containers=left[1]
                )
            except JSONError as exc:
                if exc.kind == "values":
                    raise self._over(exc.field == "containers") from None
                raise
        else:
            value = read_json(text, constants=constants)
        try:
            values, containers = count_values(value, 0, MAX_JSON_DEPTH)
        except TooDeep:  # read_json refused deeper values already
            raise _too_deep() from None
        self.values += values
        self.containers += containers
        if self.values > self.max_values:
            raise self._over(containers=False)
        if self.containers > self.max_containers:
            raise self._over(containers=True)
        return value

    def fresh(self) -> JSONBudget:
        """A budget of the same limits, nothing used yet."""
        return JSONBudget(self.max_values, self.max_containers)

    def _over(self, containers: bool) -> JSONError:
        if containers:
            what = f"{self.max_containers:,} JSON arrays and objects"
        else:
            what = f"{self.max_values:,} JSON values"
        field = "containers" if containers else "values"
        return JSONError(f"the JSON holds more than {what}", "values", field=field)


def _too_deep() -> JSONError:
    return JSONError(f"the JSON nests deeper than {MAX_JSON_DEPTH} levels", "depth")


def _long_integer(text: str, start: int = 0) -> JSONError:
    limit = sys.get_int_max_str_digits()
    found = re.compile(rf"\d{{{limit + 1},}}").search(text, start)
    line = column = None
    if found is not None:
        line = text.count("\n", 0, found.start()) + 1
        column = found.start() - text.rfind("\n", 0, found.start())
    digits = f"{len(found.group()):,} digits" if found else "too many digits"
    return JSONError(
        f"an integer of {digits}: at most {limit:,} are read; write a longer one as a string",
        "integer", line, column,
    )  # fmt: skip


def _may_nest_deeper(text: str) -> bool:
    """Whether ``text`` has enough brackets to nest past MAX_JSON_DEPTH (each level opens and
    closes: twice as many characters at least); the value is walked only then. About 1 ns a
    character: 3 us of a 1.2 KB line's 12 us."""
    if len(text) <= 2 * MAX_JSON_DEPTH:
        return False
    return text.count("[") + text.count("{") > MAX_JSON_DEPTH


def _depth(value: Any) -> int:
    """The nesting depth of a parsed value (0 for a scalar), walked without recursion; stops
    once past MAX_JSON_DEPTH."""
    if not isinstance(value, dict | list):
        return 0
    deepest = 0
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
        todo.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return deepest


def _path_of(value: Any, hit: Callable[[Any], bool], where: str) -> str | None:
    """The field path of the first part of ``value`` (depth first, in order) that ``hit``."""
    if hit(value):
        return where
    if isinstance(value, dict):
        for key, item in value.items():
            found = _path_of(item, hit, f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _path_of(item, hit, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def finite_value(value: Any) -> str | None:
    """Where the first NaN or infinite float of a parsed JSON value is, as a field path
    (``meta.scores[2]``, ``""`` for the value itself), or None if it holds none.

    >>> finite_value({"id": "a", "meta": {"scores": [0.5, float("nan")]}})
    'meta.scores[1]'
    """
    try:
        return _path_of(value, _non_finite, "")
    except RecursionError:
        return "(nested too deeply to say)"


_MARK = object()


def constant_problem(text: str) -> str | None:
    """Why the JSON text ``text`` is refused for a NaN, Infinity or -Infinity (tokens Python's
    json reads and JSON does not have), naming the field; None if it holds none.

    >>> constant_problem('{"id": "a", "meta": {"score": NaN}}')
    "NaN is not JSON (field 'meta.score'): write null, a number or a string instead"
    """
    tokens: list[str] = []

    def mark(token: str) -> object:
        tokens.append(token)
        return _MARK

    try:
        value = json.loads(text, parse_constant=mark)
        field = _path_of(value, lambda v: v is _MARK, "")
    except (ValueError, RecursionError):
        return None
    if not tokens:
        return None
    return _constant_message(tokens[0], field)


def _constant_message(token: str, field: str | None) -> str:
    return (
        f"{token} is not JSON (field {field or '(top level)'!r}): write null, a number or a "
        "string instead"
    )


def _range_message(token: str, field: str | None) -> str:
    return (
        f"{token} is beyond a float's range (field {field or '(top level)'!r}): write a "
        "smaller number, null or a string instead"
    )


def _range_problem(text: str, token: str) -> str:
    """What a text with ``token``, a number beyond a float's range, is told, naming the field
    (a NaN or Infinity it also holds is named first)."""
    found = constant_problem(text)
    if found is not None:
        return found
    try:
        field = finite_value(json.loads(text))
    except (ValueError, RecursionError):
        field = None
    return _range_message(token, field)


#: The most items of one array that ``json_text`` encodes in one call.
_TEXT_ITEMS = 4096


def json_text(value: Any) -> str:
    """``json.dumps(value)``'s text, but no call encodes more than ``_TEXT_ITEMS`` items of one
    array (a 13 M-number ``meta`` in one call holds the GIL for a second, thread or not).

    >>> json_text({"n": list(range(5000))}) == json.dumps({"n": list(range(5000))})
    True
    """
    if not isinstance(value, list | dict):
        return json.dumps(value)
    children = value.values() if isinstance(value, dict) else value
    kinds = set(map(type, children))
    nested = list in kinds or dict in kinds
    if not nested and len(value) <= _TEXT_ITEMS:
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {json_text(v)}" for k, v in value.items()) + "}"
    if nested:
        return "[" + ", ".join(map(json_text, value)) + "]"
    slices = (
        json.dumps(value[i : i + _TEXT_ITEMS])[1:-1] for i in range(0, len(value), _TEXT_ITEMS)
    )
    return "[" + ", ".join(slices) + "]"


def same_json(a: Any, b: Any) -> bool:
    """``a == b`` for parsed JSON values, but no call compares more than ``_TEXT_ITEMS`` items
    of one array (``==`` over a 13 M-number ``meta`` is one C call: 0.1 s holding the GIL,
    thread or not). The same answer as ``==`` (items that are the same object are equal, as
    ``==`` takes them; dicts in any order; ``1 == 1.0``).

    >>> same_json({"n": list(range(9000)), "a": 1}, {"a": 1.0, "n": list(range(9000))})
    True
    >>> same_json({"n": [*range(9000), [1]]}, {"n": [*range(9000), [2]]})
    False
    """
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, list | dict):
        return bool(a == b)
    if len(a) != len(b):
        return False
    if isinstance(a, dict):
        return all(key in b and same_json(value, b[key]) for key, value in a.items())
    for start in range(0, len(a), _TEXT_ITEMS):
        left, right = a[start : start + _TEXT_ITEMS], b[start : start + _TEXT_ITEMS]
        kinds = set(map(type, left))  # scalars on the left: ``!=`` is quick whatever the right
        if list in kinds or dict in kinds:
            if not all(map(same_json, left, right)):
                return False
        elif left != right:
            return False
    return True
