"""Longer windows plus whole-item matching for short items, measured before any contract
change: ``python -m bench.multilingual.whole``.

The idea (issue 31's one goal not met): under ``weighted-2`` the window of an unspaced script
must be short enough for the tersest translation of a 13-word item, so it also matches shared
runs of 9 to 12 English words translated at length. Here the unspaced scripts' windows are
``W`` English words' worth (their ``weighted-2`` weights times ``13 / W``), and an item too
light for one such window but of at least ``F`` English words' worth (``weighted-2`` weights)
is protected as a whole: a document is flagged when it holds the item's whole word sequence.
Spaced scripts keep their windows, and their items under 13 English words protect nothing.

Everything is measured on the same seeds, items and documents as ``bench.multilingual.pooled``
(its ``case``), with windows and whole items matched by a 64-bit polynomial hash of word ids
(vectorised; a collision over these few million windows is negligible), and the English
baseline the same machinery at 13 words a window. ``--windows 13 --floors none`` gives
``weighted-2``'s counts, and ``--weights 38,16,12,12,12,12,12:85,35,27,27,27,29,26`` core's
``weighted-3`` ones (``pooled``'s), line for line.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from bench.multilingual.catalogs import LANGUAGES, ROOTS, language_messages
from bench.multilingual.decont import _text, case
from bench.multilingual.pooled import SHARED, Pooled, _english_run, table
from neardup.core._windows import CHARACTER_WEIGHTS, SCRIPT_WEIGHTS, WEIGHT_UNIT, word_weights
from neardup.core.engine import words as tokens

__all__ = ["Prepared", "Variant", "main", "prepare", "score"]

T = "multilingual"
N = 13
#: The scripts written without spaces whose windows are lengthened.
UNSPACED = ("Han", "Kana", "Thai", "Lao", "Khmer", "Myanmar", "Tibetan")
#: Their ``weighted-2`` weights (per code point from Thai on), from which ``--windows`` and
#: ``--floors`` scale: fixed here, as core's tables now hold ``weighted-3``'s.
WEIGHTED_2 = (59, 24, 19, 19, 19, 20, 18)
_BASE = np.uint64(0x9E3779B97F4A7C15)
_INV = np.uint64(pow(0x9E3779B97F4A7C15, -1, 2**64))


def _script_table() -> NDArray[np.int64]:
    """Every code point's index in UNSPACED, or -1."""
    table = np.full(0x110000, -1, dtype=np.int64)
    for name, _, ranges in (*SCRIPT_WEIGHTS, *CHARACTER_WEIGHTS):
        if name in UNSPACED:
            for lo, hi in ranges:
                table[lo : hi + 1] = UNSPACED.index(name)
    return table


_SCRIPT = _script_table()
#: Whether a script of UNSPACED weighs per code point (CHARACTER_WEIGHTS) or per word.
_PER_CODE_POINT = np.array([any(n == s for n, _, _ in CHARACTER_WEIGHTS) for s in UNSPACED])


@dataclass
class Texts:
    """A batch of texts as word ids, core's weights (used for every script but UNSPACED's),
    UNSPACED script indices and code points, concatenated."""

    ids: NDArray[np.uint64]
    weights: NDArray[np.int64]
    script: NDArray[np.int64]
    code_points: NDArray[np.int64]
    doc_words: NDArray[np.int64]
    prefix: NDArray[np.uint64] = field(init=False)
    powers: NDArray[np.uint64] = field(init=False)
    inverse: NDArray[np.uint64] = field(init=False)

    def __post_init__(self) -> None:
        # Q[i] = sum ids[j] * B^j for j < i (wrapping); key(lo, hi) = (Q[hi] - Q[lo]) * B^-lo.
        n = len(self.ids)
        base = np.full(n, _BASE, dtype=np.uint64)
        inv = np.full(n, _INV, dtype=np.uint64)
        self.powers = np.ones(n + 1, dtype=np.uint64)
        self.inverse = np.ones(n + 1, dtype=np.uint64)
        self.prefix = np.zeros(n + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            np.cumprod(base, out=self.powers[1:])
            np.cumprod(inv, out=self.inverse[1:])
            np.cumsum(self.ids * self.powers[:-1], out=self.prefix[1:])

    def keys(self, lo: NDArray[np.int64], hi: NDArray[np.int64]) -> NDArray[np.uint64]:
        """The hash of every run ``[lo, hi)`` of words (global indices), its length mixed in."""
        with np.errstate(over="ignore"):
            h = (self.prefix[hi] - self.prefix[lo]) * self.inverse[lo]
            return h ^ ((hi - lo).astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F))


