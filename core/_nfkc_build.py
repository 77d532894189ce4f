"""Re-create ``core/_nfkc_data.py``, the shipped normalization data of the ``multilingual``
tokenizer (docs/algorithm.md section 1a), at Unicode ``UNICODE_VERSION``:

    pip install unicodedata2==17.0.0 regex==2026.12.2 && python -m neardup.core._nfkc_build

(both are in the ``test`` extra). ``unicodedata2`` (the standard backport of CPython's
``unicodedata``) gives the combining classes, each code point's full compatibility
decomposition and the primary canonical compositions; ``regex`` (the release that made
``core/_unicode_data.py``) gives full case folding, which ``unicodedata2`` lacks. Run once when
the tables move to another Unicode version (then bump ``TABLE_VERSION`` in ``core._scripts``).
The runtime never imports either: ``core._nfkc`` reads the shipped data. The generator refuses
any other version of its sources, so the same command always writes the same file.
"""

from __future__ import annotations

import base64
import unicodedata
import zlib
from pathlib import Path
from typing import Any

from neardup.core._scripts import TABLE_VERSION
from neardup.core._unicode_build import REGEX_VERSION

__all__ = ["UNICODEDATA2_VERSION", "build", "casefold", "encode", "main", "text"]

#: The ``unicodedata2`` release the data is read from (its number is the Unicode version's).
UNICODEDATA2_VERSION = TABLE_VERSION
#: Nothing at or above decomposes, folds or has a combining class (``build`` checks).
TOP = 0x30000
_HANGUL = range(0xAC00, 0xD7A4)  # decomposed and composed by rule, not by table
#: ``regex`` folds I and İ as a Turkic-neutral matcher needs (to themselves); CaseFolding.txt's
#: full folding (status C and F), which ``str.casefold`` applies, makes them these.
_FOLD_FIXES = {0x49: "i", 0x130: "i\u0307"}


def _unicodedata2() -> Any:
    """``unicodedata2`` at the pinned version (and ``regex`` at its), or a one-line exit."""
    import regex
    import unicodedata2  # type: ignore[import-not-found]

    if unicodedata2.unidata_version != UNICODEDATA2_VERSION:
        raise SystemExit(f"unicodedata2 {UNICODEDATA2_VERSION} is needed (Unicode "
                         f"{TABLE_VERSION}), found {unicodedata2.unidata_version}")  # fmt: skip
    if regex.__version__ != REGEX_VERSION:
        raise SystemExit(f"regex {REGEX_VERSION} is needed, found {regex.__version__}")
    return unicodedata2


def casefold(char: str) -> str:
    """Full case folding of ``char`` at the pinned version (``regex``'s, I and İ fixed)."""
    import regex
    from regex import _regex

    if ord(char) in _FOLD_FIXES:
        return _FOLD_FIXES[ord(char)]
    folded: str = _regex.fold_case(  # type: ignore[attr-defined]
        regex.FULLCASE | regex.IGNORECASE | regex.UNICODE, char
    )
    return folded


def build() -> list[list[list[int]]]:
    """The data in four sections of entries: nonzero combining classes (code point, class);
    full compatibility decompositions (code point, length, the code points); primary canonical
    compositions (first, second, composite); full case foldings (code point, length, the code
    points). Hangul syllables are left to the rule (``core._nfkc``)."""
    ucd = _unicodedata2()
    sections: list[list[list[int]]] = [[], [], [], []]
    classes, decompositions, compositions, folds = sections
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        char = chr(code)
        ccc = ucd.combining(char)
        nfkd = ucd.normalize("NFKD", char)
        folded = casefold(char)
        if code >= TOP and (ccc or nfkd != char or folded != char):
            raise SystemExit(f"U+{code:04X} decomposes, folds or combines: raise TOP")
        # Case folding never changes for an encoded character: where this Python knows the
        # character, its str.casefold must agree (else a source is wrong).
        if unicodedata.category(char) != "Cn" and folded != char.casefold():
            raise SystemExit(f"U+{code:04X}: regex folds it to {folded!r}, Python to "
                             f"{char.casefold()!r}")  # fmt: skip
        if ccc:
            classes.append([code, ccc])
        if nfkd != char and code not in _HANGUL:
            decompositions.append([code, len(nfkd), *map(ord, nfkd)])
        parts = ucd.decomposition(char).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            pair = "".join(chr(int(p, 16)) for p in parts)
            if ucd.normalize("NFC", pair) == char:
                compositions.append([*map(ord, pair), code])
        if folded != char:
            folds.append([code, len(folded), *map(ord, folded)])
    return sections


def _varint(value: int, out: bytearray) -> None:
    """Append ``value`` zigzag-encoded (sign in the lowest bit), seven bits a byte."""
    value = value << 1 if value >= 0 else ((-value) << 1) - 1
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode(sections: list[list[list[int]]]) -> str:
    """``sections`` as base64 of zlib of varints: each section's count, then each entry's
    values as differences from a prediction (``core._nfkc._decode`` inverts it): in the
    classes and compositions, the same value of the entry before; in the decompositions and
    foldings, the code point from the one before, the length as it is, and each part from the
    entry before's part moved by as much as the code point (when the lengths agree), else from
    the code point."""
    out = bytearray()
    for number, entries in enumerate(sections):
        _varint(len(entries), out)
        prev = [0, 0, 0]
        for entry in entries:
            if number in (0, 2):
                for value, before in zip(entry, prev, strict=False):
                    _varint(value - before, out)
            else:
                code, length, parts = entry[0], entry[1], entry[2:]
                step = code - prev[0]
                _varint(step, out)
                _varint(length, out)
                same = prev[1] == length
                for i, part in enumerate(parts):
                    _varint(part - (prev[2 + i] + step if same else code), out)
            prev = entry
    return base64.b64encode(zlib.compress(bytes(out), 9)).decode()


def text(data: str) -> str:
    """The source of ``core/_nfkc_data.py`` holding ``data`` (``encode``'s)."""
    lines = [data[i : i + 96] for i in range(0, len(data), 96)]
    body = "\n".join(f'    "{line}"' for line in lines)
    return (
        '"""The normalization data of the multilingual tokenizer, generated by\n'
        '``python -m neardup.core._nfkc_build`` (do not edit): see ``core._nfkc``."""\n\n'
        f'UNICODE_VERSION = "{UNICODEDATA2_VERSION}"\n'
        f"DATA = (\n{body}\n)\n"
    )


def main() -> None:
    """Write ``core/_nfkc_data.py`` next to this module."""
    target = Path(__file__).with_name("_nfkc_data.py")
    target.write_text(text(encode(build())), encoding="utf-8")


if __name__ == "__main__":
    main()
