"""Persistent indexes in tests: corpora with copies of indexed documents, the ``neardup``
command as a subprocess, and what an index holds, read without neardup (its manifest and
pyarrow), to compare an index before and after."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.batch.corpus import write_corpus
from bench.index.batch import write_batch

ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "ROOT",
    "env",
    "flat_layout",
    "index_table",
    "latest_manifest",
    "neardup",
    "snapshot",
    "spawn",
    "version_file",
    "version_files",
    "write_corpora",
]


def env(**extra: str) -> dict[str, str]:
    """The environment of a ``neardup`` subprocess running this checkout's code."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    return {**base, "PYTHONPATH": str(ROOT), **extra}


def neardup(
    *args: object, cwd: Path, timeout: float = 300, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``python -m neardup ARGS`` to its end."""
    return subprocess.run(
        [sys.executable, "-m", "neardup", *map(str, args)], cwd=cwd, env=env(**extra),
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


#: The runs ``spawn`` started, until ``kill_spawned`` reaps them.
_spawned: list[subprocess.Popen[str]] = []


def spawn(*args: object, cwd: Path, **extra: str) -> subprocess.Popen[str]:
    """``python -m neardup ARGS`` started in a session of its own (its stderr piped); killed
    after the test if still there (``kill_spawned``, an autouse fixture of tests/e2e)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "neardup", *map(str, args)], cwd=cwd, env=env(**extra),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    _spawned.append(proc)
    return proc


def kill_spawned() -> None:
    """Kill (their whole sessions) the runs ``spawn`` started that are still there: a stopped
    run must never outlive a failed test."""
    while _spawned:
        proc = _spawned.pop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def write_corpora(tmp: Path, base_docs: int, batches: dict[str, int]) -> None:
    """``tmp/base.jsonl`` (``base_docs`` documents with planted copies) and, per name of
    ``batches``, ``tmp/NAME.jsonl``: that many new documents with copies of base originals."""
    base = tmp / "base.jsonl"
    write_corpus(base, base_docs, seed=1, corpus="c")
    for seed, (name, docs) in enumerate(sorted(batches.items()), start=2):
        write_batch(base, tmp / f"{name}.jsonl", docs, base_docs=base_docs, seed=seed, corpus="c")
        text = (tmp / f"{name}.jsonl").read_text(encoding="utf-8")
        # distinct ids per batch (the batch writer's ids do not depend on its seed)
        (tmp / f"{name}.jsonl").write_text(text.replace('"id": "n', f'"id": "{name}-n'))


def version_file(idx: Path, version: int) -> Path:
    """The file of version ``version`` of ``idx``: in the flat log (``_index/``) if there, else
    where the grouped log keeps it (docs/index.md, "The version log")."""
    flat = idx / "_index" / f"{version:08d}.json"
    return flat if flat.exists() else idx / "_index" / "log" / f"{version // 1000:05d}" / flat.name


def version_files(idx: Path) -> list[Path]:
    """Every version file of ``idx`` (both logs; the seal's copy in the grouped log counted
    once), by version."""
    found = {int(p.stem): p for p in (idx / "_index" / "log").glob("*/[0-9]*.json")}
    found.update({int(p.stem): p for p in (idx / "_index").glob("[0-9]*.json")})
    return [found[v] for v in sorted(found)]


def flat_layout(idx: Path) -> None:
    """Turn ``idx`` into an index of the layout before format_version 4 (what a neardup before
    it left): every version in the flat log ``_index/``, of format_version 3 (or lower, as
    written), without ``sealed``; the grouped log removed."""
    for path in version_files(idx):
        body = json.loads(path.read_text())
        body.pop("sealed", None)
        body["format_version"] = min(body["format_version"], 3)
        target = idx / "_index" / f"{int(path.stem):08d}.json"
        target.write_text(json.dumps(body, sort_keys=True, indent=1) + "\n")
    shutil.rmtree(idx / "_index" / "log", ignore_errors=True)


def latest_manifest(idx: Path) -> tuple[int, dict[str, Any]]:
    """The latest committed version of ``idx`` and its JSON, read as docs/index.md says."""
    latest = version_files(idx)[-1]
    return int(latest.stem), json.loads(latest.read_text())


def snapshot(idx: Path) -> dict[str, Any]:
    """What a reader of ``idx`` sees: the latest version, its file's bytes, and the SHA-256 of
    every file it lists (leftovers no version lists are left out: readers never see them)."""
    version, manifest = latest_manifest(idx)
    files = {
        f["path"]: hashlib.sha256((idx / f["path"]).read_bytes()).hexdigest()
        for part in manifest["parts"]
        for f in part["files"]
    }
    return {
        "version": version,
        "manifest": version_file(idx, version).read_bytes(),
        "files": files,
    }


def index_table(idx: Path) -> pa.Table:
    """Every live row of ``idx``'s latest version, read with pyarrow from the files its
    manifest lists, less the rows its parts' deletion vectors delete (docs/index.md), sorted by
    id, without the file-level metadata."""
    _, manifest = latest_manifest(idx)
    tables = []
    for part in manifest["parts"]:
        table = pq.read_table([str(idx / f["path"]) for f in part["files"]])
        if part.get("deleted"):
            vector = pa.ipc.open_file(pa.memory_map(str(idx / part["deleted"]["path"])))
            deleted = set(vector.read_all().column("row").to_pylist())
            keep = pa.array([i not in deleted for i in range(table.num_rows)])
            table = table.filter(keep)
        tables.append(table.replace_schema_metadata(None))
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables).sort_by("id")
