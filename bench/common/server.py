"""A real ``neardup serve`` process on a free loopback port: for the benchmarks and tests/e2e.

``start_server(tmp, *args)`` runs ``python -m neardup serve --port P --data-dir D *args`` (the
module path, so its ``__main__`` guard is exercised) from the repository root, with no
``NEARDUP_*`` variable in its environment but those it is given (``env``), logging to
``tmp/server-P.log``, and waits until ``/readyz`` answers 200. The server runs in its own
session, so its process group holds it and its spawn workers and nothing else: ``Server.stop``
sends SIGTERM, waits, then SIGKILLs whatever is left in the group (a server that did not stop,
workers that outlived it). ``serving`` is the same as a context manager that prints the end of
the log when its block fails. At exit, the groups of servers never stopped (say, one a test
killed with SIGKILL, whose workers it orphaned) are killed too.

Only 127.0.0.1 is used (``--host`` is the server's default unless ``args`` give another).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common.machine import REPO_ROOT

__all__ = [
    "HOST",
    "Server",
    "free_port",
    "recovered_from_log",
    "serving",
    "start_server",
    "stop_server",
    "unwind_on_sigterm",
]

HOST = "127.0.0.1"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0
_POLL_SECONDS = 0.05
_FAILURE_TAIL = 60
_RECOVERED = re.compile(r"recovered documents=(\d+) .*seconds=([0-9.]+)")


@dataclass
class Server:
    """A started server: its URL, process, log file, and how long it took to get ready.

    Attributes:
        url: ``http://127.0.0.1:PORT``.
        process: the ``python -m neardup serve`` process (a session leader).
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
            self.process.wait(timeout=STOP_TIMEOUT)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait for a graceful exit (SIGKILL after ``timeout``), then reap the group.

        Returns:
            The server's exit code, or None if it had to be killed.
        """
        code: int | None = self.process.poll()
        if code is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                code = None
        self.kill_group()  # spawn workers that outlived the server, if any
        self.exit_code = code
        with contextlib.suppress(ValueError):
            _unstopped.remove(self)
        return code


#: Servers started and not yet stopped: their process groups are killed at exit.
_unstopped: list[Server] = []


@atexit.register
def _kill_unstopped() -> None:
    for server in list(_unstopped):
        if server.process.poll() is None:
            server.kill_group()  # its leader is alive, so the group is still the server's
            continue
        try:
            os.kill(server.pid, 0)
        except ProcessLookupError:
            # The leader is reaped and no process has its pid, so no new group can have that
            # id: whatever is left in the group is the server's (orphaned workers).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(server.pid, signal.SIGKILL)
        # else: the pid was reused, so the group may be another's; leave it alone.


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _wait_ready(server: Server, started: float, timeout: float) -> None:
    """Poll ``/readyz`` until 200; raise if the process exits or the deadline passes."""
    deadline = started + timeout
    with httpx.Client(timeout=2.0) as client:
        while time.perf_counter() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{server.log_tail(_FAILURE_TAIL)}")
            with contextlib.suppress(httpx.TransportError):
                if client.get(f"{server.url}/readyz").status_code == 200:
                    server.ready_seconds = time.perf_counter() - started
                    return
            time.sleep(_POLL_SECONDS)
    raise RuntimeError(
        f"server not ready within {timeout:.0f} s:\n{server.log_tail(_FAILURE_TAIL)}"
    )


def start_server(
    tmp: Path,
    *args: str,
    timeout: float = READY_TIMEOUT,
    data_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    repo: Path | None = None,
) -> Server:
    """Start ``python -m neardup serve`` on a free loopback port and wait until it is ready.

    Args:
        tmp: where the log goes (created if missing); the data directory is ``tmp/data``
            unless ``data_dir`` is given.
        args: more ``serve`` flags (``--workers 2``, ``--api-keys-file F``, ...).
        timeout: seconds to wait for ``/readyz``.
        data_dir: the server's ``--data-dir``.
        env: ``NEARDUP_*`` settings for the server's environment; with ``NEARDUP_PORT`` the
            port is that one, and no ``--port`` is passed.
        repo: another checkout to run the server of (its ``.venv``, from its root): a
            benchmark's "before"; default this one, with this interpreter.

    Returns:
        The ready server. On any failure its process group is killed before raising.

    Raises:
        RuntimeError: the server exited (the end of its log is in the message) or did not get
            ready in time.
    """
    settings = dict(env or {})
    port = int(settings.get("NEARDUP_PORT") or free_port())
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / f"server-{port}.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    environ.update(settings)
    python = sys.executable if repo is None else str(repo / ".venv" / "bin" / "python")
    cmd = [python, "-m", "neardup", "serve"]
    cmd += [] if "NEARDUP_PORT" in settings else ["--port", str(port)]
    cmd += ["--data-dir", str(data_dir or tmp / "data"), *args]
    started = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environ,
            cwd=REPO_ROOT if repo is None else repo,
            start_new_session=True,
        )
    server = Server(f"http://{HOST}:{port}", process, log)
    _unstopped.append(server)
    try:
        _wait_ready(server, started, timeout)
    except BaseException:
        server.kill_group()
        _unstopped.remove(server)
        raise
    return server


def stop_server(server: Server, timeout: float = STOP_TIMEOUT) -> int | None:
    """``server.stop(timeout)``: SIGTERM, wait, then SIGKILL what is left of its group."""
    return server.stop(timeout)


@contextlib.contextmanager
def serving(
    tmp: Path, *args: str, timeout: float = READY_TIMEOUT, data_dir: Path | None = None
) -> Iterator[Server]:
    """``start_server(...)`` for the block; stopped on exit.

    On an error inside the block, the end of the server's log goes to stderr first.
    """
    server = start_server(tmp, *args, timeout=timeout, data_dir=data_dir)
    try:
        yield server
    except BaseException:
        print(f"--- end of the server log ({server.log.name}) ---", file=sys.stderr)
        print(server.log_tail(40), file=sys.stderr)
        raise
    finally:
        server.stop()


def recovered_from_log(log: Path) -> tuple[int, float] | None:
    """(documents, seconds) of the server's ``recovered documents=N ... seconds=S`` line."""
    try:
        found = _RECOVERED.search(log.read_text(errors="replace"))
    except OSError:
        return None
    return (int(found.group(1)), float(found.group(2))) if found else None


def _unwind(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def unwind_on_sigterm() -> None:
    """Make SIGTERM unwind like Ctrl-C does, so that ``finally`` blocks stop the servers."""
    signal.signal(signal.SIGTERM, _unwind)
