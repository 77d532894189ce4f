"""A database that stalls (frozen, not refusing) costs a replica at most STORE_TIMEOUT per
store call: writes, document reads and contamination checks (charged in the store) answer 503
instead of hanging, /readyz turns 503 after an overdue call, and the follower's staleness
(``neardup_log_lag_seconds``) shows; all of it comes back by itself once the database answers
again."""

import os
import signal
import time
from contextlib import suppress

import httpx

from bench.common.server import serving
from tests.procs import children


def _frozen(postgres, sig):
    """Send ``sig`` to the PostgreSQL server and every process of it."""
    postmaster = int((postgres.data / "postmaster.pid").read_text().split()[0])
    for pid in [postmaster, *children(postmaster)]:
        with suppress(ProcessLookupError):
            os.kill(pid, sig)


def _metric(server, name):
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    line = next(line for line in text.splitlines() if line.startswith(f"{name} "))
    return float(line.split()[1])


def _until(get, ok, timeout=60.0):
    """``get()`` until ``ok(value)`` (its last value otherwise, for the assertion)."""
    deadline = time.monotonic() + timeout
    got = get()
    while not ok(got) and time.monotonic() < deadline:
        time.sleep(0.1)
        got = get()
    return got


def _ready(server):
    response = httpx.get(f"{server.url}/readyz", timeout=10)
    return response.status_code, response.json()["status"]


def test_a_frozen_database_is_a_503_and_unready_not_a_hang(tmp_path, postgres):
    url = postgres.database()
    with serving(tmp_path, "--workers", "1", "--store-url", url, "--store-timeout", "2") as server:
        doc = {"documents": [{"id": "a", "text": "a text stored before the database froze"}]}
        assert httpx.post(f"{server.url}/v1/documents", json=doc, timeout=30).status_code == 200
        evals = " ".join(f"e{i}" for i in range(20))
        put = httpx.put(f"{server.url}/v1/protected-sets/evals", content=evals,
                        headers={"content-type": "text/plain"}, timeout=30)  # fmt: skip
        assert put.status_code == 201, put.text
        check = {"texts": [evals]}
        assert _ready(server) == (200, "ready")
        assert _metric(server, "neardup_log_lag_seconds") < 2
        _frozen(postgres, signal.SIGSTOP)
        try:
            # Without a client-side deadline each of these hangs as long as the database does.
            write = {"documents": [{"id": "b", "text": "sent while the database is frozen"}]}
            refused = httpx.post(f"{server.url}/v1/documents", json=write, timeout=30)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            read = httpx.get(f"{server.url}/v1/documents/a", timeout=30)
            assert read.status_code == 503
            assert _until(lambda: _ready(server), lambda r: r[0] == 503)[0] == 503
            lag = _until(lambda: _metric(server, "neardup_log_lag_seconds"), lambda v: v >= 2)
            assert lag >= 2
            query = {"texts": ["a text stored before the database froze"]}
            assert httpx.post(f"{server.url}/v1/query", json=query, timeout=30).status_code == 200
            # A check is charged to the caller's budget in the store first: refused, not free.
            charged = httpx.post(f"{server.url}/v1/contamination", json=check, timeout=30)
            assert charged.status_code == 503 and charged.headers["retry-after"] == "1"
        finally:
            _frozen(postgres, signal.SIGCONT)
        assert _until(lambda: _ready(server), lambda r: r == (200, "ready")) == (200, "ready")
        assert _metric(server, "neardup_log_lag_seconds") < 2
        assert httpx.post(f"{server.url}/v1/documents", json=write, timeout=30).status_code == 200
        assert httpx.get(f"{server.url}/v1/documents/a", timeout=30).status_code == 200
        checked = httpx.post(f"{server.url}/v1/contamination", json=check, timeout=30)
        assert checked.status_code == 200 and checked.json()["results"][0]["hit_count"] == 1
