"""Finding a process's spawn pool workers (and its resource tracker), to kill or watch them;
waiting for a run stopped by ``NEARDUP_TEST_PAUSE`` (``app.cli.pause``)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

#: What ``pause_point`` prints on stderr before the process stops itself.
PAUSE_MARKER = "neardup: test pause at "


def _children(pid: int, marker: bytes) -> list[int]:
    """The pids of ``pid``'s children whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and marker in cmdline:
            found.append(int(entry.name))
    return found


def pool_workers(pid: int) -> list[int]:
    """The pids of ``pid``'s children that are multiprocessing spawn workers."""
    return _children(pid, b"spawn_main")


def compaction_children(pid: int) -> list[int]:
    """The pids of ``pid``'s children writing a compaction's part (app/service/compaction.py)."""
    return _children(pid, b"compaction import main")


def resource_trackers(pid: int) -> list[int]:
    """The pids of ``pid``'s multiprocessing resource tracker processes."""
    return _children(pid, b"resource_tracker")


def children(pid: int) -> list[int]:
    """The pids of every child of ``pid``."""
    return _children(pid, b"")


def state(pid: int) -> str:
    """``pid``'s state letter from /proc (``T``: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def stopped_at(proc: subprocess.Popen[str], stage: str) -> None:
    """Wait for ``proc``'s pause marker on its stderr (skipping what it printed before, e.g.
    progress), then until it is stopped."""
    assert proc.stderr is not None
    line = proc.stderr.readline()
    while line and PAUSE_MARKER not in line:
        line = proc.stderr.readline()
    assert line.strip().endswith(PAUSE_MARKER + stage), line
    while state(proc.pid) != "T":
        time.sleep(0.01)
