"""Every benchmark, one after the other, as ``make bench`` runs them.

Each module runs in its own interpreter (``python -m MODULE --markdown``, plus ``--quick`` when
given); its progress goes to the terminal, its markdown is collected. With ``--output`` the
record of the whole run (date, commit, machine and load, then every module's section) is written
to that file, replacing it only when every module succeeded: ``bench/RESULTS.md`` always holds
one complete run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common.machine import REPO_ROOT, commit, load_average, machine, now

#: The benchmarks, in the order they run.
MODULES = (
    "bench.signatures",
    "bench.service",
    "bench.service.ingest_latency",
    "bench.service.copies",
    "bench.service.replicas",
    "bench.batch",
    "bench.index",
    "bench.index.lookups",
    "bench.index.deletes",
    "bench.index.serve",
    "bench.index.parts",
    "bench.index.memtable",
    "bench.index.ids",
    "bench.index.versions",
    "bench.decont",
    "bench.probing",
    "bench.coldstart",
    "bench.multilingual",
    "bench.multilingual.speed",
    "bench.spark",
    "bench.spark.incremental",
)


def _section(module: str, output: str) -> str:
    """A module's markdown under a heading of its own (kept if the module printed one).

    Some modules print their plain-text report and progress before the markdown: what comes
    before the first line of markdown (a heading or a table row) is left out. A table that
    follows another one directly gets a blank line before it, so that it stays a table.
    """
    lines = output.strip().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith(("#", "|"))), 0)
    out: list[str] = []
    for i, line in enumerate(lines[first:], start=first):
        header = i + 1 < len(lines) and lines[i + 1].startswith("|-")
        if header and line.startswith("|") and out and out[-1].startswith("|"):
            out.append("")
        out.append(line)
    text = "\n".join(out)
    if not text.startswith("## "):
        text = f"## `{module}`\n\n{text}"
    return text + "\n"


def run(modules: Sequence[str], quick: bool) -> tuple[list[str], str, str]:
    """Run ``modules`` one after the other; their sections, and the start and end dates.

    Raises:
        SystemExit: a module failed (its exit status and name).
    """
    started = now()
    sections = []
    for module in modules:
        command = [sys.executable, "-m", module, "--markdown", *(["--quick"] if quick else [])]
        print(f"== {' '.join(command[1:])}", file=sys.stderr, flush=True)
        done = subprocess.run(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{module} failed (exit {done.returncode}); nothing written")
        sys.stdout.write(done.stdout)
        sys.stdout.flush()
        sections.append(_section(module, done.stdout))
    return sections, started, now()


def record(
    sections: Sequence[str], started: str, ended: str, load_at_start: str, argv: Sequence[str]
) -> str:
    """The results file: how the run was made, then every section."""
    command = " ".join(["python -m bench", *argv])
    head = [
        "# Benchmark results",
        "",
        "One run of `make bench`; every section below is what its module printed with",
        "`--markdown`, and carries its own date, load and versions.",
        "",
        "| | |",
        "|---|---|",
        f"| date (start - end of run) | {started} - {ended} |",
        f"| commit | {commit()} |",
        f"| machine | {machine()} |",
        f"| load average (1, 5, 15 min) | {load_at_start} at start, {load_average()} at end |",
        f"| command | `{command}` (what `make bench` runs) |",
        "",
    ]
    return "\n".join(head) + "\n" + "\n".join(sections)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmarks; with ``--output``, write their record there."""
    args_given = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--output", type=Path, help="write the record of the run here")
    parser.add_argument("--quick", action="store_true", help="every module's --quick sizes")
    parser.add_argument(
        "--only", nargs="+", choices=MODULES, metavar="MODULE", help="run only these modules"
    )
    args = parser.parse_args(args_given)
    load_at_start = load_average()
    sections, started, ended = run(args.only or MODULES, args.quick)
    if args.output is None:
        return
    text = record(sections, started, ended, load_at_start, args_given)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=args.output.parent, prefix=f".{args.output.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.output)
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
