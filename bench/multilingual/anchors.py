"""What whole items (``weighted-3``) cost a contamination check, interleaved:
``python -m bench.multilingual.speed --decont``.

Per language, on its gettext catalogs (``bench.multilingual.decont``'s case: 100 eval items of
13 to 20 English words, protected under ``multilingual``; every document of the other
messages, clean):

- check: CPU seconds per MB of ``NgramIndex.contaminated_many`` over the clean documents with
  the protected set's index (its whole items found by their anchors) and with the same n-grams
  but no whole items, in turns (the order swapped every round); the ratio is the median of the
  rounds' ratios, with the lowest and highest;
- build: CPU seconds of ``NgramIndex`` built from bare n-grams (every message's protected
  n-grams of the language: the whole items found by weighing them), against hashing the same
  n-grams alone (``gram_hashes``), in turns; ``all``: the languages' n-grams together.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.multilingual.catalogs import ROOTS, language_messages
from bench.multilingual.decont import case
from neardup.core._ngrams import NgramIndex, gram_hashes
from neardup.core._windows import protected_grams
from neardup.core.engine import ProtectedFormat, parse_protected_set, words

__all__ = ["Cost", "bare_grams", "measure_build", "measure_check", "rounds", "row", "tables"]

M = "multilingual"


@dataclass(frozen=True)
class Cost:
    """One row: what was timed (MB or n-grams), the medians of the two timings (CPU seconds)
    and the rounds' ratios (first over second)."""

    label: str
    size: float
    first: float
    second: float
    ratios: tuple[float, ...]


def _cpu(run: Callable[[], object]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def rounds(first: Callable[[], object], second: Callable[[], object], repeats: int) -> Cost:
    """Both timed in every round, in turns (``second`` first in odd rounds), after one
    untimed run each; size and label left for the caller."""
    first(), second()
    a: list[float] = []
    b: list[float] = []
    for round_ in range(repeats):
        if round_ % 2:
            b.append(_cpu(second))
            a.append(_cpu(first))
        else:
            a.append(_cpu(first))
            b.append(_cpu(second))
    ratios = tuple(x / y for x, y in zip(a, b, strict=True))
    return Cost("", 0.0, statistics.median(a), statistics.median(b), ratios)


def measure_check(language: str, repeats: int, roots: tuple[str, ...] = ROOTS) -> Cost | None:
    """The check's row of ``language`` (None if it has no catalogs or no clean documents); at
    most half its messages are eval items (a catalog of a few dozen keeps documents)."""
    found, _ = language_messages(language, roots)
    data = case(found, min(100, len(found) // 2), 100_000)
    texts = [" ".join(m.text for m in doc) for doc in data.clean]
    if not texts:
        return None
    body = "\n".join(json.dumps({"id": str(i), "text": m.text}) for i, m in enumerate(data.items))
    protected = parse_protected_set("eval", body, ProtectedFormat.JSONL, tokenizer=M)
    plain = NgramIndex(protected.grams.keys(), protected.n, M, frozenset())
    cost = rounds(
        lambda: protected.index.contaminated_many(texts),
        lambda: plain.contaminated_many(texts),
        repeats,
    )
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    return Cost(language, megabytes, cost.first / megabytes, cost.second / megabytes, cost.ratios)


def bare_grams(language: str, roots: tuple[str, ...] = ROOTS) -> set[str]:
    """Every message's protected n-grams of ``language`` (n = 13, ``multilingual``)."""
    found, _ = language_messages(language, roots)
    return {g for m in found for g in protected_grams(words(m.text, M), 13, M)}


def measure_build(label: str, grams: set[str], repeats: int) -> Cost:
    """The build's row: ``NgramIndex`` of the bare n-grams against hashing them."""
    listed = list(grams)
    cost = rounds(lambda: NgramIndex(grams, 13, M), lambda: gram_hashes(listed), repeats)
    return Cost(label, float(len(grams)), cost.first, cost.second, cost.ratios)


def row(cost: Cost, unit: float, size: str = ",.2f") -> str:
    """A markdown row: size (formatted by ``size``), both medians (times ``unit``), the
    ratios' median and range."""
    ratio = statistics.median(cost.ratios)
    return (
        f"| {cost.label} | {cost.size:{size}} | {cost.first * unit:.1f} | "
        f"{cost.second * unit:.1f} | {ratio:.2f} | "
        f"{min(cost.ratios):.2f} - {max(cost.ratios):.2f} |"
    )


def tables(languages: list[str], repeats: int, roots: tuple[str, ...] = ROOTS) -> list[str]:
    """The two markdown tables (check, build) of ``languages`` and of all of them together."""
    check = [
        "| language | MB | whole items, ms/MB | no whole items, ms/MB | ratio (median) "
        "| ratio (lowest - highest round) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    build = [
        "| language | n-grams | NgramIndex of bare n-grams, ms | hashing them, ms "
        "| ratio (median) | ratio (lowest - highest round) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    pooled: set[str] = set()
    for language in languages:
        if not language_messages(language, roots)[0]:
            check.append(f"| {language} | not installed | | | | |")
            build.append(f"| {language} | not installed | | | | |")
            continue
        grams = bare_grams(language, roots)
        found = measure_check(language, repeats, roots)
        check.append(row(found, 1e3) if found else f"| {language} | no clean documents | | | | |")
        pooled |= grams
        if not grams:
            build.append(f"| {language} | no n-grams | | | | |")
            continue
        build.append(row(measure_build(language, grams, repeats), 1e3, ",.0f"))
    if len(languages) > 1 and pooled:
        build.append(row(measure_build("all", pooled, repeats), 1e3, ",.0f"))
    return [*check, "", *build]
