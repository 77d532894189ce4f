"""neardup's ``signatures`` with workers=2 against workers=1, and what the machine allows.

Two workers can be at most as much faster than one as the machine runs two busy processes
faster than one: on a shared or throttled machine (two vCPUs on one physical core, another
process running) that is well below 2x. So the same run also times a pure-Python loop on the
same warm pool, one task against two tasks of half the work each: ``machine_ratio``, the most
any pool of two can give in that run, to read the signature ratio against.

The pure-Python loop touches no memory; the signature kernel streams its buffers and keeps the
vector units busy, which two vCPUs may share. So the run also times the kernel itself on the
pool with nothing sent: each worker signs its own copy of the corpus (generated in the worker,
once), the whole in one task against two halves at once (``kernel_ratio``): the most any way of
sending the texts could give. The warm pool's ratio is read against both.

All cases are interleaved in every repeat (drift of the machine's load hits them alike), after
untimed warm-up calls, and medians are reported.

Run alone (the ``workers`` section of ``python -m bench.signatures``)::

    python -m bench.signatures.workers [--worker-docs N] [--repeats R] [--quick] [--markdown]
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from bench.common import options
from bench.common.corpora import CORPORA
from bench.common.options import Size
from bench.signatures.measure import pool_peak_rss_mib, timed
from neardup.core.engine import spawn_pool, warm_worker
from neardup.core.minhash import signatures

#: Untimed full calls on the warm pool before timing (its workers are warmed as they start,
#: as a long-lived pool's are: ``spawn_pool(warm=warm_worker)``).
WARM_CALLS = 2
#: Iterations of the machine reference loop: about as long as workers=1 on 8,000 documents.
SPIN = 6_000_000
#: The cases, in the order they run in every repeat.
ONE = "workers=1"
SPAWNED = "workers=2, pool spawned by the call"
WARM = "workers=2, pre-created warm pool"


@dataclass
class WorkerTimes:
    """What the workers comparison measured.

    Attributes:
        medians: median seconds per case (``ONE``, ``SPAWNED``, ``WARM``).
        repeats: timed calls per case.
        identical: whether workers=2 gave the same signatures as workers=1.
        machine_ratio: the pure-Python loop, one task on the pool / two half tasks, medians.
        kernel_ratio: the same for the signature kernel on texts the workers already hold.
        worker_peak_rss_mib: the largest peak RSS of the warm pool's workers (None: unknown).
    """

    medians: dict[str, float]
    repeats: int
    identical: bool
    machine_ratio: float
    kernel_ratio: float
    worker_peak_rss_mib: float | None


def spin(n: int) -> int:
    """A pure-Python CPU loop (no memory traffic, no numpy): ``n`` additions."""
    total = 0
    for i in range(n):
        total += i
    return total


def _spin_on(pool: ProcessPoolExecutor, parts: int) -> Callable[[], object]:
    return lambda: list(pool.map(spin, [SPIN // parts] * parts))


_HELD: dict[tuple[int, int], list[str]] = {}


def held_signatures(docs: int, seed: int, part: int, parts: int) -> int:
    """In a worker: the signatures of part ``part`` of ``parts`` of its own copy of ``docs``
    documents of corpus (a) (made here once, so nothing but these numbers is sent)."""
    if (docs, seed) not in _HELD:
        _HELD.clear()
        _HELD[docs, seed] = CORPORA["web"].make(docs, seed)
    texts = _HELD[docs, seed]
    lo, hi = docs * part // parts, docs * (part + 1) // parts
    return len(signatures(texts[lo:hi]))


def _held_on(pool: ProcessPoolExecutor, docs: int, seed: int, parts: int) -> Callable[[], object]:
    def run() -> object:
        futures = [pool.submit(held_signatures, docs, seed, i, parts) for i in range(parts)]
        return [f.result() for f in futures]

    return run


def worker_times(texts: list[str], repeats: int, seed: int = 0) -> WorkerTimes:
    """Median seconds of ``signatures`` with workers=1, workers=2 (own pool) and a warm pool,
    interleaved, with the machine and kernel references timed in the same repeats (``texts``
    are corpus (a)'s first documents for ``seed``)."""
    warm_worker()  # workers=1 runs here: compiled kernels and tables ready, as in the pool
    docs = len(texts)
    with spawn_pool(2, warm=warm_worker) as pool:
        for _ in range(WARM_CALLS):
            signatures(texts, pool=pool)
        # Both workers make their copy (two tasks at once, each long enough to hold one).
        _held_on(pool, docs, seed, 2)()
        cases: dict[str, Callable[[], object]] = {
            ONE: lambda: signatures(texts, workers=1),
            SPAWNED: lambda: signatures(texts, workers=2),
            WARM: lambda: signatures(texts, pool=pool),
            "spin 1": _spin_on(pool, 1),
            "spin 2": _spin_on(pool, 2),
            "held 1": _held_on(pool, docs, seed, 1),
            "held 2": _held_on(pool, docs, seed, 2),
        }
        for fn in cases.values():
            fn()
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeats):
            for name, fn in cases.items():
                samples[name].append(timed(fn))
        identical = np.array_equal(signatures(texts, pool=pool), signatures(texts, workers=1))
        worker_peak = pool_peak_rss_mib(pool)
    medians = {name: statistics.median(times) for name, times in samples.items()}
    machine = medians.pop("spin 1") / medians.pop("spin 2")
    kernel = medians.pop("held 1") / medians.pop("held 2")
    return WorkerTimes(medians, repeats, bool(identical), machine, kernel, worker_peak)


