"""The settings that change an answer (THRESHOLD, NGRAM, MAX_MATCHES) are locked in the store,
as the index parameters are: a replica or a restart with others is refused in one line naming
each and the way to change them, ``neardup store-settings`` changes them for every replica,
and a replica still serving the old values stops answering (503, not ready)."""

import subprocess
import sys

import httpx

from bench.common.machine import REPO_ROOT
from bench.common.server import free_port
from tests.e2e.conftest import start_server, stop_server
from tests.e2e.test_replicas import _one_line_refusal, _poll


def _neardup(*args):
    cmd = [sys.executable, "-m", "neardup", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)


def _serve(*args):
    return _neardup("serve", "--port", str(free_port()), "--workers", "1", *args)


def _ready(server):
    response = httpx.get(f"{server.url}/readyz", timeout=10)
    return response.status_code, response.json()["status"]


def test_replicas_with_other_answer_settings_are_refused_and_changed_together(tmp_path, postgres):
    url = postgres.database()
    first = start_server(tmp_path / "a", "--workers", "1", "--store-url", url)
    second = None
    try:
        doc = {"documents": [{"id": "a", "text": " ".join(f"w{i}" for i in range(60))}]}
        assert httpx.post(f"{first.url}/v1/documents", json=doc, timeout=30).status_code == 200
        other = _serve("--store-url", url, "--threshold", "0.6", "--ngram", "8")
        _one_line_refusal(
            other,
            "THRESHOLD is 0.6 but the store's replicas answer with 0.8",
            "NGRAM is 8 but the store's replicas answer with 13",
            "NEARDUP_THRESHOLD=0.8 NEARDUP_NGRAM=13",
            "neardup store-settings --threshold 0.6 --ngram 8",
        )
        fewer = _serve("--store-url", url, "--max-matches", "5")
        _one_line_refusal(fewer, "MAX_MATCHES is 5 but the store's replicas answer with 100")
        shown = _neardup("store-settings", "--store-url", url)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout == '{"threshold": "0.8", "ngram": "13", "max_matches": "100"}\n'
        bad = _neardup("store-settings", "--store-url", url, "--threshold", "1.5")
        assert bad.returncode == 2 and "neardup store-settings: error:" in bad.stderr
        same = _neardup("store-settings", "--store-url", url, "--ngram", "13")
        assert same.returncode == 0 and same.stderr == "", same.stderr  # nothing changed
        changed = _neardup("store-settings", "--store-url", url, "--threshold", "0.6")
        assert changed.returncode == 0, changed.stderr
        assert "THRESHOLD 0.8 -> 0.6" in changed.stderr
        assert changed.stdout == '{"threshold": "0.6", "ngram": "13", "max_matches": "100"}\n'
        # The running replica, at 0.8, notices (its follower reads the log) and stops answering.
        assert _poll(lambda: _ready(first), (503, "settings changed")) == (503, "settings changed")
        refused = httpx.post(f"{first.url}/v1/query", json={"texts": ["w1 w2"]}, timeout=30)
        assert refused.status_code == 503, refused.text
        assert "THRESHOLD 0.8 -> 0.6" in refused.json()["detail"]
        write = {"documents": [{"id": "b", "text": "never stored at the old threshold"}]}
        assert httpx.post(f"{first.url}/v1/documents", json=write, timeout=30).status_code == 503
        assert httpx.get(f"{first.url}/metrics", timeout=10).status_code == 200
        # A replica set to the old value is refused now; one not setting it adopts the new.
        _one_line_refusal(_serve("--store-url", url, "--threshold", "0.8"), "THRESHOLD is 0.8 but")
        second = start_server(tmp_path / "b", "--workers", "1", "--store-url", url)
        assert httpx.post(f"{second.url}/v1/documents", json=write, timeout=30).status_code == 200
        config = httpx.get(f"{second.url}/v1/config", timeout=10).json()
        assert config["threshold"] == 0.6
        log = second.log.read_text()
        assert "adopting THRESHOLD=0.6 from the store (NEARDUP_THRESHOLD is not set" in log
        assert "adopting NGRAM" not in log and "adopting MAX_MATCHES" not in log
        assert "data_dir" not in log and "starting store_url=postgresql://" in log
    finally:
        stop_server(first)
        if second is not None:
            stop_server(second)


def test_a_restart_with_other_answer_settings_is_refused_on_sqlite(tmp_path):
    data = tmp_path / "data"
    server = start_server(tmp_path, "--workers", "1", data_dir=data)
    try:
        held = _neardup("store-settings", "--data-dir", str(data), "--max-matches", "5")
        assert held.returncode == 2 and "neardup store-settings: error:" in held.stderr
    finally:
        stop_server(server)
    refused = _serve("--data-dir", str(data), "--max-matches", "5")
    _one_line_refusal(refused, "MAX_MATCHES is 5 but the store's replicas answer with 100",
                      "neardup store-settings --max-matches 5")  # fmt: skip
    changed = _neardup("store-settings", "--data-dir", str(data), "--max-matches", "5")
    assert changed.returncode == 0, changed.stderr
    assert "MAX_MATCHES 100 -> 5" in changed.stderr
    nowhere = _neardup("store-settings", "--data-dir", str(tmp_path / "none"), "--ngram", "8")
    assert nowhere.returncode == 2 and "holds no store" in nowhere.stderr
    server = start_server(tmp_path, "--workers", "1", "--max-matches", "5", data_dir=data)
    try:
        assert _ready(server) == (200, "ready")
    finally:
        stop_server(server)