class Vocab:
    """Word -> id (from 1), shared by items and documents."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def texts(self, texts: Sequence[str]) -> Texts:
        ids: list[int] = []
        weights: list[NDArray[np.int64]] = []
        script: list[NDArray[np.int64]] = []
        code_points: list[NDArray[np.int64]] = []
        counts = []
        for text in texts:
            w = tokens(text, T)
            ids.extend(self.ids.setdefault(x, len(self.ids) + 1) for x in w)
            weights.append(word_weights(w) if w else np.zeros(0, dtype=np.int64))
            first = np.array([ord(x[0]) for x in w], dtype=np.int64)
            script.append(_SCRIPT[first] if w else np.zeros(0, dtype=np.int64))
            code_points.append(np.array([len(x) for x in w], dtype=np.int64))
            counts.append(len(w))
        return Texts(
            np.array(ids, dtype=np.uint64),
            np.concatenate(weights) if weights else np.zeros(0, dtype=np.int64),
            np.concatenate(script) if script else np.zeros(0, dtype=np.int64),
            np.concatenate(code_points) if code_points else np.zeros(0, dtype=np.int64),
            np.array(counts, dtype=np.int64),
        )


@dataclass(frozen=True)
class Variant:
    """Unspaced windows of ``window`` English words' worth (``weighted-2`` weights times
    ``13 / window``); whole items from ``floor`` English words' worth (None: none, as
    ``weighted-2``). ``table``: instead, integer weights per UNSPACED script (per code point
    where ``weighted-2`` weighs per code point) for windows and for the floor, each against
    ``13 * WEIGHT_UNIT``, as a contract would state them."""

    window: int
    floor: float | None
    table: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def label(self) -> str:
        if self.table is None:
            return f"{self.window:>3} {self.floor!s:>5}"
        return "/".join(map(str, self.table[0])) + " floor " + "/".join(map(str, self.table[1]))


def _table_weights(t: Texts, weights: tuple[int, ...]) -> NDArray[np.int64]:
    per = np.array(weights, dtype=np.int64)
    mine = per.take(np.maximum(t.script, 0)) * np.where(
        _PER_CODE_POINT.take(np.maximum(t.script, 0)), t.code_points, 1
    )
    return np.where(t.script >= 0, mine, t.weights)


def _window_weights(t: Texts, v: Variant) -> tuple[NDArray[np.int64], int]:
    if v.table is not None:
        return _table_weights(t, v.table[0]), N * WEIGHT_UNIT
    # exact in integers: everything times ``window``
    base = _table_weights(t, WEIGHTED_2)
    return np.where(t.script >= 0, base * N, base * v.window), N * WEIGHT_UNIT * v.window


def _floor_weights(t: Texts, v: Variant) -> tuple[NDArray[np.int64], float]:
    if v.table is not None:
        return _table_weights(t, v.table[1]), N * WEIGHT_UNIT
    # unspaced words times 13 / floor, others as they are (then a spaced-only text reaches the
    # floor only with a window of its own)
    floor = v.floor if v.floor is not None else N
    base = _table_weights(t, WEIGHTED_2)
    return np.where(t.script >= 0, base * N, base * floor), N * WEIGHT_UNIT * floor


def _ends(t: Texts, weights: NDArray[np.int64], need: int) -> NDArray[np.int64]:
    total = np.zeros(len(weights) + 1, dtype=np.int64)
    np.cumsum(weights, out=total[1:])
    ends = np.searchsorted(total, total[:-1] + need, side="left")
    doc_end = np.repeat(np.cumsum(t.doc_words), t.doc_words)
    return np.where(ends <= doc_end, ends, -1).astype(np.int64)


def window_keys(t: Texts, v: Variant) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """Keys of every window under ``v``, and the document of each."""
    weights, need = _window_weights(t, v)
    ends = _ends(t, weights, need)
    found = np.flatnonzero(ends >= 0)
    doc = np.repeat(np.arange(len(t.doc_words)), t.doc_words)
    return t.keys(found, ends[found]), doc[found]


def whole_items(t: Texts, v: Variant) -> NDArray[np.bool_]:
    """Which items are protected as a whole: no window, and at least the floor."""
    if v.floor is None and v.table is None:
        return np.zeros(len(t.doc_words), dtype=np.bool_)
    start = np.cumsum(t.doc_words) - t.doc_words
    has_window = np.zeros(len(t.doc_words), dtype=np.bool_)
    _, doc = window_keys(t, v)
    has_window[np.unique(doc)] = True
    floor_w, need = _floor_weights(t, v)
    sums = np.add.reduceat(floor_w, start) if len(floor_w) else np.zeros(0)
    sums = np.where(t.doc_words > 0, sums, 0)
    return ~has_window & (sums >= need)


def whole_keys(t: Texts, which: NDArray[np.bool_]) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """The whole-sequence key and length of each chosen text."""
    start = np.cumsum(t.doc_words) - t.doc_words
    lo, count = start[which], t.doc_words[which]
    return t.keys(lo, lo + count), count


def runs_of(t: Texts, length: int) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """Keys of every run of ``length`` words inside one document, and its document."""
    start = np.cumsum(t.doc_words) - t.doc_words
    doc = np.repeat(np.arange(len(t.doc_words)), t.doc_words)
    lo = np.arange(len(t.ids), dtype=np.int64)
    ok = lo + length <= (start + t.doc_words)[doc]
    lo = lo[ok]
    return t.keys(lo, lo + length), doc[ok]


@dataclass
class Prepared:
    """One seed of one language, tokenised once for every variant."""

    items: Texts
    clean: Texts
    quotes: Texts
    english_flags: NDArray[np.bool_]
    english_caught: NDArray[np.bool_]
    keys: list[str]
    item_english: list[str]
    doc_english: list[str]


def _hits(items: Texts, docs: Texts, v: Variant) -> list[set[int]]:
    """The items each document matches (by a window or as a whole item)."""
    found: list[set[int]] = [set() for _ in range(len(docs.doc_words))]
    ikeys, idoc = window_keys(items, v)
    order = np.argsort(ikeys)
    ikeys, idoc = ikeys[order], idoc[order]
    dkeys, ddoc = window_keys(docs, v)
    _match(ikeys, idoc, dkeys, ddoc, found)
    whole = whole_items(items, v)
    if whole.any():
        wkeys, wlen = whole_keys(items, whole)
        wdoc = np.flatnonzero(whole)
        for length in np.unique(wlen).tolist():
            pick = wlen == length
            k, d = wkeys[pick], wdoc[pick]
            order = np.argsort(k)
            rk, rd = runs_of(docs, length)
            _match(k[order], d[order], rk, rd, found)
    return found


def _match(
    ikeys: NDArray[np.uint64],
    idoc: NDArray[np.int64],
    dkeys: NDArray[np.uint64],
    ddoc: NDArray[np.int64],
    found: list[set[int]],
) -> None:
    if not len(ikeys) or not len(dkeys):
        return
    lo = np.searchsorted(ikeys, dkeys, side="left")
    hi = np.searchsorted(ikeys, dkeys, side="right")
    for j in np.flatnonzero(hi > lo).tolist():
        found[int(ddoc[j])].update(idoc[lo[j] : hi[j]].tolist())


def prepare(language: str, messages: list, items: int, seed: int) -> Prepared:  # type: ignore[type-arg]
    """Tokenise one seed's items, clean documents and quotes in the language and English."""
    data = case(messages, items, 10**9, seed)
    vocab = Vocab()

    def batch(english: bool) -> tuple[Texts, Texts, Texts]:
        its = vocab.texts([m.english if english else m.text for m in data.items])
        clean = vocab.texts([_text(d, english) for d in data.clean])
        quotes = vocab.texts([_text(d, english) for d in data.quotes])
        return its, clean, quotes

    e_items, e_clean, e_quotes = batch(True)
    base = Variant(N, None)
    e_flags = np.array([bool(h) for h in _hits(e_items, e_clean, base)], dtype=np.bool_)
    caught = [i in h for i, h in enumerate(_hits(e_items, e_quotes, base))]
    e_caught = np.array(caught, dtype=np.bool_)
    its, clean, quotes = batch(False)
    keys = [d[0].catalog + "\0" + d[0].english for d in data.clean]
    doc_english = [" ".join(m.english for m in d) for d in data.clean]
    item_english = [m.english for m in data.items]
    return Prepared(its, clean, quotes, e_flags, e_caught, keys, item_english, doc_english)


