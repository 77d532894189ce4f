"""Facts about the machine, the run and the installed versions, for every benchmark's record.

A run takes ``at_start()`` before it measures anything (date, load, digests of the sources it
measures) and ``facts(start, ...)`` at its end: one table of date, machine, load, Python and
versions, the same rows in every benchmark's record.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "REPO_ROOT",
    "Start",
    "at_start",
    "commit",
    "cpu_model",
    "cpus",
    "facts",
    "load_average",
    "machine",
    "mem_total",
    "now",
    "sources_digest",
    "version",
]

#: The repository root (the parent of ``bench/``).
REPO_ROOT = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpus() -> int:
    """The CPUs this process may run on (what ``nproc`` prints)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def mem_total() -> str:
    """``"23 GiB RAM"`` from /proc/meminfo, or ``"RAM unknown"``."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            kib = int(f.readline().split()[1])
        return f"{kib / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        return "RAM unknown"


def machine() -> str:
    """``"2 CPUs (nproc) - <model> - 23 GiB RAM"``."""
    return f"{cpus()} CPUs (nproc) - {cpu_model()} - {mem_total()}"


def version(dist: str) -> str:
    """The installed version of a distribution, or ``"not installed"``."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str:
    """What ``git ARGS`` prints in the repository, stripped."""
    done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit() -> str:
    """The checked-out commit, with ``+changes`` when the tree differs from it."""
    try:
        head = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head}+changes" if dirty else head


def load_average() -> str:
    """The 1, 5 and 15 minute load averages."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def now() -> str:
    """The local date and time, ISO 8601 to the second, with the UTC offset."""
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def sources_digest(*paths: str) -> str:
    """The first 12 hex digits of SHA-256 over the ``.py`` files of ``paths`` (sorted).

    Args:
        paths: files or folders, relative to the repository root; a folder stands for every
            ``.py`` file below it. A path that does not exist is hashed as missing.
    """
    h = hashlib.sha256()
    files: list[Path] = []
    for p in paths:
        path = REPO_ROOT / p
        if path.is_dir():
            files.extend(path.rglob("*.py"))
        elif path.exists():
            files.append(path)
        else:
            h.update(p.encode() + b"\0missing\0")
    for f in sorted(files):
        h.update(f.relative_to(REPO_ROOT).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class Start:
    """What ``at_start`` read: the date, the load and the sources' digests, before any work."""

    date: str
    load: str
    sources: dict[str, str] = field(default_factory=dict)


def at_start(sources: Mapping[str, Sequence[str]] | None = None) -> Start:
    """The date, the load, and a digest per named group of source paths, read now.

    Args:
        sources: a label and the paths (see ``sources_digest``) of each digest to take.
    """
    digests = {label: sources_digest(*paths) for label, paths in (sources or {}).items()}
    return Start(now(), load_average(), digests)


def facts(start: Start, dists: Sequence[str] = ()) -> dict[str, str]:
    """Date, machine, load, Python, the versions of ``dists`` and the digests, for the record.

    Args:
        start: what ``at_start`` read at the start of the run.
        dists: distributions whose installed versions to list.
    """
    out = {
        "date (start - end of run)": f"{start.date} - {now()}",
        "machine": machine(),
        "load average (1, 5, 15 min)": f"{start.load} at start, {load_average()} at end",
        "python": platform.python_version(),
    }
    out.update((name, version(name)) for name in dists)
    if start.sources:
        digests = ", ".join(f"{label} {digest}" for label, digest in start.sources.items())
        out["sources sha256 (at start)"] = digests
    return out
