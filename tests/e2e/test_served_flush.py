"""``neardup serve --index IDX`` writes its own documents into IDX (issue 30, part 7), real
processes on a real SQLite file: flushed by size, a batch run ``neardup dedup NEW --index IDX``
drops NEW's near copies of them; documents acknowledged but not flushed survive a SIGKILL and
are flushed at the next SIGTERM, on top of a batch append committed while the service served
(picked up by refresh first)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from tests.e2e.conftest import start_server, stop_server
from tests.indexes import latest_manifest, neardup


def _text(name: str) -> str:
    """A long text of words of its own: its near copies are found, others' are not."""
    return " ".join(f"{name}w{i} x{i * 7}" for i in range(120))


def _stats(url: str) -> dict:
    return httpx.get(f"{url}/v1/stats", timeout=60).json()


def _wait(url: str, done, what: str) -> dict:
    for _ in range(1200):
        stats = _stats(url)
        if done(stats):
            return stats
        time.sleep(0.1)
    raise AssertionError(f"{what}: {stats}")


def _register(url: str, names: list[str]) -> None:
    docs = [{"id": n, "text": _text(n)} for n in names]
    answer = httpx.post(f"{url}/v1/documents", json={"documents": docs}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert [r["status"] for r in answer.json()["results"]] == ["created"] * len(names)


def _dedup_kept(tmp: Path, name: str, rows: list[tuple[str, str]]) -> list[str]:
    """The ids ``neardup dedup NAME.jsonl --index idx`` keeps of ``rows`` (read mode)."""
    (tmp / f"{name}.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in rows)
    )
    done = neardup("dedup", f"{name}.jsonl", "--output", f"{name}.out.jsonl", "--index", "idx",
                   "--index-mode", "read", "--workers", "1", "--quiet", cwd=tmp)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = (tmp / f"{name}.out.jsonl").read_text().splitlines()
    return [json.loads(line)["id"] for line in out]


def test_the_service_flushes_its_documents_into_the_index_a_batch_run_reads(
    tmp_path: Path,
) -> None:
    (tmp_path / "base.jsonl").write_text(json.dumps({"id": "base-1", "text": _text("b")}) + "\n")
    done = neardup("dedup", "base.jsonl", "--output", "base.out.jsonl", "--index", "idx",
                   "--workers", "1", "--quiet", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    idx = str(tmp_path / "idx")
    args = ("--workers", "1", "--index", idx, "--flush-rows", "3", "--flush-seconds", "0",
            "--index-refresh", "0.2")  # fmt: skip

    server = start_server(tmp_path, *args)
    try:
        _register(server.url, ["s1", "s2", "s3"])  # FLUSH_ROWS reached: flushed in the background
        flushed = _wait(server.url, lambda s: s["index_flushes"] >= 1, "no flush by size")
        _register(server.url, ["s4", "s5"])  # acknowledged, not flushed
        before = _stats(server.url)
        metrics = httpx.get(f"{server.url}/metrics", timeout=60).text
        server.kill_group()  # SIGKILL: no flush at shutdown
    finally:
        stop_server(server)
    assert (flushed["unflushed"], flushed["index_version"], flushed["documents"]) == (0, 2, 3)
    assert (before["unflushed"], before["indexed_documents"]) == (2, 1)
    assert "neardup_unflushed 2.0" in metrics and "neardup_index_version 2.0" in metrics
    near = [(f"n-{n}", _text(n) + " and one more word") for n in ("s1", "s4")]
    fresh = ("fresh", _text("f"))
    assert _dedup_kept(tmp_path, "first", [*near, fresh]) == ["n-s4", "fresh"]

    server = start_server(tmp_path, *args)
    try:
        assert _stats(server.url)["unflushed"] == 2  # replayed from the store
        # A batch append while it serves: served at the next refresh, then flushed on top of.
        (tmp_path / "append.jsonl").write_text(json.dumps({"id": "a-1", "text": _text("a")}))
        done = neardup("dedup", "append.jsonl", "--output", "append.out.jsonl", "--index", "idx",
                       "--workers", "1", "--quiet", cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        _wait(server.url, lambda s: s["index_version"] == 3, "the append was not served")
    finally:
        stop_server(server)  # SIGTERM: the flush at shutdown
    version, manifest = latest_manifest(tmp_path / "idx")
    assert version == 4 and manifest["rows"] == 7
    assert [p["run"]["engine"] for p in manifest["parts"]] == ["local", "service", "local",
                                                              "service"]  # fmt: skip
    assert _dedup_kept(tmp_path, "second", [*near, fresh]) == ["fresh"]

    server = start_server(tmp_path, *args)
    try:
        stats = _stats(server.url)
    finally:
        stop_server(server)
    assert {k: stats[k] for k in ("documents", "indexed_documents", "unflushed")} == {
        "documents": 5, "indexed_documents": 2, "unflushed": 0,
    }  # fmt: skip
