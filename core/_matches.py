"""Where a text shares word n-grams with protected sets: every matching window with its
character offsets in the ORIGINAL text, and the frequency cap that ignores boilerplate n-grams.

A word is a match of the tokenizer's pattern (``\\w+``, or the multilingual one) in
``text.lower()`` (``core._text.words``); its span is mapped back
to ``text``'s characters (``str.lower`` lengthens a few characters, U+0130 to two code points).
The span of an n-gram runs from its first word's first character to its last word's last one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from neardup.core._multilingual import original_spans
from neardup.core._protected import ProtectedSet
from neardup.core._text import check_tokenizer, word_re
from neardup.core._windows import windows
from neardup.core.errors import ParameterError

__all__ = ["MAX_LISTED", "Match", "Protection", "merged_spans", "sample_capped", "word_spans"]

#: Entries a list of a report or of a row's meta holds at most; each such list is counted in full
#: (``documents`` and ``document_ids``, ``item_count`` and ``items``, ...).
MAX_LISTED = 10


def word_spans(text: str, tokenizer: str = "words") -> tuple[list[str], list[tuple[int, int]]]:
    """The words of ``text`` (exactly ``words(text, tokenizer)``) and each one's [start, end)
    in ``text`` (the original text, also where the multilingual tokenizer normalized it)."""
    if tokenizer != "words":
        check_tokenizer(tokenizer)
        return original_spans(text)
    lowered = text.lower()
    found = [(m.group(), m.start(), m.end()) for m in word_re(tokenizer).finditer(lowered)]
    if len(lowered) == len(text):
        return [w for w, _, _ in found], [(s, e) for _, s, e in found]
    # Some character lowered to several: where each original character starts in ``lowered``.
    starts = np.cumsum([0, *(len(c.lower()) for c in text)])[:-1]
    spans = []
    for _, s, e in found:
        lo = int(np.searchsorted(starts, s, side="right")) - 1
        hi = int(np.searchsorted(starts, e - 1, side="right"))
        spans.append((lo, hi))
    return [w for w, _, _ in found], spans


@dataclass(frozen=True)
class Match:
    """One window of a text that a protected set protects: the set, the items holding the
    n-gram (first seen first), the n-gram, and its [start, end) characters in the text."""

    set: str
    items: tuple[str, ...]
    ngram: str
    start: int
    end: int


def merged_spans(matches: Iterable[Match]) -> list[tuple[int, int]]:
    """The [start, end) character spans the matches cover, overlapping or touching windows
    merged (whatever set they are of), in text order."""
    out: list[tuple[int, int]] = []
    for start, end in sorted({(m.start, m.end) for m in matches}):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class Protection:
    """Protected sets checked together, less their capped n-grams (a capped n-gram still passes
    the hash filter; the exact scan ignores it).

    Args:
        sets: the protected sets (one n-gram length).
        item_cap: an n-gram in MORE than this many items of its set is ignored (None: no cap).
        capped: further n-grams to ignore (``sample_capped``'s, from a corpus sample).
    """

    def __init__(
        self,
        sets: Sequence[ProtectedSet],
        item_cap: int | None = None,
        capped: Iterable[str] = (),
    ) -> None:
        if item_cap is not None and (
            isinstance(item_cap, bool) or not isinstance(item_cap, int) or item_cap < 1
        ):
            raise ParameterError(f"item cap must be a whole number >= 1, got {item_cap!r}")
        if len({s.n for s in sets}) > 1:
            raise ParameterError("protected sets of different n-gram lengths cannot be combined")
        if len({s.tokenizer for s in sets}) > 1:
            raise ParameterError("protected sets of different tokenizers cannot be combined")
        self.sets = list(sets)
        self.n = sets[0].n if sets else 13
        self.tokenizer = sets[0].tokenizer if sets else "words"
        self.item_cap = item_cap
        extra = set(capped)
        self.capped: dict[str, set[str]] = {}
        for s in self.sets:
            over = {g for g in extra if g in s.grams}
            if item_cap is not None:
                over.update(s.capped_by_items(item_cap))
            self.capped[s.name] = over

    def matches(self, text: str) -> list[Match]:
        """Every protected window of ``text``, in text order (one per set protecting it)."""
        w, spans = word_spans(text, self.tokenizer)
        out: list[Match] = []
        found = [(lo, hi, " ".join(w[lo:hi])) for lo, hi in windows(w, self.n, self.tokenizer)]
        for s in self.sets:  # whole items (``multilingual``): by where they start
            found.extend(s.index.anchors.spans(w))
        for lo, hi, gram in sorted(set(found)):
            for s in self.sets:
                labels = s.grams.get(gram)
                if labels and gram not in self.capped[s.name]:
                    start, end = spans[lo][0], spans[hi - 1][1]
                    out.append(Match(s.name, tuple(labels), gram, start, end))
        return out

    def matches_many(self, texts: Sequence[str]) -> list[list[Match]]:
        """``matches`` of every text; only those a set's hash filter flags (its own, prepared
        once: a cap never rebuilds it) are scanned word by word."""
        out: list[list[Match]] = [[] for _ in texts]
        if not texts:
            return out
        flagged = np.zeros(len(texts), dtype=np.bool_)
        for s in self.sets:
            flagged |= s.index.contaminated_many(texts)
        for i in np.flatnonzero(flagged).tolist():
            out[i] = self.matches(texts[i])
        return out


def sample_capped(sets: Sequence[ProtectedSet], sample: Iterable[str], share: float) -> set[str]:
    """The protected n-grams found in MORE than ``share`` of the ``sample`` texts (a sample of
    the training corpus): common phrases rather than leaked items. An empty sample caps none."""
    if not 0.0 <= share <= 1.0:
        raise ParameterError(f"sample share must be between 0 and 1, got {share!r}")
    probe = Protection(sets)
    seen: Counter[str] = Counter()
    texts = 0
    batch: list[str] = []
    for text in [*sample, None]:
        if text is not None:
            batch.append(text)
            texts += 1
        if batch and (text is None or len(batch) >= 1024):
            for found in probe.matches_many(batch):
                seen.update({m.ngram for m in found})
            batch = []
    return {g for g, count in seen.items() if count > share * texts}
