"""Decontamination modes over a Doc stream: ``drop`` a contaminated document, ``cut`` its
matches out (the GPT-3 procedure, Brown et al. 2020, appendix C), or ``annotate`` it.

``cut``: every matching n-gram is removed with ``window`` characters each side of it (clipped to
the text), widened to whole words (``cut_bounds``: a cut never splits a word of the tokenizer, so
a kept piece's words are words of the original and no piece holds a protected n-gram); the
removed spans, merged where they touch or overlap, split the text into pieces;
pieces shorter than ``min_piece`` characters are dropped; and when MORE than ``max_pieces``
pieces remain, the whole document is dropped (as when none remains). Each kept piece is a Doc
of its own, id ``ID#K`` (K = 1, 2, ... among the kept pieces), its text exactly the characters
of the original it spans. Documents without a match pass unchanged in every mode.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import islice
from typing import Any

from neardup.core._corpus import Doc
from neardup.core._matches import MAX_LISTED, Match, Protection, merged_spans, word_spans
from neardup.core.errors import ParameterError

__all__ = [
    "DECONT_KEY",
    "PIECE_SEPARATOR",
    "Cut",
    "DecontMode",
    "DecontParams",
    "apply_mode",
    "collision_message",
    "cut_bounds",
    "cut_spans",
    "decontaminate_modes",
    "drop_rule",
    "match_summary",
    "piece_collision",
    "piece_id",
    "piece_source",
]

#: The meta key a cut piece or an annotated document says what was found in.
DECONT_KEY = "decontamination"
#: Between a document's id and its piece number: ``doc-7#2`` is the second kept piece of doc-7.
PIECE_SEPARATOR = "#"


class DecontMode(StrEnum):
    """What happens to a document sharing an n-gram with a protected set."""

    DROP = "drop"
    CUT = "cut"
    ANNOTATE = "annotate"


@dataclass(frozen=True)
class DecontParams:
    """The mode and the numbers of ``cut`` (GPT-3's defaults)."""

    mode: DecontMode = DecontMode.DROP
    window: int = 200
    min_piece: int = 200
    max_pieces: int = 10

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", DecontMode(self.mode))
        except ValueError:
            modes = ", ".join(m.value for m in DecontMode)
            raise ParameterError(f"mode must be one of {modes}, got {self.mode!r}") from None
        for name in ("window", "min_piece", "max_pieces"):
            value = getattr(self, name)
            low = 1 if name == "max_pieces" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(f"{name} must be a whole number >= {low}, got {value!r}")


@dataclass(frozen=True)
class Cut:
    """What ``cut`` makes of a text: the removed spans (merged, in order), the kept pieces'
    [start, end), and whether the document is dropped whole (``too many pieces``, ``nothing
    left``) or None."""

    removed: list[tuple[int, int]]
    pieces: list[tuple[int, int]]
    dropped: str | None


# A whitespace-delimited run of characters holding a capital sigma.
_SIGMA_RUN = re.compile(r"\S*\u03a3\S*")


def cut_bounds(text: str, tokenizer: str = "words") -> list[tuple[int, int]]:
    """The [start, end) spans of ``text`` no cut may fall inside, in order: its words under
    ``tokenizer`` and, where a capital sigma is, the run of non-space characters around it (a
    sigma lowers to a final or a medial one by its neighbours across apostrophes and periods,
    so a cut there could change a word of the piece; no space is such a neighbour).

    >>> cut_bounds("foobar c2")
    [(0, 6), (7, 9)]
    """
    bounds = word_spans(text, tokenizer)[1]
    if "\u03a3" not in text:
        return bounds
    runs = [(m.start(), m.end()) for m in _SIGMA_RUN.finditer(text)]
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(bounds + runs):
        if merged and lo < merged[-1][1]:  # overlapping, not touching: "中文" stays two words
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _outside(pos: int, starts: Sequence[int], whole: Sequence[tuple[int, int]], up: bool) -> int:
    """``pos`` moved to the edge of the span of ``whole`` it falls strictly inside (its end if
    ``up``, else its start), or ``pos`` itself."""
    i = bisect_left(starts, pos) - 1  # the last span starting before pos
    if i >= 0 and whole[i][1] > pos:
        return whole[i][1] if up else whole[i][0]
    return pos


def cut_spans(
    length: int,
    matches: Sequence[tuple[int, int]],
    params: DecontParams,
    whole: Sequence[tuple[int, int]] = (),
) -> Cut:
    """Cut every match [start, end) out of a text of ``length`` characters, with
    ``params.window`` characters each side, each cut moved out of any span of ``whole`` it
    falls inside (``cut_bounds``: the text's words); see the module docstring."""
    starts = [lo for lo, _ in whole]
    removed: list[tuple[int, int]] = []
    for start, end in sorted(matches):
        lo, hi = max(0, start - params.window), min(length, end + params.window)
        lo, hi = _outside(lo, starts, whole, False), _outside(hi, starts, whole, True)
        if removed and lo <= removed[-1][1]:
            removed[-1] = (removed[-1][0], max(removed[-1][1], hi))
        else:
            removed.append((lo, hi))
    bounds = [0, *(x for span in removed for x in span), length]
    spans = [(bounds[i], bounds[i + 1]) for i in range(0, len(bounds), 2)]
    pieces = [(a, b) for a, b in spans if b - a >= params.min_piece and b > a]
    if len(pieces) > params.max_pieces:
        return Cut(removed, [], "too many pieces")
    if not pieces:
        return Cut(removed, [], "nothing left")
    return Cut(removed, pieces, None)


def piece_id(doc_id: str, k: int) -> str:
    """The id of a document's ``k``-th kept piece (from 1)."""
    return f"{doc_id}{PIECE_SEPARATOR}{k}"


def piece_source(doc_id: str, max_pieces: int) -> tuple[str, int] | None:
    """``(source id, K)`` when ``doc_id`` is the id cut mode gives the K-th piece (K at most
    ``max_pieces``) of a document ``source id``, else None. Only one source can give an id:
    ``K`` is the digits after its last ``#``.

    >>> piece_source("doc-7#2", 10), piece_source("doc-7#02", 10), piece_source("doc-7#11", 10)
    (('doc-7', 2), None, None)
    """
    source, sep, k = doc_id.rpartition(PIECE_SEPARATOR)
    if not (sep and source and k.isascii() and k.isdigit()) or k.startswith("0"):
        return None
    return (source, int(k)) if int(k) <= max_pieces else None


def piece_collision(ids: Iterable[str], max_pieces: int) -> tuple[str, str] | None:
    """``(id, source id)`` of the first of ``ids`` that is the id of a piece cut mode could
    give another of ``ids`` (two rows of one id in a cut output), or None when none is."""
    ids = list(ids)
    known = set(ids)
    for doc_id in ids:
        found = piece_source(doc_id, max_pieces)
        if found is not None and found[0] in known:
            return doc_id, found[0]
    return None


def collision_message(piece: str, source: str) -> str:
    """What a run or a request says when the id ``piece`` is a piece id cut mode could give
    the document ``source``."""
    return (
        f"the id {piece!r} is the id cut mode gives a piece of {source!r}: the output would hold "
        "two rows of one id; rename one of them"
    )


def match_summary(
    matches: Sequence[Match], cap: int = MAX_LISTED, *, offsets: bool = True
) -> dict[str, Any]:
    """What a row's meta says of its matches: ids, counts and offsets into the text, never the
    n-grams. ``sets`` matched (a handful: they are the configured sets); ``match_count``
    windows (one per set protecting it); ``item_count`` items, the ``cap`` with most windows
    listed as ``{"set", "item", "matches"}`` (then by set and id); ``span_count`` spans where
    overlapping windows merge, the first ``cap`` listed as ``[start, end]`` (``spans`` None
    without ``offsets``: for a caller who may not learn where protected text is)."""
    per_item: Counter[tuple[str, str]] = Counter()
    for m in matches:
        per_item.update((m.set, i) for i in m.items)
    best = sorted(per_item.items(), key=lambda kv: (-kv[1], kv[0]))
    spans = merged_spans(matches)
    return {
        "sets": sorted({m.set for m in matches}),
        "match_count": len(matches),
        "item_count": len(per_item),
        "items": [{"set": s, "item": i, "matches": c} for (s, i), c in best[:cap]],
        "span_count": len(spans),
        "spans": [list(span) for span in spans[:cap]] if offsets else None,
    }


def _by_removed(matches: Sequence[Match], removed: Sequence[tuple[int, int]]) -> list[list[Match]]:
    """The matches inside each removed span (each match is inside exactly one)."""
    starts = [lo for lo, _ in removed]
    out: list[list[Match]] = [[] for _ in removed]
    for m in matches:
        out[bisect_right(starts, m.start) - 1].append(m)
    return out


def _cut(doc: Doc, matches: Sequence[Match], params: DecontParams, tokenizer: str) -> Cut:
    bounds = cut_bounds(doc.text, tokenizer)
    return cut_spans(len(doc.text), [(m.start, m.end) for m in matches], params, bounds)


def drop_rule(
    doc: Doc, matches: Sequence[Match], params: DecontParams, tokenizer: str = "words"
) -> str | None:
    """Why ``apply_mode`` drops a document whole: ``"contaminated"`` (``drop``), ``"too many
    pieces"`` or ``"nothing left"`` (``cut``); None when it keeps something of it.
    ``tokenizer``: the matches' (``Protection.tokenizer``)."""
    if not matches or params.mode is DecontMode.ANNOTATE:
        return None
    if params.mode is DecontMode.DROP:
        return "contaminated"
    return _cut(doc, matches, params, tokenizer).dropped


def apply_mode(
    doc: Doc,
    matches: list[Match],
    params: DecontParams,
    *,
    cap: int = MAX_LISTED,
    tokenizer: str = "words",
    offsets: bool = True,
) -> list[Doc]:
    """What a document becomes under ``params.mode`` given its matches (none: itself).

    ``meta["decontamination"]`` (``annotate``, ``cut``) holds ids, counts and offsets only
    (``match_summary``, every list at most ``cap`` long): an annotated document's of all its
    matches, a cut piece's of its own, the matches in the removed spans bordering it.
    ``tokenizer`` is the matches' (``Protection.tokenizer``): cuts fall between its words.
    Without ``offsets`` (for a caller who may not learn where protected text is) nothing made
    says where a match is: ``spans`` are None, and the cut mode, whose pieces' edges are
    matches' edges, is a ParameterError."""
    if not matches:
        return [doc]
    if params.mode is DecontMode.DROP:
        return []
    if params.mode is DecontMode.ANNOTATE:
        found = {"mode": "annotate", **match_summary(matches, cap, offsets=offsets)}
        return [Doc(doc.id, doc.text, {**doc.meta, DECONT_KEY: found})]
    if not offsets:
        raise ParameterError(
            "the cut mode tells where protected text is (a piece's edges are a match's): it "
            "cannot answer without offsets"
        )
    cut = _cut(doc, matches, params, tokenizer)
    inside = _by_removed(matches, cut.removed)
    ending = {hi: j for j, (_, hi) in enumerate(cut.removed)}
    starting = {lo: j for j, (lo, _) in enumerate(cut.removed)}
    out = []
    for k, (start, end) in enumerate(cut.pieces, start=1):
        # Its own matches: those of the removed spans bordering it (one each side, or one).
        near = [j for j in (ending.get(start), starting.get(end)) if j is not None]
        own = [m for j in near for m in inside[j]]
        meta = {"mode": "cut", "source": doc.id, "piece": k, "pieces": len(cut.pieces),
                "span": [start, end], "removed": [list(cut.removed[j]) for j in near],
                **match_summary(own, cap)}  # fmt: skip
        out.append(Doc(piece_id(doc.id, k), doc.text[start:end], {**doc.meta, DECONT_KEY: meta}))
    return out


def decontaminate_modes(
    docs: Iterable[Doc],
    protection: Protection,
    params: DecontParams | None = None,
    *,
    batch: int = 256,
    observe: Callable[[Doc, list[Match]], None] | None = None,
) -> Iterator[Doc]:
    """Decontaminate a Doc stream under ``params`` (default: drop); STREAMS.

    At most ``batch`` documents are read ahead (their n-grams hashed together), so an endless
    input works in every mode. ``observe(doc, matches)``, when given, sees every input document
    with its matches (a ``ContaminationReport.add``).
    """
    params = params or DecontParams()
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ParameterError(f"batch must be a whole number >= 1, got {batch!r}")
    it = iter(docs)
    while chunk := list(islice(it, batch)):
        for doc, matches in zip(
            chunk, protection.matches_many([d.text for d in chunk]), strict=True
        ):
            if observe is not None:
                observe(doc, matches)
            yield from apply_mode(doc, matches, params, tokenizer=protection.tokenizer)
