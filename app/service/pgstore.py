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
their position (``changes``, in one repeatable-read snapshot). Recovery reads the alive
documents' signatures with a binary ``COPY`` in one repeatable-read snapshot whose log head
becomes the replica's position.

History is pruned (``prune``, a bounded step at a time under the write lock): log entries older
than the retention window (LOG_RETENTION_SECONDS; the newest entry always stays, it numbers the
next), then deleted rows that no kept ``add`` entry names (the row of the largest number always
stays, it numbers the next document). A replica whose position is older than the oldest kept
entry gets LogPruned from ``changes`` or ``lock_writes`` and reloads from the live documents.

A database that cannot be reached (refused, shut down, timed out) is StoreUnavailable (503),
a full disk StoreFull (507). One that stalls (frozen, not refusing) is abandoned after
STORE_TIMEOUT seconds a call (``_deadline`` shuts its connection down): StoreUnavailable too.
One connection serves the store thread (the service calls the store
from one thread, so a pool would add nothing), reconnected on demand: a call that finds it dead
before doing anything (a read, ``lock_writes``) reconnects and tries once more, so writes work
again as soon as the database is back.

The tables live in one PostgreSQL schema (``STORE_SCHEMA``, ``public`` by default), created if
missing; the store's layout has a version (``schema_versions``): a store of an older version is
migrated at start, one of a newer version refused. A role without a privilege the store needs,
a wrong password, an unknown role or database are StoreRefused, naming what is missing and how
to grant it, in one line, and never the password (docs/postgres.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg import sql

from neardup.app.config import redact
from neardup.app.service import cluster_reads
from neardup.app.service import clusters as cluster_sql
from neardup.app.service.budget_sql import (
    BUDGET_FULL_AFTER,
    BUDGET_SWEEP_SECONDS,
    budget_schema,
    budget_take_sql,
)
from neardup.app.service.cluster_reads import ClusterSlice
from neardup.app.service.clusters import ClusterRow, ClusterWrite, StoredCluster
from neardup.app.service.errors import (
    DamagedStore,
    LogPruned,
    StoreFull,
    StoreRefused,
    StoreUnavailable,
)
from neardup.app.service.store import (
    PROBE_BYTES,
    PRUNE_BATCH,
    QUEUED_AT,
    Change,
    ProtectedSetRow,
    StoredDoc,
    changed_settings,
    check_params,
    check_settings,
    unrecorded,
)
from neardup.core.engine import ProtectedFormat, json_text, read_json

__all__ = ["FLUSH_LOCK", "SCHEMA_VERSION", "WRITE_LOCK", "PostgresStore"]

log = logging.getLogger("neardup")

#: The advisory lock every write transaction holds ('neardup' in ASCII).
WRITE_LOCK = 0x6E656172647570
#: The advisory lock (session level) a replica holds while it flushes into the served index:
#: one flusher at a time ('neardfl' in ASCII; another schema's store: its write lock's key + 1).
FLUSH_LOCK = 0x6E65617264666C
#: The NOTIFY channel a committed change wakes the followers on.
CHANNEL = "neardup_changes"
#: Seconds to wait for a connection (or to connect) before answering 503.
CONNECT_TIMEOUT = 3.0
#: After the database failed, calls fail at once for this long instead of waiting again.
FAIL_FAST = 0.5
#: Seconds a store call may take by default (STORE_TIMEOUT) before the client abandons it: a
#: database that is frozen rather than refusing never answers, and statement_timeout, being the
#: server's, cannot help then.
CALL_TIMEOUT = 10.0
#: Any statement (lock waits included) longer than this is cancelled: 503, never a hang.
STATEMENT_TIMEOUT_MS = 30_000
#: A write transaction idle this long (its replica planning, or gone) is ended by the server.
IDLE_IN_WRITE_MS = 60_000

#: The version of the store's layout this neardup writes (``schema_versions``).
SCHEMA_VERSION = 7
#: The tables the store reads and writes (the role needs SELECT, INSERT, UPDATE, DELETE).
TABLES = (
    "params", "documents", "protected_sets", "changes", "probe", "schema_versions", "budgets",
    "index_flush", "index_deletes", "clusters", "cluster_members", "cluster_sizes",
    "document_count",
)  # fmt: skip
#: The sequences the store draws from (the role needs USAGE).
SEQUENCES = ("probe_id_seq", "index_deletes_seq_seq")

# Version 1: the layout before versions were recorded (a store without ``schema_versions`` but
# with these tables is of version 1).
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
_VERSIONS = """
CREATE TABLE IF NOT EXISTS schema_versions (
    version INTEGER PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
"""
#: How a store of version ``v - 1`` becomes version ``v``: run in order at start, each in the
#: schema's transaction under the write lock, and recorded in ``schema_versions``; a new store
#: is made as version 1 and brought up the same way.
MIGRATIONS: dict[int, str] = {
    # 2: when each log entry was written (clock time under the write lock, so increasing with
    # ``seq``), for the retention window; deleted rows found without a scan, for pruning them.
    2: """
ALTER TABLE changes ADD COLUMN IF NOT EXISTS at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp();
CREATE INDEX IF NOT EXISTS documents_deleted ON documents (num) WHERE deleted;
""",
    # 3: the read keys' contamination budgets, shared by every replica (``take_budget``).
    3: budget_schema("DOUBLE PRECISION"),
    # 4: flushing into a served index (app/service/flush.py): the store's identity, flush
    # marks and ``deletes_through`` (documents numbered up to it are flushed or in a flush
    # being written), the flushed documents deleted or replaced since (recorded in the
    # delete's transaction), and two log entries: ``flush`` (a batch taken, ``lo`` its
    # through) and ``flushed`` (a flush committed, ``name`` its mark).
    4: """
CREATE TABLE IF NOT EXISTS index_flush (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS index_deletes (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL,
    digest BYTEA NOT NULL,
    num BIGINT NOT NULL
);
ALTER TABLE changes DROP CONSTRAINT IF EXISTS changes_kind_check;
ALTER TABLE changes ADD CONSTRAINT changes_kind_check
    CHECK (kind IN ('add', 'delete', 'put_set', 'delete_set', 'flush', 'flushed'));
""",
    # 5: the clusters of two or more members (app/service/clusters.py), written by every
    # write in its transaction; filled once at start from the recovered clusters (a store of
    # layout 4 holds documents but no clusters), then ``clusters_filled`` recorded in
    # ``index_flush``.
    5: """
CREATE TABLE IF NOT EXISTS clusters (
    label BIGINT PRIMARY KEY,
    root TEXT NOT NULL,
    size INTEGER NOT NULL,
    own INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS clusters_by_size ON clusters (size DESC, root COLLATE "C");
CREATE TABLE IF NOT EXISTS cluster_members (
    id TEXT PRIMARY KEY,
    label BIGINT NOT NULL,
    own BOOLEAN NOT NULL
);
CREATE INDEX IF NOT EXISTS cluster_members_by_label ON cluster_members (label, id COLLATE "C");
""",
    # 6: clusters answered from the tables (app/service/cluster_reads.py): the listing
    # by root, the live documents by id in code-point order (singletons, merged into that
    # listing), and how many listed clusters (own > 0) there are of each size, kept by a
    # trigger in the transaction of every write to ``clusters`` (stats, the size histogram).
    6: """
CREATE INDEX IF NOT EXISTS clusters_by_root ON clusters (root COLLATE "C");
CREATE INDEX IF NOT EXISTS documents_alive_by_id ON documents (id COLLATE "C") WHERE NOT deleted;
CREATE TABLE IF NOT EXISTS cluster_sizes (
    size INTEGER PRIMARY KEY,
    clusters BIGINT NOT NULL
);
DELETE FROM cluster_sizes;
INSERT INTO cluster_sizes (size, clusters)
    SELECT size, count(*) FROM clusters WHERE own > 0 GROUP BY size;
CREATE OR REPLACE FUNCTION clusters_sized() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        IF OLD.own > 0 THEN
            UPDATE cluster_sizes SET clusters = clusters - 1 WHERE size = OLD.size;
            DELETE FROM cluster_sizes WHERE size = OLD.size AND clusters <= 0;
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        IF NEW.own > 0 THEN
            INSERT INTO cluster_sizes AS s (size, clusters) VALUES (NEW.size, 1)
            ON CONFLICT (size) DO UPDATE SET clusters = s.clusters + 1;
        END IF;
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS clusters_sized ON clusters;
CREATE TRIGGER clusters_sized AFTER INSERT OR DELETE OR UPDATE OF size, own ON clusters
    FOR EACH ROW EXECUTE FUNCTION clusters_sized();
""",
    # 7: how many documents are alive (not ``deleted``), one row, so that a start reads it
    # instead of counting every row (``document_count``): counted here once (in the migration's
    # transaction, under the write lock), then kept by statement-level triggers in the
    # transaction of every statement that inserts, updates, deletes or truncates ``documents``
    # (a ``COPY`` of a batch adds its alive rows once, not a row at a time). Every such
    # statement runs under the write lock, so the one row adds no waiting.
    7: """
CREATE TABLE IF NOT EXISTS document_count (
    one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    documents BIGINT NOT NULL
);
DELETE FROM document_count;
INSERT INTO document_count (documents) SELECT count(*) FROM documents WHERE NOT deleted;
CREATE OR REPLACE FUNCTION documents_counted_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE n BIGINT;
BEGIN
    SELECT count(*) INTO n FROM added WHERE NOT deleted;
    IF n <> 0 THEN UPDATE document_count SET documents = documents + n; END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION documents_counted_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE n BIGINT;
BEGIN
    SELECT (SELECT count(*) FROM became WHERE NOT deleted)
        - (SELECT count(*) FROM was WHERE NOT deleted) INTO n;
    IF n <> 0 THEN UPDATE document_count SET documents = documents + n; END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION documents_counted_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE n BIGINT;
BEGIN
    SELECT count(*) INTO n FROM gone WHERE NOT deleted;
    IF n <> 0 THEN UPDATE document_count SET documents = documents - n; END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION documents_counted_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE document_count SET documents = 0;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS documents_counted_insert ON documents;
CREATE TRIGGER documents_counted_insert AFTER INSERT ON documents
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION documents_counted_insert();
DROP TRIGGER IF EXISTS documents_counted_update ON documents;
CREATE TRIGGER documents_counted_update AFTER UPDATE ON documents
    REFERENCING OLD TABLE AS was NEW TABLE AS became
    FOR EACH STATEMENT EXECUTE FUNCTION documents_counted_update();
DROP TRIGGER IF EXISTS documents_counted_delete ON documents;
CREATE TRIGGER documents_counted_delete AFTER DELETE ON documents
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION documents_counted_delete();
DROP TRIGGER IF EXISTS documents_counted_truncate ON documents;
CREATE TRIGGER documents_counted_truncate AFTER TRUNCATE ON documents
    FOR EACH STATEMENT EXECUTE FUNCTION documents_counted_truncate();
""",
}
#: ``clusters``' and ``cluster_members``' ids in the contract's order (code points).
_C = ' COLLATE "C"'
#: A live row of ``documents`` (as ``d``), for the cluster reads (``cluster_reads.listing``).
_ALIVE = "NOT d.deleted AND"
#: The key of ``index_flush`` recording that the cluster tables were filled (layout 5).
_FILLED = "clusters_filled"
#: ``take_budget``'s statement: the clock is the server's, one for every replica.
_TAKE = budget_take_sql(
    lambda n: f"%({n})s", "extract(epoch FROM clock_timestamp())::float8", "least", "greatest",
    "DOUBLE PRECISION",
)  # fmt: skip

#: Whether a pruning step would remove anything (read without the write lock, so that replicas
#: with nothing to prune never make writers wait).
_PRUNE_DUE = """
SELECT EXISTS (
    SELECT 1 FROM changes WHERE at < clock_timestamp() - make_interval(secs => %s)
    AND seq < (SELECT max(seq) FROM changes)
) OR EXISTS (
    SELECT 1 FROM documents WHERE deleted AND num < least(
        (SELECT min(lo) FROM changes WHERE kind = 'add'), (SELECT max(num) FROM documents))
)
"""

_Conn = psycopg.Connection[tuple[Any, ...]]
_T = TypeVar("_T")


class PostgresStore:
    """The store at ``url`` (``postgresql://USER@HOST:PORT/DB``), shared by every replica, in
    PostgreSQL schema ``schema``.

    Opening connects (StoreUnavailable if it cannot, StoreRefused if the server refuses the
    role), creates the schema and tables if missing or migrates them, and checks the role's
    privileges. Called from one thread at a time (the service's store thread), except
    ``wait_for_changes``, which has its own connection and runs in the follower's thread.
    """

    def __init__(self, url: str, schema: str = "public", timeout: float = CALL_TIMEOUT) -> None:
        self._url = url
        self._timeout = timeout
        self._watchdog = _Watchdog()
        self.schema = schema
        self._lock_key = _lock_key(schema)
        self._channel = CHANNEL if schema == "public" else f"{CHANNEL}_{schema}"[:63]
        self._db: _Conn | None = None
        self._tx: _Conn | None = None  # the open write transaction (lock_writes .. commit)
        self._snapshot: _Conn | None = None  # recovery's repeatable-read snapshot
        self._listener: _Conn | None = None
        #: the connection holding the flush lock while this replica flushes (``lock_flush``)
        self._flusher: _Conn | None = None
        #: ``take_budget``'s connection, used by the service's budget thread alone (a check
        #: never waits for a write, nor runs in its transaction), with its own deadlines
        self._budget_db: _Conn | None = None
        self._budget_watchdog = _Watchdog()
        #: the cluster reads' connection, used by the service's read thread alone (a read
        #: never waits for a write, nor runs in its transaction), with its own deadlines
        self._read_db: _Conn | None = None
        self._read_watchdog = _Watchdog()
        self._swept = 0.0
        self._applied = 0
        #: the answer settings this replica serves with (``ensure_settings``): every read of
        #: the log checks that the store still holds them (SettingsChanged otherwise)
        self._answers: dict[str, str] = {}
        self._down_until = 0.0
        self._down_reason = ""
        self._closed = False
        self._opened = False
        try:
            info = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error:  # its message quotes the URL's pieces, the password among them
            self.close()
            raise StoreRefused(
                "the store URL cannot be read: percent-encode any @ : / ? # % or space in "
                "its user or password (or give the password in PGPASSWORD or ~/.pgpass)"
            ) from None
        self.where = redact(_where(info), url)
        self._role = str(info.get("user") or "") or "ROLE"
        self._database = str(info.get("dbname") or "") or "DATABASE"
        self._options = str(info.get("options") or "")
        if "search_path" in self._options:  # STORE_SCHEMA would override it, silently
            self.close()
            raise StoreRefused(
                "the store URL sets search_path in its options: name the store's schema with "
                "NEARDUP_STORE_SCHEMA (--store-schema) instead"
            )
        try:
            self._run(self._open_schema)
        except psycopg.Error as exc:  # anything else the server said: one line, no password
            self.close()
            raise StoreRefused(f"the store at {self.where} refused: {self._line(exc)}") from None
        except BaseException:
            self.close()
            raise
        self._opened = True

    def available(self) -> bool:
        """False while the database cannot be reached (or refuses), since the last call that
        tried it; True once a call succeeds again."""
        return not self._down_reason

    # --- errors -------------------------------------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Database errors as the service's: StoreFull for a full disk, StoreRefused for a
        missing privilege or a refused login, StoreUnavailable for a database that is away
        (and, for FAIL_FAST seconds after, without trying again)."""
        if time.monotonic() < self._down_until:
            raise StoreUnavailable(self._down_reason)
        try:
            yield
        except psycopg.errors.DiskFull as exc:
            raise StoreFull(f"{self.where}: {self._line(exc)}; nothing was stored") from exc
        except (
            psycopg.OperationalError,
            psycopg.InterfaceError,
            psycopg.errors.InsufficientPrivilege,
        ) as exc:
            error = self._explain(exc)
            if not self._down_reason and self._opened:  # at start, the caller says it
                log.warning("store unavailable, answering 503 until it is back: %s", error)
            self._down_reason = str(error)
            self._down_until = time.monotonic() + FAIL_FAST
            raise error from None
        if self._down_reason:
            log.info("store %s reachable again", self.where)
            self._down_reason = ""

    def _line(self, exc: BaseException) -> str:
        """An error's message on one line (the server's primary message, without the quoted
        statement), without the password."""
        diag = getattr(exc, "diag", None)
        said = getattr(diag, "message_primary", None) or str(exc)
        return redact(" ".join(str(said).split()), self._url)

    def _explain(self, exc: BaseException) -> StoreUnavailable:
        """What the database said, as StoreRefused naming the missing privilege or login and
        the fix, or as StoreUnavailable (away, refused, timed out)."""
        said = self._line(exc)
        role, db, schema = _ident(self._role), _ident(self._database), self.schema
        tables = (
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}; "
            f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"
        )
        fixes = [
            (
                r'permission denied for schema "?(\w+)"?',
                "role {role} may not create or use tables in schema {0} (PostgreSQL 15 and "
                "later no longer let every role create in schema public): as the schema's "
                "owner or a superuser run: GRANT USAGE, CREATE ON SCHEMA {0} TO {role}; or give "
                "neardup its own schema: CREATE SCHEMA neardup AUTHORIZATION {role}; and set "
                "NEARDUP_STORE_SCHEMA=neardup",
            ),
            (
                r"permission denied for (?:table|sequence|relation) \"?(\w+)\"?",
                "role {role} lacks a privilege on {0}: as the tables' owner run: " + tables,
            ),
            (
                r"must be owner of (?:table|relation|sequence|index) \"?(\w+)\"?",
                "role {role} must own {0} to migrate the store: run this neardup once as the "
                "tables' owner, or ALTER TABLE ... OWNER TO {role}",
            ),
            (
                r"permission denied for database|does not have CONNECT privilege",
                "role {role} may not connect to database {db}: GRANT CONNECT ON DATABASE {db} "
                "TO {role}",
            ),
            (
                r"password authentication failed",
                "the server refused role {role}'s password: give the right one in the URL, "
                "in PGPASSWORD or in ~/.pgpass (mode 0600)",
            ),
            (
                r"no password supplied",
                "the server asks role {role} for a password and none was given: put it in the "
                "URL (percent-encoded), in PGPASSWORD or in ~/.pgpass (mode 0600)",
            ),
            (
                r'role "([^"]*)" does not exist',
                "role {named} does not exist: CREATE ROLE {named} LOGIN PASSWORD '...'",
            ),
            (
                r'database "([^"]*)" does not exist',
                "database {named} does not exist: CREATE DATABASE {named} OWNER {role}",
            ),
            (
                r"no pg_hba\.conf entry",
                "the server's pg_hba.conf has no entry for role {role}, database {db} from this "
                "host (with this sslmode): ask its administrator to add one",
            ),
        ]
        for pattern, fix in fixes:
            found = re.search(pattern, said)
            if found:
                named = _ident(found.group(1)) if found.groups() else ""
                text = fix.format(*found.groups(), role=role, db=db, named=named)
                return StoreRefused(f"the store at {self.where} refused: {text} ({said})")
        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            return StoreRefused(
                f"the store at {self.where} refused: role {role} lacks a privilege ({said}); "
                "docs/postgres.md lists the grants"
            )
        return StoreUnavailable(f"the store at {self.where} is unavailable: {said}")

    def _connect(self, durable: bool = True) -> _Conn:
        """A new autocommit connection with the store's settings (``_connect_kwargs``; not
        ``durable``: commits do not wait for the WAL's flush); once open, within what is left
        of the call's STORE_TIMEOUT (``_connect_within``)."""
        kwargs = _connect_kwargs(self._options, self.schema)
        if not durable:
            kwargs["options"] += " -c synchronous_commit=off"

        def connect() -> _Conn:
            return psycopg.connect(self._url, autocommit=True, **kwargs)

        return _connect_within(connect, self._left()) if self._opened else connect()

    def _left(self) -> float:
        """Seconds left of the current call's STORE_TIMEOUT, counted from when it was queued
        for the store's thread (``QUEUED_AT``; from now for a call not queued so)."""
        queued = QUEUED_AT.get()
        return self._timeout if queued is None else queued + self._timeout - time.monotonic()

    def _connection(self, budget: bool = False, reads: bool = False) -> _Conn:
        """The store's connection (``budget``: the budget thread's; ``reads``: the read
        thread's), opened (again) if there is none or it broke."""
        conn = self._budget_db if budget else self._read_db if reads else self._db
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            with suppress(Exception):
                conn.close()
        if budget:
            # A charge lost with the server's last fraction of a second gives a key little it
            # could not have had a moment later: no wait for the WAL's flush.
            self._budget_db = None
            self._budget_db = self._connect(durable=False)
            return self._budget_db
        if reads:
            self._read_db = None
            self._read_db = self._connect()
            return self._read_db
        self._db = None
        self._db = self._connect()
        return self._db

    @contextmanager
    def _deadline(self, conn: _Conn, budget: bool = False, reads: bool = False) -> Iterator[None]:
        """The block's calls on ``conn`` abandoned once the call's STORE_TIMEOUT is spent
        (``_left``): a watchdog (the budget thread's own for ``budget``) shuts the
        connection's socket down, which ends a call waiting on a frozen server (``_Overdue``,
        so StoreUnavailable and not ready; the next call reconnects). Not while opening (a
        migration may take long) or recovering (one long snapshot)."""
        if not self._opened or conn is self._snapshot:
            yield
            return
        left = self._left()
        if left <= 0:  # queued behind calls that took it all: the database is that slow
            raise _Overdue(f"no answer within {self._timeout:g} s (STORE_TIMEOUT)")
        watchdog = (
            self._budget_watchdog if budget else self._read_watchdog if reads else self._watchdog
        )
        fired = watchdog.arm(conn, left)
        try:
            yield
        except (psycopg.OperationalError, psycopg.InterfaceError):
            if fired.is_set():
                raise _Overdue(f"no answer within {self._timeout:g} s (STORE_TIMEOUT)") from None
            raise
        finally:
            watchdog.disarm()

    def _run(self, fn: Callable[[_Conn], _T], budget: bool = False, reads: bool = False) -> _T:
        """``fn`` on the connection of the open snapshot or write transaction if any; else on
        the store's connection (``budget``: the budget thread's, ``reads``: the read thread's,
        never a transaction's), once more on a fresh one if that had died meanwhile (``fn``
        must be safe to repeat: reads, or a transaction it begins itself); all within the
        call's STORE_TIMEOUT, connecting included (``_deadline``, ``_connect``)."""
        with self._guard():
            held = None if budget or reads else self._snapshot or self._tx
            if held is not None:
                with self._deadline(held):
                    return fn(held)
            before = self._budget_db if budget else self._read_db if reads else self._db
            fresh = before is None or before.closed or before.broken
            conn = self._connection(budget, reads)
            try:
                with self._deadline(conn, budget, reads):
                    return fn(conn)
            except _Overdue:
                raise  # it did not answer in time: trying again would wait as long
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if fresh or not conn.broken:
                    raise
            conn = self._connection(budget, reads)
            with self._deadline(conn, budget, reads):
                return fn(conn)

    # --- contamination budgets ----------------------------------------------------------------

    def take_budget(self, caller: str, unit: str, amount: int, per_minute: int) -> float | None:
        """Take ``amount`` ``unit``s from ``caller``'s bucket of ``per_minute`` a minute (full
        when new), or take nothing: None if taken, else the units there are. One statement
        (an upsert, atomic under the row's lock) on the budget thread's connection, shared by
        every replica through the ``budgets`` table, on the server's clock; buckets full
        again are deleted once a BUDGET_SWEEP_SECONDS."""
        values = {"caller": caller, "unit": unit, "cap": per_minute, "amount": amount,
                  "rate": per_minute / 60.0}  # fmt: skip
        sweep = time.monotonic() - self._swept >= BUDGET_SWEEP_SECONDS

        def take(conn: _Conn) -> tuple[Any, ...] | None:
            if sweep:
                conn.execute(
                    "DELETE FROM budgets WHERE at < extract(epoch FROM clock_timestamp()) - %s",
                    (BUDGET_FULL_AFTER,),
                )
            return conn.execute(_TAKE, values).fetchone()

        row = self._run(take, budget=True)
        if sweep:
            self._swept = time.monotonic()
        if row is None:
            raise RuntimeError("the budget upsert returned no row")
        return None if row[1] else float(row[0])

    # --- the schema ---------------------------------------------------------------------------

    def _open_schema(self, conn: _Conn) -> None:
        """Create the schema and tables if missing, or migrate an older layout, under the write
        lock (replicas starting at once: one creates, the others see it); refuse a newer
        layout; then check the role's privileges on every table. A store already of this
        version runs no DDL, so a role with only SELECT, INSERT, UPDATE, DELETE can serve it."""
        row = conn.execute("SELECT current_user, current_database()").fetchone()
        if row is not None:
            self._role, self._database = str(row[0]), str(row[1])
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            found = conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
            ).fetchone()
            if found is None:
                try:
                    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
                except psycopg.errors.InsufficientPrivilege:
                    role, db, schema = _ident(self._role), _ident(self._database), self.schema
                    raise StoreRefused(
                        f"the store at {self.where} refused: schema {schema} does not exist "
                        f"and role {role} may not create it: CREATE SCHEMA {schema} "
                        f"AUTHORIZATION {role}; (or GRANT CREATE ON DATABASE {db} TO {role})"
                    ) from None
            version = _stored_version(conn)
            if version is None:  # a new store: version 1's layout, migrated below
                conn.execute(_SCHEMA)
                conn.execute(_VERSIONS)
                conn.execute("INSERT INTO schema_versions (version) VALUES (1)")
                version = 1
            if version > SCHEMA_VERSION:
                raise StoreRefused(
                    f"the store at {self.where} (schema {self.schema}) has layout version "
                    f"{version}, newer than this neardup's ({SCHEMA_VERSION}): run the neardup "
                    "version that wrote it (an upgrade cannot be undone)"
                )
            else:
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    log.info("migrating the store to layout version %d", target)
                    conn.execute(MIGRATIONS[target])
                    conn.execute("INSERT INTO schema_versions (version) VALUES (%s)", (target,))
        self._check_privileges(conn)

    def _check_privileges(self, conn: _Conn) -> None:
        """StoreRefused naming every table privilege the role lacks, and the GRANT."""
        rows = conn.execute(
            "SELECT c.relname, p.priv FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS p(priv) "
            "WHERE n.nspname = %s AND c.relname = ANY(%s) "
            "AND NOT has_table_privilege(c.oid, p.priv) ORDER BY 1, 2",
            (self.schema, list(TABLES)),
        ).fetchall()
        missing = [f"{priv} on {table}" for table, priv in rows]
        for name in SEQUENCES:
            qualified = f"{self.schema}.{name}"
            seq = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL AND NOT has_sequence_privilege(%s, 'USAGE')",
                (qualified, qualified),
            ).fetchone()
            if seq is not None and seq[0]:
                missing.append(f"USAGE on {name}")
        if missing:
            role, schema = _ident(self._role), self.schema
            raise StoreRefused(
                f"the store at {self.where} refused: role {role} lacks "
                f"{', '.join(missing)} in schema {schema}: as the tables' owner run: GRANT "
                f"SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}; "
                f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"
            )

    # --- parameters, probe --------------------------------------------------------------------

    def ensure_params(self, params: dict[str, int | str]) -> None:
        """Record the index parameters on first use; refuse others afterwards, naming them."""

        def record(conn: _Conn) -> dict[str, str]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                rows = conn.execute("SELECT key, value FROM params").fetchall()
                stored: dict[str, str] = {str(k): str(v) for k, v in rows}
                if stored:
                    added = unrecorded(stored, params)
                    with conn.cursor() as cur:  # none: nothing is sent
                        cur.executemany(
                            "INSERT INTO params VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                            list(added.items()),
                        )
                    return {**stored, **added}
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

    def ensure_settings(
        self, settings: dict[str, str], explicit: Collection[str] | None = None
    ) -> dict[str, str]:
        """Record the answer settings the store lacks (the first replica's); refuse others
        among ``explicit`` (None: all of them; SettingsMismatch) and adopt the stored values of
        the rest (returned: ``check_settings``); then follow them: once ``set_settings``
        changes them, reading the log (a write's, the follower's) raises SettingsChanged."""

        def record(conn: _Conn) -> dict[str, str]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                rows = conn.execute("SELECT key, value FROM params").fetchall()
                stored: dict[str, str] = {str(k): str(v) for k, v in rows}
                missing = [(k, v) for k, v in settings.items() if k not in stored]
                if missing:
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO params VALUES (%s, %s)", missing)
                return stored

        adopted = check_settings(self.where, self._run(record), settings, explicit)
        self._answers = settings | adopted
        return adopted

    def set_settings(self, settings: dict[str, str]) -> dict[str, str]:
        """Replace the recorded answer settings named in ``settings``, under the write lock,
        and wake every replica (those serving the old values then stop answering); the
        recorded values before (all of them)."""

        def update(conn: _Conn) -> dict[str, str]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                rows = conn.execute("SELECT key, value FROM params").fetchall()
                if settings:
                    with conn.cursor() as cur:
                        cur.executemany(
                            "INSERT INTO params VALUES (%s, %s) "
                            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            list(settings.items()),
                        )
                    conn.execute(f"NOTIFY {self._channel}")
                return {str(k): str(v) for k, v in rows}

        return self._run(update)

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
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                found = self._read_changes(conn)
            except BaseException:
                _rollback(conn)
                raise
            self._tx = conn
            return found

        found = self._run(begin)
        if found:
            self._applied = found[-1].seq
        return found

    def prune(self, retention: float, batch: int = PRUNE_BATCH) -> int:
        """One bounded step of pruning, in one transaction under the write lock: at most
        ``batch`` log entries older than ``retention`` seconds (never the newest), then at most
        ``batch`` deleted documents' rows that no kept ``add`` entry names (never the row of
        the largest number). Returns how many rows went; call again while it returns
        ``batch`` or more. Interrupted (or killed) it leaves the step undone, never half."""

        def step(conn: _Conn) -> int:
            due = conn.execute(_PRUNE_DUE, (retention,)).fetchone()
            if due is None or not due[0]:  # nothing to prune: the write lock is not taken
                return 0
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                entries = conn.execute(
                    "WITH kept AS (SELECT coalesce(min(seq), 0) AS seq FROM changes "
                    "  WHERE at >= clock_timestamp() - make_interval(secs => %s) "
                    "  OR seq = (SELECT max(seq) FROM changes)) "
                    "DELETE FROM changes WHERE seq IN (SELECT seq FROM changes "
                    "  WHERE seq < (SELECT seq FROM kept) ORDER BY seq LIMIT %s)",
                    (retention, batch),
                ).rowcount
                rows = conn.execute(
                    "WITH floor AS (SELECT least("
                    "  (SELECT min(lo) FROM changes WHERE kind = 'add'),"
                    "  (SELECT max(num) FROM documents)) AS num) "
                    "DELETE FROM documents WHERE num IN (SELECT num FROM documents "
                    "  WHERE deleted AND num < (SELECT num FROM floor) ORDER BY num LIMIT %s)",
                    (batch,),
                ).rowcount
            return max(entries, 0) + max(rows, 0)

        return self._run(step)

    def unlock_writes(self) -> None:
        """End the write transaction if no write committed it (rolled back: nothing stored)."""
        conn, self._tx = self._tx, None
        if conn is None:
            return
        try:
            with self._deadline(conn):
                _rollback(conn)
        except psycopg.Error:  # no time left, or no answer: the server ends it with the session
            with suppress(Exception):
                conn.close()

    @contextmanager
    def _write(self) -> Iterator[_Conn]:
        """The open write transaction, committed after the block (rolled back on an error);
        the lock is released either way."""
        conn = self._tx
        if conn is None:
            raise RuntimeError("a store write outside lock_writes()")
        try:
            with self._guard(), self._deadline(conn):
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
        conn.execute(f"NOTIFY {self._channel}")
        assert row is not None
        return int(row[0])

    def _log_deletes(self, conn: _Conn, gone: list[tuple[int, str]]) -> int:
        """``_log`` of a ``delete`` entry per document of ``gone`` (number, id), in that order,
        in one statement; the last entry's number."""
        row = conn.execute(
            "INSERT INTO changes (seq, kind, lo, hi, name) "
            "SELECT h.seq + d.k, 'delete', d.num, d.num + 1, d.id "
            "FROM (SELECT coalesce(max(seq), 0) AS seq FROM changes) h, "
            "unnest(%s::bigint[], %s::text[]) WITH ORDINALITY AS d(num, id, k) "
            "ORDER BY d.k RETURNING seq",
            ([n for n, _ in gone], [i for _, i in gone]),
        ).fetchall()
        conn.execute(f"NOTIFY {self._channel}")
        return max(int(r[0]) for r in row)

    def add_documents(
        self, docs: Sequence[StoredDoc], clusters: ClusterWrite | None = None
    ) -> None:
        """Store a batch (numbered from the store's next number), its log row and what it
        changes in the clusters, durably."""
        seq = None
        with self._write() as conn:
            _write_clusters(conn, clusters)
            if not docs:
                return
            lo = docs[0].num
            _check_next(conn, [d.num for d in docs])
            sql = "COPY documents (num, id, digest, sig, meta, text) FROM STDIN"
            with conn.cursor().copy(sql) as copy:
                for d in docs:
                    text = None if d.text is None else d.text.encode("utf-8")
                    copy.write_row((d.num, d.id, d.digest, d.sig, json_text(d.meta), text))
            seq = self._log(conn, "add", lo, lo + len(docs))
        self._applied = seq

    def delete_document(self, num: int, clusters: ClusterWrite | None = None) -> None:
        """Mark a document deleted (its text and meta cleared) and regroup its cluster
        (``clusters``), durably."""
        self.delete_documents([num], clusters)

    def delete_documents(self, nums: Sequence[int], clusters: ClusterWrite | None = None) -> None:
        """``delete_document`` of several documents in one durable transaction, logged as one
        ``delete`` entry per document deleted (in number order), as many deletes would be."""
        seq = None
        nums = sorted(nums)
        with self._write() as conn:
            _note_index_deletes(conn, nums)
            _write_clusters(conn, clusters)
            gone = _mark_deleted(conn, nums)
            if gone:
                seq = self._log_deletes(conn, gone)
        if seq is not None:
            self._applied = seq

    def replace_document(
        self, old: int, doc: StoredDoc, clusters: ClusterWrite | None = None
    ) -> None:
        """Mark document ``old`` deleted and store ``doc`` (its new text, numbered from the
        store's next number) with what that changes in the clusters, in one durable
        transaction, logged as a delete then an add."""
        seq = None
        with self._write() as conn:
            _note_index_deletes(conn, [old])
            _write_clusters(conn, clusters)
            marked = _mark_deleted(conn, [old])
            if not marked:
                raise RuntimeError(f"document {old} to replace is not in the store")
            old_id = marked[0][1]
            _check_next(conn, [doc.num])
            text = None if doc.text is None else doc.text.encode("utf-8")
            conn.execute(
                "INSERT INTO documents (num, id, digest, sig, meta, text) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (doc.num, doc.id, doc.digest, doc.sig, json_text(doc.meta), text),
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
        """The log entries past this replica's position, oldest first (now taken as applied),
        read in one repeatable-read snapshot (pruning never takes rows from under it).

        Raises:
            LogPruned: entries past this replica's position were pruned.
        """

        def read(conn: _Conn) -> list[Change]:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                found = self._read_changes(conn)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            return found

        found = self._run(read) if self._snapshot is None and self._tx is None else None
        if found is None:
            found = self._run(self._read_changes)
        if found:
            self._applied = found[-1].seq
        return found

    def _read(self, fn: Callable[[_Conn], _T]) -> _T:
        """``fn`` on the read thread's connection, in one repeatable-read snapshot (its
        statements see one state of the store, whatever other replicas write meanwhile)."""

        def read(conn: _Conn) -> _T:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                found = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            return found

        return self._run(read, reads=True)

    def _read_changes(self, conn: _Conn) -> list[Change]:
        """The entries past this replica's position (LogPruned if some of them were pruned);
        the caller takes them as applied."""
        if self._answers:  # nothing is applied under settings the store no longer holds
            keys = list(self._answers)
            held = conn.execute("SELECT key, value FROM params WHERE key = ANY(%s)", (keys,))
            changed_settings(self.where, dict(held.fetchall()), self._answers)
        rows = conn.execute(
            "SELECT seq, kind, lo, hi, name FROM changes WHERE seq > %s ORDER BY seq",
            (self._applied,),
        ).fetchall()
        if rows and int(rows[0][0]) != self._applied + 1:
            oldest = int(rows[0][0])
            raise LogPruned(
                f"this replica's position {self._applied} in the store's log is older than its "
                f"oldest entry kept, {oldest} (entries past LOG_RETENTION_SECONDS are pruned)"
            )
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
            elif kind in ("flush", "flushed"):
                found.append(Change(seq, kind, name=name, nums=[lo]))
            elif kind == "put_set":
                found.append(Change(seq, "put_set", name=name, row=self._set(conn, name)))
            else:
                found.append(Change(seq, "delete_set", name=name))
        return found

    def wait_for_changes(self, timeout: float) -> None:
        """Block until a change is notified or ``timeout`` seconds pass (own connection; on a
        database that is away, just wait: the follower polls anyway)."""
        started = time.monotonic()
        try:
            if self._listener is None or self._listener.closed:
                self._listener = self._connect()
                self._listener.execute(f"LISTEN {self._channel}")
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

    def numbered(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """The number and signature bytes of those of ``ids`` that are registered."""
        return self._run(lambda c: cluster_reads.numbered(_PgSql(c), ids, " AND NOT deleted"))

    def document(self, doc_id: str) -> StoredDoc | None:
        """One registered document by id, or None (on the store's connection, or a write's)."""
        return self._run(lambda c: _document(c, doc_id))

    def read_document(self, doc_id: str) -> StoredDoc | None:
        """``document`` on the read connection (a reader's: never behind a write)."""
        return self._read(lambda c: _document(c, doc_id))

    def texts(self, nums: Sequence[int]) -> dict[int, str]:
        """The stored texts of those documents (when texts are stored)."""
        return self._run(lambda c: _texts(c, nums))

    def read_texts(self, nums: Sequence[int]) -> dict[int, str]:
        """``texts`` on the read connection (a reader's: never behind a write)."""
        return self._read(lambda c: _texts(c, nums))

    def extent(self) -> int:
        """One more than the largest document number ever stored (0 when empty)."""
        row = self._run(
            lambda c: c.execute("SELECT coalesce(max(num) + 1, 0) FROM documents").fetchone()
        )
        return int(row[0]) if row is not None else 0

    def document_count(self, after: int = -1) -> int:
        """How many documents are registered (numbered after ``after``; deleted ones not
        counted): the kept count (``document_count``, layout 7) when ``after`` is negative,
        else counted from the table."""
        if after < 0:
            row = self._run(lambda c: c.execute("SELECT documents FROM document_count").fetchone())
        else:
            row = self._run(
                lambda c: c.execute(
                    "SELECT count(*) FROM documents WHERE NOT deleted AND num > %s", (after,)
                ).fetchone()
            )
        return int(row[0]) if row is not None else 0

    def iter_signatures(
        self, batch: int, after: int = -1
    ) -> Iterator[tuple[list[int], list[str], bytes]]:
        """Every registered document's (nums, ids, concatenated signature bytes), ``batch``
        rows at a time (those numbered after ``after``), read with a binary COPY."""
        sql = (
            "COPY (SELECT num, id, sig FROM documents WHERE NOT deleted "
            f"AND num > {int(after)} ORDER BY num) TO STDOUT (FORMAT BINARY)"
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

    # --- flushing into a served index (app/service/flush.py) -----------------------------------

    def lock_flush(self) -> bool:
        """Take the flush lock (one flusher among the replicas) on a connection of its own,
        held until ``unlock_flush``; False at once if another replica holds it."""

        def take(conn: _Conn) -> bool:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self._flush_key,)).fetchone()
            return bool(row is not None and row[0])

        with self._guard():
            conn = self._connect()
            try:
                with self._deadline(conn):
                    taken = take(conn)
            except BaseException:
                with suppress(Exception):
                    conn.close()
                raise
        if not taken:
            conn.close()
            return False
        self._flusher = conn
        return True

    def unlock_flush(self) -> None:
        """Release the flush lock (its connection closed: the server releases it)."""
        conn, self._flusher = self._flusher, None
        if conn is not None:
            with suppress(Exception):
                conn.close()

    def holds_flush_lock(self) -> bool:
        """Whether the flush lock ``lock_flush`` took is still held: its connection answers
        (the server releases an advisory lock with the session that took it, so a connection
        that died, or was ended, lost it to whichever replica takes it next)."""
        conn = self._flusher
        if conn is None:
            return False
        try:
            with self._deadline(conn):
                conn.execute("SELECT 1").fetchone()
        except Exception:  # any failure: the session, and with it the lock, may be gone
            return False
        return True

    @property
    def _flush_key(self) -> int:
        return FLUSH_LOCK if self._lock_key == WRITE_LOCK else self._lock_key + 1

    def flush_state(self) -> dict[str, str]:
        """The recorded flush state: the store's identity, its marks (JSON) and
        ``deletes_through``, by key."""
        rows = self._run(lambda c: c.execute("SELECT key, value FROM index_flush").fetchall())
        return {str(k): str(v) for k, v in rows}

    def set_flush_state(self, values: dict[str, str], clear_deletes: int = 0) -> None:
        """Record ``values`` in the flush state and forget the index's deletes numbered up to
        ``clear_deletes``, in the write transaction (``lock_writes``; else in one of its own
        under the write lock); a committed mark is logged (``flushed``: every replica learns
        it in log order)."""

        def record(conn: _Conn) -> int | None:
            _put_flush_state(conn, values)
            conn.execute("DELETE FROM index_deletes WHERE seq <= %s", (clear_deletes,))
            if "committed" in values:
                return self._log(conn, "flushed", name=values["committed"])
            return None

        if self._tx is None:  # at start, before the log is followed: its own transaction
            # (the entry is applied from the log like another replica's)

            def alone(conn: _Conn) -> None:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                    record(conn)

            self._run(alone)
            return
        with self._write() as conn:
            seq = record(conn)
        if seq is not None:
            self._applied = seq

    def index_deletes(self) -> list[tuple[int, str, bytes, int]]:
        """The index's deletes not forgotten yet: (seq, id, digest, number), in order."""
        rows = self._run(
            lambda c: c.execute(
                "SELECT seq, id, digest, num FROM index_deletes ORDER BY seq"
            ).fetchall()
        )
        return [(int(a), str(b), bytes(c), int(d)) for a, b, c, d in rows]

    def take_flush(self, through: int) -> list[tuple[int, str, bytes, int]]:
        """In the write transaction (``lock_writes``): from now on record the deletion of any
        document numbered up to ``through`` (the store's ``deletes_through``, for every
        replica), log it (``flush``), and return the index's deletes (``index_deletes``)."""
        with self._write() as conn:
            rows = conn.execute(
                "SELECT seq, id, digest, num FROM index_deletes ORDER BY seq"
            ).fetchall()
            last = max((int(r[0]) for r in rows), default=0)
            _put_flush_state(conn, {"deletes_through": str(through), "batch_deletes": str(last)})
            seq = self._log(conn, "flush", through, through)
        self._applied = seq
        return [(int(a), str(b), bytes(c), int(d)) for a, b, c, d in rows]

    # --- clusters (app/service/clusters.py) ----------------------------------------------------

    def write_clusters(self, clusters: ClusterWrite) -> bool:
        """Apply ``clusters`` (a linking of indexed documents, computed from this replica's
        state) durably: in the write transaction (``lock_writes``), or else in one of its own
        under the write lock, and then only if no other replica wrote since this one's
        position (False: nothing written; the next start writes it)."""
        if self._tx is not None:
            with self._write() as conn:
                _write_clusters(conn, clusters)
            return True

        def alone(conn: _Conn) -> bool:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                head = conn.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()
                if head is None or int(head[0]) != self._applied:
                    return False
                _write_clusters(conn, clusters)
                return True

        return self._run(alone)

    def clusters_filled(self) -> bool:
        """Whether the cluster tables hold the clusters (a store migrated from layout 4 is
        filled once at start)."""
        row = self._run(
            lambda c: c.execute("SELECT 1 FROM index_flush WHERE key = %s", (_FILLED,)).fetchone()
        )
        return row is not None

    def fill_clusters(self, rows: Iterable[ClusterRow]) -> bool:
        """In the write transaction (``lock_writes``): fill the cluster tables with ``rows``
        (every cluster of two or more) and record it; False (nothing written) if another
        replica filled them already."""
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM index_flush WHERE key = %s", (_FILLED,)).fetchone():
                return False
            cluster_sql.fill(_PgSql(conn), rows)
            _put_flush_state(conn, {_FILLED: "1"})
        return True

    def cluster_rows(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """(root, size) of each of ``ids`` that is in a cluster of two or more."""
        return self._run(lambda c: cluster_reads.cluster_rows(_PgSql(c), ids))

    def read_cluster_rows(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """``cluster_rows`` on the read connection (a reader's: never behind a write)."""
        return self._read(lambda c: cluster_reads.cluster_rows(_PgSql(c), ids))

    def read_numbered(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``numbered`` on the read connection (a reader's: never behind a write)."""
        return self._read(lambda c: cluster_reads.numbered(_PgSql(c), ids, " AND NOT deleted"))

    def cluster_members(self, root: str, after: str | None, limit: int) -> list[str]:
        """The member ids of the cluster rooted at ``root`` after ``after``, in id order, at
        most ``limit`` (none if ``root`` roots no cluster of two or more)."""
        return self._run(lambda c: cluster_reads.cluster_members(_PgSql(c), root, after, limit, _C))

    def clusters_page(
        self,
        min_size: int,
        after: tuple[int, str] | None,
        limit: int,
        owned: bool = True,
        offset: int = 0,
    ) -> list[tuple[str, int]]:
        """(root, size) of the clusters of at least ``min_size``, largest first then by root,
        after the (size, root) cursor ``after`` and ``offset`` rows, at most ``limit``
        (``owned``: those holding a document of the service's own)."""
        return self._read(
            lambda c: cluster_reads.clusters_page(
                _PgSql(c), min_size, after, limit, owned, _C, offset
            )
        )

    def cluster_slice(self, root: str, after: str | None, limit: int) -> ClusterSlice | bool | None:
        """``cluster_reads.cluster_slice``: the cluster rooted at ``root``, its members after
        ``after``, at most ``limit`` (a live document in no cluster: alone); True: ``root`` is
        a member, not a root; None: no live document and in no cluster. One snapshot."""
        return self._read(
            lambda c: cluster_reads.cluster_slice(_PgSql(c), root, after, limit, _C, _ALIVE)
        )

    def cluster_listing(
        self, min_size: int, after: str | None, limit: int, most: int, per_cluster: int
    ) -> tuple[list[ClusterSlice], str | None]:
        """``cluster_reads.listing``: a page of the clusters by root, and the next cursor, read in
        one snapshot (REPEATABLE READ)."""
        return self._read(
            lambda c: cluster_reads.listing(
                _PgSql(c), min_size, after, limit, most, per_cluster, _C, _ALIVE
            )
        )

    def cluster_sizes(self) -> dict[int, int]:
        """Size -> how many listed clusters are of that size (``cluster_reads.cluster_sizes``)."""
        return self._read(lambda c: cluster_reads.cluster_sizes(_PgSql(c)))

    def linked_members(self) -> list[str]:
        """The ids of cluster members that are linked indexed documents."""
        return self._run(lambda c: cluster_reads.linked_members(_PgSql(c)))

    def stored_clusters(self, ids: Sequence[str]) -> dict[int, StoredCluster]:
        """The clusters holding any of ``ids`` as stored, by label (``stored_clusters``)."""
        return self._run(lambda c: cluster_sql.stored_clusters(_PgSql(c), ids))

    def close(self) -> None:
        """Roll back an open write, close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with suppress(Exception):
            self.unlock_writes()
        for conn in (self._listener, self._db, self._budget_db, self._read_db, self._flusher):
            if conn is not None:
                with suppress(Exception):
                    conn.close()
        self._listener = self._db = self._budget_db = self._read_db = self._flusher = None
        self._watchdog.close()
        self._budget_watchdog.close()
        self._read_watchdog.close()


class _Watchdog:
    """One thread that shuts a connection down once the call on it is overdue, so the call
    fails at once (a frozen server never answers). One deadline at a time: the store is
    called from one thread (arming again replaces the deadline)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: tuple[float, _Conn, threading.Event] | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, conn: _Conn, timeout: float) -> threading.Event:
        """Watch ``conn`` for ``timeout`` seconds; the event is set if it was shut down."""
        fired = threading.Event()
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="store-deadline", daemon=True
                )
                self._thread.start()
            self._due = (time.monotonic() + timeout, conn, fired)
            self._cond.notify()
        return fired

    def disarm(self) -> None:
        """The call returned: nothing to watch."""
        with self._cond:
            self._due = None

    def close(self) -> None:
        """Stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                if self._due is None:
                    self._cond.wait()
                    continue
                due, conn, fired = self._due
                left = due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._due = None
                fired.set()
                _shut_down(conn)


def _shut_down(conn: _Conn) -> None:
    """Shut ``conn``'s socket down both ways: a call waiting on it fails at once."""
    with suppress(OSError, ValueError, psycopg.Error):
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


class _Overdue(psycopg.OperationalError):
    """A store call abandoned after STORE_TIMEOUT seconds (its connection shut down)."""


def _connect_within(connect: Callable[[], _Conn], seconds: float) -> _Conn:
    """``connect()`` in a thread of its own, given up (``_Overdue``) after ``seconds``: libpq's
    connect_timeout counts whole seconds, at least 2, per address. An attempt given up goes on
    until its own connect_timeout and closes the connection it may still make."""
    lock = threading.Lock()
    done = threading.Event()
    outcome: list[_Conn | Exception] = []
    given_up = False

    def attempt() -> None:
        try:
            made: _Conn | Exception = connect()
        except Exception as exc:
            made = exc
        with lock:
            if given_up:
                if not isinstance(made, Exception):
                    with suppress(Exception):
                        made.close()
                return
            outcome.append(made)
        done.set()

    threading.Thread(target=attempt, name="store-connect", daemon=True).start()
    done.wait(max(seconds, 0.0))
    with lock:
        if not outcome:
            given_up = True
            raise _Overdue("no connection within STORE_TIMEOUT")
    made = outcome[0]
    if isinstance(made, Exception):
        raise made
    return made


def _note_index_deletes(conn: _Conn, nums: list[int]) -> None:
    """In the caller's write transaction: record alive documents ``nums``' ids and digests
    among the index's deletes (in number order), those numbered up to the store's
    ``deletes_through`` (flushed, or in a flush being written, by any replica)."""
    conn.execute(
        "INSERT INTO index_deletes (id, digest, num) SELECT id, digest, num FROM documents "
        "WHERE num = ANY(%s) AND NOT deleted AND num <= (SELECT value::bigint FROM index_flush "
        "WHERE key = 'deletes_through') ORDER BY num",
        (nums,),
    )


class _PgSql:
    """``clusters.Sql`` over a psycopg connection (``?`` placeholders as ``%s``)."""

    def __init__(self, conn: _Conn) -> None:
        self._conn = conn

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql.replace("?", "%s"), list(params)).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(sql.replace("?", "%s"), list(params))

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(sql.replace("?", "%s"), rows)


def _write_clusters(conn: _Conn, clusters: ClusterWrite | None) -> None:
    """In the caller's write transaction: what a write changes in the clusters."""
    if clusters:
        cluster_sql.apply_write(_PgSql(conn), clusters)


def _mark_deleted(conn: _Conn, nums: list[int]) -> list[tuple[int, str]]:
    """Mark documents ``nums`` deleted (text and meta cleared; the rows stay for the log's
    replay); (number, id) of those that were alive, in number order."""
    rows = conn.execute(
        "UPDATE documents SET deleted = true, text = NULL, meta = '{}' "
        "WHERE num = ANY(%s) AND NOT deleted RETURNING num, id",
        (nums,),
    ).fetchall()
    return sorted((int(n), str(i)) for n, i in rows)


def _check_next(conn: _Conn, nums: list[int]) -> None:
    """Refuse documents not numbered consecutively from the store's next number."""
    head = conn.execute("SELECT coalesce(max(num) + 1, 0) FROM documents").fetchone()
    lo = nums[0]
    if head is None or head[0] != lo or nums != list(range(lo, lo + len(nums))):
        raise RuntimeError(f"documents numbered from {lo}, the store's next is {head}")


def _put_flush_state(conn: _Conn, values: dict[str, str]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO index_flush VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            list(values.items()),
        )


def _set_row(row: tuple[Any, ...]) -> ProtectedSetRow:
    name, items, ngrams, fmt, body = row
    return ProtectedSetRow(name, items, ngrams, ProtectedFormat(fmt), bytes(body).decode("utf-8"))


def _connect_kwargs(options: str, schema: str) -> dict[str, Any]:
    """Connection settings: a bounded connect; TCP keepalives both ways, and a cap on a
    transaction left idle, so a replica whose host vanished mid-write does not hold the write
    lock for long; every commit flushed to the WAL before it returns; the store's schema alone
    on the search path. The URL's own ``options`` come first (ours win where both set one)."""
    server = {
        "synchronous_commit": "on",
        "statement_timeout": STATEMENT_TIMEOUT_MS,
        "idle_in_transaction_session_timeout": IDLE_IN_WRITE_MS,
        "tcp_keepalives_idle": 10,
        "tcp_keepalives_interval": 5,
        "tcp_keepalives_count": 3,
        "search_path": schema,
    }
    ours = " ".join(f"-c {k}={v}" for k, v in server.items())
    return {
        "connect_timeout": max(1, int(CONNECT_TIMEOUT)),
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "options": f"{options} {ours}".strip(),
    }


def _ident(name: str) -> str:
    """``name`` as SQL writes it: bare when it is a plain lower-case identifier, else quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name):
        return name
    return '"' + name.replace('"', '""') + '"'


def _lock_key(schema: str) -> int:
    """The write lock of the store in ``schema``: WRITE_LOCK for ``public``, else a key of the
    schema's name (two stores in one database do not wait for each other)."""
    if schema == "public":
        return WRITE_LOCK
    return int.from_bytes(hashlib.blake2b(schema.encode(), digest_size=7).digest(), "big")


def _stored_version(conn: _Conn) -> int | None:
    """The store's layout version on the search path's schema: None for a new store, 1 for
    one made before versions were recorded (its tables, no ``schema_versions``)."""
    row = conn.execute(
        "SELECT to_regclass('schema_versions') IS NOT NULL, to_regclass('documents') IS NOT NULL"
    ).fetchone()
    if row is None or not (row[0] or row[1]):
        return None
    if not row[0]:
        conn.execute(_VERSIONS)
        conn.execute("INSERT INTO schema_versions (version) VALUES (1)")
        return 1
    head = conn.execute("SELECT max(version) FROM schema_versions").fetchone()
    return int(head[0]) if head is not None and head[0] is not None else 1


def _document(conn: _Conn, doc_id: str) -> StoredDoc | None:
    """One registered document by id, or None."""
    row = conn.execute(
        "SELECT num, id, digest, sig, meta, text FROM documents WHERE id = %s AND NOT deleted",
        (doc_id,),
    ).fetchone()
    if row is None:
        return None
    text = None if row[5] is None else bytes(row[5]).decode("utf-8")
    return StoredDoc(
        row[0], row[1], bytes(row[2]), bytes(row[3]), read_json(row[4], constants="null"), text
    )


def _texts(conn: _Conn, nums: Sequence[int]) -> dict[int, str]:
    """The stored texts of those documents (when texts are stored)."""
    rows = conn.execute(
        "SELECT num, text FROM documents WHERE num = ANY(%s) AND text IS NOT NULL AND NOT deleted",
        (list(nums),),
    ).fetchall()
    return {r[0]: bytes(r[1]).decode("utf-8") for r in rows}


def _rollback(conn: _Conn) -> None:
    """End whatever transaction ``conn`` has open (nothing stored); quiet on a dead one."""
    if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        with suppress(psycopg.Error):
            conn.execute("ROLLBACK")


def _where(info: dict[str, Any]) -> str:
    """The store's host, port and database for messages (never the password)."""
    host, port, db = info.get("host", "localhost"), info.get("port", 5432), info.get("dbname", "")
    return f"postgresql://{host}:{port}/{db}"
