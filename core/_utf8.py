"""Where a file stops being UTF-8: the line and byte of the first bad byte, for the error.

Text readers decode a block at a time, so their ``UnicodeDecodeError`` says what is wrong but
not on which line; the reader then reads the file again (``reread_utf8_error``, an error path
only) to name the line as every other corpus error does.
"""

from __future__ import annotations

from collections.abc import Callable
from io import TextIOWrapper
from typing import IO, cast

from neardup.core._formats import text_reader
from neardup.core.errors import CorpusError

__all__ = ["first_bad_utf8", "reread_utf8_error", "utf8_error"]

_BLOCK = 1 << 16


def first_bad_utf8(binary: IO[bytes]) -> tuple[int, int, int, str] | None:
    """``(line, byte in the line, byte in the stream, reason)`` of the first byte of ``binary``
    that is not UTF-8 (lines counted as a text reader counts them: ``\\n``, ``\\r\\n`` and
    ``\\r`` end one; both bytes from 0), or None when all of it is UTF-8."""
    line, offset, pending = 1, 0, b""
    while True:
        block = binary.read(_BLOCK)
        data = pending + block
        lines = data.splitlines(keepends=True)
        # The last piece may go on in the next block (no line end yet, or a \r before a \n).
        pending = lines.pop() if block and lines and not lines[-1].endswith(b"\n") else b""
        for piece in lines:
            try:
                piece.decode("utf-8")
            except UnicodeDecodeError as exc:
                return line, exc.start, offset + exc.start, exc.reason
            line += 1
            offset += len(piece)
        if not block:
            return None


def utf8_error(name: str, binary: IO[bytes] | None, exc: UnicodeDecodeError) -> CorpusError:
    """The CorpusError for ``exc``, raised reading the file ``name``: its line and bytes when
    ``binary`` (the file's decoded-from bytes, read again from the start) shows them."""
    found = None
    if binary is not None:
        try:
            found = first_bad_utf8(binary)
        except (OSError, EOFError):
            found = None
    if found is None:
        return CorpusError(name, None, f"not UTF-8 ({exc.reason})")
    line, column, offset, reason = found
    return CorpusError(
        name, line, f"not UTF-8 ({reason} at byte {column} of the line, byte {offset} of the file)"
    )


def reread_utf8_error(
    name: str, open_raw: Callable[[], IO[bytes]], fmt: str, exc: UnicodeDecodeError
) -> CorpusError:
    """``utf8_error`` for the file ``name`` of format ``fmt`` (compressed or not), opened again
    with ``open_raw``; without the line if it cannot be read again."""
    try:
        with open_raw() as raw, text_reader(raw, fmt) as text:
            # The decompressed bytes under the text layer.
            return utf8_error(name, cast(IO[bytes], cast(TextIOWrapper, text).buffer), exc)
    except (OSError, EOFError, CorpusError):
        return utf8_error(name, None, exc)
