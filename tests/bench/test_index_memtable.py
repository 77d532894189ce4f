"""``bench.index.memtable`` at a tiny size: a flushed service served, its figures measured."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.index.memtable import _build, _texts, build, markdown, measure
from neardup.app.config import Settings
from neardup.app.service import Service
from neardup.core.engine import DocIndex, read_json
from tests.app.service.cluster_reads import page


def test_memtable_bench_serves_the_flushed_documents_and_measures_them(tmp_path: Path) -> None:
    result = measure(2_000, tmp_path, None)
    [after] = result["runs"]
    assert after["name"] == "after" and after["documents"] == 3_000  # and the 1,000 registered
    assert after["clusters"] > 0  # a tenth are near copies
    assert all(after[k] > 0 for k in ("ready_s", "rss_anon_mib", "p50_ms", "register_1000_s"))
    assert "| after | 2,000 |" in markdown(result, "test")


# --- the fast build leaves what the service leaves --------------------------------------------


def _store_rows(data: Path) -> dict[str, Any]:
    """What a data directory's store holds, but the flush marks' tokens (each part's file name
    is new) and the cluster labels (numbers naming clusters, given in write order)."""
    db = sqlite3.connect(data / "neardup.sqlite3")
    try:
        flush = dict(db.execute("SELECT key, value FROM index_flush"))
        marks = {
            k: {f: v for f, v in read_json(flush[k]).items() if f != "token"}
            for k in ("committed", "attempt")
        }
        members = db.execute(
            "SELECT m.id, c.root, c.size, c.own, m.own FROM cluster_members m "
            "JOIN clusters c USING (label) ORDER BY m.id"
        ).fetchall()
        return {
            "documents": db.execute("SELECT * FROM documents ORDER BY num").fetchall(),
            "params": db.execute("SELECT * FROM params ORDER BY key").fetchall(),
            "clusters": db.execute("SELECT root, size, own FROM clusters ORDER BY root").fetchall(),
            "members": members,
            "sizes": db.execute("SELECT * FROM cluster_sizes ORDER BY size").fetchall(),
            "layout": db.execute("PRAGMA user_version").fetchone(),
            "deletes": db.execute("SELECT count(*) FROM index_deletes").fetchone(),
            "marks": marks,
        }
    finally:
        db.close()


def _index_rows(url: Path) -> list[tuple[int, dict[str, Any], list[Any]]]:
    """Each part of the index: its rows, its run (but when and by which store) and its rows'
    ids, digests and signatures in order."""
    index = DocIndex.open(str(url))
    out = []
    for part in index.parts:
        run = {k: v for k, v in part.run.items() if k not in ("store", "created")}
        table = pa.concat_tables(
            pq.read_table(index.fs.open(index.path(f.path))) for f in part.files
        )
        cols = [c for c in table.column_names if c in ("id", "digest", "sig", "signature")]
        out.append((part.rows, run, table.select(cols).to_pylist()))
    return out


async def _answers(data: Path, url: Path, text: str) -> tuple[Any, ...]:
    """A service started on the data directory: its stats, clusters and a query of ``text``."""
    settings = Settings(workers=1, data_dir=data, index=str(url), flush_rows=0, flush_seconds=0)
    service = await Service.start(settings)
    try:
        stats = await service.read_stats()
        counts = {k: stats[k] for k in ("documents", "clusters", "duplicates", "unflushed")}
        clusters = await page(service, 2, 10**6, None)
        found = await service.query([text], None, None)
        return counts, clusters, found
    finally:
        await service.close()


def test_the_fast_build_leaves_the_state_registering_and_flushing_leaves(tmp_path: Path) -> None:
    docs, flush_docs = 2_000, 1_000
    asyncio.run(_build(tmp_path / "s" / "data", tmp_path / "s" / "idx", docs, 500, flush_docs))
    build(tmp_path / "f" / "data", tmp_path / "f" / "idx", docs, flush_docs, jobs=2, chunk=500)
    service, fast = (_store_rows(tmp_path / k / "data") for k in ("s", "f"))
    assert len(service["documents"]) == docs and len(service["members"]) > 100
    assert service["marks"]["committed"]["through"] == docs - 1
    assert fast == service
    assert _index_rows(tmp_path / "f" / "idx") == _index_rows(tmp_path / "s" / "idx")
    near = _texts(docs - 1, 1)[0][1]  # a near copy of document docs - 10
    answers = [
        asyncio.run(_answers(tmp_path / k / "data", tmp_path / k / "idx", near)) for k in "sf"
    ]
    assert answers[0][0]["documents"] == docs and answers[0][0]["clusters"] > 100
    assert answers[0][2][0][0] > 0  # the query matched
    assert answers[1] == answers[0]
