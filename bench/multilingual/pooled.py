"""Decontamination false flags and catches, pooled over seeds and every clean document:
``python -m bench.multilingual.pooled``.

One seed of ``bench.multilingual.decont`` flags 2 to 6 of 100 to 300 clean documents, and the
ratio of two such counts is noise. Here every seed draws its own ``--items`` eval items (13 to
20 English words) and checks EVERY document of the other messages (not a sample of them), in
the language and in English (the same messages' English sources), and every item is quoted
once. Per language the table gives the pooled false-flag rate with a 95 % Wilson interval, the
same for English, their ratio with a 95 % interval from a bootstrap over documents (a document
is checked under every seed, so documents, not checks, are resampled), and the quotes caught.

Why a flag is raised (``shared``): a language's false flag whose item's English source shares
at least ``SHARED`` words in a row with the flagged document's English (the translations of
near-identical messages: "Extra space to put between the child and its left ..." against "...
its upper ..."), so genuine shared text, not a short window matching by chance; English flags
it only from 13 words on. ``--show`` prints every false flag (the shared window, the item and
the document's message holding it) and every missed quote (with its weight in English words).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from difflib import SequenceMatcher

import numpy as np

from bench.multilingual.catalogs import LANGUAGES, ROOTS, Message, language_messages
from bench.multilingual.decont import DecontCase, case
from neardup.core._windows import WEIGHT_UNIT, word_weights
from neardup.core.engine import MinhashParams, ProtectedFormat, ProtectedSet, parse_protected_set
from neardup.core.engine import words as tokens

__all__ = ["Pooled", "main", "measure", "wilson"]

#: English words in a row an item's and a flagged document's English sources share for the
#: flag to count as shared text (a window by chance shares none).
SHARED = 6
#: The languages the issue's goal names (Tibetan: Dzongkha's catalogs) and two baselines.
DEFAULT = ("th", "km", "my", "lo", "dz", "ja", "zh_CN", "zh_TW", "ko", "hi", "ar", "ru")
T = "multilingual"


@dataclass
class Pooled:
    """One language's counts over all seeds; ``keys[i]`` names the document of check ``i``."""

    language: str
    n: int = 13
    seeds: int = 0
    flags: list[bool] = field(default_factory=list)
    english: list[bool] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    shared: int = 0
    caught: int = 0
    caught_english: int = 0
    quotes: int = 0


