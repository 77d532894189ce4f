"""Real multilingual text from the translation catalogs installed on this machine.

Every GNU gettext catalog (``.mo``) under ``/usr/share/locale*/LANG/LC_MESSAGES`` (``ROOTS``)
holds the translated messages of a program: each English source (``msgid``) with its
translation (``msgstr``), real sentences in dozens of languages. They are read at run time
(never committed). A language whose locale has no catalog here is reported as not installed
(on Debian and Ubuntu, the ``*-l10n`` and ``language-pack-*`` packages and most programs'
packages ship them); nothing fails.

English (``en``) is the English source of the German catalogs' messages. Every other language
keeps each message's English source beside it, so that a document's length and a quote's length
are counted in English words, the same amount of text in every language, and the same
messages can be measured in English as a baseline.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from neardup.core.engine import ParameterError

__all__ = [
    "LANGUAGES",
    "ROOTS",
    "Message",
    "catalogs",
    "documents",
    "english_words",
    "language_messages",
    "messages",
    "read_mo",
]

#: The languages measured, each with the locale its catalogs are read from (``en``: the
#: English sources of the German catalogs).
LANGUAGES: dict[str, str] = {
    "zh_CN": "zh_CN",
    "zh_TW": "zh_TW",
    "ja": "ja",
    "ko": "ko",
    "th": "th",
    "km": "km",
    "my": "my",
    "lo": "lo",
    "bo": "bo",
    "dz": "dz",
    "hi": "hi",
    "bn": "bn",
    "ta": "ta",
    "si": "si",
    "ar": "ar",
    "he": "he",
    "el": "el",
    "vi": "vi",
    "ru": "ru",
    "de": "de",
    "en": "de",
}
#: Where catalogs are looked for: ``ROOT/LOCALE/LC_MESSAGES/*.mo``.
ROOTS = ("/usr/share/locale", "/usr/share/locale-langpack", "/usr/local/share/locale")


@dataclass(frozen=True)
class Message:
    """One message: its English source and its text in the language measured (the same for
    ``en``), and the catalog it is from."""

    english: str
    text: str
    catalog: str


def read_mo(path: str | Path) -> list[tuple[str, str]]:
    """The (msgid, msgstr) pairs of a GNU ``.mo`` file, plural forms joined by NUL as stored;
    ParameterError if it is not one."""
    data = Path(path).read_bytes()
    if len(data) < 28:
        raise ParameterError(f"{path}: too short for a .mo file")
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if order is None:
        raise ParameterError(f"{path}: not a .mo file (magic {magic:#x})")
    count, originals, translations = struct.unpack(order + "III", data[8:20])
    out = []
    for i in range(count):
        olen, ooff = struct.unpack(order + "II", data[originals + 8 * i : originals + 8 * i + 8])
        tlen, toff = struct.unpack(
            order + "II", data[translations + 8 * i : translations + 8 * i + 8]
        )
        msgid = data[ooff : ooff + olen].decode("utf-8", "replace")
        msgstr = data[toff : toff + tlen].decode("utf-8", "replace")
        out.append((msgid, msgstr))
    return out


def catalogs(locale: str, roots: tuple[str, ...] = ROOTS) -> list[Path]:
    """Every ``.mo`` catalog installed for ``locale``, sorted by name."""
    found: list[Path] = []
    for root in roots:
        found.extend(Path(root, locale, "LC_MESSAGES").glob("*.mo"))
    return sorted(found, key=lambda p: (p.name, str(p)))


def _flat(text: str) -> str:
    return " ".join(text.split("\0")[0].split())


def messages(path: Path, min_chars: int = 8) -> list[tuple[str, str]]:
    """The (English source, translation) pairs of a catalog, in its order: the first plural
    form, whitespace collapsed; the header, unreadable ones and translations shorter than
    ``min_chars`` left out."""
    out = []
    try:
        pairs = read_mo(path)
    except (OSError, ParameterError, struct.error):
        return []
    for msgid, msgstr in pairs:
        if not msgid or not msgstr:
            continue
        english, text = _flat(msgid), _flat(msgstr)
        if len(text) >= min_chars and "\ufffd" not in text + english:
            out.append((english, text))
    return out


def english_words(text: str) -> int:
    """Words of an English text as a reader counts them: runs between spaces."""
    return len(text.split())


def language_messages(language: str, roots: tuple[str, ...] = ROOTS) -> tuple[list[Message], int]:
    """Every message of the language's catalogs in catalog order (a message whose English
    source was seen before is left out: catalogs share many), and how many catalogs were read."""
    locale = LANGUAGES[language]
    found = catalogs(locale, roots)
    out: list[Message] = []
    seen: set[str] = set()
    for path in found:
        for english, text in messages(path):
            if english in seen:
                continue
            seen.add(english)
            out.append(Message(english, english if language == "en" else text, path.stem))
    return out, len(found)


def documents(found: list[Message], docs: int, english_target: int = 120) -> list[list[Message]]:
    """Up to ``docs`` documents: consecutive messages of one catalog until their English
    sources hold ``english_target`` words (the same amount of text in every language)."""
    out: list[list[Message]] = []
    current: list[Message] = []
    size = 0
    for message in found:
        if current and message.catalog != current[-1].catalog:
            current, size = [], 0
        current.append(message)
        size += english_words(message.english)
        if size >= english_target:
            out.append(current)
            current, size = [], 0
            if len(out) >= docs:
                break
    return out
