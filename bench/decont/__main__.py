"""Decontamination modes: documents/s of drop, cut and annotate (with the report), in process.

A seeded corpus of N documents (``bench.common.corpus``) and a protected set of M items (100
words each, from the same vocabulary, so common phrases do collide) are built; 1 % of the
documents get a 13-word quote of a random item spliced in. Every mode runs over the same
corpus in the same process, one after another:

- ``per-document reference``: ``neardup.core.engine.decontaminate_with``, the contract's drop, which
  checks one document at a time word by word (the peer: the straightforward implementation);
- ``drop`` / ``cut`` / ``annotate``: ``decontaminate_modes`` (batches hashed at numpy speed,
  only flagged documents scanned), each with a ``ContaminationReport`` observing;
- ``drop, item cap 1``: the frequency cap on.

Run from the repository root::

    python -m bench.decont [--docs N] [--items M] [--quick] [--markdown]

Defaults (N = 100,000, M = 5,000) take about a minute on 2 cores; ``--quick`` (N = 5,000) a
few seconds.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from bench.common import options
from bench.common.corpus import doc_id, documents
from bench.common.machine import at_start, facts
from bench.common.options import Size
from neardup.core.engine import (
    ContaminationReport,
    DecontMode,
    DecontParams,
    Doc,
    NgramIndex,
    ProtectedFormat,
    Protection,
    decontaminate_modes,
    decontaminate_with,
    parse_protected_set,
    words,
)

SIZES = {
    "docs": Size("corpus documents (N)", 100_000, 5_000),
    "items": Size("protected items (M)", 5_000, 500),
}


def _corpus(n: int, items: list[str], seed: int) -> list[Doc]:
    texts = documents(n, seed=seed)
    rng = np.random.default_rng([seed, 7])
    for i in rng.choice(n, size=max(1, n // 100), replace=False).tolist():
        item = words(items[int(rng.integers(len(items)))])
        at = int(rng.integers(len(item) - 13))
        quote = " ".join(item[at : at + 13])
        cut = len(texts[i]) // 2
        texts[i] = f"{texts[i][:cut]} {quote} {texts[i][cut:]}"
    return [Doc(doc_id(i), t) for i, t in enumerate(texts)]


def _timed(run: Callable[[], Iterator[Doc]]) -> tuple[float, int]:
    started = time.perf_counter()
    out = sum(1 for _ in run())
    return time.perf_counter() - started, out


def main(argv: Sequence[str] | None = None) -> int:
    """Run every mode over one corpus and print the table."""
    parser = options.parser("bench.decont", __doc__, SIZES, "print a markdown table")
    args = parser.parse_args(argv)
    given, command = options.command_line("bench.decont", argv)
    del given
    size = options.sizes(args, SIZES)
    start = at_start()
    items = documents(size["items"], seed=1, min_words=100, max_words=100)
    body = "\n".join(json.dumps({"id": f"q{i}", "question": t}) for i, t in enumerate(items))
    pset = parse_protected_set("evals", body, ProtectedFormat.JSONL)
    docs = _corpus(size["docs"], items, seed=0)
    plain = Protection([pset])
    capped = Protection([pset], item_cap=1)
    index = NgramIndex(set(pset.grams), pset.n)

    def modes(prot: Protection, mode: DecontMode) -> Callable[[], Iterator[Doc]]:
        def run() -> Iterator[Doc]:
            report = ContaminationReport(prot)
            yield from decontaminate_modes(docs, prot, DecontParams(mode), observe=report.add)
            report.as_dict()

        return run

    runs: list[tuple[str, Callable[[], Iterator[Doc]]]] = [
        ("per-document reference (decontaminate_with)", lambda: decontaminate_with(docs, index)),
        ("drop + report", modes(plain, DecontMode.DROP)),
        ("cut + report", modes(plain, DecontMode.CUT)),
        ("annotate + report", modes(plain, DecontMode.ANNOTATE)),
        ("drop + report, item cap 1", modes(capped, DecontMode.DROP)),
    ]
    rows = []
    for label, run in runs:
        print(f"[bench.decont] {label} ...", file=sys.stderr, flush=True)
        seconds, out = _timed(run)
        rows.append((label, seconds, out))
    base = rows[0][1]
    n = len(docs)
    head = f"{n:,} documents, {len(items):,} protected items ({pset.ngrams:,} 13-grams)"
    if args.markdown:
        print(f"### Decontamination modes: {head}\n\n`{command}`\n")
        for key, value in facts(start).items():
            print(f"- {key}: {value}")
        print("\n| run | seconds | documents/s | documents out | speed vs reference |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for label, seconds, out in rows:
            print(f"| {label} | {seconds:.2f} | {n / seconds:,.0f} | {out:,} | "
                  f"{base / seconds:.1f}x |")  # fmt: skip
    else:
        print(head)
        for label, seconds, out in rows:
            print(f"{label:45} {seconds:7.2f} s {n / seconds:10,.0f}/s out {out:,} "
                  f"({base / seconds:.1f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
