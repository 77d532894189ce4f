"""Copies of one text: the cost of a registration must not grow with the earlier copies.

Starts ``python -m neardup serve --workers 2`` on a fresh data directory (127.0.0.1 only) and
registers N copies of one cookie-banner text (with typographic quotes and an accented name, as
real boilerplate has) in batches of 100 (default 5,000), timing every batch. Then it deletes one
copy, restarts the server on the same data directory (recovery), and reports:

- seconds per batch: the median of the first and of the last five batches and their ratio (the
  target: flat within 2x from first to last);
- the response size of the last batch (``matches`` list the best MAX_MATCHES, counted all);
- the DELETE of one copy, the recovery, and the index size from ``/v1/stats``.

Run from the repository root::

    python -m bench.service.copies [--copies N] [--quick] [--markdown]

Defaults take about 20 seconds on 2 cores; ``--quick`` (1,000 copies) a few seconds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from bench.common import options
from bench.common.machine import at_start, facts
from bench.common.options import Size
from bench.common.server import recovered_from_log, serving, unwind_on_sigterm
from bench.service.ingest_latency import table
from bench.service.report import DISTS, SOURCES

MODULE = "bench.service.copies"
BATCH = 100
EDGE = 5  # batches at each end whose median is compared
TEXT = (
    "We use cookies to improve your experience on our website. By continuing to browse, you "
    "agree to our use of cookies — see our “privacy policy” (contact: Renée Lefèvre, DPO)."
)
SIZES = {"copies": Size("copies of the text registered", 5_000, 1_000)}


def _register(client: httpx.Client, url: str, copies: int) -> tuple[list[float], int]:
    """Seconds per batch, and the bytes of the last answer."""
    seconds, size = [], 0
    for start in range(0, copies, BATCH):
        docs = [{"id": f"copy-{i:06d}", "text": TEXT} for i in range(start, start + BATCH)]
        started = time.perf_counter()
        answer = client.post(f"{url}/v1/documents", json={"documents": docs})
        seconds.append(time.perf_counter() - started)
        answer.raise_for_status()
        size = len(answer.content)
    return seconds, size


def measure(copies: int) -> list[list[str]]:
    """Run the copies through a server, then delete one and restart; the table's rows."""
    with tempfile.TemporaryDirectory(prefix="neardup-copies-") as tmp:
        data = Path(tmp) / "data"
        with (
            serving(Path(tmp), "--workers", "2", data_dir=data) as server,
            httpx.Client(timeout=600) as client,
        ):
            seconds, size = _register(client, server.url, copies)
            started = time.perf_counter()
            client.delete(f"{server.url}/v1/documents/copy-000050").raise_for_status()
            delete = time.perf_counter() - started
            stats = client.get(f"{server.url}/v1/stats").json()
        with serving(Path(tmp) / "again", "--workers", "2", data_dir=data) as again:
            recovered = recovered_from_log(again.log)
    first, last = statistics.median(seconds[:EDGE]), statistics.median(seconds[-EDGE:])
    return [
        ["measure", "value"],
        ["copies registered, batches of 100", f"{copies:,}"],
        [f"seconds a batch, median of the first {EDGE}", f"{first:.3f}"],
        [f"seconds a batch, median of the last {EDGE}", f"{last:.3f}"],
        ["last / first (target <= 2)", f"{last / first:.2f}"],
        ["slowest batch, seconds", f"{max(seconds):.3f}"],
        ["bytes of the last answer", f"{size:,}"],
        ["DELETE of one copy, seconds", f"{delete:.3f}"],
        ["recovery, seconds", f"{recovered[1]:.3f}" if recovered else "?"],
        ["clusters / duplicates", f"{stats['clusters']} / {stats['duplicates']:,}"],
        ["index bytes", f"{stats['index_bytes']:,}"],
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table and the facts of the run."""
    raw, command = options.command_line(MODULE, argv)
    parser = options.parser(MODULE, __doc__, SIZES, "markdown tables")
    args = parser.parse_args(raw)
    [copies] = options.sizes(args, SIZES).values()
    if copies < 2 * EDGE * BATCH:
        parser.error(f"need --copies >= {2 * EDGE * BATCH}")
    unwind_on_sigterm()  # so that the server is stopped
    start = at_start(SOURCES)
    print(table(measure(copies), args.markdown))
    record = facts(start, DISTS) | {"command": command}
    print(table([["fact", "value"], *([k, v] for k, v in record.items())], args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
