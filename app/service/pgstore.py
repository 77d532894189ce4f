"""The shared store: PostgreSQL, for several ``neardup serve`` replicas behaving as one service.

Every write is one transaction that holds one transaction-level advisory lock (``WRITE_LOCK``)
from ``lock_writes`` to its commit: the replica first applies the log entries other replicas
committed since it last looked (``lock_writes`` returns them), then plans against an index
that holds every acknowledged document, then inserts its rows and one log row (``changes``,
numbered under the lock, so in commit order) and commits with ``synchronous_commit`` on and a
``NOTIFY``. Document numbers are the index's positions: the next one is one more than the
largest ever stored, because deleted documents stay as rows (``deleted``, text and meta cleared)
so a lagging replica can still replay the batch that added them before the deletion.

Followers wake on ``NOTIFY`` (``wait_for_changes``) or after a timeout, and read the log past
their position (``changes``). Recovery reads the alive documents' signatures with a binary
``COPY`` in one repeatable-read snapshot whose log head becomes the replica's position.

A database that cannot be reached (refused, shut down, timed out) is StoreUnavailable (503),
a full disk StoreFull (507). One connection serves the store thread (the service calls the store
from one thread, so a pool would add nothing), reconnected on demand: a call that finds it dead
before doing anything (a read, ``lock_writes``) reconnects and tries once more, so writes work
again as soon as the database is back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import psycopg
import psycopg.errors

from neardup.app.service.errors import DamagedStore, StoreFull, StoreUnavailable
from neardup.app.service.store import PROBE_BYTES, Change, ProtectedSetRow, StoredDoc, check_params
from neardup.core.engine import ProtectedFormat

__all__ = ["WRITE_LOCK", "PostgresStore"]

log = logging.getLogger("neardup")

#: The advisory lock every write transaction holds ('neardup' in ASCII).
WRITE_LOCK = 0x6E656172647570
#: The NOTIFY channel a committed change wakes the followers on.
CHANNEL = "neardup_changes"
#: Seconds to wait for a connection (or to connect) before answering 503.
CONNECT_TIMEOUT = 3.0
#: After the database failed, calls fail at once for this long instead of waiting again.
FAIL_FAST = 0.5
#: Any statement (lock waits included) longer than this is cancelled: 503, never a hang.
STATEMENT_TIMEOUT_MS = 30_000
#: A write transaction idle this long (its replica planning, or gone) is ended by the server.
IDLE_IN_WRITE_MS = 60_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS params (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    num BIGINT PRIMARY KEY,
    id TEXT NOT NULL,
    digest BYTEA NOT NULL,
    sig BYTEA NOT NULL,
    meta TEXT NOT NULL,
    text BYTEA,
    deleted BOOLEAN NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX IF NOT EXISTS documents_alive_id ON documents (id) WHERE NOT deleted;
CREATE TABLE IF NOT EXISTS protected_sets (
    name TEXT PRIMARY KEY,
    items INTEGER NOT NULL,
    ngrams INTEGER NOT NULL,
    body BYTEA NOT NULL,
    format TEXT NOT NULL CHECK (format IN ('jsonl', 'text'))
);
CREATE TABLE IF NOT EXISTS changes (
    seq BIGINT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('add', 'delete', 'put_set', 'delete_set')),
    lo BIGINT NOT NULL DEFAULT 0,
    hi BIGINT NOT NULL DEFAULT 0,
    name TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS probe (id BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL);
"""

_Conn = psycopg.Connection[tuple[Any, ...]]
_T = TypeVar("_T")