def score(row: Pooled, p: Prepared, v: Variant) -> None:
    """Add one seed's flags and catches under ``v`` to ``row``."""
    hits = _hits(p.items, p.clean, v)
    flags = [bool(h) for h in hits]
    row.shared += sum(
        max(_english_run(p.item_english[i], p.doc_english[d]) for i in h) >= SHARED
        for d, h in enumerate(hits)
        if h
    )
    caught = [i in h for i, h in enumerate(_hits(p.items, p.quotes, v))]
    row.seeds += 1
    row.flags.extend(flags)
    row.english.extend(p.english_flags.tolist())
    row.keys.extend(p.keys)
    row.caught += sum(caught)
    row.caught_english += int(p.english_caught.sum())
    row.quotes += len(caught)


def sweep(
    language: str,
    seeds: range,
    items: int,
    variants: list[Variant],
    roots: tuple[str, ...] = ROOTS,
) -> dict[Variant, Pooled]:
    """Pooled rows of every variant over the seeds."""
    found, _ = language_messages(language, roots)
    rows = {v: Pooled(language) for v in variants}
    for seed in seeds:
        p = prepare(language, found, items, seed)
        for v in variants:
            score(rows[v], p, v)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Sweep window x floor per language, or print one variant's pooled table."""
    parser = argparse.ArgumentParser(prog="python -m bench.multilingual.whole",
                                     description=(__doc__ or "").split("\n\n")[0])  # fmt: skip
    parser.add_argument("--languages", default="th,km,my,dz,ja,zh_CN,zh_TW,ko,hi,ar,ru")
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--windows", default="13,14,15,16,17,18,20,22",
                        help="unspaced windows, English words' worth")  # fmt: skip
    parser.add_argument("--floors", default="none,7,8,9,10,11",
                        help="whole-item floors, English words' worth (none: none)")  # fmt: skip
    parser.add_argument("--weights", help="instead: window weights per script of UNSPACED, "
                        "comma-separated, then ':' and the floor weights")  # fmt: skip
    parser.add_argument("--table", action="store_true", help="one pooled table per variant")
    parser.add_argument("--catalogs", default=":".join(ROOTS), help="roots (%(default)s)")
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    floors = [None if f == "none" else float(f) for f in args.floors.split(",")]
    variants = [Variant(int(w), f) for w, f in itertools.product(args.windows.split(","), floors)]
    if args.weights:
        window, floor = (tuple(int(x) for x in part.split(",")) for part in args.weights.split(":"))
        variants = [Variant(N, None, (window, floor))]
    for language in args.languages.split(","):
        if language not in LANGUAGES:
            parser.error(f"unknown language {language}")
        roots = tuple(root for root in args.catalogs.split(":") if root)
        rows = sweep(language, seeds, args.items, variants, roots)
        if args.table:
            for v, row in rows.items():
                print(f"{language}: {v.label()}")
                print("\n".join(table([row])))
            continue
        print(f"{language} (seeds {seeds.start}-{seeds.stop - 1}): window floor: "
              "false flags / English's, caught / English's")  # fmt: skip
        for v, row in rows.items():
            print(f"  {v.label()}: {sum(row.flags):>4}/{sum(row.english):<4} "
                  f"{sum(row.flags) / max(sum(row.english), 1):5.2f}  "
                  f"{row.caught}/{row.caught_english} of {row.quotes}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
