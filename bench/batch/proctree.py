"""Run a command and measure its wall time and the memory of its whole process tree.

While the command runs, ``/proc/PID/status`` is read every ``POLL_SECONDS`` for the process
and all its descendants (found through ``/proc/PID/task/TID/children``): the largest sum of
their VmRSS is the tree's peak (it can miss a spike shorter than the poll interval). VmRSS
counts a page shared by several processes (libraries, the spawn workers' common imports) once
in each, so the largest sum of Pss (``/proc/PID/smaps_rollup``, shared pages split between their
users) is kept too: the tree's real footprint, between the two. The main
process's VmHWM is read at every poll; the last reading is its own peak up to at most one poll
before it exited. After exit, ``os.wait4`` gives the child's ``ru_maxrss``: the peak of the
largest single process among it and the descendants it reaped.

The command runs in a new session, so on a timeout its process group (and nothing else) is
killed.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.common.machine import REPO_ROOT
from bench.common.memory import proc_memory

__all__ = ["POLL_SECONDS", "TreeRun", "descendants", "run_checked", "run_measured"]

POLL_SECONDS = 0.05
_MAX_DEPTH = 8  # a spawn pool is two levels deep; more is a runaway


@dataclass
class TreeRun:
    """One measured command (bytes and seconds).

    Attributes:
        argv: the command.
        returncode: its exit status (negative: killed by that signal).
        wall: seconds from spawn to reaped.
        peak_tree_rss: the largest sum of VmRSS over the process and its descendants.
        peak_tree_processes: how many processes were alive at that reading.
        peak_tree_pss: the largest sum of Pss over the tree (shared pages counted once).
        max_processes: the most processes seen alive at once.
        main_hwm: the main process's VmHWM at the last poll before it exited.
        maxrss_single: ``ru_maxrss`` from ``wait4``: the largest single process's peak.
        cpu_seconds: user + system CPU time from ``wait4`` (the process and the children it
            reaped, e.g. neardup's spawn workers).
        polls: readings taken.
        stdout: what it printed on stdout.
        stderr_tail: the end of its stderr.
    """

    argv: list[str]
    returncode: int = 0
    wall: float = 0.0
    peak_tree_rss: int = 0
    peak_tree_processes: int = 0
    peak_tree_pss: int = 0
    max_processes: int = 0
    main_hwm: int = 0
    maxrss_single: int = 0
    cpu_seconds: float = 0.0
    polls: int = 0
    stdout: str = ""
    stderr_tail: str = field(default="", repr=False)


def _pss(pid: int) -> int:
    """Pss of a process in bytes (0 once it is gone or where smaps_rollup is missing)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return 0
    return 0


def _children(pid: int) -> list[int]:
    """The direct children of every thread of ``pid``."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as fh:
                found.extend(int(c) for c in fh.read().split())
    return found


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (at most ``_MAX_DEPTH`` levels)."""
    tree, level = [pid], [pid]
    for _ in range(_MAX_DEPTH):
        level = [c for p in level for c in _children(p)]
        if not level:
            break
        tree.extend(level)
    return tree


def _poll(run: TreeRun, pid: int) -> None:
    """One reading of the tree."""
    pids = descendants(pid)
    readings = [proc_memory(p) for p in pids]
    total = sum(r.get("VmRSS", 0) for r in readings)
    alive = sum(1 for r in readings if r)
    if total > run.peak_tree_rss:
        run.peak_tree_rss, run.peak_tree_processes = total, alive
    run.max_processes = max(run.max_processes, alive)
    run.peak_tree_pss = max(run.peak_tree_pss, sum(_pss(p) for p in pids))
    run.main_hwm = max(run.main_hwm, readings[0].get("VmHWM", 0))
    run.polls += 1


def run_measured(argv: Sequence[str], *, cwd: Path, timeout: float, log: Path) -> TreeRun:
    """Run ``argv`` to completion (or kill it after ``timeout`` seconds), measuring it.

    Args:
        argv: the command.
        cwd: its working directory.
        timeout: seconds before its process group is killed.
        log: where its stdout and stderr go (``<log>.out``, ``<log>.err``).

    Returns:
        The measurements; ``returncode`` says whether it succeeded.
    """
    run = TreeRun(list(argv))
    out_path, err_path = log.with_suffix(".out"), log.with_suffix(".err")
    started = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, start_new_session=True)
        try:
            status, usage = _wait_polling(run, proc.pid, started + timeout)
        except BaseException:
            _kill_group(proc.pid)
            proc.wait()
            raise
    run.wall = time.perf_counter() - started
    proc.returncode = run.returncode = os.waitstatus_to_exitcode(status)
    run.maxrss_single = int(usage.ru_maxrss) * 1024
    run.cpu_seconds = usage.ru_utime + usage.ru_stime
    run.stdout = out_path.read_text(errors="replace")
    run.stderr_tail = err_path.read_text(errors="replace")[-4000:]
    return run


def run_checked(argv: Sequence[str], *, timeout: float, log: Path, what: str) -> TreeRun:
    """A benchmark's step: ``run_measured`` from the repository's root; RuntimeError naming
    ``what``, with the tail of its stderr, when it fails."""
    run = run_measured(argv, cwd=REPO_ROOT, timeout=timeout, log=log)
    if run.returncode != 0:
        raise RuntimeError(f"{what} failed ({run.returncode}):\n{run.stderr_tail}")
    return run


def _kill_group(pid: int) -> None:
    """SIGKILL the process group of a command started in its own session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _wait_polling(run: TreeRun, pid: int, deadline: float) -> tuple[int, resource.struct_rusage]:
    """Poll the tree until ``pid`` exits or the deadline passes (then kill its group)."""
    polls = int((deadline - time.perf_counter()) / POLL_SECONDS) + 1
    for _ in range(max(polls, 1)):
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage
        if time.perf_counter() > deadline:
            break
        _poll(run, pid)
        time.sleep(POLL_SECONDS)
    _kill_group(pid)
    _, status, usage = os.wait4(pid, 0)
    return status, usage