class PostgresStore:
    """The store at ``url`` (``postgresql://USER@HOST:PORT/DB``), shared by every replica.

    Opening connects (StoreUnavailable if it cannot), creates the tables if missing. Called
    from one thread at a time (the service's store thread), except ``wait_for_changes``, which
    has its own connection and runs in the follower's thread.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self.where = _where(url)
        self._db: _Conn | None = None
        self._tx: _Conn | None = None  # the open write transaction (lock_writes .. commit)
        self._snapshot: _Conn | None = None  # recovery's repeatable-read snapshot
        self._listener: _Conn | None = None
        self._applied = 0
        self._down_until = 0.0
        self._down_reason = ""
        self._closed = False
        try:
            self._run(_create_schema)
        except BaseException:
            self.close()
            raise

    # --- errors -------------------------------------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Database errors as the service's: StoreFull for a full disk, StoreUnavailable for a
        database that is away (and, for FAIL_FAST seconds after, without trying again)."""
        if time.monotonic() < self._down_until:
            raise StoreUnavailable(self._down_reason)
        try:
            yield
        except psycopg.errors.DiskFull as exc:
            raise StoreFull(f"{self.where}: {exc}; nothing was stored") from exc
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if not self._down_reason:
                log.warning("store unavailable, answering 503 until it is back: %s", exc)
            self._down_reason = f"the store at {self.where} is unavailable: {exc}"
            self._down_until = time.monotonic() + FAIL_FAST
            raise StoreUnavailable(self._down_reason) from exc
        if self._down_reason:
            log.info("store %s reachable again", self.where)
            self._down_reason = ""

    def _connection(self) -> _Conn:
        """The store's connection, opened (again) if there is none or it broke."""
        conn = self._db
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            with suppress(Exception):
                conn.close()
        self._db = None
        self._db = psycopg.connect(self._url, autocommit=True, **_connect_kwargs())
        return self._db

    def _run(self, fn: Callable[[_Conn], _T]) -> _T:
        """``fn`` on the connection of the open snapshot or write transaction if any; else on
        the store's connection, once more on a fresh one if that had died meanwhile (``fn``
        must be safe to repeat: reads, or a transaction it begins itself)."""
        with self._guard():
            held = self._snapshot or self._tx
            if held is not None:
                return fn(held)
            fresh = self._db is None or self._db.closed or self._db.broken
            conn = self._connection()
            try:
                return fn(conn)
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if fresh or not conn.broken:
                    raise
            return fn(self._connection())

    # --- parameters, probe --------------------------------------------------------------------

    def ensure_params(self, params: dict[str, int | str]) -> None:
        """Record the index parameters on first use; refuse others afterwards, naming them."""

        def record(conn: _Conn) -> dict[str, str]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                rows = conn.execute("SELECT key, value FROM params").fetchall()
                stored: dict[str, str] = {str(k): str(v) for k, v in rows}
                if stored:
                    return stored
                has_docs = conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone()
                has_sets = conn.execute("SELECT 1 FROM protected_sets LIMIT 1").fetchone()
                if has_docs is not None or has_sets is not None:
                    raise DamagedStore(
                        f"{self.where} holds documents or protected sets but no index "
                        "parameters (its params table is empty): refusing to guess them"
                    )
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO params VALUES (%s, %s)",
                        [(k, str(v)) for k, v in params.items()],
                    )
                return {k: str(v) for k, v in params.items()}

        check_params(self.where, "the store", self._run(record), params)

    def probe(self) -> None:
        """Write, commit and delete ``PROBE_BYTES``: StoreFull while there is no room."""

        def probe(conn: _Conn) -> None:
            with conn.transaction():
                conn.execute("INSERT INTO probe (body) VALUES (%s)", (bytes(PROBE_BYTES),))
            conn.execute("DELETE FROM probe")

        self._run(probe)

    # --- the write transaction ----------------------------------------------------------------

    def lock_writes(self) -> list[Change]:
        """Begin a write: take the store-wide write lock, and return what other replicas
        committed since this one's position (to apply before planning)."""

        def begin(conn: _Conn) -> list[Change]:
            try:
                conn.execute("BEGIN")
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                found = self._read_changes(conn)
            except BaseException:
                _rollback(conn)
                raise
            self._tx = conn
            return found

        return self._run(begin)

    def unlock_writes(self) -> None:
        """End the write transaction if no write committed it (rolled back: nothing stored)."""
        conn, self._tx = self._tx, None
        if conn is not None:
            _rollback(conn)

    @contextmanager
    def _write(self) -> Iterator[_Conn]:
        """The open write transaction, committed after the block (rolled back on an error);
        the lock is released either way."""
        conn = self._tx
        if conn is None:
            raise RuntimeError("a store write outside lock_writes()")
        try:
            with self._guard():
                yield conn
                conn.execute("COMMIT")
        finally:
            self.unlock_writes()

    def _log(self, conn: _Conn, kind: str, lo: int = 0, hi: int = 0, name: str = "") -> int:
        """Append a log row (numbered under the lock: in commit order) and notify on commit."""
        row = conn.execute(
            "INSERT INTO changes (seq, kind, lo, hi, name) "
            "SELECT coalesce(max(seq), 0) + 1, %s, %s, %s, %s FROM changes RETURNING seq",
            (kind, lo, hi, name),
        ).fetchone()
        conn.execute(f"NOTIFY {CHANNEL}")
        assert row is not None
        return int(row[0])

    def add_documents(self, docs: Sequence[StoredDoc]) -> None:
        """Store a batch (numbered from the store's next number) and its log row, durably."""
        seq = None
        with self._write() as conn:
            if not docs:
                return
            lo = docs[0].num
            _check_next(conn, [d.num for d in docs])
            sql = "COPY documents (num, id, digest, sig, meta, text) FROM STDIN"
            with conn.cursor().copy(sql) as copy:
                for d in docs:
                    text = None if d.text is None else d.text.encode("utf-8")
                    copy.write_row((d.num, d.id, d.digest, d.sig, json.dumps(d.meta), text))
            seq = self._log(conn, "add", lo, lo + len(docs))
        self._applied = seq

    def delete_document(self, num: int) -> None:
        """Mark a document deleted (its text and meta cleared), durably."""
        seq = None
        with self._write() as conn:
            doc_id = _mark_deleted(conn, num)
            if doc_id is not None:
                seq = self._log(conn, "delete", num, num + 1, doc_id)
        if seq is not None:
            self._applied = seq

    def replace_document(self, old: int, doc: StoredDoc) -> None:
        """Mark document ``old`` deleted and store ``doc`` (its new text, numbered from the
        store's next number) in one durable transaction, logged as a delete then an add."""
        seq = None
        with self._write() as conn:
            old_id = _mark_deleted(conn, old)
            if old_id is None:
                raise RuntimeError(f"document {old} to replace is not in the store")
            _check_next(conn, [doc.num])
            text = None if doc.text is None else doc.text.encode("utf-8")
            conn.execute(
                "INSERT INTO documents (num, id, digest, sig, meta, text) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (doc.num, doc.id, doc.digest, doc.sig, json.dumps(doc.meta), text),
            )
            self._log(conn, "delete", old, old + 1, old_id)
            seq = self._log(conn, "add", doc.num, doc.num + 1)
        self._applied = seq

    def put_protected_set(self, row: ProtectedSetRow) -> None:
        """Create or atomically replace a protected set."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO protected_sets (name, items, ngrams, format, body) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET "
                "items = excluded.items, ngrams = excluded.ngrams, format = excluded.format, "
                "body = excluded.body",
                (row.name, row.items, row.ngrams, row.format.value, row.body.encode("utf-8")),
            )
            seq = self._log(conn, "put_set", name=row.name)
        self._applied = seq

    def delete_protected_set(self, name: str) -> bool:
        """Remove a protected set; False if there was none of that name."""
        seq = None
        with self._write() as conn:
            cursor = conn.execute("DELETE FROM protected_sets WHERE name = %s", (name,))
            if cursor.rowcount > 0:
                seq = self._log(conn, "delete_set", name=name)
        if seq is not None:
            self._applied = seq
        return seq is not None

    # --- following the log --------------------------------------------------------------------

    def position(self) -> int | None:
        """The last log entry this replica has applied."""
        return self._applied

    def changes(self) -> list[Change]:
        """The log entries past this replica's position, oldest first (now taken as applied)."""
        return self._run(self._read_changes)

    def _read_changes(self, conn: _Conn) -> list[Change]:
        rows = conn.execute(
            "SELECT seq, kind, lo, hi, name FROM changes WHERE seq > %s ORDER BY seq",
            (self._applied,),
        ).fetchall()
        found = []
        for seq, kind, lo, hi, name in rows:
            if kind == "add":
                docs = conn.execute(
                    "SELECT num, id, sig FROM documents WHERE num >= %s AND num < %s ORDER BY num",
                    (lo, hi),
                ).fetchall()
                nums, ids, sigs = [d[0] for d in docs], [d[1] for d in docs], [d[2] for d in docs]
                found.append(Change(seq, "add", nums=nums, ids=ids, sigs=b"".join(sigs)))
            elif kind == "delete":
                found.append(Change(seq, "delete", name=name, nums=[lo]))
            elif kind == "put_set":
                found.append(Change(seq, "put_set", name=name, row=self._set(conn, name)))
            else:
                found.append(Change(seq, "delete_set", name=name))
        if rows:
            self._applied = int(rows[-1][0])
        return found

    def wait_for_changes(self, timeout: float) -> None:
        """Block until a change is notified or ``timeout`` seconds pass (own connection; on a
        database that is away, just wait: the follower polls anyway)."""
        started = time.monotonic()
        try:
            if self._listener is None or self._listener.closed:
                self._listener = psycopg.connect(self._url, autocommit=True, **_connect_kwargs())
                self._listener.execute(f"LISTEN {CHANNEL}")
            for _ in self._listener.notifies(timeout=timeout, stop_after=1):
                pass
        except Exception:  # any failure of the listener: poll instead, reconnect next time
            listener, self._listener = self._listener, None
            if listener is not None:
                with suppress(Exception):
                    listener.close()
            time.sleep(max(0.0, timeout - (time.monotonic() - started)))

    # --- reading ------------------------------------------------------------------------------

    @contextmanager
    def recovering(self) -> Iterator[None]:
        """Recovery's reads in one repeatable-read snapshot; its log head becomes the
        position, so following resumes exactly after what was loaded."""

        def begin(conn: _Conn) -> tuple[_Conn, int]:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            conn.execute("SET LOCAL statement_timeout = 0")  # a large store takes a while
            conn.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            head = conn.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()
            return conn, int(head[0]) if head is not None else 0

        conn, head = self._run(begin)
        self._snapshot = conn
        try:
            yield
            with self._guard():
                conn.execute("COMMIT")
            self._applied = head
        finally:
            self._snapshot = None
            _rollback(conn)

    def digests(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The text digests of those of ``ids`` that are registered."""
        rows = self._run(
            lambda c: c.execute(
                "SELECT id, digest FROM documents WHERE id = ANY(%s) AND NOT deleted", (list(ids),)
            ).fetchall()
        )
        return {r[0]: bytes(r[1]) for r in rows}

    def document(self, doc_id: str) -> StoredDoc | None:
        """One registered document by id, or None."""
        row = self._run(
            lambda c: c.execute(
                "SELECT num, id, digest, sig, meta, text FROM documents "
                "WHERE id = %s AND NOT deleted",
                (doc_id,),
            ).fetchone()
        )
        if row is None:
            return None
        text = None if row[5] is None else bytes(row[5]).decode("utf-8")
        return StoredDoc(row[0], row[1], bytes(row[2]), bytes(row[3]), json.loads(row[4]), text)

    def texts(self, nums: Sequence[int]) -> dict[int, str]:
        """The stored texts of those documents (when texts are stored)."""
        rows = self._run(
            lambda c: c.execute(
                "SELECT num, text FROM documents WHERE num = ANY(%s) AND text IS NOT NULL "
                "AND NOT deleted",
                (list(nums),),
            ).fetchall()
        )
        return {r[0]: bytes(r[1]).decode("utf-8") for r in rows}

    def extent(self) -> int:
        """One more than the largest document number ever stored (0 when empty)."""
        row = self._run(
            lambda c: c.execute("SELECT coalesce(max(num) + 1, 0) FROM documents").fetchone()
        )
        return int(row[0]) if row is not None else 0

    def iter_signatures(self, batch: int) -> Iterator[tuple[list[int], list[str], bytes]]:
        """Every registered document's (nums, ids, concatenated signature bytes), ``batch``
        rows at a time, read with a binary COPY."""
        sql = (
            "COPY (SELECT num, id, sig FROM documents WHERE NOT deleted ORDER BY num) "
            "TO STDOUT (FORMAT BINARY)"
        )
        with self._guard(), self._connection().cursor().copy(sql) as copy:
            copy.set_types(["int8", "text", "bytea"])
            nums: list[int] = []
            ids: list[str] = []
            sigs: list[bytes] = []
            for num, doc_id, sig in copy.rows():
                nums.append(num)
                ids.append(doc_id)
                sigs.append(sig)
                if len(nums) == batch:
                    yield nums, ids, b"".join(sigs)
                    nums, ids, sigs = [], [], []
            if nums:
                yield nums, ids, b"".join(sigs)

    def protected_sets(self) -> list[ProtectedSetRow]:
        """Every protected set, by name."""
        rows = self._run(
            lambda c: c.execute(
                "SELECT name, items, ngrams, format, body FROM protected_sets ORDER BY name"
            ).fetchall()
        )
        return [_set_row(r) for r in rows]

    def _set(self, conn: _Conn, name: str) -> ProtectedSetRow | None:
        row = conn.execute(
            "SELECT name, items, ngrams, format, body FROM protected_sets WHERE name = %s",
            (name,),
        ).fetchone()
        return None if row is None else _set_row(row)

    def close(self) -> None:
        """Roll back an open write, close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with suppress(Exception):
            self.unlock_writes()
        for conn in (self._listener, self._db):
            if conn is not None:
                with suppress(Exception):
                    conn.close()
        self._listener = self._db = None


def _mark_deleted(conn: _Conn, num: int) -> str | None:
    """Mark document ``num`` deleted (text and meta cleared; the row stays for the log's
    replay); its id, or None if there is no such alive document."""
    row = conn.execute(
        "UPDATE documents SET deleted = true, text = NULL, meta = '{}' "
        "WHERE num = %s AND NOT deleted RETURNING id",
        (num,),
    ).fetchone()
    return None if row is None else str(row[0])


def _check_next(conn: _Conn, nums: list[int]) -> None:
    """Refuse documents not numbered consecutively from the store's next number."""
    head = conn.execute("SELECT coalesce(max(num) + 1, 0) FROM documents").fetchone()
    lo = nums[0]
    if head is None or head[0] != lo or nums != list(range(lo, lo + len(nums))):
        raise RuntimeError(f"documents numbered from {lo}, the store's next is {head}")


def _set_row(row: tuple[Any, ...]) -> ProtectedSetRow:
    name, items, ngrams, fmt, body = row
    return ProtectedSetRow(name, items, ngrams, ProtectedFormat(fmt), bytes(body).decode("utf-8"))


def _connect_kwargs() -> dict[str, Any]:
    """Connection settings: a bounded connect; TCP keepalives both ways, and a cap on a
    transaction left idle, so a replica whose host vanished mid-write does not hold the write
    lock for long; every commit flushed to the WAL before it returns."""
    server = {
        "synchronous_commit": "on",
        "statement_timeout": STATEMENT_TIMEOUT_MS,
        "idle_in_transaction_session_timeout": IDLE_IN_WRITE_MS,
        "tcp_keepalives_idle": 10,
        "tcp_keepalives_interval": 5,
        "tcp_keepalives_count": 3,
    }
    return {
        "connect_timeout": max(1, int(CONNECT_TIMEOUT)),
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "options": " ".join(f"-c {k}={v}" for k, v in server.items()),
    }


def _create_schema(conn: _Conn) -> None:
    with conn.transaction():  # replicas starting at once: one creates, the others see it
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        conn.execute(_SCHEMA)


def _rollback(conn: _Conn) -> None:
    """End whatever transaction ``conn`` has open (nothing stored); quiet on a dead one."""
    if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        with suppress(psycopg.Error):
            conn.execute("ROLLBACK")


def _where(url: str) -> str:
    """The store's host, port and database for messages (never the password)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://(unparsable URL)"
    host, port, db = info.get("host", "localhost"), info.get("port", 5432), info.get("dbname", "")
    return f"postgresql://{host}:{port}/{db}"
