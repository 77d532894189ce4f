"""Memory readings of processes: /proc/PID/status fields, and this process's peak RSS."""

from __future__ import annotations

import resource
import sys

__all__ = ["MIB", "peak_rss_bytes", "proc_memory"]

MIB = 2**20
_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


def proc_memory(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon and RssFile of a process from ``/proc/PID/status``, in bytes.

    Returns:
        The fields found (an empty dict once the process is gone, or where /proc is missing).
    """
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in _FIELDS:
                    out[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return {}
    return out


def peak_rss_bytes(who: int = resource.RUSAGE_SELF) -> int:
    """Peak RSS of this process (``ru_maxrss``: KiB on Linux, bytes on macOS), in bytes."""
    peak = int(resource.getrusage(who).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024
