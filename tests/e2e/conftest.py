"""A real ``neardup serve`` process on a free loopback port, for end-to-end tests.

The launcher is the benchmarks' (``bench.common.server``): ``start_server(tmp, *args,
timeout=..., data_dir=...)`` and ``stop_server(server)`` are re-exported from it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from bench.common.server import Server, start_server, stop_server

__all__ = ["Server", "server", "start_server", "stop_server", "wait_inflight"]


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
