"""A real ``neardup serve`` process on a free loopback port, for end-to-end tests.

The launcher is the benchmarks' (``bench.common.server``): ``start_server(tmp, *args,
timeout=..., data_dir=...)`` and ``stop_server(server)`` are re-exported from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from bench.common.machine import REPO_ROOT
from bench.common.server import Server, start_server, stop_server
from tests.indexes import kill_spawned

__all__ = [
    "HealthzProbe",
    "Server",
    "probe_healthz",
    "server",
    "start_server",
    "stop_server",
    "wait_inflight",
]


#: What a server's signature workers load as they start (``warm_worker``), for each tokenizer.
_WARM = (
    "from neardup.core.engine import warm_worker\n"
    "assert warm_worker() and warm_worker('multilingual'), 'the compiled kernels did not load'"
)


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels() -> None:
    """The compiled kernels in numba's cache before the first server starts (from it in about a
    second; compiled once, ~10 s, on a fresh checkout). A server stopped while its workers still
    warm up ends them (``stop_pool``): on a fresh checkout, a compile ended so would be lost and
    begun again by the next server's workers, two at a time."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}  # as a server's
    done = subprocess.run([sys.executable, "-c", _WARM], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.fixture(autouse=True)
def _no_run_left_behind() -> Iterator[None]:
    """The runs a test started with ``tests.indexes.spawn``, killed after it if still there."""
    yield
    kill_spawned()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("server"), "--workers", "2")
    yield srv
    stop_server(srv)


def wait_inflight(server: Server, at_least: int = 1, timeout: float = 60.0) -> None:
    """Block until the server reports ``at_least`` batches in flight."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if httpx.get(f"{server.url}/v1/stats", timeout=5).json()["inflight"] >= at_least:
            return
        time.sleep(0.01)
    raise AssertionError("no batch became in flight")


#: Probes ``URL/healthz`` every 0.25 s until the file STOP exists, then prints [[when, seconds
#: it took], ...]. A connection the server dropped (a keep-alive one it closed late, while its
#: loop was held) counts as a probe of the time it took. In a process of its own: a thread of
#: the test's process would also measure this process's garbage collections and GIL (a full
#: suite's heap made one probe look 4 s long).
_PROBE = """
import json, os, sys, time, httpx
url, stop, took = sys.argv[1], sys.argv[2], []
with httpx.Client(timeout=60) as client:
    while not os.path.exists(stop):
        at, started = time.time(), time.perf_counter()
        try:
            client.get(url + "/healthz").raise_for_status()
        except httpx.TransportError:
            pass
        took.append((at, time.perf_counter() - started))
        time.sleep(0.25)
print(json.dumps(took))
"""


def probe_healthz(url: str, stop: Path) -> subprocess.Popen[str]:
    """Start probing ``url``'s /healthz until ``stop`` exists; its stdout is then the JSON list
    of (when, seconds) of every probe."""
    return subprocess.Popen([sys.executable, "-c", _PROBE, url, str(stop)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip


#: Probes ``URL/healthz`` every 0.25 s, and at once on each line of its standard input, until
#: that input ends, printing a JSON line [when, seconds it took] for each probe as it ends (a
#: dropped connection counts, as above).
_PROBE_LINES = """
import json, sys, threading, time, httpx
url, asked, done = sys.argv[1], threading.Event(), threading.Event()
def listen():
    for _ in sys.stdin:
        asked.set()
    done.set()
    asked.set()
threading.Thread(target=listen, daemon=True).start()
with httpx.Client(timeout=60) as client:
    while not done.is_set():
        asked.clear()
        at, started = time.time(), time.perf_counter()
        try:
            client.get(url + "/healthz").raise_for_status()
        except httpx.TransportError:
            pass
        print(json.dumps([at, time.perf_counter() - started]), flush=True)
        asked.wait(0.25)
"""


class HealthzProbe:
    """``probe_healthz`` for many requests in turn: one probing process (an interpreter start a
    request bought nothing), asked after each request for the slowest probe while it was
    served. Probing before the first request starts."""

    def __init__(self, url: str, timeout: float = 120.0) -> None:
        self._timeout = timeout
        self._probes: list[tuple[float, float]] = []
        self._ended = False
        self._changed = threading.Condition()
        self._process = subprocess.Popen([sys.executable, "-c", _PROBE_LINES, url],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True)  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait_for(lambda: bool(self._probes))

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            at, took = json.loads(line)
            with self._changed:
                self._probes.append((at, took))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def _wait_for(self, seen: Callable[[], bool]) -> None:
        with self._changed:
            self._changed.wait_for(lambda: seen() or self._ended, self._timeout)
            assert seen(), "the /healthz probe stopped probing"

    def slowest(self, started: float, ended: float) -> float:
        """The slowest probe overlapping ``[started, ended]`` (``time.time()``), once a probe
        started after ``ended`` is in (asked for now): every probe that overlapped it has
        ended by then."""
        assert self._process.stdin is not None
        self._process.stdin.write("\n")
        self._process.stdin.flush()
        self._wait_for(lambda: self._probes[-1][0] > ended)
        return max(
            (took for at, took in self._probes if at <= ended and at + took >= started),
            default=0.0,
        )

    def close(self) -> None:
        """End the probing process."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.close()
        try:
            self._process.wait(timeout=60)
        finally:
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
            self._reader.join(timeout=60)
            self._process.stdout.close()
