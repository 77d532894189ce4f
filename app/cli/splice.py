"""Pass 2's fast path: a row written by splicing its input line instead of parsing it again.

The output of a row is ``json.dumps`` of the row with ``meta.minhash_cluster`` added (and, for
``--removed`` and ``--keep-duplicates``, the ``neardup`` reason appended). ``json.dumps`` of an
object is its members' texts joined by ``", "`` in key order, so when a line is exactly
``json.dumps`` of what it parses to (``classify`` checks that in pass 1, where the row is parsed
anyway), the output is that line with the new text spliced in at a place known from the row's
shape: byte for byte what the general path writes. Any other line (other separators or spacing,
repeated keys, ``1.50``, ``\\/``, non-ASCII characters unescaped, ``meta`` not the last key, ...)
is parsed in pass 2 and takes the general path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _json_encoder
from json.encoder import encode_basestring_ascii
from typing import Any

from neardup.core.engine import CLUSTER_KEY, Record

__all__ = [
    "GENERAL",
    "META_ABSENT",
    "META_LAST",
    "META_NULL",
    "SKIP",
    "classify",
    "tagged_line",
    "with_reason_line",
]

#: Shapes of a line (one byte per row in pass 1). GENERAL: parse it in pass 2. SKIP: a dropped
#: row may be skipped unparsed (it has no ``neardup`` field a reason would be appended to), but
#: the line is not ``json.dumps`` of its row. The META_* shapes are spliceable: no ``meta``;
#: ``meta`` the last key, an object without ``minhash_cluster``; ``meta`` the last key, null.
GENERAL, SKIP, META_ABSENT, META_LAST, META_NULL = 0, 1, 2, 3, 4
_CLUSTER = json.dumps(CLUSTER_KEY)


def _dumps_function() -> Callable[[Any], str]:
    """``json.dumps`` with its defaults, without building an encoder on every call: the C
    encoder ``json.dumps`` itself uses, built once (no circular-reference check: rows parsed
    from JSON hold no cycles), else ``json.dumps``."""
    make = getattr(_json_encoder, "c_make_encoder", None)
    if make is None:
        return json.dumps
    encode = make(
        None, json.JSONEncoder().default, encode_basestring_ascii, None, ": ", ", ",
        False, False, True,
    )  # fmt: skip
    return lambda value: "".join(encode(value, 0))


_dumps = _dumps_function()


def classify(record: Record, reason_key: str) -> int:
    """The shape of a JSON Lines record read in pass 1 (GENERAL for a Parquet one)."""
    row, raw = record.row, record.raw
    if raw is None or reason_key in row:
        return GENERAL
    if _dumps(row) != raw[: _end(raw)]:
        return SKIP
    if "meta" not in row:
        return META_ABSENT
    if next(reversed(row)) != "meta":
        return SKIP
    meta = row["meta"]
    if meta is None:
        return META_NULL
    if isinstance(meta, dict) and CLUSTER_KEY not in meta:
        return META_LAST
    return SKIP


def _end(raw: str) -> int:
    """Where the JSON text of a line ends (before its newline, if it has one)."""
    return len(raw) - 1 if raw.endswith("\n") else len(raw)


def tagged_line(raw: str, shape: int, root: str) -> str:
    """The JSON text of the row on line ``raw`` with ``meta.minhash_cluster = root``; ``shape``
    one of the META_* shapes ``classify`` gave the line."""
    end = _end(raw)
    tag = f"{_CLUSTER}: {encode_basestring_ascii(root)}"
    if shape == META_ABSENT:  # {..., "meta": {"minhash_cluster": root}}
        return f'{raw[: end - 1]}, "meta": {{{tag}}}}}'
    if shape == META_LAST:  # ends with the meta object's "}" and the row's "}"
        glue = "" if raw.startswith("{}}", end - 3) else ", "
        return f"{raw[: end - 2]}{glue}{tag}}}}}"
    if shape == META_NULL:  # ends with "null}"
        return f"{raw[: end - 5]}{{{tag}}}}}"
    raise ValueError(f"shape {shape} is not spliceable")


def with_reason_line(line: str, key: str, reason: dict[str, Any]) -> str:
    """The JSON text ``line`` (of an object without ``key``; its newline, if any, dropped)
    with ``key: reason`` appended."""
    return f"{line[: _end(line) - 1]}, {json.dumps(key)}: {json.dumps(reason)}}}"