def wilson(part: int, whole: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a rate ``part / whole``."""
    if not whole:
        return 0.0, 1.0
    p = part / whole
    middle = (p + z * z / (2 * whole)) / (1 + z * z / whole)
    half = z * math.sqrt(p * (1 - p) / whole + z * z / (4 * whole * whole)) / (1 + z * z / whole)
    return max(0.0, middle - half), min(1.0, middle + half)


def ratio_interval(row: Pooled, draws: int = 2000) -> tuple[float, float]:
    """95 % interval of the ratio of false-flag rates, by a bootstrap over documents."""
    own: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key, mine, base in zip(row.keys, row.flags, row.english, strict=True):
        own[key][0] += mine
        own[key][1] += base
    counts = np.array(list(own.values()), dtype=np.float64).reshape(-1, 2)
    rng = np.random.default_rng(0)
    pick = rng.integers(0, len(counts), size=(draws, len(counts)))
    sums = counts[pick].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(sums[:, 1] > 0, sums[:, 0] / sums[:, 1], np.inf)
    low, high = np.percentile(ratios, [2.5, 97.5], method="lower")
    return float(low), float(high)


def _english_run(a: str, b: str) -> int:
    """The most words in a row two English texts share."""
    x, y = a.lower().split(), b.lower().split()
    return SequenceMatcher(None, x, y, autojunk=False).find_longest_match().size


def _weight(text: str) -> float:
    """A text's weight in English words (``core._windows``)."""
    w = tokens(text, T)
    return float(word_weights(w).sum()) / WEIGHT_UNIT if w else 0.0


def _protected(data: DecontCase, english: bool) -> ProtectedSet:
    body = "\n".join(
        json.dumps({"id": str(i), "text": m.english if english else m.text})
        for i, m in enumerate(data.items)
    )
    return parse_protected_set("eval", body, ProtectedFormat.JSONL, tokenizer=T)


def _seed(row: Pooled, found: list[Message], items: int, seed: int, show: bool) -> None:
    data = case(found, items, 10**9, seed)
    hits = {}
    for english in (False, True):
        protected = _protected(data, english)
        row.n = protected.n
        docs = [" ".join(m.english if english else m.text for m in d) for d in data.clean]
        hits[english] = protected.hits_many(docs)
        quotes = [" ".join(m.english if english else m.text for m in d) for d in data.quotes]
        caught = [
            any(label == str(i) for label, _ in h)
            for i, h in enumerate(protected.hits_many(quotes))
        ]
        if english:
            row.caught_english += sum(caught)
        else:
            row.caught += sum(caught)
            row.quotes += len(caught)
            for i in [i for i, c in enumerate(caught) if not c and show]:
                item = data.items[i]
                print(f"  missed ({_weight(item.text):.1f} English words' worth): {item.text}")
                print(f"    English: {item.english}")
    for d, doc in enumerate(data.clean):
        mine, base = bool(hits[False][d]), bool(hits[True][d])
        row.flags.append(mine)
        row.english.append(base)
        row.keys.append(doc[0].catalog + "\0" + doc[0].english)
        if not mine:
            continue
        text = " ".join(m.english for m in doc)
        run = max(_english_run(data.items[int(label)].english, text) for label, _ in hits[False][d])
        row.shared += run >= SHARED
        if show:
            label, gram = hits[False][d][0]
            print(f"  flag (seed {seed}; English flags it too: {base}; English shares {run}"
                  f" words in a row): {gram.replace(' ', '')}")  # fmt: skip
            print(f"    item: {data.items[int(label)].english}")


def measure(
    language: str, items: int, seeds: range, show: bool = False, roots: tuple[str, ...] = ROOTS
) -> Pooled:
    """The pooled counts of one language (no checks: no catalogs)."""
    found, _ = language_messages(language, roots)
    row = Pooled(language)
    for seed in seeds:
        row.seeds += 1
        _seed(row, found, items, seed, show)
    return row


def _rate(part: int, whole: int) -> str:
    low, high = wilson(part, whole)
    return f"{part}/{whole} = {100 * part / whole:.2f} % [{100 * low:.2f}, {100 * high:.2f}]"


def table(rows: list[Pooled]) -> list[str]:
    """The markdown table of the rows."""
    out = [
        "| language | n | seeds x items | clean checks | false flags (95 % CI) | English's "
        "(95 % CI) | ratio (95 % CI) | shared text | quotes caught | English's |",
        "|---|---:|---:|---:|---|---|---|---:|---:|---:|",
    ]
    for row in rows:
        checks = len(row.flags)
        if not checks:
            out.append(f"| {row.language} | | | no clean documents | | | | | | |")
            continue
        mine, base = sum(row.flags), sum(row.english)
        low, high = ratio_interval(row)
        ratio = f"{mine / base:.2f}" if base else ("-" if not mine else "inf")
        out.append(
            f"| {row.language} | {row.n} | {row.seeds} x {row.quotes // max(row.seeds, 1)} | "
            f"{checks} | {_rate(mine, checks)} | {_rate(base, checks)} | {ratio} "
            f"[{low:.2f}, {high:.2f}] | {row.shared}/{mine} | {row.caught}/{row.quotes} | "
            f"{row.caught_english}/{row.quotes} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the pooled table for ``--languages``."""
    parser = argparse.ArgumentParser(prog="python -m bench.multilingual.pooled",
                                     description=(__doc__ or "").split("\n\n")[0])  # fmt: skip
    parser.add_argument("--languages", default=",".join(DEFAULT))
    parser.add_argument("--items", type=int, default=100, help="eval items a seed (100)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds (10)")
    parser.add_argument("--first-seed", type=int, default=1, help="the first seed (1)")
    parser.add_argument("--show", action="store_true", help="print every flag and missed quote")
    parser.add_argument("--catalogs", default=":".join(ROOTS), help="roots (%(default)s)")
    args = parser.parse_args(argv)
    unknown = [lang for lang in args.languages.split(",") if lang not in LANGUAGES]
    if unknown:
        parser.error(f"unknown language(s) {', '.join(unknown)}: one of {', '.join(LANGUAGES)}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows = []
    for language in args.languages.split(","):
        if args.show:
            print(f"{language}:")
        roots = tuple(root for root in args.catalogs.split(":") if root)
        rows.append(measure(language, args.items, seeds, args.show, roots))
    version = MinhashParams(tokenizer=T).window_version
    print(f"windows `{version}`, seeds {seeds.start} to {seeds.stop - 1}, {args.items} items a "
          f"seed; `shared text`: false flags whose item shares >= {SHARED} English words in a "
          "row with the document's English sources\n")  # fmt: skip
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
