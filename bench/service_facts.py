"""Date, machine, load, versions and source digests for the service benchmark's record."""

from __future__ import annotations

import datetime
import hashlib
import os
import platform

from bench.machine import cpu_model, load_average, version
from bench.server_process import REPO_ROOT

__all__ = ["machine_facts"]


def _sources_digest(package: str) -> str:
    """The first 12 hex digits of SHA-256 over ``package/*.py`` (sorted), read now."""
    h = hashlib.sha256()
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        h.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def machine_facts(start: dict[str, str] | None) -> dict[str, str]:
    """Date, machine, load, versions and source digests; pass the start facts to finish them.

    Args:
        start: None at the start of the run; the dict returned then, at the end.

    Returns:
        At the start: date, load and source digests. At the end: the full table.
    """
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    if start is None:
        return {
            "date": now,
            "load": load_average(),
            "app": _sources_digest("app"),
            "core": _sources_digest("core"),
        }
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    facts = {
        "date (start - end of run)": f"{start['date']} - {now}",
        "machine": f"{usable} CPUs (nproc) - {cpu_model()} - {_mem_total()}",
        "load average (1, 5, 15 min)": f"{start['load']} at start, {load_average()} at end",
        "python": platform.python_version(),
    }
    for name in ("numpy", "datasketch", "fastapi", "starlette", "uvicorn", "pydantic", "httpx"):
        facts[name] = version(name)
    facts["app/ and core/ sources sha256 (at start)"] = f"{start['app']}, {start['core']}"
    return facts


def _mem_total() -> str:
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        return f"{kib / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        return "RAM unknown"
