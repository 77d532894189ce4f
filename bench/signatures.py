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
"""

from __future__ import annotations

import argparse
import datetime
import gc
import hashlib
import os
import platform
import re
import resource
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

import core.fnv
import core.permute
import core.signatures as cs
import core.tokens
from bench.corpus import documents
from bench.machine import cpu_model, load_average, version

NUM_PERM = 128
SEED = 0
K = 5
#: The case name of neardup called batch by batch.
BATCHED = "neardup/batched"
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Config:
    """What to run.

    Attributes:
        docs: documents in the single-process comparison.
        worker_docs: documents in the workers=2 vs workers=1 comparison.
        repeats: timed repeats of every case; medians are reported.
        batch_size: documents per call in the extra, batched neardup row; 0 leaves it out.
        seed: the corpus seed.
        round_robin: interleave the cases in every repeat, instead of timing all repeats of a
            case back to back.
    """

    docs: int
    worker_docs: int
    repeats: int
    batch_size: int
    seed: int
    round_robin: bool


@dataclass
class Report:
    """Everything measured, in seconds unless a name says otherwise."""

    config: Config
    command: str
    corpus_mb: float
    shingles: int
    #: CPU time over wall time of the single-process sections: ~1.0 on an idle core, lower when
    #: other processes competed for it (the timings are then inflated).
    cpu_share: float = 0.0
    load_at_start: str = ""
    kernel: str = ""
    medians: dict[str, float] = field(default_factory=dict)
    split: dict[str, float] | None = None
    split_note: str = ""
    workers: dict[str, float] = field(default_factory=dict)
    workers_identical: bool = False
    peak_rss_mib: float = 0.0
    worker_peak_rss_mib: float | None = None


# --- the contenders ---------------------------------------------------------------------------


def word_shingles(text: str, k: int = K) -> list[str]:
    """The k-word shingles of ``text`` as their users build them for datasketch and rensa.

    Args:
        text: a document.
        k: words per shingle.

    Returns:
        The windows of k words joined by single spaces; one shingle of all the words for a text
        of 1 to k-1 words; none for a text without words.
    """
    words = _WORD.findall(text.lower())
    if len(words) < k:
        return [" ".join(words)] if words else []
    return [" ".join(words[i : i + k]) for i in range(len(words) - k + 1)]


def run_neardup(texts: Sequence[str], batch_size: int = 0) -> NDArray[np.uint32]:
    """neardup on this process: ``batch_signatures`` over the list, or batch by batch.

    Args:
        texts: the documents.
        batch_size: documents per ``batch_signatures`` call; 0 for one call over all of them.

    Returns:
        The ``[len(texts), 128]`` uint32 signatures.
    """
    if batch_size <= 0:
        return cs.batch_signatures(texts, NUM_PERM, SEED, K)
    parts = [
        cs.batch_signatures(texts[i : i + batch_size], NUM_PERM, SEED, K)
        for i in range(0, len(texts), batch_size)
    ]
    return np.concatenate(parts, axis=0)


def run_datasketch(texts: Sequence[str]) -> list[NDArray[np.uint64]]:
    """datasketch ``MinHash.bulk`` with its default (SHA-1 based) hash over UTF-8 shingles.

    Args:
        texts: the documents.

    Returns:
        The hash values of each document's MinHash.
    """
    from datasketch import MinHash  # type: ignore[import-untyped]

    data = [[s.encode("utf-8") for s in word_shingles(t)] for t in texts]
    return [m.hashvalues for m in MinHash.bulk(data, num_perm=NUM_PERM)]


def run_rensa(texts: Sequence[str]) -> list[list[int]]:
    """rensa ``RMinHash(num_perm=128, seed=0)``, ``update`` with the shingles, then ``digest``.

    Args:
        texts: the documents.

    Returns:
        The digest of each document.
    """
    from rensa import RMinHash  # type: ignore[import-untyped]

    digests = []
    for text in texts:
        m = RMinHash(num_perm=NUM_PERM, seed=SEED)
        m.update(word_shingles(text))
        digests.append(m.digest())
    return digests


# --- timing -----------------------------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    """Seconds taken by one call of ``fn``, after a garbage collection."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_times(
    cases: dict[str, Callable[[], object]], repeats: int, round_robin: bool = False
) -> dict[str, float]:
    """Median seconds of each case.

    Back to back (the default), each case runs in the steady state it would have in a real
    pipeline. Round-robin spreads slow drift of the machine over all cases alike, but each case
    then runs right after another library's allocations: measured here, neardup is ~15 %
    slower right after datasketch's millions of small objects than after itself.

    Args:
        cases: a name and a zero-argument call per case.
        repeats: timed calls per case.
        round_robin: interleave the cases in every repeat.

    Returns:
        The median seconds per case name.
    """
    samples: dict[str, list[float]] = {name: [] for name in cases}
    if round_robin:
        for fn in cases.values():  # untimed: imports, caches, first-touch of memory
            fn()
        for _ in range(repeats):
            for name, fn in cases.items():
                samples[name].append(timed(fn))
    else:
        for name, fn in cases.items():
            fn()  # untimed: imports, caches, first-touch of memory
            samples[name] = [timed(fn) for _ in range(repeats)]
    return {name: statistics.median(times) for name, times in samples.items()}


