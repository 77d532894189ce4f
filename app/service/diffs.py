"""Word-level differences and n-gram highlights for the /ui pages (display only)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Set
from dataclasses import dataclass

from neardup.core.engine import gram_spans, word_spans

__all__ = ["Piece", "highlight_ngrams", "word_diff", "words_end"]

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Piece:
    """A run of text and how to show it: ``same``, ``ins``, ``del`` or ``hit``."""

    text: str
    kind: str


def words_end(text: str, limit: int) -> int:
    """The character offset just past the first ``limit`` words of ``text`` (its length when it
    has fewer)."""
    for i, match in enumerate(_WORD.finditer(text), start=1):
        if i == limit:
            return match.end()
    return len(text)


def word_diff(root: str, member: str) -> list[Piece]:
    """The member's text against the root's, word by word, as near-dedup sees words (case and
    punctuation ignored): kept text, inserted words and (at their place) the root's deleted words.
    """
    a = [w.lower() for w in _WORD.findall(root)]
    spans = [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(member)]
    b = [w for _, _, w in spans]
    pieces: list[Piece] = []
    pos = 0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            pieces.append(Piece(" ".join(a[a0:a1]), "del"))
        if b1 > b0:
            start, end = spans[b0][0], spans[b1 - 1][1]
            if start > pos:
                pieces.append(Piece(member[pos:start], "same"))
            pieces.append(Piece(member[start:end], "same" if op == "equal" else "ins"))
            pos = end
    if pos < len(member):
        pieces.append(Piece(member[pos:], "same"))
    return pieces


def highlight_ngrams(text: str, grams: Set[str], n: int, tokenizer: str = "words") -> list[Piece]:
    """The text with every word (by ``tokenizer``, as the n-grams were made) inside a shared
    n-gram (a window, or a whole item: ``gram_spans``) marked ``hit``."""
    found, at = word_spans(text, tokenizer)
    spans = [(start, end, word) for word, (start, end) in zip(found, at, strict=True)]
    covered = [False] * len(spans)
    for lo, hi in gram_spans(found, grams, n, tokenizer):
        for j in range(lo, hi):
            covered[j] = True
    pieces: list[Piece] = []
    pos = 0
    for (start, end, _), hit in zip(spans, covered, strict=True):
        if start > pos:
            pieces.append(Piece(text[pos:start], "same"))
        pieces.append(Piece(text[start:end], "hit" if hit else "same"))
        pos = end
    if pos < len(text):
        pieces.append(Piece(text[pos:], "same"))
    return pieces
