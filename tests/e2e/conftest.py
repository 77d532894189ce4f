"""A real ``neardup serve`` process on a free loopback port, for end-to-end tests.

The launcher is the benchmarks' (``bench.common.server``): ``start_server(tmp, *args,
timeout=..., data_dir=...)`` and ``stop_server(server)`` are re-exported from it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.common.server import Server, start_server, stop_server

__all__ = [
    "Server",
    "probe_healthz",
    "server",
    "start_server",
    "stop_server",
    "wait_inflight",
]


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
