"""The service's own documents written into the index it serves (``neardup serve --index``):
a flush writes the documents registered since the last one as a new part, through core's one
writer (``write_part``, ``commit_index``: the batch engines' atomic commit), so that a later
``neardup dedup NEW --index IDX`` (either engine) sees them.

What was flushed is a **mark**: the version committed, a file that commit listed (its token:
each file's path is written for one version only), the document numbers flushed through, and
the store's index deletes (``SQLiteStore.index_deletes``) committed through. The part's
``run`` records it too (``engine: service``, the store's identity, ``from``/``through``,
``deletes_through``). The store keeps two marks: ``attempt``, written before each commit, and
``committed``, written after it. At start an attempt whose token the version it names lists was
committed (the process died between the commit and recording it): it is adopted, so the same
documents are never written twice; one that the version does not list lost, or never ran,
and its documents are flushed again (its files are leftovers, removed by ``neardup index
compact``).

Deletes and replaces of flushed documents: the store records the id and digest of every
document numbered up to ``index_deletes_through`` that it deletes, in the delete's own
transaction; the next flush deletes (deletion vectors) the index's row of that id if its
digest is that one, and commits it with the new part. A delete is committed at the next flush,
not at once: a version per DELETE would make one deletion vector file (and one version) per
request. Meanwhile the id is ``ServedIndex.hidden``: never answered. Replaying the deletes
after a crash is exact: those up to the committed mark are skipped, and a document deleted
then registered again gets its new row in a later part than the row deleted.

On a shared store (PostgreSQL) the marks, ``deletes_through`` and the index deletes are the
store's (tables), so what was flushed is the store's, whichever replica flushed it. One replica
flushes at a time (``Store.lock_flush``: an advisory lock of its own, held for the whole flush;
another replica's trigger skips). Its batch is taken under the store's write lock after the
other replicas' writes are applied, so it is exact (document numbers and delete sequence
numbers are given under that lock, so none commits below a batch's bound after it was read).
Taking a batch and committing a flush are log entries (``flush``, ``flushed``): every replica
applies them in order with the writes, so each hides a deleted flushed document's row as it
applies the delete, stops hiding it once the version deleting it is served, and counts the
flushed rows as the service's own (``Flusher``). A replica whose flusher died between its
commit and recording it is adopted by the next flush, or sooner by any replica's refresh that
finds its part (``Flusher.adopt``, under the flush lock: flush settings 0 included).
"""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
import time
import uuid
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from neardup.app.service.clusters import ClusterWrite
from neardup.app.service.errors import StoreUnavailable
from neardup.app.service.served import ServedIndex
from neardup.app.service.store import SQLiteStore, Store
from neardup.core.engine import (
    DocIndex,
    IndexConflictError,
    IndexFile,
    IndexPart,
    MinhashParams,
    commit_index,
    read_json,
    run_info,
    write_deletes,
    write_part,
)

if TYPE_CHECKING:
    from neardup.app.service.operations import Service

__all__ = [
    "Batch", "Flusher", "Mark", "Written", "commit_flush", "run_store", "start_mark", "write_flush",
]  # fmt: skip

log = logging.getLogger("neardup")

#: Flushes into the served index tried in a row when other runs keep committing first.
FLUSH_ATTEMPTS = 5
#: Seconds the flush at shutdown may take before it is abandoned (logged: the store holds
#: every document, and the next start flushes them).
SHUTDOWN_FLUSH_SECONDS = 120.0
#: Seconds a replica waits before trying a flush by size again after finding another replica
#: flushing.
BUSY_SECONDS = 1.0


@dataclass(frozen=True)
class Mark:
    """What the service has flushed into one index (see the module's docstring)."""

    #: the version committed (0: nothing flushed)
    version: int = 0
    #: a file that version lists, written by this flush (its part's data file, or a vector)
    token: str = ""
    #: documents numbered up to this are in the index (-1: none)
    through: int = -1
    #: the store's index deletes up to this sequence number are committed
    deletes: int = 0

    def as_json(self) -> str:
        """The mark as the store records it."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> Mark | None:
        """The mark the store recorded (None: none)."""
        return None if text is None else cls(**read_json(text))


@dataclass(frozen=True)
class Batch:
    """What one flush writes, taken under the write lock: the documents numbered after the
    mark's (ids, 16-byte text digests as two uint64, signatures), the number flushed through,
    and the store's index deletes after the mark's as (seq, id, digest)."""

    ids: list[str]
    digests: NDArray[np.uint64]
    sigs: NDArray[np.uint32]
    through: int
    deletes: list[tuple[int, str, bytes]]

    @property
    def deletes_through(self) -> int:
        """The last index delete this batch commits (0: none)."""
        return self.deletes[-1][0] if self.deletes else 0


@dataclass(frozen=True)
class Written:
    """A flush written, not committed: the version it was written against, its part (None:
    deletes only) and deletion vectors, and the mark committing it makes."""

    base: DocIndex
    part: IndexPart | None
    vectors: dict[str, IndexFile]
    mark: Mark

    def discard(self) -> None:
        """Remove the files written (listed by no version: a lost race, or a failure), the new
        part's directory whole."""
        for f in self.vectors.values():
            with suppress(OSError, FileNotFoundError):
                self.base.fs.rm(self.base.path(f.path))
        if self.part is not None:
            folder = posixpath.dirname(self.part.files[0].path)
            with suppress(OSError, FileNotFoundError):
                self.base.fs.rm(self.base.path(folder), recursive=True)


def _version() -> str:
    try:
        return metadata.version("neardup")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def start_mark(store: Store, index: DocIndex) -> tuple[str, Mark]:
    """The store's identity (made on first use) and what it has flushed into ``index``: the
    committed mark, or the attempt after it if ``index`` committed it (then recorded as
    committed, its deletes forgotten); nothing (and the deletes forgotten) when the mark names
    a version of another index (the store was flushed into another one). Blocking."""
    state = store.flush_state()
    store_id = state.get("store") or uuid.uuid4().hex
    committed = Mark.from_json(state.get("committed")) or Mark()
    attempt = Mark.from_json(state.get("attempt"))
    if (
        attempt is not None
        and attempt.version > committed.version
        and attempt.token in (index.files_of_version(attempt.version) or ())
    ):
        log.info("the last flush was committed as version %d: recorded", attempt.version)
        committed = attempt
    elif committed.version and committed.token not in (
        index.files_of_version(committed.version) or ()
    ):
        log.warning(
            "this store was flushed into another index (its version %d lists no file of "
            "this store's): every document of the store will be written into this one",
            committed.version,
        )
        committed = Mark()
        store.set_flush_state({"committed": committed.as_json()}, clear_deletes=2**62)
    store.set_flush_state(
        {"store": store_id, "committed": committed.as_json()}, clear_deletes=committed.deletes
    )
    return store_id, committed


def _digest_halves(ids: list[str], digests: dict[str, bytes]) -> NDArray[np.uint64]:
    """The 16-byte text digests of ``ids`` as two uint64 each (``write_part``'s form)."""
    raw = b"".join(digests[i][:16] for i in ids)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).astype(np.uint64)


def _doomed(base: DocIndex, batch: Batch) -> list[str]:
    """The ids whose rows of ``base`` the flush deletes: a deleted or replaced flushed
    document's row (its id with its digest), and the row of an id the batch writes (the
    store's document wins: an id is in an index at most once)."""
    wanted = {doc_id: digest[:16] for _, doc_id, digest in batch.deletes}
    found = base.id_digests(sorted(wanted)) if wanted else {}
    doomed = {i for i, d in found.items() if wanted[i] == d}
    if batch.ids:
        doomed.update(base.id_parts(batch.ids))
    return sorted(doomed)


def write_flush(
    url: str, params: MinhashParams, batch: Batch, store_id: str, mark: Mark
) -> Written | None:
    """Write ``batch`` against the index's latest version: its documents as a part, and the
    deletion vectors of the rows it deletes; None when there is nothing to commit. Blocking."""
    base = DocIndex.open(url)
    base.check_params(params)
    doomed = _doomed(base, batch)
    vectors = write_deletes(base, doomed)[0] if doomed else {}
    part = None
    if batch.ids:
        run = {
            **run_info("service", _version(), []),
            "store": store_id,
            "from": mark.through + 1,
            "through": batch.through,
            "deletes_through": batch.deletes_through,
        }
        try:
            part = write_part(base, params, batch.ids, batch.digests, batch.sigs, run)
        except BaseException:
            Written(base, None, vectors, mark).discard()
            raise
    if part is None and not vectors:
        return None
    token = part.files[0].path if part is not None else sorted(f.path for f in vectors.values())[0]
    after = Mark(base.version + 1, token, batch.through, batch.deletes_through)
    return Written(base, part, vectors, after)


def commit_flush(written: Written, params: MinhashParams) -> int:
    """Commit ``written`` as the next version; IndexConflictError (its files removed) when
    another run committed it first. Blocking."""
    added = [] if written.part is None else [written.part]
    try:
        return commit_index(written.base, params, added, deletes=written.vectors)
    except IndexConflictError:
        written.discard()
        raise


def run_store(part: IndexPart) -> Any:
    """The store identity a part's ``run`` names (a part the service flushed), or None."""
    return part.run.get("store") if part.run.get("engine") == "service" else None


class Flusher:
    """The service's flushes into the index it serves: what was flushed (the mark), the
    triggers (by size after a write, by age in a background task, at shutdown), one flush at
    a time, and the rows of deleted flushed documents hidden until a flush deletes them
    (``ServedIndex.hidden``). Created by ``Service.start`` (``start``, before the store is
    read); the service reaches it as ``Service.flusher``.

    On a shared store (PostgreSQL) every replica has one: what was flushed is the store's
    (its tables), one replica flushes at a time (``Store.lock_flush``; the others skip), and
    each learns from the store's log, in order, when a batch was taken (``batch_taken``:
    deletes of documents up to its through are recorded from then on, so they are hidden)
    and when a flush was committed (``committed``: its rows are the service's once the
    version is served). A replica that does not flush itself (FLUSH_ROWS and FLUSH_SECONDS
    0) still follows them."""

    def __init__(self, service: Service, served: ServedIndex) -> None:
        self.service = service
        self.served = served
        #: Whether the store is shared by replicas (PostgreSQL).
        self.shared = not isinstance(service.store, SQLiteStore)
        #: The store's identity and what was committed.
        self.store_id = ""
        self.mark = Mark()
        #: Documents numbered up to this are flushed, or in a flush being written: the store
        #: records their deletion for the next flush, and their rows are hidden (None: none).
        self.deletes_through: int | None = None
        #: The documents flushed through in the version served (its rows are the service's).
        self.served_through = -1
        #: Hides of deleted flushed documents counted, and per hidden id its latest hide's
        #: count and the document's number (``hide``); the hides counted when the last batch
        #: was taken (by any replica); what a committed flush waits for to stop hiding the
        #: rows it deleted: (its version, the hides counted when its batch was taken, its
        #: mark's through).
        self._hides = 0
        self._hidden_at: dict[str, tuple[int, int]] = {}
        self._cut = 0
        self._settling: tuple[int, int, int] | None = None
        #: One flush at a time; the flushes done; the background tasks (by age, by size, a
        #: refresh after another replica's flush); when the last flush ended (for
        #: FLUSH_SECONDS); until when flushes by size wait (another replica flushes).
        self._lock = asyncio.Lock()
        self.flushes = 0
        self._every: asyncio.Task[None] | None = None
        self._sized: asyncio.Task[None] | None = None
        self._refresh: asyncio.Task[None] | None = None
        self._flushed_at = time.monotonic()
        self._busy_until = 0.0

    @property
    def store(self) -> Store:
        """The service's store."""
        return self.service.store

    def start(self, resolve: bool = True) -> None:
        """At start, before the store is read: what was flushed (``start_mark``: with
        ``resolve``, under the flush lock on a shared store), and the flushed documents
        deleted since, hidden until the next flush deletes their rows (on a shared store they
        are read with the documents: ``read`` and ``load``). Blocking."""
        store = self.store
        if self.shared:
            deadline = time.monotonic() + self.service.settings.store_timeout
            while True:
                known = store.flush_state().get("store", "")
                if known and not resolve:  # this replica never flushes: it reads the marks
                    self.store_id = known
                    return
                if store.lock_flush():
                    try:
                        self.store_id = start_mark(store, self.served.index)[0]
                    finally:
                        store.unlock_flush()
                    return
                if known:  # another replica flushes: it resolved the marks at its start
                    self.store_id = known
                    return
                if time.monotonic() > deadline:  # (the store's identity is made by then)
                    raise StoreUnavailable("the flush lock is held and the store has no identity")
                time.sleep(0.05)  # the replica holding the lock is making the identity
        assert isinstance(store, SQLiteStore)
        self.store_id, self.mark = start_mark(store, self.served.index)
        self.served_through = self.mark.through  # the version opened holds the mark's
        self.deletes_through = store.index_deletes_through = self.mark.through
        self._hidden_at = {doc_id: (0, num) for _, doc_id, _, num in store.index_deletes()}
        self.served.hidden = set(self._hidden_at)
        self._log_start()

    def _log_start(self) -> None:
        log.info(
            "flushing into the index: flushed through document %d (version %d), %d deleted "
            "since", self.mark.through, self.mark.version, len(self.served.hidden),
        )  # fmt: skip

    def read(self) -> tuple[dict[str, str], list[tuple[int, str, bytes, int]]] | None:
        """A shared store's flush state and index deletes, read in the snapshot the documents
        are read in (``Store.recovering``); the served index read again if a flush committed
        a newer version since it was opened (its deletes are forgotten by the store). None
        on an embedded store (``start`` read them). Blocking."""
        if not self.shared:
            return None
        state = self.store.flush_state()
        deletes = self.store.index_deletes()
        committed = Mark.from_json(state.get("committed")) or Mark()
        if committed.version > self.served.version:
            latest = self.served.newer(self.service.params)
            if latest is not None:
                self.served.index = latest
        self._serve_recorded(committed)
        return state, deletes

    def _serve_recorded(self, committed: Mark) -> None:
        """Serve a version ``committed`` (the store's mark, read in the start's snapshot)
        allows: a replica's flush committed into the index but not recorded yet (its
        replica is between the two, or died there) holds documents the store still counts
        as unflushed, which would be answered for twice. The version before that flush's
        part is served instead, as a running replica keeps serving it (``may_serve``), until
        the commit is recorded (or adopted) and the refresh serves the newer one. Blocking."""
        served = self.served.index
        older: DocIndex | None = served
        while older is not None and any(
            run_store(p) == self.store_id and int(p.run.get("through", -1)) > committed.through
            for p in older.parts
        ):  # back past that part's version: one step, more after a batch run's commits
            older = older.at_version(older.version - 1) if older.version > 1 else None
        if older is None or older is served:
            return
        log.info(
            "the index's version %d holds a flush not recorded yet: serving version %d until "
            "it is", served.version, older.version,
        )  # fmt: skip
        self.served.index = older

    def load(self, read: tuple[dict[str, str], list[tuple[int, str, bytes, int]]]) -> None:
        """Take what ``read`` returned as what was flushed (in the step that installs the
        documents read with it): the committed mark, the documents whose deletes are
        recorded, and the recorded deletes hidden (those the batch taken but not committed
        yet holds are shown again once it is)."""
        state, deletes = read
        self.mark = Mark.from_json(state.get("committed")) or Mark()
        through = state.get("deletes_through")
        self.deletes_through = self.mark.through if through is None else int(through)
        batch = int(state.get("batch_deletes", "0"))
        self._hidden_at = {i: (0 if q <= batch else 1, num) for q, i, _, num in deletes}
        self._hides, self._cut, self._settling = 1, 0, None
        self.served.hidden = set(self._hidden_at)
        self.served_through = self.mark.through
        self._log_start()

    def start_background(self) -> None:
        """Flush every FLUSH_SECONDS in the background (if set)."""
        if self.service.settings.flush_seconds > 0:
            self._every = asyncio.create_task(self._flush_every())

    async def close(self, flush: bool = True) -> None:
        """At shutdown: stop flushing by age, flush (if ``flush``; bounded: a failure is
        logged, the store holds every document), and let a flush by size under way end."""
        if self._every is not None:
            self._every.cancel()
            with suppress(asyncio.CancelledError):
                await self._every
        if flush:
            try:
                await asyncio.wait_for(self.flush(), SHUTDOWN_FLUSH_SECONDS)
            except Exception:  # TimeoutError included: the next start flushes them
                log.exception("the flush at shutdown failed; the store keeps the documents")
        for task in (self._sized, self._refresh):  # let one under way end
            if task is not None:
                with suppress(Exception):
                    await task

    @property
    def settles(self) -> bool:
        """Whether a flush will settle the deletes recorded here: the service flushes, or
        shares its store with replicas (one of them may). Not so on an embedded store whose
        flush settings are now 0, after it flushed before."""
        return self.shared or self.service.flushing

    def forget(self, nums: Sequence[int], clusters: ClusterWrite | None = None) -> None:
        """On an embedded store no flush settles (``settles``): delete documents ``nums``,
        flushed ones whose rows the version served deleted or replaced (the one rule), in one
        transaction, without noting them for the index (there is nothing left to delete: a
        later flush, and a start, must not hide the ids). Blocking."""
        store = self.store
        assert isinstance(store, SQLiteStore)
        store.delete_documents(nums, clusters, note=False)

    def flushed_number(self, num: int) -> bool:
        """Whether document ``num`` is in the index, or in a flush being written (its deletion
        is then recorded by the store for the next flush)."""
        return self.deletes_through is not None and num <= self.deletes_through

    def hide(self, doc_id: str, num: int) -> None:
        """After a flushed document ``num`` was deleted or replaced (here, or by another
        replica: applied from the log): its row in the index is answered no more."""
        if self.flushed_number(num):
            self._hides += 1
            self._hidden_at[doc_id] = (self._hides, num)
            self.served.hidden.add(doc_id)

    def batch_taken(self, through: int) -> None:
        """Another replica took a flush's batch through document ``through`` (its log entry):
        the deletes of documents up to it are recorded (and hidden) from now on, and the
        hides counted before it are what its commit deletes."""
        self.deletes_through = max(self.deletes_through or -1, through)
        self._cut = self._hides

    def committed(self, mark: Mark) -> None:
        """Another replica committed a flush (its log entry): ``mark`` is what was flushed;
        once the version it names is served (read now, in the background), its documents are
        the service's rows and the rows it deleted are hidden no more. The same mark again (a
        replica starting records the marks it found) changes nothing. FLUSH_SECONDS counts
        from it: the age is the store's, not this replica's."""
        if mark == self.mark:
            return
        self.mark = mark
        self._flushed_at = time.monotonic()
        self._settling = (mark.version, self._cut, mark.through)
        if self.served.version >= mark.version:
            self.settle()
        elif self._refresh is None or self._refresh.done():
            self._refresh = asyncio.create_task(self._serve_flushed())

    async def _serve_flushed(self) -> None:
        try:
            await self.service.refresh_index()
        except Exception:  # its rows stay hidden until the refresh task serves the version
            log.exception("could not serve the version flushed; serving the one read")

    def may_serve(self, latest: DocIndex) -> bool:
        """Whether ``latest`` can be served: every part this store flushed into it holds
        documents up to the mark known here (a part another replica committed is served
        once its commit is applied from the log, with the documents it holds)."""
        return all(
            run_store(p) != self.store_id or int(p.run.get("through", -1)) <= self.mark.through
            for p in latest.parts
        )

    def unflushed(self) -> int:
        """The service's documents not in the index yet. Grows with them (at most about
        FLUSH_ROWS), not with the documents."""
        return len(self.service.index.documents_since(self.mark.through + 1))

    def indexed_others(self) -> int:
        """The served index's documents but the service's own flushed ones (counted in
        ``documents``) and the rows of flushed documents deleted since (hidden)."""
        index, served_through = self.service.index, self.served_through
        own = len(index) - len(index.documents_since(served_through + 1))
        # The rows of deleted flushed documents too, those the version served holds (a hidden
        # id held again is a new document, numbered after it: not counted twice).
        hidden = [self._hidden_at.get(i, (0, -1))[1] for i in list(self.served.hidden)]
        own += sum(1 for num in hidden if 0 <= num <= served_through)
        return max(self.served.rows - own, 0)

    def soon(self, now: bool = False) -> None:
        """Flush in the background once FLUSH_ROWS documents were numbered since the last
        flush (removed ones included: a cheap bound, checked after every write), or ``now``."""
        rows = self.service.settings.flush_rows
        running = self._sized is not None and not self._sized.done()
        if now and not running:
            self._sized = asyncio.create_task(self._flush_logged())
            return
        if rows <= 0 or self._lock.locked() or time.monotonic() < self._busy_until:
            return
        if not running and self.service.index.next_number - 1 - self.mark.through >= rows:
            self._sized = asyncio.create_task(self._flush_logged())

    async def _flush_every(self) -> None:
        """Flush every FLUSH_SECONDS (after the last flush) while documents or deletions wait.
        A flush under way is shielded: cancelling this task (at shutdown) never stops one
        between its commit and recording it."""
        every = self.service.settings.flush_seconds
        while True:
            await asyncio.sleep(max(self._flushed_at + every - time.monotonic(), 0.05))
            if time.monotonic() - self._flushed_at >= every:
                await asyncio.shield(self._flush_logged())

    async def _flush_logged(self) -> None:
        """``flush``, a failure logged (the store keeps the documents: the next one retries)."""
        try:
            await self.flush()
        except Exception:
            log.exception("could not flush into the index; trying again later")
            self._flushed_at = time.monotonic()

    async def flush(self) -> int | None:
        """Write the documents registered since the last flush, and the deletions of flushed
        ones, into the served index as its next version (``write_flush``: off the event loop;
        registrations wait only while the batch is taken); the version committed, or None
        when there was nothing to write, or another replica holds the flush lock (it
        flushes). Another run committing first (IndexConflictError) is retried on its
        version, FLUSH_ATTEMPTS times."""
        service = self.service
        async with self._lock:
            if not await service._io_call(self.store.lock_flush):
                log.debug("another replica is flushing into the index")
                self._flushed_at = time.monotonic()
                self._busy_until = self._flushed_at + BUSY_SECONDS
                return None
            try:
                if self.shared and await self._adopt():
                    await self._serve_flushed_version()
                return await self._flush()
            finally:
                await service._io_call(self.store.unlock_flush)

    async def _flush(self) -> int | None:
        service = self.service
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            batch, cut = await self._batch()
            if not batch.ids and not batch.deletes:
                self._flushed_at = time.monotonic()
                return None
            args = (self.served.url, service.params, batch, self.store_id, self.mark)
            written = await asyncio.to_thread(write_flush, *args)
            if written is None:  # the deletes had no row left to delete
                mark = self.mark
                after = Mark(mark.version, mark.token, mark.through, batch.deletes_through)
                await self._flushed(after, cut)
                return None
            if not await self._attempt(written):
                await asyncio.to_thread(written.discard)
                return None
            try:
                version = await asyncio.to_thread(commit_flush, written, service.params)
            except IndexConflictError as exc:
                log.info("flush: %s; writing it again on the new version", exc)
                if attempt == FLUSH_ATTEMPTS:
                    raise
                continue
            await self._flushed(written.mark, cut)
            self.flushes += 1  # once the version flushed is served (/v1/stats agree)
            log.info(
                "flushed into the index version=%d documents=%d deletes=%d",
                version, len(batch.ids), len(written.vectors),
            )  # fmt: skip
            return version
        return None

    async def _attempt(self, written: Written) -> bool:
        """Record ``written``'s mark as the attempt, before its commit, if the flush is still
        this replica's (False: nothing recorded, the flush abandoned). On a shared store the
        flush lock may have been lost meanwhile (its connection died: the server released
        it) and another replica may be flushing the same documents: checked under the write
        lock. (A lock lost after this check, before the commit, costs work, not rows: the
        later of two commits of one batch deletes the earlier one's rows of its ids, and a
        start adopts whichever attempt was recorded last.)"""
        if not self.shared:
            await self._record({"attempt": written.mark.as_json()})
            return True
        service = self.service
        async with service._writing():
            held = await service._io_call(self.store.holds_flush_lock)
            if not held:
                log.warning(
                    "flush abandoned: the flush lock was lost (its connection ended); the "
                    "replica holding it now flushes these documents"
                )
                return False
            await service._write(self.store.set_flush_state, {"attempt": written.mark.as_json()})
        return True

    async def _record(self, values: dict[str, str], clear_deletes: int = 0) -> None:
        """Record flush state in the store (on a shared store in a write, under its lock:
        a committed mark is logged for every replica)."""
        service = self.service
        if not self.shared:
            await service._write(self.store.set_flush_state, values, clear_deletes)
            return
        async with service._writing():
            await service._write(self.store.set_flush_state, values, clear_deletes)

    async def _adopt(self) -> bool:
        """On a shared store, under the flush lock: a flush another replica committed but
        did not record (it died in between) is recorded as committed, so its documents are
        never written again (True). Checked and recorded under the write lock, the log
        applied first: a commit its flusher recorded meanwhile is known here, not adopted."""
        async with self.service._writing():
            attempt = await self._adoptable()
            if attempt is None:
                return False
            self._took(attempt, self._cut)
            values = {"committed": attempt.as_json()}
            await self.service._write(self.store.set_flush_state, values, attempt.deletes)
        return True

    async def _adoptable(self) -> Mark | None:
        """The store's attempt if it is past the mark and the version it names lists its
        token (committed, not recorded: its flusher died in between)."""
        state = await self.service._io_call(self.store.flush_state)
        attempt = Mark.from_json(state.get("attempt"))
        if attempt is None or attempt.version <= self.mark.version:
            return None
        files = await asyncio.to_thread(self.served.index.files_of_version, attempt.version)
        if attempt.token not in (files or ()):
            return None
        log.info("the last flush was committed as version %d: recorded", attempt.version)
        return attempt

    async def adopt(self, latest: DocIndex) -> bool:
        """A refresh found ``latest`` holding a part of this store's beyond the mark
        (``may_serve`` False): if no replica holds the flush lock, its flusher died between
        the commit and recording it, so the commit is adopted here (``_adopt``: recorded as
        committed for every replica) without waiting for a flush, whatever this replica's
        flush settings; whether ``latest`` can be served now. Another replica holding the
        lock (or this one flushing) records its own commit: False."""
        if not self.shared or self._lock.locked():
            return False
        async with self._lock:  # (not locked: taken at once)
            if not await self.service._io_call(self.store.lock_flush):
                return False
            try:
                await self._adopt()
            finally:
                await self.service._io_call(self.store.unlock_flush)
        return self.may_serve(latest)

    async def _batch(self) -> tuple[Batch, int]:
        """What to flush, taken under the write lock (exact: no registration in between, and
        on a shared store every other replica's write applied first): the documents numbered
        after the mark, and the store's index deletes after it; and the hides counted then.
        From then on the store records the deletion of any of them (``Store.take_flush``)."""
        service = self.service
        async with service._writing():
            # Grows with the documents flushed: off the event loop (writers wait, readers not).
            ids, sigs = await asyncio.to_thread(self._unflushed_documents)
            through = service.index.next_number - 1
            store = self.store
            digests = await service._io_call(store.digests, ids) if ids else {}
            recorded = max(through, self.mark.through)
            deletes = await service._write(store.take_flush, recorded)
            self.deletes_through = recorded
            cut = self._cut = self._hides
        later = [(q, i, d) for q, i, d, _ in deletes if q > self.mark.deletes]
        # Grows with the documents flushed (all of a store's at its first flush): off the loop.
        halves = await asyncio.to_thread(_digest_halves, ids, digests)
        return Batch(ids, halves, sigs, through, later), cut

    def _unflushed_documents(self) -> tuple[list[str], NDArray[np.uint32]]:
        """The ids and signatures of the service's documents numbered after the mark."""
        index = self.service.index
        ids = index.documents_since(self.mark.through + 1)
        if not ids:
            return ids, np.empty((0, self.service.params.num_perm), dtype=np.uint32)
        return ids, index.signatures_of(ids)

    async def _flushed(self, mark: Mark, cut: int) -> None:
        """Take ``mark`` as what was flushed (at once: a later flush of this process must never
        write its documents again, even if recording it fails, when the attempt recorded
        before the commit tells the next start), record it (durably: its deletes forgotten),
        then serve the version committed (``settle``: the rows it deleted hidden no more)."""
        self._took(mark, cut)
        await self._record({"committed": mark.as_json()}, mark.deletes)
        await self._serve_flushed_version()

    async def _serve_flushed_version(self) -> None:
        """Serve the version the mark names (``settle``: the rows it deleted hidden no more)."""
        if self.served.version >= self.mark.version:
            self.settle()  # served already (by the refresh task, or nothing was committed)
            return
        try:
            await self.service.refresh_index()
        except Exception:  # its rows stay hidden until a version holding it is served
            log.exception("could not serve the version flushed; serving the one read")

    def _took(self, mark: Mark, cut: int) -> None:
        """Take ``mark`` as what was flushed, the hides counted up to ``cut`` settled once
        its version is served."""
        self.mark = mark
        self._flushed_at = time.monotonic()
        self._settling = (mark.version, cut, mark.through)

    def settle(self) -> None:
        """Once a version holding the last flush is served (in the step that serves it): its
        documents are the service's rows of the index, and the rows of deleted documents it
        deleted are hidden no more (those hidden since its batch was taken stay hidden)."""
        if self._settling is None:
            return
        version, cut, through = self._settling
        if self.served.version < version:
            return
        self._settling = None
        self.served_through = through
        self.service.evict_soon()  # its documents are the index's: memory may let them go
        kept = {i for i in self.served.hidden if self._hidden_at.get(i, (0, -1))[0] > cut}
        self._hidden_at = {i: n for i, n in self._hidden_at.items() if i in kept}
        self.served.hidden = kept
