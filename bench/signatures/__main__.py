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

The pieces: the contenders in ``bench.signatures.contenders``, timing and peak RSS in
``bench.signatures.measure``, neardup's stage split in ``bench.signatures.split``, the workers
comparison in ``bench.signatures.workers``, and the report in ``bench.signatures.report``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from bench.common import options
from bench.common.corpus import documents
from bench.common.machine import at_start
from bench.common.options import Size
from bench.signatures.contenders import (
    BATCHED,
    run_datasketch,
    run_neardup,
    run_rensa,
    word_shingles,
)
from bench.signatures.measure import median_times, peak_rss_mib
from bench.signatures.report import (
    KERNEL_SOURCES,
    Config,
    Report,
    machine_facts,
    markdown,
    print_text,
)
from bench.signatures.split import neardup_split
from bench.signatures.workers import worker_times

#: The size options: docs, docs for the workers comparison, repeats.
SIZES = {
    "docs": Size("docs, single process", 5000, 1000),
    "worker_docs": Size("docs, workers", 8000, 2000),
    "repeats": Size("timed repeats", 5, 2),
}


def parse_args(argv: Sequence[str] | None = None) -> tuple[Config, bool]:
    """The configuration and the ``--markdown`` flag from the command line."""
    parser = options.parser("bench.signatures", __doc__, SIZES, "also print markdown tables")
    parser.add_argument(
        "--batch-size", type=int, default=1000, help="extra batched neardup row; 0 = none (1000)"
    )
    parser.add_argument("--round-robin", action="store_true", help="interleave the cases")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (0)")
    args = parser.parse_args(argv)
    config = Config(
        **options.sizes(args, SIZES),
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
    report.start = at_start(KERNEL_SOURCES)
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
    raw, command = options.command_line("bench.signatures", argv)
    config, as_markdown = parse_args(raw)
    report = run(config, command)
    print_text(report)
    if as_markdown:
        print()
        print(markdown(report, machine_facts(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
