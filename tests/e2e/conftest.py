"""A real ``neardup serve`` process on a free loopback port, for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    tmp: Path, *args: str, timeout: float = 60.0, data_dir: Path | None = None
) -> Server:
    """``python -m app.cli serve`` (the module path, so its __main__ guard is exercised)."""
    port = _free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / f"server-{port}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
    cmd += ["--data-dir", str(data_dir or tmp / "data"), *args]
    with log.open("wb") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return Server(url, process, log)
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"server not ready in {timeout}s:\n{log.read_text()}")


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


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
