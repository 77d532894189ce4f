"""PostgreSQL's kept document count (layout 7, ``document_count``): what its triggers cost the
writes, and what a start reads instead of counting every row.

Writes: batches of synthetic documents (a 512-byte signature, about 1 KB of text each) added
with ``PostgresStore.add_documents``, then a tenth of them deleted in one
``delete_documents``, on a store with the count's triggers and on one with them dropped (the
writes before layout 7), interleaved rounds (each first in every other), a new database each.
Reads: a store of ROWS documents (a tenth deleted) filled with one ``INSERT ... SELECT``; a
``COUNT(*)`` of the alive rows (what a start ran before, twice: the second from a warm cache)
against the kept count read, and the migration from layout 6 (the count made once) timed as a
store's open.

Run from the repository root (a throwaway PostgreSQL server of the system's binaries,
``bench.common.postgres``, fsync on)::

    python -m bench.service.pg_count [--batch B] [--batches N] [--rounds K] [--rows R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import psycopg

from bench.common.postgres import PostgresServer
from neardup.app.service.pgstore import PostgresStore
from neardup.app.service.store import StoredDoc

#: The count's triggers on ``documents`` (pgstore.MIGRATIONS[7]).
TRIGGERS = ("insert", "update", "delete", "truncate")


def writes(url: str, batch: int, batches: int, counted: bool) -> tuple[float, float]:
    """Median seconds of an ``add_documents`` of ``batch``, and seconds of the one
    ``delete_documents`` of a tenth of every document, with or without the triggers."""
    store = PostgresStore(url)
    try:
        store.document_count()  # opened: the layout made
        if not counted:
            with psycopg.connect(url, autocommit=True) as c:
                for name in TRIGGERS:
                    c.execute(f"DROP TRIGGER documents_counted_{name} ON documents")
        text = "word " * 200
        took = []
        for b in range(batches):
            docs = [
                StoredDoc(n, f"id{n}", os.urandom(32), os.urandom(512), {}, text)
                for n in range(b * batch, (b + 1) * batch)
            ]
            store.lock_writes()
            start = time.perf_counter()
            store.add_documents(docs)
            took.append(time.perf_counter() - start)
        store.lock_writes()
        start = time.perf_counter()
        store.delete_documents(list(range(0, batch * batches, 10)))
        deleted = time.perf_counter() - start
        return statistics.median(took), deleted
    finally:
        store.close()


def reads(url: str, rows: int) -> dict[str, float]:
    """Seconds of the two ``COUNT(*)``, the kept count's read and the migration from 6."""
    store = PostgresStore(url)
    store.document_count()
    store.close()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(
            "INSERT INTO documents (num, id, digest, sig, meta, text, deleted) "
            "SELECT n, 'id' || n, sha256(n::text::bytea), "
            "  decode(repeat(md5(n::text), 16), 'hex') || decode(repeat(md5(n::text), 16), 'hex'),"
            "  '{}', convert_to(repeat('word ', 200), 'UTF8'), n %% 10 = 0 "
            "FROM generate_series(0, %s - 1) AS n",
            (rows,),
        )
        c.execute("VACUUM ANALYZE documents")
        found = {}
        for name in ("COUNT(*), first", "COUNT(*), again"):
            start = time.perf_counter()
            c.execute("SELECT count(*) FROM documents WHERE NOT deleted").fetchone()
            found[name] = time.perf_counter() - start
    store = PostgresStore(url)
    try:
        start = time.perf_counter()
        kept = store.document_count()
        found["kept count"] = time.perf_counter() - start
        assert kept == rows - (rows + 9) // 10, kept
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as c:  # back to layout 6
        c.execute("DROP TABLE document_count")
        for name in TRIGGERS:
            c.execute(f"DROP TRIGGER documents_counted_{name} ON documents")
        c.execute("DELETE FROM schema_versions WHERE version >= 7")
    start = time.perf_counter()
    store = PostgresStore(url)
    try:
        assert store.document_count() == kept
        found["migration 6 -> 7 (open)"] = time.perf_counter() - start
    finally:
        store.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    server = PostgresServer().start()
    try:
        got: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for r in range(args.rounds):  # each first in every other round
            for counted in (True, False) if r % 2 == 0 else (False, True):
                got[counted].append(writes(server.database(), args.batch, args.batches, counted))
        print(f"Writes: batches of {args.batch:,}, {args.batches} a round, {args.rounds} rounds")
        print()
        print("| documents | add_documents p50 ms (median of rounds) | delete_documents ms |")
        print("|---|---:|---:|")
        for counted in (True, False):
            add = statistics.median(a for a, _ in got[counted]) * 1000
            gone = statistics.median(d for _, d in got[counted]) * 1000
            name = "with the count's triggers" if counted else "without (layout 6)"
            print(f"| {name} | {add:.1f} | {gone:.1f} |")
        print()
        found = reads(server.database(), args.rows)
        print(f"Reads: {args.rows:,} rows, a tenth deleted")
        print()
        print("| read | ms |")
        print("|---|---:|")
        for name, seconds in found.items():
            print(f"| {name} | {seconds * 1000:.2f} |")
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
