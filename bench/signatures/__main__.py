"""Signature kernel benchmark: neardup against rensa and datasketch on four corpora, the stage
split, workers=2 vs 1, and the peak memory of one call.

Every library turns the same texts into 128-entry MinHash signatures over 5-word shingles.
Times are end to end from texts: the peers' shingles are built in Python the way their users
build them (``re.findall(r"\\w+", text.lower())``, windows of 5 words joined by spaces, a text
of 1 to 4 words is one shingle), and that tokenisation counts in their time.

The corpora (``bench.common.corpora``): (a) web-like English with typographic punctuation,
accented names and a little of other scripts; (b) a multilingual mix; (c) the ASCII corpus of
the earlier results; (d) real text: documentation and licence files installed on this machine.

Run from the repository root::

    python -m bench.signatures [--docs N] [--worker-docs N] [--repeats R] [--corpora a,b,...]
                               [--round-robin] [--seed S] [--quick] [--markdown]

Defaults (5000 docs a corpus, 8000 for workers, 5 repeats) take about four minutes on 2 cores.

The peers are imported lazily, inside the functions that call them, so that the spawn workers
of the ``workers=2`` section (which re-import this module as ``__mp_main__``) start no slower
than they would in an application.

The pieces: the contenders in ``bench.signatures.contenders``, timing in
``bench.signatures.measure``, neardup's stage split in ``bench.signatures.split``, the workers
comparison in ``bench.signatures.workers``, peak memory in ``bench.signatures.memory``, and the
report in ``bench.signatures.report``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from bench.common import options
from bench.common.corpora import CORPORA
from bench.common.machine import at_start
from bench.common.options import Size
from bench.signatures.contenders import RUNS, run_neardup, word_shingles
from bench.signatures.measure import median_times, peak_rss_mib
from bench.signatures.memory import signatures_peak_mib
from bench.signatures.report import (
    ASCII,
    KERNEL_SOURCES,
    WEB,
    Config,
    CorpusFacts,
    Report,
    machine_facts,
    markdown,
    print_text,
)
from bench.signatures.split import neardup_split
from bench.signatures.workers import worker_times

#: The size options: docs, docs for the workers comparison, repeats.
SIZES = {
    "docs": Size("docs a corpus, single process", 5000, 1000),
    "worker_docs": Size("docs of corpus (a), workers", 8000, 2000),
    "repeats": Size("timed repeats", 5, 2),
}
#: The corpus of the workers comparison (the issue's target corpus).
WORKERS_CORPUS = "web"
#: The workers comparison times this many times ``--repeats`` calls a case (its ratio is noisy).
WORKER_REPEATS = 3
#: The memory section also runs one call over each corpus repeated this many times.
MEMORY_TIMES = 4


def parse_args(argv: Sequence[str] | None = None) -> tuple[Config, bool]:
    """The configuration and the ``--markdown`` flag from the command line."""
    parser = options.parser("bench.signatures", __doc__, SIZES, "also print markdown tables")
    parser.add_argument(
        "--corpora", default=",".join(CORPORA), help=f"which, in order ({','.join(CORPORA)})"
    )
    parser.add_argument("--round-robin", action="store_true", help="interleave the cases")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (0)")
    args = parser.parse_args(argv)
    corpora = tuple(c for c in args.corpora.split(",") if c)
    if not corpora or set(corpora) - set(CORPORA):
        parser.error(f"--corpora takes names among {', '.join(CORPORA)}")
    config = Config(
        **options.sizes(args, SIZES),
        seed=args.seed,
        round_robin=args.round_robin,
        corpora=corpora,
    )
    if config.docs < 1 or config.worker_docs < 2 or config.repeats < 1:
        parser.error("need --docs >= 1, --worker-docs >= 2 and --repeats >= 1")
    return config, args.markdown


def _facts(key: str, texts: list[str]) -> CorpusFacts:
    return CorpusFacts(
        label=CORPORA[key].label,
        docs=len(texts),
        megabytes=sum(len(t.encode("utf-8")) for t in texts) / 1e6,
        shingles=sum(len(word_shingles(t)) for t in texts),
        non_ascii_docs=sum(not t.isascii() for t in texts),
    )


def run(config: Config, command: str) -> Report:
    """Make the corpora and run every measurement."""
    import neardup.core._compiled

    report = Report(config, command)
    report.start = at_start(KERNEL_SOURCES)
    report.jit_loaded = neardup.core._compiled.load() is not None
    # First, while this process is fresh, and interleaved: all three cases are neardup's.
    print("workers ...", file=sys.stderr, flush=True)
    worker_texts = CORPORA[WORKERS_CORPUS].make(config.worker_docs, config.seed)
    report.workers = worker_times(worker_texts, WORKER_REPEATS * config.repeats, config.seed)
    wall, cpu = time.perf_counter(), time.process_time()
    kept: dict[str, list[str]] = {}
    for key in config.corpora:
        print(f"corpus {key} ...", file=sys.stderr, flush=True)
        texts = CORPORA[key].make(config.docs, config.seed)
        if key in (WEB, ASCII):
            kept[key] = texts
        report.corpora[key] = _facts(key, texts)
        cases: dict[str, Callable[[], object]] = {
            name: (lambda fn=fn, texts=texts: fn(texts)) for name, fn in RUNS.items()
        }
        report.medians[key] = median_times(cases, config.repeats, config.round_robin)
        report.splits[key] = {
            "compiled": neardup_split(texts, config.repeats, jit=True),
            "numpy": neardup_split(texts, config.repeats, jit=False),
        }
    report.cpu_share = (time.process_time() - cpu) / (time.perf_counter() - wall)
    if WEB in kept and ASCII in kept:
        # (a) against (c) once more, interleaved and thrice as often: the ratio the issue sets.
        pair = {key: (lambda t=kept[key]: run_neardup(t)) for key in (WEB, ASCII)}
        report.web_ascii = median_times(pair, 3 * config.repeats, round_robin=True)
    print("memory ...", file=sys.stderr, flush=True)
    for key in config.corpora:
        texts = CORPORA[key].make(config.docs, config.seed)
        report.memory[key] = (
            signatures_peak_mib(texts, 1),
            signatures_peak_mib(texts, MEMORY_TIMES),
        )
    report.memory_times = MEMORY_TIMES
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
