"""Tokenising speed per byte, ``multilingual`` against ``words``, interleaved:
``python -m bench.multilingual.speed``.

The speed table of ``bench.multilingual`` times each figure on its own (all of one tokenizer's
runs, then the other's), so a change in the load of a shared machine between them moves the
ratio; here both tokenizers run in every round, in turns (words first in even rounds,
multilingual first in odd ones), and each round gives its own ratio. Per language: the texts
``bench.multilingual`` times (its documents repeated to about ``--speed-kb``; a language with
too little text for one document, every message of its catalogs), ``Tokens`` with the compiled
kernels, CPU seconds of this process per MB of UTF-8 (the median over the rounds), and the
ratio ``multilingual`` over ``words``: the median of the rounds' ratios, with the lowest and
highest (the spread the machine's load makes). Goal (issue 31): at most 1.3.

Run from the repository root::

    python -m bench.multilingual.speed [--languages ta,bn,...] [--repeats R] [--speed-kb KB]
        [--quick] [--markdown] [--decont]

``--decont``: what whole items cost a contamination check and an index build instead
(``bench.multilingual.anchors``; default languages th, km, my, ja, zh_CN and en).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

from bench.common import options
from bench.common.machine import Start, at_start, commit, facts
from bench.common.options import Size
from bench.multilingual.catalogs import LANGUAGES, ROOTS, documents, language_messages
from neardup.core._tokens import Tokens

__all__ = ["Speed", "main", "measure", "timed_texts"]

SIZES = {
    "repeats": Size("rounds (both tokenizers in each, in turns)", 15, 3),
    "speed_kb": Size("KB of UTF-8 timed per language (its documents, repeated)", 1000, 100),
}
#: The languages of the issue, and Tibetan script (``dz``).
DEFAULT = (
    "zh_CN,zh_TW,ja,ko,th,km,my,lo,dz,hi,bn,ta,si,ar,he,el,vi,ru,de,en"
)  # fmt: skip
#: ``--decont``'s: the scripts with whole items, and English as the control.
DECONT = "th,km,my,ja,zh_CN,en"


@dataclass(frozen=True)
class Speed:
    """One language's figures: MB timed, whether they are whole documents, the medians of
    ``words`` and ``multilingual`` (CPU seconds per MB), and the rounds' ratios."""

    language: str
    megabytes: float
    documents: bool
    words: float
    multilingual: float
    ratios: tuple[float, ...]


def timed_texts(
    language: str, kilobytes: int, roots: tuple[str, ...] = ROOTS
) -> tuple[list[str], bool]:
    """The texts timed for ``language`` (its ``bench.multilingual`` documents, or every message
    if it has too little text for one; False then), repeated to about ``kilobytes``."""
    found, _ = language_messages(language, roots)
    grouped = documents(found, 400)
    texts = [" ".join(m.text for m in doc) for doc in grouped] or [m.text for m in found]
    own = sum(len(t.encode("utf-8")) for t in texts) / 1000
    return texts * max(1, round(kilobytes / own)) if texts else [], bool(grouped)


def _cpu_seconds(texts: list[str], tokenizer: str) -> float:
    started = time.process_time()
    Tokens(texts, jit=True, tokenizer=tokenizer)
    return time.process_time() - started


def measure(
    language: str, repeats: int, kilobytes: int, roots: tuple[str, ...] = ROOTS
) -> Speed | None:
    """``language``'s figures; None if it has no catalogs here."""
    texts, whole = timed_texts(language, kilobytes, roots)
    if not texts:
        return None
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    for tokenizer in ("words", "multilingual"):
        _cpu_seconds(texts, tokenizer)  # tables built, kernels loaded
    words: list[float] = []
    multi: list[float] = []
    for round_ in range(repeats):
        if round_ % 2:
            multi.append(_cpu_seconds(texts, "multilingual"))
            words.append(_cpu_seconds(texts, "words"))
        else:
            words.append(_cpu_seconds(texts, "words"))
            multi.append(_cpu_seconds(texts, "multilingual"))
    return Speed(
        language,
        megabytes,
        whole,
        statistics.median(words) / megabytes,
        statistics.median(multi) / megabytes,
        tuple(m / w for m, w in zip(multi, words, strict=True)),
    )


def _decont(
    wanted: list[str],
    repeats: int,
    roots: tuple[str, ...],
    command: str,
    start: Start,
    markdown: bool,
) -> int:
    from bench.multilingual.anchors import tables

    found = tables(wanted, repeats, roots)
    if markdown:
        print("## Whole items' cost, interleaved (`bench.multilingual.speed --decont`)\n")
        print(f"- command: `{command}`")
        for key, value in facts(start).items():
            print(f"- {key}: {value}")
        print(f"- commit: {commit()}\n")
    print("\n".join(found))
    return 0


def _row(row: Speed) -> str:
    ratio = statistics.median(row.ratios)
    over = " (over 1.3)" if ratio > 1.3 else ""
    text = "" if row.documents else " (messages)"
    return (
        f"| {row.language}{text} | {row.megabytes:.2f} | {row.words * 1e3:.2f} | "
        f"{row.multilingual * 1e3:.2f} | {ratio:.2f}{over} | "
        f"{min(row.ratios):.2f} - {max(row.ratios):.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = options.parser("bench.multilingual.speed", __doc__, SIZES, "print a markdown table")
    parser.add_argument("--languages", default=DEFAULT, help="comma-separated (%(default)s)")
    parser.add_argument(
        "--catalogs",
        default=":".join(ROOTS),
        help="colon-separated roots of LOCALE/LC_MESSAGES/*.mo (default: %(default)s)",
    )
    parser.add_argument(
        "--decont", action="store_true", help="time whole items' cost (bench.multilingual.anchors)"
    )
    args = parser.parse_args(argv)
    roots = tuple(root for root in args.catalogs.split(":") if root)
    if args.decont and args.languages == DEFAULT:
        args.languages = DECONT
    _, command = options.command_line("bench.multilingual.speed", argv)
    sizes = options.sizes(args, SIZES)
    wanted = [lang for lang in args.languages.split(",") if lang]
    unknown = [lang for lang in wanted if lang not in LANGUAGES]
    if unknown:
        parser.error(f"unknown language(s) {', '.join(unknown)}: one of {', '.join(LANGUAGES)}")
    from neardup.core import _compiled

    if _compiled.load() is None:
        parser.error("the compiled kernels did not load: nothing to time")
    start = at_start()
    if args.decont:
        return _decont(wanted, sizes["repeats"], roots, command, start, args.markdown)
    rows = []
    missing: list[str] = []
    for language in wanted:
        row = measure(language, sizes["repeats"], sizes["speed_kb"], roots)
        if row is None:
            print(f"{language:6} not installed", file=sys.stderr)
            missing.append(language)
            continue
        rows.append(row)
        print(f"{language:6} {statistics.median(row.ratios):.2f}", file=sys.stderr)
    if args.markdown:
        print("## Multilingual tokenising speed, interleaved (`bench.multilingual.speed`)\n")
        print(f"- command: `{command}`")
        for key, value in facts(start).items():
            print(f"- {key}: {value}")
        print(f"- commit: {commit()}\n")
    print(
        "| language | MB | words, ms/MB | multilingual, ms/MB | ratio (median) "
        "| ratio (lowest - highest round) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(_row(row))
    for language in missing:
        print(f"| {language} | not installed | | | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
