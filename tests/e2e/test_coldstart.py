"""A cold start of ``neardup serve`` (issue 22): ready once the store is recovered, before the
signature workers are warm; a request sent at once waits for them and is answered right."""

import time

import httpx

from bench.common.server import start_server, stop_server
from neardup.core.minhash import signatures


def _log_lines(server, needle: str, timeout: float = 120.0) -> list[str]:
    """The server's log lines, once one holds ``needle``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = server.log.read_text(errors="replace").splitlines()
        if any(needle in line for line in lines):
            return lines
        time.sleep(0.05)
    raise AssertionError(f"no {needle!r} in the log:\n{server.log_tail()}")


def test_ready_comes_before_the_workers_are_warm_and_a_request_waits_for_them(tmp_path):
    server = start_server(tmp_path, "--workers", "2")  # returns at the first 200 of /readyz
    try:
        texts = [f"a request sent as soon as the server said ready {i}" for i in range(40)]
        response = httpx.post(f"{server.url}/v1/signatures", json={"texts": texts}, timeout=120)
        assert response.status_code == 200, response.text
        assert response.json()["signatures"] == signatures(texts).tolist()
        lines = _log_lines(server, "workers ready")
        ready = next(i for i, line in enumerate(lines) if "neardup ready documents=0" in line)
        warm = next(i for i, line in enumerate(lines) if "neardup workers ready" in line)
        assert ready < warm, "\n".join(lines)
        assert "workers=2 compiled=True" in lines[warm]
    finally:
        stop_server(server)
