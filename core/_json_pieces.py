"""Reading a long JSON text a piece at a time, so that no C call holds the GIL for long.

One call of ``json``'s C scanner over a 49 MB request body holds the interpreter lock for 0.75 s,
thread or not: the event loop that serves ``/healthz`` waits that long. ``read_pieces`` reads the
same values with the same scanner, but never scans more than ``piece`` characters in one call
(a string or number longer than that excepted: scanning those is a tight C loop): a value that
fits a window of the text is scanned in one call; a longer array or object is opened here, in
Python, and its items (members) read the same way, one call each, so the lock is released
between them. Whatever is read is counted (``max_values``) and its depth checked as it is read.

Errors are those one scan of the whole text gives, at the same position: a failed scan of a
window is tried again on a wider one, then on the value's items, until it is found where
``json.loads`` finds it; a NaN, a number beyond a float's range or an integer too long to read
is raised where it is scanned alone, with the field path that leads to it (``field``).
"""

from __future__ import annotations

import json.decoder
import re
from collections.abc import Callable, Collection, Mapping
from json import JSONDecodeError
from typing import Any

__all__ = [
    "PIECE_CHARS",
    "DuplicateKey",
    "TooDeep",
    "TooManyItems",
    "TooManyValues",
    "UnknownKey",
    "count_values",
    "read_pieces",
]

#: The most characters one scanner call reads (about 1 ms): a value longer than that is read
#: an item at a time.
PIECE_CHARS = 1 << 16
#: The first window tried; then twice the last value's length (at least this).
_FIRST_WINDOW = 64
#: Arrays whose items are this short or shorter are read a run of items (a window) a call;
#: after a window that did not end on an item (a comma in a string), this many items one by one.
_RUN_ITEM = 256
_SKIP_AFTER_FAILED_RUN = 64
#: Commas tried from a window's end for a run's end (the last ones may be inside an item:
#: a window of ``[0, "x"]`` items ten characters long always ended inside one, and every run
#: failed, 20 µs an item).
_RUN_CUTS = 4
_SPACE = re.compile(r"[ \t\n\r]*")
#: A number scanned in a window may be cut short where the window cuts it ("1.5" as "1."):
#: one followed by any of these is scanned again in a wider window.
_NUMBER_GOES_ON = frozenset("0123456789.eE+-")
Scan = Callable[[str, int], tuple[Any, int]]
Container = list[Any] | dict[str, Any]
#: The C string scanner json's decoder uses (not in typeshed): (text, after the quote, strict).
_scanstring: Callable[[str, int, bool], tuple[str, int]] = vars(json.decoder)["scanstring"]


class DuplicateKey(ValueError):
    """A key twice in one object."""


class TooDeep(ValueError):
    """Nesting past the depth allowed."""


class TooManyValues(ValueError):
    """More values than ``max_values``, or more arrays and objects than ``max_containers``."""

    def __init__(self, limit: int, what: str) -> None:
        super().__init__(f"more than {limit:,} {what}")
        self.limit = limit
        self.what = what


class TooManyItems(ValueError):
    """A top-level member named in ``batches`` holding more items than its limit (told at the
    first item past it, before the rest is read)."""

    def __init__(self, key: str, limit: int) -> None:
        super().__init__(f"more than {limit:,} items in {key!r}")
        self.key = key
        self.limit = limit


class UnknownKey(ValueError):
    """A top-level key not in ``keys``."""

    def __init__(self, key: str) -> None:
        super().__init__(f"unknown field {key!r}")
        self.key = key


def count_values(value: Any, depth: int, max_depth: int) -> tuple[int, int]:
    """How many values ``value`` holds, itself included (keys are not values), and how many of
    them are arrays or objects; TooDeep if it nests past ``max_depth`` levels below ``depth``.
    Walks containers only."""
    if not isinstance(value, list | dict):
        return 1, 0
    values = 1
    containers = 0
    todo: list[tuple[Container, int]] = [(value, depth + 1)]
    while todo:
        item, level = todo.pop()
        if level > max_depth:
            raise TooDeep
        values += len(item)
        containers += 1
        children = item.values() if isinstance(item, dict) else item
        kinds = set(map(type, children))  # at C speed: most containers hold scalars only
        if list in kinds or dict in kinds:
            todo.extend((c, level + 1) for c in children if isinstance(c, list | dict))
    return values, containers


class _Frame:
    """An array or object opened here, and the key of the member being read."""

    __slots__ = ("container", "key")

    def __init__(self, container: Container) -> None:
        self.container = container
        self.key = ""