# --- neardup's split --------------------------------------------------------------------------


def _split_once(texts: Sequence[str]) -> tuple[dict[str, float], NDArray[np.uint32]]:
    """One pass of the kernel stage by stage, from core's internals."""
    from core.hashing import MERSENNE31, perm_params

    gc.collect()
    t0 = time.perf_counter()
    tokens = core.tokens.Tokens(texts)
    start, end, per_doc = core.tokens.shingle_spans(tokens, K)
    t1 = time.perf_counter()
    h = core.fnv.fnv1a64_spans(tokens.buf, start, end)
    x = h % np.uint64(MERSENNE31)
    t2 = time.perf_counter()
    a, b = perm_params(NUM_PERM, SEED)
    sig = core.permute.minima(x, per_doc, a, b)
    t3 = time.perf_counter()
    stages = {"tokenise + shingle spans": t1 - t0, "FNV-1a 64 + mod P": t2 - t1}
    stages["permutations + minima"] = t3 - t2
    return stages, sig


def neardup_split(texts: Sequence[str], repeats: int) -> tuple[dict[str, float] | None, str]:
    """Median seconds of neardup's stages, or None with the reason if internals changed.

    Args:
        texts: the documents (all in one batch).
        repeats: timed passes.

    Returns:
        The medians per stage (or None), and a note: empty, or why the split is missing or
        differs from ``batch_signatures``.
    """
    try:
        passes = [_split_once(texts) for _ in range(repeats)]
    except (AttributeError, ImportError, TypeError, ValueError) as exc:
        return None, f"split unavailable (core internals changed?): {type(exc).__name__}: {exc}"
    note = ""
    if not np.array_equal(passes[0][1], cs.batch_signatures(texts, NUM_PERM, SEED, K)):
        note = "the staged pass no longer equals batch_signatures: the split may be stale"
    names = passes[0][0]
    return {name: statistics.median(p[0][name] for p in passes) for name in names}, note


# --- workers ----------------------------------------------------------------------------------


def worker_times(
    texts: list[str], repeats: int, round_robin: bool = False
) -> tuple[dict[str, float], bool, float | None]:
    """Median seconds of ``signatures`` with workers=1, workers=2 (own pool) and a warm pool.

    Args:
        texts: the documents.
        repeats: timed calls per case.
        round_robin: interleave the cases in every repeat.

    Returns:
        The medians per case, whether workers=2 gave the same signatures as workers=1, and the
        largest peak RSS in MiB of the warm pool's workers (None where it cannot be read).
    """
    half = (len(texts) + 1) // 2  # each worker's share, to tell batch size from parallelism
    with cs.spawn_pool(2) as pool:
        # Warm-up: start both workers and import the kernel in each before any timing.
        for _ in range(2):
            cs.signatures(texts[:64], pool=pool)
        cases: dict[str, Callable[[], object]] = {
            "workers=1": lambda: cs.signatures(texts, workers=1),
            "workers=1, as 2 batch_signatures calls of half": lambda: run_neardup(texts, half),
            "workers=2, pool spawned by the call": lambda: cs.signatures(texts, workers=2),
            "workers=2, pre-created warm pool": lambda: cs.signatures(texts, pool=pool),
        }
        medians = median_times(cases, repeats, round_robin)
        identical = np.array_equal(cs.signatures(texts, pool=pool), cs.signatures(texts, workers=1))
        worker_peak = pool_peak_rss_mib(pool)
    return medians, bool(identical), worker_peak


# --- machine and memory -----------------------------------------------------------------------


