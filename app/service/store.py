"""The durable store: SQLite in WAL mode with full fsync, one transaction per request batch.

Everything the in-memory index holds can be rebuilt from here (signatures are stored, never
recomputed); the clusters of two or more are kept too (app/service/clusters.py), written by
every write in its transaction. ``Store`` is the small interface the service needs;
``SQLiteStore`` is the embedded default and ``open_store`` picks the shared PostgreSQL store
(``app.service.pgstore``) when STORE_URL is set. A shared store also keeps a log of changes
(``Change``) that every replica follows (pruned past a retention window, with the deleted
documents' rows it names); the embedded store has no other writer, so its log is always
empty, and a deletion deletes the row. ``SQLiteStore`` holds the data directory's lock while
open, refuses a damaged database (DamagedStore) and reports a write that failed for a full or
failing disk as StoreFull, rolled back whole.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

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
from neardup.app.service.dirlock import DataDirLock
from neardup.app.service.errors import (
    DamagedStore,
    ParameterMismatch,
    SettingsChanged,
    SettingsMismatch,
    StoreFull,
    StoreUnavailable,
)
from neardup.core.engine import ProtectedFormat, json_text, read_json

if TYPE_CHECKING:
    from neardup.app.config import Settings

__all__ = [
    "QUEUED_AT",
    "Change",
    "ProtectedSetRow",
    "SQLiteStore",
    "Store",
    "StoredDoc",
    "check_params",
    "check_settings",
    "lock_settings",
    "open_store",
    "queued_call",
    "unrecorded",
]

log = logging.getLogger("neardup")
_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS params (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    num INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    digest BLOB NOT NULL,
    sig BLOB NOT NULL,
    meta TEXT NOT NULL,
    text TEXT
);
-- Confirmed pairs were stored before clusters were recomputed from signatures: not needed.
DROP TABLE IF EXISTS pairs;
CREATE TABLE IF NOT EXISTS protected_sets (
    name TEXT PRIMARY KEY,
    items INTEGER NOT NULL,
    ngrams INTEGER NOT NULL,
    body TEXT NOT NULL,
    format TEXT NOT NULL DEFAULT 'text' CHECK (format IN ('jsonl', 'text'))
);
-- Room probes after a full disk: written, committed and deleted (see SQLiteStore.probe).
CREATE TABLE IF NOT EXISTS probe (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
-- Flushing into a served index (app/service/flush.py): the store's identity and flush marks,
-- and the flushed documents deleted or replaced since, whose rows the next flush deletes.
CREATE TABLE IF NOT EXISTS index_flush (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS index_deletes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    digest BLOB NOT NULL,
    num INTEGER NOT NULL
);
-- The clusters of two or more members (app/service/clusters.py), written by every write.
CREATE TABLE IF NOT EXISTS clusters (
    label INTEGER PRIMARY KEY,
    root TEXT NOT NULL,
    size INTEGER NOT NULL,
    own INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS clusters_by_size ON clusters (size DESC, root);
CREATE TABLE IF NOT EXISTS cluster_members (
    id TEXT PRIMARY KEY,
    label INTEGER NOT NULL,
    own BOOLEAN NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cluster_members_by_label ON cluster_members (label, id);
-- The listing by root (GET /v1/clusters).
CREATE INDEX IF NOT EXISTS clusters_by_root ON clusters (root);
-- How many listed clusters (own > 0) there are of each size (stats, the size histogram),
-- kept by these triggers in the transaction of every write to ``clusters``.
CREATE TABLE IF NOT EXISTS cluster_sizes (
    size INTEGER PRIMARY KEY,
    clusters INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS clusters_sized_insert AFTER INSERT ON clusters WHEN NEW.own > 0
BEGIN
    INSERT INTO cluster_sizes (size, clusters) VALUES (NEW.size, 1)
    ON CONFLICT (size) DO UPDATE SET clusters = clusters + 1;
END;
CREATE TRIGGER IF NOT EXISTS clusters_sized_delete AFTER DELETE ON clusters WHEN OLD.own > 0
BEGIN
    UPDATE cluster_sizes SET clusters = clusters - 1 WHERE size = OLD.size;
    DELETE FROM cluster_sizes WHERE size = OLD.size AND clusters <= 0;
END;
CREATE TRIGGER IF NOT EXISTS clusters_sized_update AFTER UPDATE OF size, own ON clusters
BEGIN
    UPDATE cluster_sizes SET clusters = clusters - 1 WHERE size = OLD.size AND OLD.own > 0;
    DELETE FROM cluster_sizes WHERE size = OLD.size AND clusters <= 0;
    INSERT INTO cluster_sizes (size, clusters) SELECT NEW.size, 1 WHERE NEW.own > 0
    ON CONFLICT (size) DO UPDATE SET clusters = clusters + 1;
END;
"""
#: ``cluster_sizes`` counted once from the clusters, in the transaction creating it (a store
#: whose cluster tables predate it); the triggers keep it from then on.
_COUNT_SIZES = (
    "DELETE FROM cluster_sizes; INSERT INTO cluster_sizes (size, clusters) "
    "SELECT size, count(*) FROM clusters WHERE own > 0 GROUP BY size;"
)
#: How many documents the store holds (one row), kept by triggers in the transaction of every
#: write to ``documents``: a start reads the count, not every row (``document_count``).
_DOCUMENT_COUNT = """
CREATE TABLE document_count (one INTEGER PRIMARY KEY CHECK (one = 0), documents INTEGER NOT NULL);
INSERT INTO document_count VALUES (0, (SELECT count(*) FROM documents));
CREATE TRIGGER documents_counted_insert AFTER INSERT ON documents
BEGIN
    UPDATE document_count SET documents = documents + 1;
END;
CREATE TRIGGER documents_counted_delete AFTER DELETE ON documents
BEGIN
    UPDATE document_count SET documents = documents - 1;
END;
"""