def read_pieces(
    text: str,
    scan: Scan,
    *,
    max_depth: int,
    unique_keys: bool = False,
    max_values: int | None = None,
    max_containers: int | None = None,
    keys: Collection[str] | None = None,
    batches: Mapping[str, int] | None = None,
    piece: int = PIECE_CHARS,
) -> Any:
    """The JSON value of ``text`` (after a byte order mark check by the caller), read with
    ``scan`` at most ``piece`` characters a call (the module says how).

    Raises JSONDecodeError (as ``json.loads``), TooDeep, TooManyValues (past ``max_values``
    values, or ``max_containers`` arrays and objects: each costs the garbage collector),
    UnknownKey (a key of the top-level object not in ``keys``: refused before its value is
    read), TooManyItems (a top-level member named in ``batches`` past its number of items, told
    before the rest is read), DuplicateKey, and whatever ``scan`` raises for one scalar (with
    ``field``, its path).
    """
    limits = (max_values, max_containers)
    reader = _Reader(text, scan, max_depth, unique_keys, limits, keys, piece)
    reader.batches = batches or {}
    return reader.read()


class _Reader:
    def __init__(
        self, text: str, scan: Scan, max_depth: int, unique_keys: bool,
        limits: tuple[int | None, int | None], keys: Collection[str] | None, piece: int,
    ) -> None:  # fmt: skip
        self.text, self.scan, self.max_depth = text, scan, max_depth
        self.unique_keys, self.limits, self.keys = unique_keys, limits, keys
        self.piece, self.window = piece, min(_FIRST_WINDOW, piece)
        self.values = self.containers = 0
        self.stack: list[_Frame] = []
        self.skip_runs = 0
        self.batches: Mapping[str, int] = {}

    def read(self) -> Any:
        text, stack = self.text, self.stack
        pos = _past_space(text, 0)
        # With ``keys``, the top-level object is opened whatever its length: its keys checked.
        first = self.keys is not None and text[pos : pos + 1] == "{"
        while True:
            got = None if first else self._run(pos) or self._value(pos)
            first = False
            if got is None:  # a long array or object: opened, its first item next
                pos = self._open(pos)
                if pos >= 0:
                    continue
                value, pos = stack.pop().container, -pos  # empty
            else:
                value, pos = got
            while True:  # the value read goes to its container; containers that end, to theirs
                if not stack:
                    pos = _past_space(text, pos)
                    if pos != len(text):
                        raise JSONDecodeError("Extra data", text, pos)
                    return value
                frame = stack[-1]
                if isinstance(frame.container, list):
                    frame.container.append(value)
                    if len(stack) == 2 and stack[0].key in self.batches:
                        limit = self.batches[stack[0].key]
                        if len(frame.container) > limit and isinstance(stack[0].container, dict):
                            raise TooManyItems(stack[0].key, limit)
                else:
                    frame.container[frame.key] = value
                pos = _past_space(text, pos)
                char = text[pos : pos + 1]
                if char == ",":
                    pos = _past_space(text, pos + 1)
                    if isinstance(frame.container, dict):
                        pos = self._key(frame, pos)
                    break
                if char != ("]" if isinstance(frame.container, list) else "}"):
                    raise JSONDecodeError("Expecting ',' delimiter", text, pos)
                value, pos = stack.pop().container, pos + 1

    def _open(self, pos: int) -> int:
        """Open the array or object at ``pos``: where its first value starts, or minus the
        position after it if it is empty."""
        text = self.text
        if len(self.stack) >= self.max_depth:
            raise TooDeep
        self._count(1, 1)
        is_list = text[pos] == "["
        frame = _Frame([] if is_list else {})
        self.stack.append(frame)
        pos = _past_space(text, pos + 1)
        if text[pos : pos + 1] == ("]" if is_list else "}"):
            return -(pos + 1)
        return pos if is_list else self._key(frame, pos)

    def _key(self, frame: _Frame, pos: int) -> int:
        """Read the key at ``pos`` of ``frame``'s object and its colon: where its value starts."""
        text = self.text
        if text[pos : pos + 1] != '"':
            raise JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
        key, pos = _scanstring(text, pos + 1, True)
        if self.keys is not None and len(self.stack) == 1 and key not in self.keys:
            raise UnknownKey(key)
        if self.unique_keys and key in frame.container:
            raise DuplicateKey(f"duplicate key {key!r} in one object")
        pos = _past_space(text, pos)
        if text[pos : pos + 1] != ":":
            raise JSONDecodeError("Expecting ':' delimiter", text, pos)
        frame.key = key
        return _past_space(text, pos + 1)

    def _value(self, pos: int) -> tuple[Any, int] | None:
        """The value at ``pos`` and where it ends, scanned in one call of at most ``piece``
        characters; None for an array or object longer than that (to be opened)."""
        text, window = self.text, self.window
        while True:
            if len(text) - pos <= window:  # the rest fits: scanned in place, errors are final
                return self._in_place(pos, container_retry=True)
            chunk = text[pos : pos + window]
            try:
                value, end = self.scan(chunk, 0)
            except (StopIteration, ValueError, RecursionError):
                end = len(chunk)  # cut short by the window, or an error: found on a retry
            if end < len(chunk) and not (chunk[end] in _NUMBER_GOES_ON and _is_number(value)):
                self._note(value, chunk, 0, end)
                self.window = min(max(2 * end, _FIRST_WINDOW), self.piece)
                return value, pos + end
            if window >= self.piece:
                break
            window = min(4 * window, self.piece)
        if text[pos] in "[{":
            return None
        return self._in_place(pos, container_retry=False)  # a long string or number

    def _run(self, pos: int) -> tuple[Any, int] | None:
        """In an array of short items, the items of the next window but the last of them in
        one call (added to the array), and the last with where it ends; None if there is no
        such run (an item of the window's last one cut inside a string or an inner value)."""
        top = self.stack[-1] if self.stack else None
        if top is None or not isinstance(top.container, list) or self.window > _RUN_ITEM:
            return None
        if self.skip_runs:
            self.skip_runs -= 1
            return None
        chunk = self.text[pos : pos + self.piece]
        if len(chunk) < self.piece:
            return None
        cut, items = len(chunk), None
        for _ in range(_RUN_CUTS):  # the last comma may be inside an item: the ones before it
            cut = chunk.rfind(",", 0, cut)
            if cut <= 0:
                break
            run = "[" + chunk[:cut] + "]"
            try:
                items, end = self.scan(run, 0)
            except (StopIteration, ValueError, RecursionError):
                continue
            if end == len(run) and items:
                break
            items = None
        if not items:
            self.skip_runs = _SKIP_AFTER_FAILED_RUN
            return None
        brackets = run.count("[") + run.count("{")
        depth = len(self.stack)
        if brackets == 1:
            self._count(len(items), 0)
        else:
            values, containers = count_values(items, depth - 1, self.max_depth)
            self._count(values - 1, containers - 1)
        top.container.extend(items[:-1])
        return items[-1], pos + cut

    def _in_place(self, pos: int, *, container_retry: bool) -> tuple[Any, int] | None:
        text = self.text
        try:
            value, end = self.scan(text, pos)
        except StopIteration as err:
            raise JSONDecodeError("Expecting value", text, err.value) from None
        except JSONDecodeError:
            raise
        except (ValueError, RecursionError) as exc:
            if container_retry and text[pos] in "[{":
                return None  # opened, to find the value at fault and say where it is
            exc.field = self._path()  # type: ignore[union-attr]
            exc.pos = pos  # type: ignore[union-attr]
            raise
        self._note(value, text, pos, end)
        return value, end

    def _note(self, value: Any, text: str, start: int, end: int) -> None:
        """Count the values of ``value`` (``text[start:end]``) and check its depth."""
        depth = len(self.stack)
        brackets = text.count("[", start, end) + text.count("{", start, end)
        if brackets == 0 or not isinstance(value, list | dict):
            self._count(1, 0)
        elif brackets == 1:  # the value's own: its items are scalars
            if depth + 1 > self.max_depth:
                raise TooDeep
            self._count(1 + len(value), 1)
        else:
            self._count(*count_values(value, depth, self.max_depth))

    def _count(self, values: int, containers: int) -> None:
        self.values += values
        self.containers += containers
        max_values, max_containers = self.limits
        if max_values is not None and self.values > max_values:
            raise TooManyValues(max_values, "JSON values")
        if max_containers is not None and self.containers > max_containers:
            raise TooManyValues(max_containers, "JSON arrays and objects")

    def _path(self) -> str:
        """The field path of the value being read (``documents[3].meta.score``)."""
        path = ""
        for frame in self.stack:
            if isinstance(frame.container, list):
                path += f"[{len(frame.container)}]"
            else:
                path += f".{frame.key}" if path else frame.key
        return path


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _past_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos
