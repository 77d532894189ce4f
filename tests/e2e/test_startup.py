"""Starting up: the server listens while it recovers, and one bad protected set does not keep it
down."""

import os
import re
import socket
import subprocess
import sys
import time

import httpx
import numpy as np

from bench.common.server import REPO_ROOT, free_port, start_server, stop_server
from bench.service.synthetic_index import write_store
from neardup.app.service.store import ProtectedSetRow, SQLiteStore
from neardup.core.engine import MinhashParams, ProtectedFormat

PARAMS = MinhashParams()


def test_the_server_listens_and_says_starting_while_it_recovers(tmp_path):
    data = tmp_path / "data"
    rng = np.random.default_rng(0)
    n = 150_000
    sigs = rng.integers(0, 2**31 - 1, size=(n, PARAMS.num_perm), dtype=np.uint32)
    write_store(data, sigs, [i.to_bytes(32, "big") for i in range(n)], PARAMS.index_params())
    port = free_port()
    cmd = [sys.executable, "-m", "neardup", "serve", "--port", str(port), "--data-dir", str(data),
           "--workers", "1"]  # fmt: skip
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    seen = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                ready = httpx.get(f"{url}/readyz", timeout=5)
            except httpx.TransportError:
                time.sleep(0.02)
                continue
            seen.append(ready.json()["status"])
            if ready.status_code == 200:
                break
            assert ready.status_code == 503 and ready.headers["retry-after"]
            stats = httpx.get(f"{url}/v1/stats", timeout=5)
            assert stats.status_code in (200, 503)
            time.sleep(0.02)
        assert seen[0] == "starting" and seen[-1] == "ready", seen
        assert httpx.get(f"{url}/v1/stats").json()["documents"] == n
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


def test_recovery_logs_its_progress_and_its_end(tmp_path):
    """A first start spent 90 s "starting" without a log line. Now a line says what is read,
    progress lines (documents read, rate, seconds left) follow at most every
    RECOVERY_LOG_SECONDS (0 here: one a chunk), and one line says when reading is done."""
    data = tmp_path / "data"
    n = 120_000  # three chunks of RECOVERY_CHUNK
    sigs = np.random.default_rng(1).integers(0, 2**31 - 1, (n, PARAMS.num_perm), np.uint32)
    write_store(data, sigs, [i.to_bytes(32, "big") for i in range(n)], PARAMS.index_params())
    server = start_server(
        tmp_path, "--workers", "1", data_dir=data, env={"NEARDUP_RECOVERY_LOG_SECONDS": "0"}
    )
    try:
        lines = [ln for ln in server.log.read_text().splitlines() if "neardup recover" in ln]
    finally:
        stop_server(server)
    progress = [re.search(r"recovering: read (\d+) of up to (\d+) documents \((\d+)/s, "
                          r"about (\d+) s left\)", ln) for ln in lines]  # fmt: skip
    assert f"recovering: reading up to {n} documents from the store" in lines[0]
    assert [(int(m[1]), int(m[2])) for m in progress if m] == [
        (50_000, n), (100_000, n), (n, n)]  # fmt: skip
    assert f"recovering: read {n} documents in " in lines[-2]
    assert f"recovered documents={n} " in lines[-1]


def test_serve_takes_its_port_from_neardup_port_and_make_serve_leaves_it(tmp_path):
    """`make serve` passed --port 8000 (and --host) always, over NEARDUP_PORT."""
    port = free_port()
    server = start_server(tmp_path, "--workers", "1", env={"NEARDUP_PORT": str(port)})
    try:
        assert server.url.endswith(f":{port}")
        assert "--port" not in server.process.args
        assert httpx.get(f"{server.url}/readyz").status_code == 200
    finally:
        stop_server(server)
    env = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT")}

    def recipe(*args):
        dry = subprocess.run(
            ["make", "-n", "-s", "serve", *args], cwd=REPO_ROOT, text=True,
            env={**env, "NEARDUP_PORT": str(port)}, capture_output=True,
        )  # fmt: skip
        assert dry.returncode == 0, dry.stderr
        [line] = [ln for ln in dry.stdout.splitlines() if "neardup serve" in ln]
        return line.split("neardup serve", 1)[1].split()

    assert recipe() == []
    assert recipe("PORT=9000", "HOST=0.0.0.0") == ["--host", "0.0.0.0", "--port", "9000"]


def test_one_bad_protected_set_is_left_out_and_the_rest_serve(tmp_path):
    data = tmp_path / "data"
    store = SQLiteStore(data)
    store.ensure_params(PARAMS.index_params())
    good = "one two three four five six seven eight nine ten eleven twelve thirteen"
    store.put_protected_set(ProtectedSetRow("good", 1, 1, ProtectedFormat.TEXT, good))
    store.put_protected_set(ProtectedSetRow("bad", 1, 1, ProtectedFormat.JSONL, "not json\n"))
    store.close()
    server = start_server(tmp_path, "--workers", "1", data_dir=data)
    try:
        stats = httpx.get(f"{server.url}/v1/stats").json()
        assert stats["protected_sets"] == 1 and stats["broken_protected_sets"] == 1
        check = httpx.post(f"{server.url}/v1/contamination", json={"texts": [good]}).json()
        assert check["results"][0]["contaminated"]
        assert httpx.delete(f"{server.url}/v1/protected-sets/bad").status_code == 204
        assert httpx.get(f"{server.url}/v1/stats").json()["broken_protected_sets"] == 0
        assert "cannot be parsed, left out" in server.log.read_text()
    finally:
        stop_server(server)


def test_a_port_in_use_is_one_line_and_exit_2_before_the_store_is_opened(tmp_path):
    """Issue 33.5: the address is bound first; the data directory is not even created."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    cmd = [sys.executable, "-m", "neardup", "serve", "--port", str(port), "--data-dir", str(data)]
    try:
        done = subprocess.run(
            cmd, cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=120
        )
    finally:
        taken.close()
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"neardup serve: cannot listen on 127.0.0.1:{port}: the port is in use (another neardup "
        "serve, or another program); choose another with --port or NEARDUP_PORT"
    ]
    assert not data.exists()