#: The store's layout version (``PRAGMA user_version``): 1 once the cluster tables are filled
#: (a store made before them, version 0, is filled once at start from the recovered clusters);
#: a newer one is refused.
LAYOUT_VERSION = 1

#: What a room probe writes: a write of this size must fit before /readyz says ready again.
PROBE_BYTES = 64 << 10
#: Rows (log entries, then deleted documents' rows) one step of ``Store.prune`` removes at most.
PRUNE_BATCH = 5_000

# SQLite's primary result codes for a full disk and a failing one (ENOSPC can surface as an
# I/O error while the WAL grows), and for a file that is not, or no longer, a database.
_DISK_TROUBLE = (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)
_DAMAGED = (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT)

# Data directories made before the format column kept it as the body's first character
# ('j' JSON Lines, 't' text): moved into the column once, on open.
_MIGRATE_FORMAT = """
ALTER TABLE protected_sets ADD COLUMN format TEXT NOT NULL DEFAULT 'text'
    CHECK (format IN ('jsonl', 'text'));
UPDATE protected_sets
    SET format = CASE substr(body, 1, 1) WHEN 'j' THEN 'jsonl' ELSE 'text' END,
        body = substr(body, 2);
"""


@dataclass(frozen=True)
class StoredDoc:
    """One registered document as the store keeps it."""

    num: int
    id: str
    digest: bytes
    sig: bytes
    meta: dict[str, Any]
    text: str | None


@dataclass(frozen=True)
class ProtectedSetRow:
    """A protected set: its name, counts, format, and the body it was parsed from."""

    name: str
    items: int
    ngrams: int
    format: ProtectedFormat
    body: str


@dataclass(frozen=True)
class Change:
    """One entry of a shared store's log of changes, with what a replica needs to apply it.

    ``add``: documents ``nums`` (consecutive, deleted ones included), ``ids`` and their
    concatenated little-endian ``sigs``. ``delete``: document ``nums[0]``, id ``name``.
    ``put_set``: set ``name``, its current ``row`` (None if deleted since). ``delete_set``:
    set ``name``. ``flush``: a replica took a flush's batch through document ``nums[0]``
    (the store records deletes up to it from then on). ``flushed``: a flush was committed,
    ``name`` its mark (app/service/flush.py).
    """

    seq: int
    kind: Literal["add", "delete", "put_set", "delete_set", "flush", "flushed"]
    name: str = ""
    nums: list[int] | None = None
    ids: list[str] | None = None
    sigs: bytes = b""
    row: ProtectedSetRow | None = None


class Store(Protocol):
    """What the service needs from durable storage. Every write is durable when it returns.

    Writes go between ``lock_writes`` (which returns the changes other processes logged since
    this one last looked, to apply first) and ``unlock_writes``; a write commits and ends the
    transaction that ``lock_writes`` began. A document write also writes, in its transaction,
    what it changes in the clusters (``ClusterWrite``: app/service/clusters.py); the cluster
    readers are bounded by their arguments.
    """

    def ensure_params(self, params: dict[str, int | str]) -> None: ...
    def ensure_settings(
        self, settings: dict[str, str], explicit: Collection[str] | None = None
    ) -> dict[str, str]: ...
    def set_settings(self, settings: dict[str, str]) -> dict[str, str]: ...
    def probe(self) -> None: ...
    def digests(self, ids: Sequence[str]) -> dict[str, bytes]: ...
    def numbered(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]: ...
    def add_documents(
        self, docs: Sequence[StoredDoc], clusters: ClusterWrite | None = None
    ) -> None: ...
    def delete_document(self, num: int, clusters: ClusterWrite | None = None) -> None: ...
    def delete_documents(
        self, nums: Sequence[int], clusters: ClusterWrite | None = None
    ) -> None: ...
    def replace_document(
        self, old: int, doc: StoredDoc, clusters: ClusterWrite | None = None
    ) -> None: ...
    def write_clusters(self, clusters: ClusterWrite) -> bool: ...
    def clusters_filled(self) -> bool: ...
    def fill_clusters(self, rows: Iterable[ClusterRow]) -> bool: ...
    def cluster_rows(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]: ...
    def read_cluster_rows(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]: ...
    def read_numbered(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]: ...
    def cluster_members(self, root: str, after: str | None, limit: int) -> list[str]: ...
    def clusters_page(
        self,
        min_size: int,
        after: tuple[int, str] | None,
        limit: int,
        owned: bool = True,
        offset: int = 0,
    ) -> list[tuple[str, int]]: ...
    def cluster_slice(
        self, root: str, after: str | None, limit: int
    ) -> ClusterSlice | bool | None: ...
    def cluster_listing(
        self, min_size: int, after: str | None, limit: int, most: int, per_cluster: int
    ) -> tuple[list[ClusterSlice], str | None]: ...
    def cluster_sizes(self) -> dict[int, int]: ...
    def linked_members(self) -> list[str]: ...
    def stored_clusters(self, ids: Sequence[str]) -> dict[int, StoredCluster]: ...
    def document(self, doc_id: str) -> StoredDoc | None: ...
    def read_document(self, doc_id: str) -> StoredDoc | None: ...
    def texts(self, nums: Sequence[int]) -> dict[int, str]: ...
    def read_texts(self, nums: Sequence[int]) -> dict[int, str]: ...
    def extent(self) -> int: ...
    def document_count(self, after: int = -1) -> int: ...
    def iter_signatures(
        self, batch: int, after: int = -1
    ) -> Iterator[tuple[list[int], list[str], bytes]]: ...
    def put_protected_set(self, row: ProtectedSetRow) -> None: ...
    def delete_protected_set(self, name: str) -> bool: ...
    def protected_sets(self) -> list[ProtectedSetRow]: ...
    def lock_writes(self) -> list[Change]: ...
    def unlock_writes(self) -> None: ...
    def changes(self) -> list[Change]: ...
    def wait_for_changes(self, timeout: float) -> None: ...
    def recovering(self) -> AbstractContextManager[None]: ...
    def position(self) -> int | None: ...
    def prune(self, retention: float, batch: int) -> int: ...
    def available(self) -> bool: ...
    def take_budget(self, caller: str, unit: str, amount: int, per_minute: int) -> float | None: ...
    def lock_flush(self) -> bool: ...
    def unlock_flush(self) -> None: ...
    def holds_flush_lock(self) -> bool: ...
    def flush_state(self) -> dict[str, str]: ...
    def set_flush_state(self, values: dict[str, str], clear_deletes: int = 0) -> None: ...
    def index_deletes(self) -> list[tuple[int, str, bytes, int]]: ...
    def take_flush(self, through: int) -> list[tuple[int, str, bytes, int]]: ...
    def close(self) -> None: ...


#: When the store call running in this thread was queued (``time.monotonic()``), set by
#: ``queued_call``: a call's deadline, STORE_TIMEOUT, counts from it (the shared store's).
QUEUED_AT: ContextVar[float | None] = ContextVar("neardup_store_queued_at", default=None)


def queued_call(queued: float, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` in a store thread, its deadline counted from ``queued`` (``QUEUED_AT``)."""
    token = QUEUED_AT.set(queued)
    try:
        return fn(*args)
    finally:
        QUEUED_AT.reset(token)


#: Index parameters added after stores were first made, and what a store that predates one
#: was made with (so it reopens unchanged).
PREDATING = {"tokenizer": "words"}


#: Parameters a store records on first use, and a store that predates one records on its next
#: start: they change nothing stored (the store keeps protected sets as their files and parses
#: them at every start), but every replica of the store must then agree on them.
RECORDED_ON_OPEN = ("windows",)

#: What a refusal adds for a parameter a store can only be rebuilt for.
_WAY_OUT = {
    "tokenizer": " (a store is never extended under another tokenizer or version of it: start "
    "with the store's, or build a new store from the documents, docs/index.md)",
    "windows": " (the store's replicas would flag other texts as contamination: run every "
    "replica with the neardup version that recorded it, or build a new store, docs/index.md)",
}


def unrecorded(stored: dict[str, str], params: dict[str, int | str]) -> dict[str, str]:
    """The values of ``RECORDED_ON_OPEN`` that ``params`` has and a store's ``stored`` lacks."""
    return {k: str(params[k]) for k in RECORDED_ON_OPEN if k in params and k not in stored}


def check_params(
    where: str, what: str, stored: dict[str, str], params: dict[str, int | str]
) -> None:
    """Refuse a store whose recorded index parameters lack some of ``params`` (DamagedStore) or
    differ from them (ParameterMismatch, naming each as ``what`` was created with it); one
    recorded before a parameter of ``PREDATING`` existed was made with its value there."""
    stored = {**PREDATING, **stored}
    missing = [k.upper() for k in params if k not in stored]
    if missing:
        raise DamagedStore(f"{where}: its params table lacks {', '.join(missing)}")
    wrong = [
        f"{k.upper()} is {v} but {what} was created with {stored[k]}" + _WAY_OUT.get(k, "")
        for k, v in params.items()
        if stored[k] != str(v)
    ]
    if wrong:
        raise ParameterMismatch(f"{where}: " + "; ".join(wrong))


def check_settings(
    where: str,
    stored: dict[str, str],
    settings: dict[str, str],
    explicit: Collection[str] | None = None,
) -> dict[str, str]:
    """The stored values of those of ``settings`` the operator did not set (not in
    ``explicit``; None: every one was set) that the store records otherwise: the replica
    adopts them. SettingsMismatch if ``stored`` records another value for any that was set,
    naming each, both values, and the two ways out: start with the store's, or change it for
    every replica with ``neardup store-settings``."""
    chosen = {k: v for k, v in settings.items() if explicit is None or k in explicit}
    adopted = {
        k: stored[k] for k, v in settings.items() if k not in chosen and stored.get(k, v) != v
    }
    wrong = [(k, v, stored[k]) for k, v in chosen.items() if k in stored and stored[k] != v]
    if wrong:
        told = "; ".join(
            f"{k.upper()} is {v} but the store's replicas answer with {was}" for k, v, was in wrong
        )
        keep = " ".join(f"NEARDUP_{k.upper()}={was}" for k, _, was in wrong)
        change = " ".join(f"--{k.replace('_', '-')} {v}" for k, v, _ in wrong)
        raise SettingsMismatch(
            f"{where}: {told}: start with {keep}, or change it for every replica with "
            f"neardup store-settings {change} (then restart them)"
        )
    return adopted


def lock_settings(store: Store, settings: Settings) -> Settings:
    """``settings`` as the store locks them: the answer settings it lacks recorded, another
    value of one the operator set refused (SettingsMismatch), and the store's value of one
    not set adopted, with a log line naming it (after ``neardup store-settings``, a replica
    started without the new value serves with it)."""
    adopted = store.ensure_settings(settings.answer_settings(), settings.model_fields_set)
    if not adopted:
        return settings
    for name, value in adopted.items():
        log.info(
            "adopting %s=%s from the store (NEARDUP_%s is not set; default %s)",
            name.upper(), value, name.upper(), getattr(settings, name),
        )  # fmt: skip
    values = {name: type(getattr(settings, name))(value) for name, value in adopted.items()}
    locked = settings.model_copy(update=values)
    locked.params  # noqa: B018 - MinhashParams refuses a stored value it cannot take
    return locked


def changed_settings(where: str, stored: dict[str, str], settings: dict[str, str]) -> None:
    """SettingsChanged if ``stored`` (read while serving) no longer holds ``settings``."""
    wrong = [(k, v, stored.get(k)) for k, v in settings.items() if stored.get(k) != v]
    if wrong:
        told = "; ".join(f"{k.upper()} {v} -> {now}" for k, v, now in wrong)
        raise SettingsChanged(
            f"the settings locked in the store at {where} were changed ({told}): this replica "
            "answers no more until it is restarted with them"
        )


class SQLiteStore:
    """The embedded store: ``DATA_DIR/neardup.sqlite3``, WAL, ``synchronous=FULL``.

    Opening takes the data directory's lock (DataDirLocked naming the holder) and refuses a
    0-byte or non-SQLite database file (DamagedStore); ``close`` releases both.
    Not thread-safe by itself: the service calls it from one thread at a time.
    """

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / "neardup.sqlite3"
        self.budgets_path = data_dir / "budgets.sqlite3"
        self._lock = DataDirLock(data_dir)
        #: Documents numbered up to this are in the served index, or in a flush being written
        #: (app/service/flush.py): deleting or replacing one records its id and digest in
        #: ``index_deletes`` in the same transaction, for a flush to delete its row. None: the
        #: service does not flush (nothing is recorded).
        self.index_deletes_through: int | None = None
        #: the budgets' clock: wall-clock seconds, so that a restart goes on from them
        self.clock: Callable[[], float] = time.time
        self._swept = 0.0
        try:
            self._db = _open(self.path)
            try:
                self._budgets = _open_budgets(self.budgets_path)
                #: the cluster reads' connection (the service's read thread's alone): in WAL,
                #: a read sees the last commit and never waits for a write
                self._reader = sqlite3.connect(
                    self.path, check_same_thread=False, isolation_level=None
                )
                self._reader.execute("PRAGMA query_only=ON")
            except BaseException:
                self._db.close()
                raise
        except BaseException:
            self._lock.release()
            raise

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; on any error ``ROLLBACK`` (unless SQLite already
        did), and a full or failing disk raised as StoreFull."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            yield
            self._db.execute("COMMIT")
        except BaseException as exc:
            if self._db.in_transaction:
                with suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            if _primary_code(exc) in _DISK_TROUBLE:
                raise StoreFull(f"{self.path}: {exc}; nothing was stored") from exc
            raise

    def ensure_params(self, params: dict[str, int | str]) -> None:
        """Record the index parameters on first use; refuse others afterwards, naming them.

        A store that holds documents or protected sets but no parameters (or only some of them)
        is DamagedStore: its index parameters cannot be guessed.
        """
        stored = dict(self._db.execute("SELECT key, value FROM params").fetchall())
        if not stored:
            if self._has_data():
                raise DamagedStore(
                    f"{self.path} holds documents or protected sets but no index parameters "
                    "(its params table is empty): refusing to guess them"
                )
            with self._transaction():
                self._db.executemany(
                    "INSERT INTO params VALUES (?, ?)", [(k, str(v)) for k, v in params.items()]
                )
            return
        added = unrecorded(stored, params)
        if added:
            with self._transaction():
                self._db.executemany("INSERT INTO params VALUES (?, ?)", list(added.items()))
        check_params(str(self.path), "the data directory", {**stored, **added}, params)

    def ensure_settings(
        self, settings: dict[str, str], explicit: Collection[str] | None = None
    ) -> dict[str, str]:
        """Record the answer settings the store lacks; refuse others among ``explicit`` (None:
        all of them; SettingsMismatch); the stored values to adopt for the rest
        (``check_settings``)."""
        stored = dict(self._db.execute("SELECT key, value FROM params").fetchall())
        missing = [(k, v) for k, v in settings.items() if k not in stored]
        if missing:
            with self._transaction():
                self._db.executemany("INSERT INTO params VALUES (?, ?)", missing)
        return check_settings(str(self.path), stored, settings, explicit)

    def set_settings(self, settings: dict[str, str]) -> dict[str, str]:
        """Replace the recorded answer settings named in ``settings``; the recorded values
        before (all of them). The data directory's lock keeps a running server out meanwhile."""
        before = dict(self._db.execute("SELECT key, value FROM params").fetchall())
        if settings:
            with self._transaction():
                self._db.executemany(
                    "INSERT OR REPLACE INTO params VALUES (?, ?)", list(settings.items())
                )
        return before

    def _has_data(self) -> bool:
        docs = self._db.execute("SELECT 1 FROM documents LIMIT 1").fetchone()
        sets = self._db.execute("SELECT 1 FROM protected_sets LIMIT 1").fetchone()
        return docs is not None or sets is not None

    def probe(self) -> None:
        """Write, commit and delete ``PROBE_BYTES`` of new rows: StoreFull while there is no
        room for them."""
        with self._transaction():
            self._db.execute("INSERT INTO probe (body) VALUES (zeroblob(?))", (PROBE_BYTES,))
        with self._transaction():
            self._db.execute("DELETE FROM probe")

    def digests(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The text digests of those of ``ids`` that are registered."""
        sql = "SELECT id, digest FROM documents WHERE id IN ({})"
        return dict(_rows_in(_SQLiteSql(self._db), sql, ids))

    def numbered(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """The number and signature bytes of those of ``ids`` that are registered."""
        return cluster_reads.numbered(_SQLiteSql(self._db), ids)

    def add_documents(
        self, docs: Sequence[StoredDoc], clusters: ClusterWrite | None = None
    ) -> None:
        """Store a batch of documents and what it changes in the clusters in one durable
        transaction."""
        with self._transaction():
            self._db.executemany(
                "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?)",
                [(d.num, d.id, d.digest, d.sig, json_text(d.meta), d.text) for d in docs],
            )
            self._write_clusters(clusters)

    def delete_document(
        self, num: int, clusters: ClusterWrite | None = None, note: bool = True
    ) -> None:
        """Remove a document and regroup its cluster (``clusters``), durably (with ``note``,
        noting it for the index: ``index_deletes_through``)."""
        self.delete_documents([num], clusters, note)

    def delete_documents(
        self, nums: Sequence[int], clusters: ClusterWrite | None = None, note: bool = True
    ) -> None:
        """``delete_document`` of several documents (in number order), in one durable
        transaction."""
        nums = sorted(nums)
        with self._transaction():
            if note:
                self._note_index_deletes(nums)
            self._db.executemany("DELETE FROM documents WHERE num = ?", [(n,) for n in nums])
            self._write_clusters(clusters)

    def replace_document(
        self, old: int, doc: StoredDoc, clusters: ClusterWrite | None = None
    ) -> None:
        """Remove document ``old`` and store ``doc`` (its new text), with what that changes in
        the clusters, in one durable transaction."""
        with self._transaction():
            self._note_index_deletes([old])
            self._db.execute("DELETE FROM documents WHERE num = ?", (old,))
            self._db.execute(
                "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?)",
                (doc.num, doc.id, doc.digest, doc.sig, json_text(doc.meta), doc.text),
            )
            self._write_clusters(clusters)

    # --- clusters (app/service/clusters.py) ----------------------------------------------------

    def _write_clusters(self, clusters: ClusterWrite | None) -> None:
        if clusters:
            cluster_sql.apply_write(_SQLiteSql(self._db), clusters)

    def write_clusters(self, clusters: ClusterWrite) -> bool:
        """Apply ``clusters`` (a linking of indexed documents) in one durable transaction;
        True (the embedded store has no other writer)."""
        with self._transaction():
            self._write_clusters(clusters)
        return True

    def clusters_filled(self) -> bool:
        """Whether the cluster tables hold the clusters (else they are filled once at start)."""
        return int(self._db.execute("PRAGMA user_version").fetchone()[0]) >= LAYOUT_VERSION

    def fill_clusters(self, rows: Iterable[ClusterRow]) -> bool:
        """Fill the cluster tables with ``rows`` (every cluster of two or more) and record the
        layout version, in one durable transaction; False if they were filled already."""
        if self.clusters_filled():
            return False
        with self._transaction():
            cluster_sql.fill(_SQLiteSql(self._db), rows)
            self._db.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")
        return True

    def cluster_rows(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """(root, size) of each of ``ids`` that is in a cluster of two or more."""
        return cluster_reads.cluster_rows(_SQLiteSql(self._db), ids)

    def read_cluster_rows(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """``cluster_rows`` on the read connection (a reader's: never behind a write)."""
        return self._read(lambda db: cluster_reads.cluster_rows(db, ids))

    def read_numbered(self, ids: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        """``numbered`` on the read connection (a reader's: never behind a write)."""
        return self._read(lambda db: cluster_reads.numbered(db, ids))

    def cluster_members(self, root: str, after: str | None, limit: int) -> list[str]:
        """The member ids of the cluster rooted at ``root`` after ``after``, in id order, at
        most ``limit`` (none if ``root`` roots no cluster of two or more)."""
        return cluster_reads.cluster_members(_SQLiteSql(self._db), root, after, limit, "")

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
            lambda db: cluster_reads.clusters_page(db, min_size, after, limit, owned, "", offset)
        )

    def cluster_slice(self, root: str, after: str | None, limit: int) -> ClusterSlice | bool | None:
        """``cluster_reads.cluster_slice``: the cluster rooted at ``root``, its members after
        ``after``, at most ``limit`` (a live document in no cluster: alone); True: ``root`` is
        a member, not a root; None: no live document and in no cluster."""
        return self._read(lambda db: cluster_reads.cluster_slice(db, root, after, limit, "", ""))

    def cluster_listing(
        self, min_size: int, after: str | None, limit: int, most: int, per_cluster: int
    ) -> tuple[list[ClusterSlice], str | None]:
        """``cluster_reads.listing``: a page of the clusters by root, and the next cursor."""
        return self._read(
            lambda db: cluster_reads.listing(db, min_size, after, limit, most, per_cluster, "", "")
        )

    def cluster_sizes(self) -> dict[int, int]:
        """Size -> how many listed clusters are of that size (``cluster_reads.cluster_sizes``)."""
        return self._read(cluster_reads.cluster_sizes)

    def _read(self, fn: Callable[[_SQLiteSql], _T]) -> _T:
        """``fn`` on the read connection, in one read transaction (one snapshot: WAL)."""
        self._reader.execute("BEGIN")
        try:
            return fn(_SQLiteSql(self._reader))
        finally:
            self._reader.execute("COMMIT")

    def linked_members(self) -> list[str]:
        """The ids of cluster members that are linked indexed documents."""
        return cluster_reads.linked_members(_SQLiteSql(self._db))

    def stored_clusters(self, ids: Sequence[str]) -> dict[int, StoredCluster]:
        """The clusters holding any of ``ids`` as stored, by label (``stored_clusters``)."""
        return cluster_sql.stored_clusters(_SQLiteSql(self._db), ids)

    def document(self, doc_id: str) -> StoredDoc | None:
        """One document by id, or None (on the write connection: a write's own read)."""
        return _document(_SQLiteSql(self._db), doc_id)

    def read_document(self, doc_id: str) -> StoredDoc | None:
        """``document`` on the read connection (a reader's: never behind a write)."""
        return self._read(lambda db: _document(db, doc_id))

    def texts(self, nums: Sequence[int]) -> dict[int, str]:
        """The stored texts of those documents (when texts are stored)."""
        return dict(_rows_in(_SQLiteSql(self._db), _TEXTS, nums))

    def read_texts(self, nums: Sequence[int]) -> dict[int, str]:
        """``texts`` on the read connection (a reader's: never behind a write)."""
        return self._read(lambda db: dict(_rows_in(db, _TEXTS, nums)))

    def extent(self) -> int:
        """One more than the largest document number (0 when empty)."""
        row = self._db.execute("SELECT MAX(num) FROM documents").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def document_count(self, after: int = -1) -> int:
        """How many documents are registered (numbered after ``after``: those read, a range
        of the table; all of them: the count its triggers keep, read in O(1))."""
        if after < 0:
            return int(self._db.execute("SELECT documents FROM document_count").fetchone()[0])
        sql = "SELECT COUNT(*) FROM documents WHERE num > ?"
        return int(self._db.execute(sql, (after,)).fetchone()[0])

    def iter_signatures(
        self, batch: int, after: int = -1
    ) -> Iterator[tuple[list[int], list[str], bytes]]:
        """Every document's (nums, ids, concatenated signature bytes), ``batch`` rows at a time
        (those numbered after ``after``)."""
        cursor = self._db.execute(
            "SELECT num, id, sig FROM documents WHERE num > ? ORDER BY num", (after,)
        )
        while rows := cursor.fetchmany(batch):
            yield [r[0] for r in rows], [r[1] for r in rows], b"".join(r[2] for r in rows)

    def put_protected_set(self, row: ProtectedSetRow) -> None:
        """Create or atomically replace a protected set."""
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO protected_sets (name, items, ngrams, format, body) "
                "VALUES (?, ?, ?, ?, ?)",
                (row.name, row.items, row.ngrams, row.format.value, row.body),
            )

    def delete_protected_set(self, name: str) -> bool:
        """Remove a protected set; False if there was none of that name."""
        with self._transaction():
            cursor = self._db.execute("DELETE FROM protected_sets WHERE name = ?", (name,))
        return cursor.rowcount > 0

    def protected_sets(self) -> list[ProtectedSetRow]:
        """Every protected set, by name."""
        rows = self._db.execute(
            "SELECT name, items, ngrams, format, body FROM protected_sets ORDER BY name"
        ).fetchall()
        return [ProtectedSetRow(n, i, g, ProtectedFormat(f), b) for n, i, g, f, b in rows]

    # The embedded store has one writer, this process (the data directory's lock): no log.

    def lock_writes(self) -> list[Change]:
        """Nothing to catch up with: each write is its own transaction."""
        return []

    def unlock_writes(self) -> None:
        """Nothing to release."""

    def changes(self) -> list[Change]:
        """No other writer, no changes to follow."""
        return []

    def wait_for_changes(self, timeout: float) -> None:
        """Never called (there is nothing to follow)."""

    def recovering(self) -> AbstractContextManager[None]:
        """Recovery reads need no snapshot: nothing else writes."""
        return nullcontext()

    def position(self) -> int | None:
        """None: the embedded store has no log."""
        return None

    def prune(self, retention: float, batch: int) -> int:
        """Nothing to prune: no log, and a deleted document's row is deleted with it."""
        return 0

    def available(self) -> bool:
        """Always: the embedded store is a file of this process (a full disk is StoreFull)."""
        return True

    def take_budget(self, caller: str, unit: str, amount: int, per_minute: int) -> float | None:
        """Take ``amount`` ``unit``s from ``caller``'s bucket of ``per_minute`` a minute (full
        when new), or take nothing: None if taken, else the units there are. In
        ``budgets.sqlite3`` (its own file and connection, called from one thread: a check never
        waits for a registration's transaction), so a restart goes on from it; its commits
        are not fsynced (a process killed loses none; an OS crash may lose the last ones)."""
        now = self.clock()
        values = {"caller": caller, "unit": unit, "cap": per_minute, "amount": amount,
                  "rate": per_minute / 60.0, "now": now}  # fmt: skip
        try:
            if now - self._swept >= BUDGET_SWEEP_SECONDS:
                self._swept = now
                self._budgets.execute(
                    "DELETE FROM budgets WHERE at < ?", (now - BUDGET_FULL_AFTER,)
                )
            row = self._budgets.execute(_SQLITE_TAKE, values).fetchone()
        except sqlite3.Error as exc:
            if _primary_code(exc) in _DISK_TROUBLE:
                raise StoreFull(f"{self.budgets_path}: {exc}; nothing was charged") from exc
            raise
        return None if row[1] else float(row[0])

    # --- flushing into a served index (app/service/flush.py) -----------------------------------

    def _note_index_deletes(self, nums: Sequence[int]) -> None:
        """In the caller's transaction: record documents ``nums``' ids and digests among the
        index's deletes (in that order), those numbered up to ``index_deletes_through``
        (flushed, or in a flush being written)."""
        through = self.index_deletes_through
        if through is None:
            return
        self._db.executemany(
            "INSERT INTO index_deletes (id, digest, num) "
            "SELECT id, digest, num FROM documents WHERE num = ?",
            [(n,) for n in nums if n <= through],
        )

    def flush_state(self) -> dict[str, str]:
        """The recorded flush state: the store's identity and its marks (JSON), by key."""
        return dict(self._db.execute("SELECT key, value FROM index_flush").fetchall())

    def set_flush_state(self, values: dict[str, str], clear_deletes: int = 0) -> None:
        """Record ``values`` in the flush state and forget the index's deletes numbered up to
        ``clear_deletes`` (committed), in one durable transaction."""
        with self._transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO index_flush VALUES (?, ?)", list(values.items())
            )
            self._db.execute("DELETE FROM index_deletes WHERE seq <= ?", (clear_deletes,))

    def index_deletes(self) -> list[tuple[int, str, bytes, int]]:
        """The index's deletes not forgotten yet: (seq, id, digest, number), in order."""
        sql = "SELECT seq, id, digest, num FROM index_deletes ORDER BY seq"
        return [(int(a), str(b), bytes(c), int(d)) for a, b, c, d in self._db.execute(sql)]

    def take_flush(self, through: int) -> list[tuple[int, str, bytes, int]]:
        """From now on record the deletion of any document numbered up to ``through`` (a
        flush's batch is taken); the index's deletes (``index_deletes``)."""
        self.index_deletes_through = through
        return self.index_deletes()

    def lock_flush(self) -> bool:
        """One flusher: the data directory's lock already makes this process the only one."""
        return True

    def unlock_flush(self) -> None:
        """Nothing to release (``lock_flush``)."""

    def holds_flush_lock(self) -> bool:
        """Always (``lock_flush``): the data directory's lock is held until ``close``."""
        return True

    def close(self) -> None:
        """Close the databases (everything committed is already durable) and release the data
        directory's lock. Idempotent."""
        try:
            self._budgets.close()
            self._reader.close()
            self._db.close()
        finally:
            self._lock.release()


#: The stored texts of documents by number (an ``IN ({})`` slot, for ``_rows_in``).
_TEXTS = "SELECT num, text FROM documents WHERE num IN ({}) AND text IS NOT NULL"


def _document(db: _SQLiteSql, doc_id: str) -> StoredDoc | None:
    """One document by id, or None."""
    sql = "SELECT num, id, digest, sig, meta, text FROM documents WHERE id = ?"
    rows = db.fetch(sql, (doc_id,))
    if not rows:
        return None
    row = rows[0]
    return StoredDoc(row[0], row[1], row[2], row[3], read_json(row[4], constants="null"), row[5])


def _rows_in(db: _SQLiteSql, sql: str, keys: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``sql`` (with an ``IN ({})`` slot) for ``keys``, 500 bound values a query,
    under SQLite's limit on parameters."""
    for lo in range(0, len(keys), 500):
        chunk = list(keys[lo : lo + 500])
        yield from db.fetch(sql.format(",".join("?" * len(chunk))), chunk)


class _SQLiteSql:
    """``clusters.Sql`` over a SQLite connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._db.execute(sql, params).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._db.execute(sql, params)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._db.executemany(sql, rows)


def open_store(settings: Settings) -> Store:
    """The store the settings name: PostgreSQL at STORE_URL if set, else SQLite in DATA_DIR."""
    if settings.store_url:
        try:
            from neardup.app.service.pgstore import PostgresStore
        except ImportError as exc:
            from importlib.metadata import version

            raise StoreUnavailable(
                "STORE_URL needs the postgres extra (psycopg): pip install -e '.[postgres]' in "
                "a clone of neardup, or pip install "
                f"'neardup-{version('neardup')}-py3-none-any.whl[postgres]' "
                f"from its wheel ({exc})"
            ) from None
        return PostgresStore(settings.store_url, settings.store_schema, settings.store_timeout)
    return SQLiteStore(settings.data_dir)


def _open(path: Path) -> sqlite3.Connection:
    """Connect in WAL mode with full fsync and bring the schema up to date; DamagedStore for a
    file that is 0 bytes (SQLite would take it for a new, empty database) or not a database."""
    if path.exists() and path.stat().st_size == 0:
        raise DamagedStore(
            f"{path} is 0 bytes: it holds no documents and no index parameters; restore it "
            "from a backup, or remove it to start an empty store"
        )
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=OFF")
        layout = int(db.execute("PRAGMA user_version").fetchone()[0])
        if layout > LAYOUT_VERSION:
            db.close()
            raise DamagedStore(
                f"{path} has layout version {layout}, newer than this neardup's "
                f"({LAYOUT_VERSION}): run the neardup version that wrote it"
            )
        sized = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'cluster_sizes'").fetchone()
        counted = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'document_count'").fetchone()
        # One transaction: a crash never leaves ``cluster_sizes`` or ``document_count`` made
        # but not counted (a store made before them is counted once, here).
        db.executescript(
            f"BEGIN IMMEDIATE; {_SCHEMA} {'' if sized else _COUNT_SIZES} "
            f"{'' if counted else _DOCUMENT_COUNT} COMMIT;"
        )
        columns = {row[1] for row in db.execute("PRAGMA table_info(protected_sets)")}
        if "format" not in columns:
            db.executescript(f"BEGIN IMMEDIATE; {_MIGRATE_FORMAT} COMMIT;")
    except sqlite3.Error as exc:
        db.close()
        code = _primary_code(exc)
        if code in _DAMAGED:
            raise DamagedStore(f"{path} is damaged or not a neardup store: {exc}") from None
        if code in _DISK_TROUBLE:
            raise StoreFull(f"{path}: {exc}") from None
        raise
    return db


_SQLITE_TAKE = budget_take_sql(lambda n: f":{n}", ":now", "min", "max", "REAL")


def _open_budgets(path: Path) -> sqlite3.Connection:
    """The contamination budgets' database, WAL, commits not fsynced (``synchronous=NORMAL``:
    they survive the process, not necessarily the OS); DamagedStore for a damaged file."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(budget_schema("REAL"))
    except sqlite3.Error as exc:
        db.close()
        code = _primary_code(exc)
        if code in _DAMAGED:
            raise DamagedStore(
                f"{path} is damaged: it holds only the read keys' contamination budgets; "
                f"remove it (every key then starts with a full minute) ({exc})"
            ) from None
        if code in _DISK_TROUBLE:
            raise StoreFull(f"{path}: {exc}") from None
        raise
    return db


def _primary_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of an error (None for any other error)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None
