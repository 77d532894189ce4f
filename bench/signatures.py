"""Signature kernel benchmark: neardup against datasketch and rensa, then workers=2 vs 1.

Every library turns the same texts into 128-entry MinHash signatures over 5-word shingles.
Times are end to end from texts: the peers' shingles are built in Python the way their users
build them (``re.findall(r"\\w+", text.lower())``, windows of 5 words joined by spaces, a text
of 1 to 4 words is one shingle), and that tokenisation counts in their time.

Run from the repository root::

    python -m bench.signatures [--docs N] [--worker-docs N] [--repeats R] [--batch-size B]
                               [--round-robin] [--seed S] [--quick] [--markdown]

Defaults (5000 docs, 8000 for workers, 5 repeats) take about a minute on 2 cores.

The peers are imported lazily, inside the functions that call them, so that the spawn workers
of the ``workers=2`` section (which re-import this module as ``__mp_main__``) start no slower
than they would in an application.

The pieces: the contenders in ``bench.signatures_contenders``, timing and peak RSS in
``bench.signatures_measure``, neardup's stage split in ``bench.signatures_split``, the workers
comparison in ``bench.signatures_workers``, and the report in ``bench.signatures_report``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable, Sequence

from bench.corpus import documents
from bench.machine import load_average
from bench.signatures_contenders import (
    BATCHED,
    run_datasketch,
    run_neardup,
    run_rensa,
    word_shingles,
)
from bench.signatures_measure import median_times, peak_rss_mib
from bench.signatures_report import (
    Config,
    Report,
    kernel_digest,
    machine_facts,
    markdown,
    print_text,
)
from bench.signatures_split import neardup_split
from bench.signatures_workers import worker_times


def parse_args(argv: Sequence[str] | None = None) -> tuple[Config, bool]:
    """The configuration and the ``--markdown`` flag from the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.signatures", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--docs", type=int, default=None, help="docs, single process (5000)")
    parser.add_argument("--worker-docs", type=int, default=None, help="docs, workers (8000)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (5)")
    parser.add_argument(
        "--batch-size", type=int, default=1000, help="extra batched neardup row; 0 = none (1000)"
    )
    parser.add_argument("--round-robin", action="store_true", help="interleave the cases")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (0)")
    parser.add_argument("--quick", action="store_true", help="1000 / 2000 docs, 2 repeats")
    parser.add_argument("--markdown", action="store_true", help="also print markdown tables")
    args = parser.parse_args(argv)
    docs, worker_docs, repeats = (1000, 2000, 2) if args.quick else (5000, 8000, 5)
    config = Config(
        docs=args.docs if args.docs is not None else docs,
        worker_docs=args.worker_docs if args.worker_docs is not None else worker_docs,
        repeats=args.repeats if args.repeats is not None else repeats,
        batch_size=args.batch_size,
        seed=args.seed,
        round_robin=args.round_robin,
    )
    if config.docs < 1 or config.worker_docs < 2 or config.repeats < 1:
        parser.error("need --docs >= 1, --worker-docs >= 2 and --repeats >= 1")
    return config, args.markdown


def run(config: Config, command: str) -> Report:
    """Generate the corpus and run every measurement."""
    corpus = documents(max(config.docs, config.worker_docs), seed=config.seed)
    texts = corpus[: config.docs]
    shingles = int(sum(len(word_shingles(t)) for t in texts))
    report = Report(config, command, sum(map(len, texts)) / 1e6, shingles)
    report.load_at_start = load_average()
    report.kernel = kernel_digest()
    cases: dict[str, Callable[[], object]] = {"neardup": lambda: run_neardup(texts)}
    if config.batch_size > 0:
        cases[BATCHED] = lambda: run_neardup(texts, config.batch_size)
    cases["rensa"] = lambda: run_rensa(texts)
    cases["datasketch"] = lambda: run_datasketch(texts)
    wall, cpu = time.perf_counter(), time.process_time()
    report.medians = median_times(cases, config.repeats, config.round_robin)
    report.split, report.split_note = neardup_split(texts, config.repeats)
    report.cpu_share = (time.process_time() - cpu) / (time.perf_counter() - wall)
    report.workers, report.workers_identical, report.worker_peak_rss_mib = worker_times(
        corpus[: config.worker_docs], config.repeats, config.round_robin
    )
    report.peak_rss_mib = peak_rss_mib()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the report (and the markdown tables with ``--markdown``)."""
    raw = sys.argv[1:] if argv is None else list(argv)
    config, as_markdown = parse_args(raw)
    command = shlex.join(["python", "-m", "bench.signatures", *raw])
    report = run(config, command)
    print_text(report)
    if as_markdown:
        print()
        print(markdown(report, machine_facts(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