def lines(result: WorkerTimes, docs: int, markdown: bool) -> list[str]:
    """The comparison as text lines, or as a markdown table with its notes."""
    one = result.medians[ONE]
    machine = (
        f"the machine in the same run: a pure-Python loop on the warm pool, one task vs two "
        f"of half the work, {result.machine_ratio:.2f}x (the most any two workers gave here); "
        f"warm pool / machine: {one / result.medians[WARM] / result.machine_ratio:.0%}; "
        f"the signature kernel on texts the workers already hold (nothing sent), the whole in "
        f"one task vs two halves at once, {result.kernel_ratio:.2f}x; warm pool / kernel: "
        f"{one / result.medians[WARM] / result.kernel_ratio:.0%}"
    )
    same = f"workers=2 signatures identical to workers=1: {result.identical}"
    if not markdown:
        out = [f"workers, corpus (a), {docs} docs, medians of {result.repeats}, interleaved:"]
        out += [
            f"  {name:<46} {s:7.3f} s  speed-up vs workers=1: {one / s:.2f}x"
            for name, s in result.medians.items()
        ]
        return [*out, f"  {machine}", f"  {same}"]
    out = [
        f"`signatures()` on {docs} docs of corpus (a), median of {result.repeats}, the cases "
        "interleaved in every repeat:",
        "",
        "| call | median s | speed-up vs workers=1 |",
        "|---|---:|---:|",
    ]
    out += [f"| {name} | {s:.3f} | {one / s:.2f}x |" for name, s in result.medians.items()]
    return [*out, "", f"{machine[0].upper()}{machine[1:]}.", "", f"{same}."]


SIZES = {
    "worker_docs": Size("docs of corpus (a)", 8000, 2000),
    "repeats": Size("timed repeats of every case", 15, 5),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison alone and print it."""
    parser = options.parser("bench.signatures.workers", __doc__, SIZES, "print a markdown table")
    args = parser.parse_args(argv)
    size = options.sizes(args, SIZES)
    if size["worker_docs"] < 2 or size["repeats"] < 1:
        parser.error("need --worker-docs >= 2 and --repeats >= 1")
    texts = CORPORA["web"].make(size["worker_docs"], 0)
    result = worker_times(texts, size["repeats"], seed=0)
    print("\n".join(lines(result, size["worker_docs"], args.markdown)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
