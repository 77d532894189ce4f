"""Cold starts: how long a new ``neardup`` process takes to answer, the first time it is used
and after. No peers: datasketch and rensa are libraries, with no command or server to start.

Every figure is the wall time of a new process, from spawning it:

- ``neardup --version``: the interpreter and the command's own imports (the floor);
- ``neardup dedup`` of 8 documents, to its exit (signed here with numpy: no spawn pool, no
  numba, below ``POOL_AFTER_CHARS``);
- ``neardup dedup`` of N documents (above ``POOL_AFTER_CHARS``: a spawn pool of warm workers
  running the compiled kernels), to its exit;
- ``neardup serve`` of an empty store, to the first 200 of ``/readyz`` (polled every 50 ms),
  and to the answer of a first ``POST /v1/signatures`` of 8 texts sent then (which waits for
  the workers' warm-up).

"First use" runs each once with an empty numba cache (``NUMBA_CACHE_DIR``, a new temporary
directory for each, so the kernels compile as after a fresh install); "after" is the median (and
the slowest) of R runs that find the cache that first use filled. Every process runs with the
defaults (``--workers``: the CPUs) and no ``NEARDUP_*`` variable.

Run from the repository root::

    python -m bench.coldstart [--runs R] [--docs N] [--quick] [--markdown]

Defaults (R = 5, N = 20,000) take a minute or two; ``--quick`` (R = 3, N = 5,000) less.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from bench.common import options
from bench.common.corpus import doc_id, documents
from bench.common.machine import REPO_ROOT, at_start, facts
from bench.common.options import Size
from bench.common.server import start_server
from neardup.core.engine import Doc, write_docs

SIZES = {
    "runs": Size("runs after the first use (R)", 5, 3),
    "docs": Size("documents of the larger dedup (N)", 20_000, 5_000),
}
#: The 8 documents of the small run: three groups of near copies and two singletons.
_SMALL = [
    f"the quick brown fox jumps over the lazy dog number {i % 3} again and again" for i in range(6)
] + ["a text of its own with nothing else like it", "and one more that stands alone here"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}


def _timed_command(*args: str) -> float:
    """Seconds from spawning ``python -m neardup ARGS`` (from the repository root, as
    ``bench.common.server`` starts ``serve``) to its exit, which must be 0."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "neardup", *args], cwd=REPO_ROOT, env=_env(), capture_output=True,
        text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"neardup {' '.join(args)} failed: {done.stderr}")
    return seconds


def _dedup(label: str, name: str, work: Path) -> Callable[[], dict[str, float]]:
    def run() -> dict[str, float]:
        out = work / "out.jsonl"
        out.unlink(missing_ok=True)
        return {label: _timed_command("dedup", str(work / name), "--output", str(out), "--quiet")}

    return run


_READY = "`neardup serve`, empty store, to ready"
_ANSWER = "`neardup serve`, empty store, to the first answer (8 texts)"


def _serve(work: Path) -> Callable[[], dict[str, float]]:
    """Seconds to ready and to the first answer of a new ``serve`` of an empty store."""

    def run() -> dict[str, float]:
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            started = time.perf_counter()
            server = start_server(Path(tmp))  # returns at the first 200 of /readyz
            try:
                response = httpx.post(
                    f"{server.url}/v1/signatures", json={"texts": _SMALL}, timeout=600
                )
                answered = time.perf_counter() - started
                if response.status_code != 200:
                    raise SystemExit(f"/v1/signatures: {response.status_code} {response.text}")
            finally:
                server.stop()
        return {_READY: server.ready_seconds, _ANSWER: answered}

    return run


def _measure(
    run: Callable[[], dict[str, float]], cache: Path, repeat: int
) -> list[tuple[str, float, list[float]]]:
    """``run`` once with ``cache`` as numba's (new, empty: the first use), then ``repeat`` times
    more with what it cached: each figure's first use and later runs."""
    os.environ["NUMBA_CACHE_DIR"] = str(cache)  # inherited by the processes and their workers
    first = run()
    after = [run() for _ in range(repeat)]
    return [(label, seconds, [a[label] for a in after]) for label, seconds in first.items()]


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every cold start, first use then after, and print the table."""
    parser = options.parser("bench.coldstart", __doc__, SIZES, "print a markdown table")
    args = parser.parse_args(argv)
    _, command = options.command_line("bench.coldstart", argv)
    size = options.sizes(args, SIZES)
    start = at_start({"core+app": ["core", "app"]})
    with tempfile.TemporaryDirectory(prefix="neardup-coldstart-") as tmp:
        work = Path(tmp)
        write_docs(work / "eight.jsonl", [Doc(str(i), t) for i, t in enumerate(_SMALL)])
        texts = documents(size["docs"], seed=0)
        write_docs(work / "large.jsonl", [Doc(doc_id(i), t) for i, t in enumerate(texts)])
        chars = sum(map(len, texts))
        del texts
        large = (f"`neardup dedup` of {size['docs']:,} documents ({chars / 1e6:.0f} M "
                 "characters: a spawn pool), to exit")  # fmt: skip
        measures: list[tuple[str, Callable[[], dict[str, float]]]] = [
            ("version", lambda: {"`neardup --version` (imports: the floor)": _timed_command(
                "--version")}),
            ("dedup 8", _dedup("`neardup dedup` of 8 documents, to exit", "eight.jsonl", work)),
            ("serve", _serve(work)),
            (f"dedup {size['docs']:,}", _dedup(large, "large.jsonl", work)),
        ]  # fmt: skip
        rows: list[tuple[str, float, list[float]]] = []
        for k, (name, run) in enumerate(measures):
            print(f"[bench.coldstart] {name} ...", file=sys.stderr, flush=True)
            rows.extend(_measure(run, work / f"numba-cache-{k}", size["runs"]))
    head = f"new processes, first use (empty numba cache) and after ({size['runs']} runs)"
    if args.markdown:
        print(f"### Cold starts: {head}; no peers (libraries, nothing to start)\n\n`{command}`\n")
        for key, value in facts(start).items():
            print(f"- {key}: {value}")
        print("\n| process | first use, s | after: median, s | after: slowest, s |")
        print("| --- | ---: | ---: | ---: |")
        for label, once, after in rows:
            print(f"| {label} | {once:.2f} | {statistics.median(after):.2f} | {max(after):.2f} |")
    else:
        print(head)
        for label, once, after in rows:
            print(f"{label:75} first {once:6.2f} s  after {statistics.median(after):6.2f} s "
                  f"(slowest {max(after):.2f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
