"""A real ``neardup serve`` process for the service benchmark, and /proc memory readings.

The server runs in its own session (so its process group holds it and its spawn workers and
nothing else); it listens on 127.0.0.1 only. ``stop`` sends SIGTERM and waits; ``kill_group``
is the last resort for errors and for any worker left behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = [
    "HOST",
    "REPO_ROOT",
    "Server",
    "peak_rss_bytes",
    "proc_memory",
    "recovered_from_log",
    "start_server",
]

HOST = "127.0.0.1"
#: The repository root (the parent of ``bench/``): the server's working directory.
REPO_ROOT = Path(__file__).resolve().parents[1]
_POLL_SECONDS = 0.05
_STOP_TIMEOUT = 60.0
_RECOVERED = re.compile(r"recovered documents=(\d+) .*seconds=([0-9.]+)")


@dataclass
class Server:
    """A started server: its URL, process, log file, and how long it took to get ready.

    Attributes:
        url: ``http://127.0.0.1:PORT``.
        process: the ``python -m app.cli serve`` process (a session leader).
        log: the file its stdout and stderr go to.
        ready_seconds: wall time from spawning the process to the first 200 of ``/readyz``.
        exit_code: what ``stop`` returned, once stopped.
    """

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    ready_seconds: float = 0.0
    exit_code: int | None = None

    @property
    def pid(self) -> int:
        """The server's process id (also its process group id)."""
        return self.process.pid

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's log, for error messages."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill_group(self) -> None:
        """SIGKILL everything left in the server's process group (the server and its workers)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.wait(timeout=_STOP_TIMEOUT)

    def stop(self) -> int | None:
        """SIGTERM, wait for a graceful exit (SIGKILL after a minute), then reap the group.

        Returns:
            The server's exit code, or None if it had to be killed.
        """
        code: int | None = self.process.poll()
        if code is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = None
        self.kill_group()  # spawn workers that outlived the server, if any
        self.exit_code = code
        return code


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _wait_ready(server: Server, started: float, timeout: float) -> None:
    """Poll ``/readyz`` until 200; raise if the process exits or the deadline passes."""
    deadline = started + timeout
    with httpx.Client(timeout=2.0) as client:
        while time.perf_counter() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{server.log_tail()}")
            try:
                if client.get(f"{server.url}/readyz").status_code == 200:
                    server.ready_seconds = time.perf_counter() - started
                    return
            except httpx.TransportError:
                pass
            time.sleep(_POLL_SECONDS)
    raise RuntimeError(f"server not ready within {timeout:.0f} s:\n{server.log_tail()}")


def start_server(data_dir: Path, log_dir: Path, *, workers: int, timeout: float) -> Server:
    """Start ``python -m app.cli serve`` on a free loopback port and wait until it is ready.

    Args:
        data_dir: the server's ``--data-dir``.
        log_dir: where its log file goes.
        workers: ``--workers``.
        timeout: seconds to wait for ``/readyz``.

    Returns:
        The ready server. On any failure the process group is killed before raising.

    Raises:
        RuntimeError: the server exited or did not get ready in time.
    """
    port = _free_port()
    log = log_dir / f"server-{port}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    cmd = [sys.executable, "-m", "app.cli", "serve", "--host", HOST, "--port", str(port)]
    cmd += ["--workers", str(workers), "--data-dir", str(data_dir)]
    started = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO_ROOT,
            start_new_session=True,
        )
    server = Server(f"http://{HOST}:{port}", process, log)
    try:
        _wait_ready(server, started, timeout)
    except BaseException:
        server.kill_group()
        raise
    return server


def recovered_from_log(log: Path) -> tuple[int, float] | None:
    """(documents, seconds) of the server's ``recovered documents=N ... seconds=S`` line."""
    try:
        found = _RECOVERED.search(log.read_text(errors="replace"))
    except OSError:
        return None
    return (int(found.group(1)), float(found.group(2))) if found else None


def proc_memory(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon and RssFile of a process from ``/proc/PID/status``, in bytes.

    Returns:
        The fields found (an empty dict where /proc is not available).
    """
    wanted = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in wanted:
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        return {}
    return out


def peak_rss_bytes() -> int:
    """Peak RSS of this process (``ru_maxrss``, KiB on Linux)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
