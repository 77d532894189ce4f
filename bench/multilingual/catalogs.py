"""Real multilingual text from the translation catalogs installed on this machine.

Every GNU gettext catalog (``.mo``) under ``/usr/share/locale*/LANG/LC_MESSAGES`` holds the
translated messages of a program (``msgstr``): real sentences in dozens of languages. They are
read at run time (never committed) and made into a corpus per language group:

- documents: consecutive messages of one catalog joined by a space until the document reaches
  ``TARGET_CHARS`` of its group (about the same number of multilingual words everywhere);
- near copies: a share of the documents copied with 1 % of their words (by the multilingual
  tokenizer: a Chinese or Japanese character, a Thai cluster, a German word) replaced by
  another word of the same document, at least one;
- exact copies: a share copied as they are.

Which catalogs exist depends on what is installed, so the counts are reported with the results.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neardup.core.engine import ParameterError

__all__ = [
    "GROUPS",
    "Corpus",
    "build",
    "catalogs",
    "messages",
    "near_copy",
    "read_mo",
]

#: Language groups and the catalog locales they are read from.
GROUPS: dict[str, tuple[str, ...]] = {
    "Latin": ("de", "fr", "es"),
    "Cyrillic": ("ru", "uk"),
    "Chinese": ("zh_CN", "zh_TW"),
    "Japanese": ("ja",),
    "Thai": ("th",),
}
#: Characters a document of the group reaches (a Chinese character carries about what a Latin
#: word does; a Thai cluster is about one character and a half).
TARGET_CHARS = {"Latin": 1200, "Cyrillic": 1200, "Chinese": 400, "Japanese": 500, "Thai": 700}
_ROOTS = ("/usr/share/locale", "/usr/share/locale-langpack", "/usr/local/share/locale")


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


def catalogs(locale: str) -> list[Path]:
    """Every ``.mo`` catalog installed for ``locale``, sorted by name."""
    found: list[Path] = []
    for root in _ROOTS:
        found.extend(Path(root, locale, "LC_MESSAGES").glob("*.mo"))
    return sorted(found, key=lambda p: (p.name, str(p)))


def messages(path: Path, min_chars: int = 8) -> list[str]:
    """The translated messages of a catalog, in its order: the first plural form, whitespace
    collapsed, the header and those shorter than ``min_chars`` left out."""
    out = []
    for msgid, msgstr in read_mo(path):
        if not msgid or not msgstr:
            continue
        text = " ".join(msgstr.split("\0")[0].split())
        if len(text) >= min_chars and "\ufffd" not in text:
            out.append(text)
    return out


@dataclass
class Corpus:
    """A language group's corpus: texts, ids, and the planted copies (copy -> original).

    Attributes:
        texts, ids: the documents (originals first, then the copies), ids ``LOCALE/DOMAIN/N``
            and ``...~near`` / ``...~exact``.
        near, exact: planted copies as (copy row, original row).
        catalogs: how many catalogs were read.
    """

    group: str
    texts: list[str]
    ids: list[str]
    near: list[tuple[int, int]]
    exact: list[tuple[int, int]]
    catalogs: int


def near_copy(text: str, share: float, rng: np.random.Generator) -> str:
    """``text`` with ``share`` of its multilingual words (at least one) replaced, each by another
    word of the text that differs from it."""
    from neardup.core.engine import word_spans

    found, spans = word_spans(text, "multilingual")
    if len(set(found)) < 2:
        return text + " x"
    edits = max(1, round(share * len(found)))
    chosen = sorted(rng.choice(len(found), size=min(edits, len(found)), replace=False).tolist())
    pieces, pos = [], 0
    for i in chosen:
        start, end = spans[i]
        other = found[int(rng.integers(len(found)))]
        while other == found[i]:
            other = found[int(rng.integers(len(found)))]
        pieces += [text[pos:start], other]
        pos = end
    return "".join(pieces) + text[pos:]


def build(
    group: str,
    docs: int,
    *,
    near_share: float = 0.2,
    exact_share: float = 0.05,
    edit_share: float = 0.01,
    seed: int = 0,
) -> Corpus:
    """Up to ``docs`` documents of the group's catalogs (in turn, one catalog after another),
    then the planted near and exact copies of a seeded sample of them."""
    target = TARGET_CHARS[group]
    texts: list[str] = []
    ids: list[str] = []
    read = 0
    sources = [(loc, path) for loc in GROUPS[group] for path in catalogs(loc)]
    for locale, path in sources:
        if len(texts) >= docs:
            break
        read += 1
        current: list[str] = []
        size = 0
        for message in messages(path):
            current.append(message)
            size += len(message) + 1
            if size >= target:
                ids.append(f"{locale}/{path.stem}/{len(texts)}")
                texts.append(" ".join(current))
                current, size = [], 0
                if len(texts) >= docs:
                    break
    rng = np.random.default_rng([seed, len(texts)])
    order = rng.permutation(len(texts)).tolist()
    n_near = int(near_share * len(texts))
    n_exact = int(exact_share * len(texts))
    near, exact = [], []
    for row in order[:n_near]:
        near.append((len(texts), row))
        ids.append(f"{ids[row]}~near")
        texts.append(near_copy(texts[row], edit_share, rng))
    for row in order[n_near : n_near + n_exact]:
        exact.append((len(texts), row))
        ids.append(f"{ids[row]}~exact")
        texts.append(texts[row])
    return Corpus(group, texts, ids, near, exact, read)