def peak_rss_mib(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident set size in MiB (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(who).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def pool_peak_rss_mib(pool: ProcessPoolExecutor) -> float | None:
    """The largest peak RSS (VmHWM) in MiB among a live pool's workers, on Linux; else None.

    ``getrusage(RUSAGE_CHILDREN)`` is no use for spawn workers: each is forked from this process
    before it execs, and Linux keeps the forked image's high-water mark, so it reports this
    process's size instead of the worker's.
    """
    peaks = []
    try:
        for pid in getattr(pool, "_processes", None) or {}:
            with open(f"/proc/{pid}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peaks.append(int(line.split()[1]) / 2**10)
    except (OSError, ValueError, IndexError):
        return None
    return max(peaks) if peaks else None


def kernel_digest() -> str:
    """The first 12 hex digits of SHA-256 of the kernel's modules: which kernel was measured."""
    digest = hashlib.sha256()
    try:
        for module in (core.tokens, core.fnv, core.permute, cs):
            with open(str(module.__file__), "rb") as f:
                digest.update(f.read())
    except (OSError, TypeError):
        return "unknown"
    return digest.hexdigest()[:12]


def machine_facts(report: Report) -> dict[str, str]:
    """Date, machine, load and versions, for the record."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date (end of run)": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": f"{usable} CPUs (nproc) - {cpu_model()}",
        "load average (1, 5, 15 min)": f"{report.load_at_start} at start, {load_average()} at end",
        "CPU time / wall time, single-process sections": f"{report.cpu_share:.2f}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "datasketch": version("datasketch"),
        "rensa": version("rensa"),
        "kernel modules sha256 (at start)": report.kernel,
    }


# --- output -----------------------------------------------------------------------------------


def comparison(neardup: float, peer: float, name: str) -> str:
    """``"neardup is 1.90x faster than rensa"`` (or slower), from the two median times."""
    if peer >= neardup:
        return f"neardup is {peer / neardup:.2f}x faster than {name}"
    return f"neardup is {neardup / peer:.2f}x slower than {name}"


def labels(config: Config) -> dict[str, str]:
    """What each case name stands for, for the tables."""
    return {
        "neardup": "neardup, 1 process, batch_signatures over the whole list",
        BATCHED: f"neardup, 1 process, batch_signatures in batches of {config.batch_size} docs",
        "rensa": "rensa RMinHash, Python shingles (counted)",
        "datasketch": "datasketch MinHash.bulk, SHA-1, Python shingles (counted)",
    }


def rss_summary(report: Report) -> str:
    """Peak RSS of this process and of the warm pool's largest worker, as one phrase."""
    text = f"{report.peak_rss_mib:.0f} MiB (benchmark process, all sections)"
    if report.worker_peak_rss_mib is not None:
        text += f", {report.worker_peak_rss_mib:.0f} MiB (largest warm-pool worker, VmHWM)"
    return text


def print_text(report: Report) -> None:
    """The human-readable report."""
    c = report.config
    print(f"corpus: {c.docs} docs, {report.corpus_mb:.1f} MB, {report.shingles} 5-word shingles")
    print(f"signatures: {NUM_PERM} permutations; medians of {c.repeats} repeats (seconds)")
    order = "round-robin" if c.round_robin else "each case's repeats back to back"
    print(f"  (order: {order})")
    nd = report.medians["neardup"]
    names = labels(c)
    for name, seconds in report.medians.items():
        print(f"  {seconds:7.3f} s  {c.docs / seconds:7.0f} docs/s  {names[name]}")
    print("  " + ", ".join(comparison(nd, report.medians[p], p) for p in ("rensa", "datasketch")))
    if report.split is None:
        print(f"neardup split: {report.split_note}")
    else:
        total = sum(report.split.values())
        print(f"neardup split (medians, staged pass total {total:.3f} s):")
        for stage, seconds in report.split.items():
            print(f"  {stage:<26} {seconds:7.3f} s  {100 * seconds / total:5.1f} %")
        if report.split_note:
            print(f"  note: {report.split_note}")
    print(f"workers ({c.worker_docs} docs, medians of {c.repeats}):")
    w1 = report.workers["workers=1"]
    for name, seconds in report.workers.items():
        print(f"  {name:<46} {seconds:7.3f} s  speed-up vs workers=1: {w1 / seconds:.2f}x")
    print(f"  workers=2 signatures identical to workers=1: {report.workers_identical}")
    print(f"peak RSS: {rss_summary(report)}")
    print(f"load average: {report.load_at_start} at start, {load_average()} at end; ", end="")
    share = report.cpu_share
    print(
        f"CPU/wall of the single-process sections {share:.2f} (~1.00 idle core; lower: contended)"
    )


def markdown(report: Report, facts: dict[str, str]) -> str:
    """The run as markdown tables, to paste into bench/RESULTS.md."""
    c = report.config
    nd = report.medians["neardup"]
    w1 = report.workers["workers=1"]
    lines = ["| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in facts.items()]
    lines += [f"| command | `{report.command}` |", ""]
    lines += [
        f"Signatures of {c.docs} docs ({report.corpus_mb:.1f} MB, {report.shingles} shingles), "
        f"{NUM_PERM} permutations, 5-word shingles, median of {c.repeats} "
        f"({'round-robin' if c.round_robin else 'repeats of each case back to back'}):",
        "",
        "| contender | median s | docs/s | time / neardup time |",
        "|---|---:|---:|---:|",
    ]
    names = labels(c)
    for name, seconds in report.medians.items():
        lines.append(
            f"| {names[name]} | {seconds:.3f} | {c.docs / seconds:.0f} | {seconds / nd:.2f}x |"
        )
    if report.split is not None:
        total = sum(report.split.values())
        lines += ["", "| neardup stage | median s | share |", "|---|---:|---:|"]
        lines += [
            f"| {stage} | {s:.3f} | {100 * s / total:.0f} % |" for stage, s in report.split.items()
        ]
    lines += [
        "",
        f"`signatures()` on {c.worker_docs} docs, median of {c.repeats}:",
        "",
        "| call | median s | speed-up vs workers=1 |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {s:.3f} | {w1 / s:.2f}x |" for name, s in report.workers.items()]
    lines += ["", f"Peak RSS: {rss_summary(report)}."]
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------


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
