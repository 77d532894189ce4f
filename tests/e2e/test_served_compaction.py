"""``neardup serve --index IDX`` compacts the parts its flushes commit, in the background (issue
30, part 5), real processes on a real SQLite file: parts are merged while documents are
registered, a SIGKILL while a compaction's child process writes loses no acknowledged
document and leaves the index readable by ``neardup index info``, and a SIGTERM while one
writes stops the service promptly (its flush at shutdown committed)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from neardup.core.engine import DocIndex
from tests.e2e.conftest import start_server, stop_server
from tests.indexes import neardup
from tests.procs import compaction_children

#: Seconds a compaction's child process is watched for (a loaded machine: generous).
WATCH_SECONDS = 240.0


def _text(name: str) -> str:
    return " ".join(f"{name}w{i} x{i * 7}" for i in range(60))


def _stats(url: str) -> dict:
    return httpx.get(f"{url}/v1/stats", timeout=60).json()


def _register(url: str, names: list[str]) -> None:
    docs = [{"id": n, "text": _text(n)} for n in names]
    answer = httpx.post(f"{url}/v1/documents", json={"documents": docs}, timeout=60)
    assert answer.status_code == 200, answer.text


def _register_until_compacting(server, names: list[str], first: int) -> int:
    """Register pairs of documents (each pair a flush) until a compaction's child runs; the
    next document number."""
    deadline = time.monotonic() + WATCH_SECONDS
    n = first
    while time.monotonic() < deadline:
        batch = [f"d{n}", f"d{n + 1}"]
        _register(server.url, batch)
        names += batch
        n += 2
        for _ in range(20):
            if compaction_children(server.pid):
                return n
            time.sleep(0.01)
    raise AssertionError(f"no compaction seen: {_stats(server.url)}")


def _ids_in_index(idx: Path) -> list[str]:
    """The live rows' ids of the index, read through its manifest (deletion vectors too)."""
    index = DocIndex.open(str(idx))
    return [i for ids, _ in index.signature_batches(index.parts) for i in ids]


def test_compaction_in_the_background_survives_sigkill_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    (tmp_path / "base.jsonl").write_text(json.dumps({"id": "base", "text": _text("b")}) + "\n")
    done = neardup("dedup", "base.jsonl", "--output", "base.out.jsonl", "--index", "idx",
                   "--workers", "1", "--quiet", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    idx = tmp_path / "idx"
    args = ("--workers", "1", "--index", str(idx), "--flush-rows", "2", "--flush-seconds", "0",
            "--compact-parts", "2", "--index-refresh", "0.2")  # fmt: skip
    names: list[str] = []

    server = start_server(tmp_path, *args)
    try:
        n = _register_until_compacting(server, names, 0)
        server.kill_group()  # SIGKILL, the server and its compaction child
    finally:
        stop_server(server)
    info = neardup("index", "info", "idx", "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["rows"] >= 1

    server = start_server(tmp_path, *args)
    try:
        assert _stats(server.url)["documents"] == len(names)  # every acknowledged one
        n = _register_until_compacting(server, names, n)
        code = stop_server(server)  # SIGTERM while the child writes (SIGKILL after 60 s)
    finally:
        stop_server(server)
    assert code in (0, -15), server.log_tail()  # (uvicorn re-raises SIGTERM once stopped)
    info = neardup("index", "info", "idx", "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    ids = _ids_in_index(idx)
    assert sorted(ids) == sorted(["base", *names])  # each once, all flushed at shutdown

    server = start_server(tmp_path, *args)
    try:
        stats = _stats(server.url)
        metrics = httpx.get(f"{server.url}/metrics", timeout=60).text
    finally:
        stop_server(server)
    assert (stats["documents"], stats["indexed_documents"], stats["unflushed"]) == (
        len(names), 1, 0,
    )  # fmt: skip
    served = DocIndex.open(str(idx)).at_version(stats["index_version"])  # (one may follow)
    assert served is not None
    parts = len(served.parts)
    assert stats["index_parts"] == parts and "neardup_index_parts " in metrics
    assert "neardup_part_compactions " in metrics
    assert "neardup_part_compactions_failed 0.0" in metrics
