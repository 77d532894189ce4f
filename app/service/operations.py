"""The service's operations, in terms of document ids: registration, queries, deletion,
clusters, protected sets and contamination checks over the index, the store and the pool.

Web-free: the HTTP routes and the web pages parse, call one method here, and render. Mutations
are serialised by one lock and are durable before they touch memory; reads never wait for them.
A write the store refuses for a full disk (StoreFull) leaves memory untouched and makes the
service unready until a store write (a request's, or the readiness probe's) succeeds again.
CPU work that grows with a batch (planning a registration, contamination scans) runs off the
event loop.

On a shared store (PostgreSQL, several replicas) every write also holds the store's write lock,
under which the changes other replicas logged are applied first (``_writing``); a follower task
applies them between writes too (``_follow``), woken by the store or after POLL_SECONDS. Another
task prunes the store's history past LOG_RETENTION_SECONDS (``_prune``); a replica whose
position is older than what is kept reloads its whole state from the live documents
(``_reload``), not ready meanwhile. The index is compacted in the background once removed
documents hold as many slots as live ones (``_compact``).

With a persistent index served (``Settings.index``, ``served.ServedIndex``), every lookup also
looks the signatures up in it by key (off the event loop): its documents are matched by the
same rule as the service's own, the ones a document of the service's matches are linked into
the in-memory index (``ServiceIndex.plan``'s ``indexed`` rows: clusters may hold them), and its
ids are registered documents that the service reads only (409 for PUT and DELETE). The
service's own documents are written into it in turn (``Flusher``, app/service/flush.py: by size,
by age and at shutdown; on a shared store one replica at a time); the rows it wrote are its
documents (the store's document of an id wins), those of documents deleted since are hidden
(``ServedIndex.hidden``) until the next flush deletes them, and a flushed document whose row a
newer version deleted or replaced is deleted here too (``_drop_overruled``: the index is the
truth for flushed documents). The parts its flushes add are compacted in the background
(``Compactor``, app/service/compaction.py); a refresh reads no row a compaction only moved.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, NamedTuple, TypeVar

import numpy as np
from numpy.typing import NDArray

from neardup.app.config import Settings
from neardup.app.service.cluster_reads import ClusterSlice
from neardup.app.service.cluster_sync import sync_clusters
from neardup.app.service.clusters import ClusterWrite
from neardup.app.service.compaction import Compactor, deleted_between, linked_parts
from neardup.app.service.errors import (
    Conflict,
    IndexUnavailable,
    LogPruned,
    NotFound,
    OutOfReach,
    ProtectScopeNeeded,
    QuotaExceeded,
    SettingsChanged,
    StoreFull,
    StoreUnavailable,
    json_limits,
)
from neardup.app.service.faults import faulted
from neardup.app.service.flush import Flusher, Mark
from neardup.app.service.index import Found, Plan, Removal, ServiceIndex, merged
from neardup.app.service.limits import BatchLimits, Budgets, ProbeLimiter
from neardup.app.service.pool import SignaturePool
from neardup.app.service.served import (
    Near,
    ServedIndex,
    linking_plan,
    matched_rows,
    matched_rows_plan,
)
from neardup.app.service.store import (
    PRUNE_BATCH,
    Change,
    ProtectedSetRow,
    Store,
    StoredDoc,
    lock_settings,
    open_store,
    queued_call,
)
from neardup.core.engine import (
    ContaminationReport,
    CorpusError,
    DecontMode,
    DecontParams,
    Doc,
    DocIndex,
    DuplicateIdError,
    IndexPart,
    JSONBudget,
    MinhashParams,
    NeardupError,
    ParameterError,
    ProtectedFormat,
    ProtectedSet,
    Protection,
    Thresholds,
    WorkerError,
    apply_mode,
    charged_words,
    collision_message,
    deleted_since,
    drop_rule,
    lsh_probability,
    parse_protected_set,
    piece_collision,
    protected_as_jsonl,
    same_json,
    text_digest,
)

__all__ = ["DecontRequest", "Hits", "NewDoc", "Registered", "Service"]

log = logging.getLogger("neardup")
_T = TypeVar("_T")

#: Reads of the index off the event loop that a write may overlap before one waits for writers.
READ_ATTEMPTS = 3
#: A cluster's members read whole (the cluster pages of the web interface): no limit.
_EVERY = 1 << 40
#: Documents read from the store at a time while recovering.
RECOVERY_CHUNK = 50_000
#: Flushed documents the index overruled (``_drop_overruled``) deleted in one store write (one
#: transaction, one round of the write lock): bounded, so writers and readers wait at most
#: one such batch, whatever the number of rows a version deleted.
OVERRULED_BATCH = 1000
#: While the disk is full, readiness probes the store for room at most this often.
PROBE_INTERVAL = 1.0
#: A replica on a shared store looks for other replicas' changes at least this often.
POLL_SECONDS = 0.5
#: A replica prunes the shared store's history at least this often (more often for a retention
#: window under four times this).
PRUNE_SECONDS = 60.0
#: What a kept document (or cut piece) of a decontamination answer may hold besides its text, as
#: Python objects and as JSON: its ``meta.decontamination``, every list at most MAX_LISTED long.
DECONT_META_BYTES = 4096


@dataclass(frozen=True)
class NewDoc:
    """A document as registered: id, text, meta."""

    id: str
    text: str
    meta: dict[str, Any]


@dataclass(frozen=True)
class Registered:
    """One result of a registration, in request order: ``matches`` counts every confirmed
    earlier match and lists the best MAX_MATCHES."""

    id: str
    cluster: str
    status: Literal["created", "unchanged", "duplicate", "replaced"]
    matches: Found


@dataclass
class _State:
    """What a replica holds in memory, as read from the store (``Service._read_state``)."""

    index: ServiceIndex
    protected: dict[str, ProtectedSet]
    set_bytes: dict[str, int]
    broken_sets: dict[str, str]
    position: int | None
    #: a shared store's flush state and index deletes, read in the same snapshot
    #: (``Flusher.read``); None on an embedded store or without flushing
    flush: tuple[dict[str, str], list[tuple[int, str, bytes, int]]] | None = None


def _release_free_memory() -> None:
    """Hand the heap that recovery's temporaries freed back to the OS (glibc keeps it otherwise,
    about 130 bytes a document at 1M documents); a no-op where there is no glibc."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class Service:
    """Everything the routes call. Create with ``await Service.start(settings)``."""

    def __init__(self, settings: Settings, store: Store, pool: SignaturePool) -> None:
        self.settings = settings
        self.params = settings.params
        self.store = store
        self.pool = pool
        self.index = ServiceIndex(self.params, settings.max_matches)
        #: The persistent index served read only (``--index``), opened at start; or None.
        self.served: ServedIndex | None = None
        self.protected: dict[str, ProtectedSet] = {}
        self._set_bytes: dict[str, int] = {}  # the UTF-8 size of every protected set's file
        #: stored sets that failed to parse at recovery, with why (replace or delete them)
        self.broken_sets: dict[str, str] = {}
        self._lock = asyncio.Lock()
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store")
        #: the store's cluster reads, on their own connection: they never wait for a write
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-reads")
        self.limits = BatchLimits(settings)
        #: contamination checks per caller: keys with the protect scope by texts, others by
        #: words checked (``_charge``)
        self.budgets = Budgets(store)
        self.probes = ProbeLimiter(settings.contamination_texts_per_minute, self.budgets)
        self.word_probes = ProbeLimiter(
            settings.contamination_words_per_minute,
            self.budgets,
            unit="words",
            setting="NEARDUP_CONTAMINATION_WORDS_PER_MINUTE",
        )
        #: the clusters and duplicates the store counted last (``read_stats``)
        self._cluster_counts = {"clusters": 0, "duplicates": 0}
        #: a cluster page's derived rows (app.service.views), keyed by (index version, root):
        #: one cluster at a time, recomputed after any write
        self.cluster_pages: dict[tuple[int, str], object] = {}
        self.recovery_seconds = 0.0
        #: Why the last store write failed for lack of room (None once a write succeeds).
        self.store_full: str | None = None
        self._probed = 0.0
        #: The served index's manifest read while it is ``down`` (``unready_reason``), in the
        #: background: a storage away may take its client's retries to answer.
        self._index_probe: asyncio.Task[None] | None = None
        self._index_probed = 0.0
        self._follower: asyncio.Task[None] | None = None
        #: The last entry of a shared store's log that the index reflects (None: no log).
        self.log_position: int | None = None
        self._listen = ThreadPoolExecutor(max_workers=1, thread_name_prefix="listen")
        #: The pool's warm-up, started with the service (``warm_up``).
        self._warming: asyncio.Task[None] | None = None
        #: Why this replica answers no more: the store's answer settings were changed
        #: (``neardup store-settings``) since it started with the old ones (None: they hold).
        self.settings_changed: str | None = None
        #: When this replica last read the shared store's log (a write's or the follower's):
        #: how stale its answers may be (``log_lag``).
        self._synced = time.monotonic()
        #: The index's compaction, running in the background (``_compact_soon``).
        self._compacting: asyncio.Task[None] | None = None
        #: Flushed documents leaving memory, in the background (``evict_soon``).
        self._evicting: asyncio.Task[None] | None = None
        #: How many times the index was compacted since the start.
        self.compactions = 0
        #: The task reading the served index's manifest every INDEX_REFRESH seconds.
        self._refresher: asyncio.Task[None] | None = None
        #: The history pruning task (a shared store's), and the rows it removed so far.
        self._pruner: asyncio.Task[None] | None = None
        self.pruned = 0
        #: Why this replica is reloading its state from the live documents (its position in
        #: the log is older than the entries kept), and how many times it did.
        self.reloading: str | None = None
        self.reloads = 0
        #: Flushing into the served index (app/service/flush.py), made at start when the
        #: service flushes, serves an index on a shared store (another replica may flush), or
        #: its store flushed before (its rows are the service's whatever the settings now);
        #: None otherwise.
        self.flusher: Flusher | None = None
        #: The index's parts compacted in the background (app/service/compaction.py), made at
        #: start when the service flushes and COMPACT_ROWS is set; None otherwise.
        self.compactor: Compactor | None = None
        self._refreshing = asyncio.Lock()

    @classmethod
    async def start(cls, settings: Settings, store: Store | None = None) -> Service:
        """Open the store (refusing other index parameters), recover the index, start the pool.

        The pool's workers start (spawn, import, load the compiled kernels) while the index is
        recovered, and are not waited for: a request's chunks queue behind their start
        (``warm_up`` waits for them).

        ``store``: one already open (``neardup serve`` passes the one it checked, so the data
        directory stays locked from the check on); it is closed if starting fails.
        """
        store = open_store(settings) if store is None else store
        try:
            store.ensure_params(settings.params.store_params())
            settings = lock_settings(store, settings)
            pool = SignaturePool(settings.workers, settings.params)
        except BaseException:
            store.close()
            raise
        service = cls(settings, store, pool)
        service._warming = asyncio.create_task(service._warm())
        try:
            # Recovery is CPU work: off the event loop, so the server answers /readyz meanwhile.
            await asyncio.to_thread(service._recover)
            await service._store_clusters()
        except BaseException:
            await service._stop_warming()
            pool.close()
            store.close()
            raise
        if service.served is not None and settings.index_refresh > 0:
            service._refresher = asyncio.create_task(service._refresh_every())
        if service.flusher is not None and service.flushing:
            service.flusher.start_background()
            if settings.compacts:
                service.compactor = Compactor(service, service.flusher)
                service.compactor.start()
        if store.position() is not None:  # a shared store: follow the other replicas' changes
            service._synced = time.monotonic()  # the recovery's snapshot; warming up took a while
            service._follower = asyncio.create_task(service._follow())
            service._pruner = asyncio.create_task(service._prune())
        return service

    async def warm_up(self) -> None:
        """Wait until every signature worker has started and loaded its kernels (from numba's
        cache after the first use; compiled on the first), which ``start`` began.

        Raises:
            WorkerError: a worker died while starting.
        """
        if self._warming is not None:
            await asyncio.shield(self._warming)

    async def _warm(self) -> None:
        started = time.perf_counter()
        await self.pool.start()
        log.info(
            "workers ready workers=%d compiled=%s seconds=%.3f",
            self.pool.workers, self.pool.compiled, time.perf_counter() - started,
        )  # fmt: skip

    async def _stop_warming(self) -> None:
        """Cancel the warm-up if it still runs; its failure, if any, was the caller's to see."""
        if self._warming is None:
            return
        self._warming.cancel()
        with suppress(asyncio.CancelledError, WorkerError):
            await self._warming

    async def _io_call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the store's thread, its STORE_TIMEOUT counted from now."""
        args = (time.monotonic(), fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._io, queued_call, *args)

    async def _read_call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` (a store read on its read connection) on the read thread, its
        STORE_TIMEOUT counted from now."""
        args = (time.monotonic(), fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._reads, queued_call, *args)

    async def _write(self, fn: Callable[..., _T], *args: Any) -> _T:
        """A store write: StoreFull is remembered (the service is unready) until one succeeds."""
        try:
            result = await self._io_call(fn, *args)
        except StoreFull as exc:
            if self.store_full is None:
                log.warning("store full, not ready until a write succeeds: %s", exc)
            self.store_full = str(exc)
            raise
        if self.store_full is not None:
            log.info("store writable again, ready")
            self.store_full = None
        return result

    def index_state(self) -> str | None:
        """``up``, or ``down`` since a read of the served index failed for its storage (it is
        not ready: ``index unavailable``) until one succeeds; None without a served index."""
        if self.served is None:
            return None
        return "up" if self.served.down is None else "down"

    def store_state(self) -> str:
        """``up``, or ``down`` while the shared store cannot be reached (or refuses this role):
        known from the last call that tried it, and the follower tries every POLL_SECONDS."""
        return "up" if self.store.available() else "down"

    async def unready_reason(self) -> str | None:
        """Why the service should not take traffic ("store unavailable", "disk full"), or None.
        While the disk is full the store is probed for room (at most every PROBE_INTERVAL,
        never behind a write that holds the lock), so readiness returns with the space."""
        if self.settings_changed is not None:
            return "settings changed"
        if self.reloading is not None:
            return "reloading"
        if not self.store.available():
            return "store unavailable"
        if self.log_lag() > POLL_SECONDS + self.settings.store_timeout:
            return "behind"
        if self.served is not None and self.served.down is not None:
            self._probe_index()
            return "index unavailable"
        if self.store_full is None:
            return None
        now = time.monotonic()
        if not self._lock.locked() and now - self._probed >= PROBE_INTERVAL:
            self._probed = now
            async with self._lock:
                with suppress(StoreFull):
                    await self._write(self.store.probe)
        return None if self.store_full is None else "disk full"

    def _probe_index(self) -> None:
        """Read the served index's manifest in the background (at most every PROBE_INTERVAL,
        one at a time): readiness returns once it is read (``ServedIndex.reading``)."""
        running = self._index_probe is not None and not self._index_probe.done()
        now = time.monotonic()
        if running or self.served is None or now - self._index_probed < PROBE_INTERVAL:
            return
        self._index_probed = now

        async def probe(served: ServedIndex) -> None:
            with suppress(IndexUnavailable):
                await asyncio.to_thread(served.probe)

        self._index_probe = asyncio.create_task(probe(self.served))

    def log_lag(self) -> float:
        """Seconds since this replica last read the shared store's log (0 without one). It is
        read every POLL_SECONDS, each read within STORE_TIMEOUT: past their sum the replica
        may be missing other replicas' changes, and is not ready ("behind")."""
        if self.log_position is None:
            return 0.0
        return time.monotonic() - self._synced

    def _recover(self) -> None:
        """Rebuild the index and the protected sets from the store, logging its progress."""
        started = time.perf_counter()
        url = self.settings.index_url
        if url is not None:  # the manifest only: no work per indexed document
            # The data directory's index (INDEX unset) is created by the first start.
            self.served = ServedIndex.open(url, self.params, create=self.settings.index is None)
            log.info(
                "serving the index version=%d documents=%d", self.served.version, self.served.rows
            )
            if self.flushing or self.store.position() is not None or self._flushed_before():
                # A replica on a shared store that does not flush follows the others' flushes;
                # a service that flushed before, its flushed rows (the one rule, deletes).
                self.flusher = Flusher(self, self.served)
                self.flusher.start(resolve=self.flushing)
            if not self.flushing:
                log.info("the index is served read only: FLUSH_ROWS and FLUSH_SECONDS are 0")
        else:  # a shared store: replicas must read one index, which no default could name
            log.warning(
                "no index (NEARDUP_INDEX): every document is held in memory on each replica; "
                "set it to a location every replica reads (docs/api.md, INDEX)"
            )
        self._install(self._read_state())
        self.recovery_seconds = time.perf_counter() - started
        log.info(
            "recovered documents=%d protected_sets=%d seconds=%.3f",
            len(self.index), len(self.protected), self.recovery_seconds,
        )  # fmt: skip

    def _read_state(self) -> _State:
        """The index and the protected sets as the store holds them (its live documents), and
        the log position they reflect: one snapshot, read in the calling thread."""
        num_perm = self.params.num_perm
        index = ServiceIndex(self.params, self.settings.max_matches)
        with self.store.recovering():  # one snapshot, whose log position is then ours
            flush = None if self.flusher is None else self.flusher.read()
            mark = None if self.flusher is None else self.flusher.mark
            if flush is not None:  # a shared store's, read in this snapshot
                mark = Mark.from_json(flush[0].get("committed")) or Mark()
            # Numbers flushed are never given again (the store's largest may have been deleted).
            flushed = -1 if mark is None else mark.through
            extent = max(self.store.extent(), flushed + 1)
            total = self.store.document_count()
            # Flushed documents are the index's (and their clusters the tables'): only the
            # memtable is read, unless the tables are to be filled from memory (once).
            after = flushed if self.store.clusters_filled() else -1
            count = self.store.document_count(after) if after >= 0 else total
            log.info("recovering: reading up to %d documents from the store", count)
            chunks = (
                (nums, ids, np.frombuffer(b, dtype="<u4").reshape(-1, num_perm).astype(np.uint32))
                for nums, ids, b in self.store.iter_signatures(RECOVERY_CHUNK, after)
            )
            every = self.settings.recovery_log_seconds
            index.load(count, extent, _recovery_progress(chunks, count, every), total)
            sets = self.store.protected_sets()
            self._link_all(index)
        _release_free_memory()
        state = _State(index, {}, {}, {}, None, flush)
        for row in sets:
            state.set_bytes[row.name] = len(row.body.encode("utf-8"))
            try:
                state.protected[row.name] = _parse_stored(row, self.params)
            except NeardupError as exc:  # one bad set must not keep the service down
                state.broken_sets[row.name] = str(exc)
                log.error("protected set %r cannot be parsed, left out: %s", row.name, exc)
        state.position = self.store.position()
        return state

    def _install(self, state: _State) -> None:
        """Serve from ``state`` from now on (one synchronous step: no reader sees half)."""
        if state.index.version <= self.index.version:  # caches keyed by version: invalidated
            state.index.version = self.index.version + 1
        self.index = state.index
        self.protected, self._set_bytes = state.protected, state.set_bytes
        self.broken_sets = state.broken_sets
        self.log_position = state.position
        self._synced = time.monotonic()
        if state.flush is not None and self.flusher is not None:
            self.flusher.load(state.flush)

    def _link_all(self, index: ServiceIndex) -> None:
        """Link into a freshly loaded ``index`` the indexed documents its documents match (a
        lookup by key of every document of the service's: the cost grows with them, not with
        the served index)."""
        served = self.served
        if served is None:
            return
        count = index.held
        if self.flusher is not None:  # the memtable's clusters, whole (flushed members too)
            index.fault_in(faulted(self.store, served, index, index.documents_since(0)))
        for lo in range(0, count, RECOVERY_CHUNK):
            sigs = index.slot_signatures(lo, min(lo + RECOVERY_CHUNK, count))
            near = served.near(sigs, self.params.threshold)
            if self.flusher is not None:  # what they match that memory does not hold
                index.fault_in(faulted(self.store, served, index, near.sigs))
            plan = linking_plan(index, [], sigs[:0], near)
            if plan.ids:
                index.apply(plan)
        if index.linked:
            log.info("linked indexed documents=%d", index.linked)

    async def _refresh_every(self) -> None:
        """Serve the index's new versions: its manifest read every INDEX_REFRESH seconds (off
        the loop); a failure is logged and the version served kept."""
        while True:
            await asyncio.sleep(self.settings.index_refresh)
            try:
                await self.refresh_index()
            except IndexUnavailable:  # logged once by the index (and again once it is back)
                pass
            except Exception:
                log.exception("could not serve the index's new version; serving the one read")

    async def refresh_index(self) -> bool:
        """Serve the index's latest version if it is newer (True). The rows of the parts it
        adds are read a batch at a time (memory bounded by a batch) and looked up among the
        service's documents off the write lock, as a reader (writes go on meanwhile); only the
        matched rows are kept. Then, under the lock, the documents written meanwhile (looked
        up in the version served then) are looked up in the new one, the matched rows linked
        as a start links them (checked again: a document deleted meanwhile links nothing),
        and the new version is served. Linked indexed documents the new version deletes
        (deletion vectors: ``neardup index delete``, ``--recrawled replace``) are taken out
        first, and an id it holds again (a replace) is linked anew if a document here matches
        it. Parts it drops (a compaction, a rewrite) are no longer read; documents linked from
        them stay linked until the next start."""
        async with self._refreshing:  # the refresh task's and a flush's: one at a time
            return await self._refresh_index()

    async def _refresh_index(self) -> bool:
        served = self.served
        if served is None:
            return False
        latest = await asyncio.to_thread(served.newer, self.params)
        flusher = self.flusher
        if latest is None:
            return False
        # A flush another replica committed: served once its commit is applied, or now if
        # its flusher died before recording it (adopted here).
        if (
            flusher is not None
            and not flusher.may_serve(latest)
            and not await flusher.adopt(latest)
        ):
            return False
        # Parts this store flushed hold its own documents (or hidden ones), compactions rows
        # known already: nothing to link (app/service/compaction.py).
        store_id = "" if flusher is None else flusher.store_id
        added = await asyncio.to_thread(linked_parts, served.index, latest, store_id)
        deleted = await asyncio.to_thread(deleted_between, served.index, latest)
        if deleted is None:  # deletes in parts compacted and removed: every own id checked
            log.warning("deletes between versions %d and %d are lost to a compaction: the "
                        "service's documents are checked against the index by id",
                        served.version, latest.version)  # fmt: skip
            known = await asyncio.to_thread(deleted_since, served.index, latest)
            deleted = sorted({*known, *await self._io_call(_own_ids, self.store)})
        while True:
            since, reloads = self.index.next_number, self.reloads
            ids, sigs, flushed_hits = await self._matched_new_rows(latest, added)
            async with self._lock:
                if self.reloads != reloads:  # the index was rebuilt meanwhile: look again
                    if served.version >= latest.version:  # (and the served index read again)
                        return False
                    continue
                await self._fault_in([*deleted, *flushed_hits])
                gone = [i for i in deleted if self.index.is_indexed(i)]
                touched = list(gone)
                for doc_id in gone:  # no longer in the index: not answered from memory either
                    removal = self.index.plan_removal(doc_id)
                    touched += [self.index.id_of(m) for m in removal.group]
                    self.index.apply_removal(removal)
                plan = await asyncio.to_thread(
                    self._refresh_plan, served, latest, since, ids, sigs, gone
                )
                if plan is not None:
                    self.index.apply(plan)
                    touched += plan.ids
                served.index = latest
                if flusher is not None:
                    flusher.settle()
                if touched:  # the linked documents' clusters, as a start writes them
                    await self._sync_linked(touched)
                break
        log.info(
            "serving the index version=%d documents=%d linked=%d",
            latest.version, latest.rows, self.index.linked,
        )  # fmt: skip
        if flusher is not None and deleted:
            await self._drop_overruled(flusher, latest, deleted)
        if self.compactor is not None:
            self.compactor.soon()
        return True

    async def _drop_overruled(self, flusher: Flusher, latest: DocIndex, deleted: list[str]) -> None:
        """The index is the truth for flushed documents: one of the service's own documents
        whose flushed row ``latest`` deleted (``neardup index delete``), or replaced by another
        text (``--recrawled replace``), is deleted here too, as a DELETE would (every replica
        follows; the store's delete is idempotent across replicas), so its id is answered by
        the index alone: not at all, or by the batch's new row once the flush that follows
        (started now) settles the delete. Deleted OVERRULED_BATCH at a time, a store write
        each (one log entry per document for the replicas)."""
        numbered = await self._io_call(self.store.numbered, deleted)
        own = {i: n for i, (n, _) in numbered.items() if n <= flusher.served_through}
        if not own:
            return
        stored = await self._io_call(self.store.digests, sorted(own))
        rows = await asyncio.to_thread(latest.id_digests, sorted(own))
        overruled = sorted(i for i in own if i in stored and rows.get(i) != stored[i][:16])
        for lo in range(0, len(overruled), OVERRULED_BATCH):
            batch = overruled[lo : lo + OVERRULED_BATCH]
            async with self._writing():
                await self._fault_in(batch)  # (flushed: memory may hold them no more)
                # deleted or replaced meanwhile (here, or by another replica): left alone
                batch = [i for i in batch if self.index.number(i) == own[i] and i in self.index]
                if not batch:
                    continue
                nums = [own[i] for i in batch]
                # Each cluster they leave is regrouped once (their removals interact).
                removals = await asyncio.to_thread(self.index.plan_removals, batch)
                clusters = await asyncio.to_thread(self.index.removal_write, removals)
                if flusher.settles:  # hidden until the flush that follows settles it
                    await self._write(self.store.delete_documents, nums, clusters)
                    for doc_id, num in zip(batch, nums, strict=True):
                        self._hide_flushed(doc_id, num)
                else:  # no flush follows: nothing to hide, nor to record for one
                    await self._write(flusher.forget, nums, clusters)
                self.index.apply_removals(removals)
            replaced = sum(1 for i in batch if i in rows)
            log.info(
                "documents deleted=%d (%r first): the index version=%d deleted %d of their "
                "flushed rows and replaced %d",
                len(batch), batch[0], latest.version, len(batch) - replaced, replaced,
            )  # fmt: skip
        if overruled and self.flushing:
            flusher.soon(now=True)

    async def _matched_new_rows(
        self, latest: DocIndex, added: list[IndexPart]
    ) -> tuple[list[str], NDArray[np.uint32], list[str]]:
        """The rows of ``added`` (parts of ``latest``) that a document of the service's own
        matches: read a batch at a time, each looked up as a reader (``read_index``) among
        those in memory, and among the flushed ones in ``latest`` (when they leave memory);
        and the ids of those flushed ones (whose clusters the linking brings back)."""
        ids: list[str] = []
        kept = [np.empty((0, self.params.num_perm), dtype=np.uint32)]
        hits: set[str] = set()
        batches = latest.signature_batches(added)
        while (batch := await asyncio.to_thread(next, batches, None)) is not None:
            rows = set(await self.read_index(partial(_matched_rows, *batch, self.served)))
            if self.flusher is not None and self.served is not None:
                near = await asyncio.to_thread(
                    self.served.near, batch[1], self.params.threshold, latest
                )
                found = {i for hits_k in near.rows for i, _ in hits_k} - set(batch[0])
                own = await self._io_call(self.store.numbered, sorted(found))
                for k, row in enumerate(near.rows):
                    matched = [i for i, _ in row if i in own and i != batch[0][k]]
                    if matched:
                        rows.add(k)
                        hits.update(matched)
            order = sorted(rows)
            ids += [batch[0][k] for k in order]
            kept.append(batch[1][order])
        return ids, np.concatenate(kept), sorted(hits)

    def _refresh_plan(
        self,
        served: ServedIndex,
        latest: DocIndex,
        since: int,
        ids: list[str],
        sigs: NDArray[np.uint32],
        gone: Sequence[str] = (),
    ) -> Plan | None:
        """The plan linking the rows ``ids``/``sigs`` found by ``_matched_new_rows``, the rows
        of ``latest`` (a newer version of ``served``) that documents numbered ``since`` or more
        match, and the rows ``latest`` holds of the ids ``gone`` (linked documents it deleted:
        a replace's new row) that a document here matches. Blocking: off the loop, under the
        write lock."""
        again = latest.id_signatures([i for i in gone if i not in set(ids)]) if gone else {}
        if again:
            more = sorted(again)
            ids = [*ids, *more]
            sigs = np.concatenate([sigs, *(again[i][None, :] for i in more)])
        recent = self.index.documents_since(since)
        if recent:
            near = served.near(self.index.signatures_of(recent), self.params.threshold, latest)
            seen = set(ids)
            more = [i for i in sorted(near.sigs) if i not in seen]
            ids = [*ids, *more]
            sigs = np.concatenate([sigs, *(near.sigs[i][None, :] for i in more)])
        if not ids:
            return None
        return matched_rows_plan(self.index, ids, sigs.astype(np.uint32))

    def _near(self, sigs: NDArray[np.uint32], threshold: float | None = None) -> Near | None:
        """What ``sigs`` match in the served index (None without one). Blocking: off the loop."""
        if self.served is None:
            return None
        return self.served.near(sigs, self.params.threshold if threshold is None else threshold)

    async def _looked_up(
        self, ids: list[str], sigs: NDArray[np.uint32]
    ) -> tuple[Plan, Near | None]:
        """``ServiceIndex.plan`` of new documents with the clusters of the documents they match
        in the index brought back (``_fault_in``) and the indexed documents in none linked in
        first; and what they matched there. Under the write lock."""
        near = await self._near_faulted(sigs)
        plan = await asyncio.to_thread(linking_plan, self.index, ids, sigs, near)
        return plan, near

    async def _near_faulted(self, sigs: NDArray[np.uint32]) -> Near | None:
        """``_near``, with the clusters of what it found brought back into memory. Under the
        write lock."""
        near = await asyncio.to_thread(self._near, sigs)
        if near is not None:
            await self._fault_in(near.sigs)
        return near

    async def _fault_in(self, ids: Iterable[str]) -> None:
        """Bring back into memory the clusters of ``ids`` that it does not hold, and the
        service's own flushed documents among them (app/service/faults.py): every document a
        write's plan reads is then in memory. Only a service whose documents are flushed lets
        them leave memory. Under the write lock."""
        served, index = self.served, self.index
        if served is None or self.flusher is None:
            return
        wanted = [i for i in ids if i not in index]
        if wanted:
            found = await self._io_call(faulted, self.store, served, index, wanted)
            if found:
                # Grows with the clusters brought back (their classes and buckets): off the loop.
                await asyncio.to_thread(self.index.fault_in, found)

    def _replace_clusters(
        self, removal: Removal, doc_id: str, sigs: NDArray[np.uint32], near: Near | None
    ) -> ClusterWrite:
        """What a replace changes in the store's clusters: ``removal``, then the new text's
        plan (made before the removal). Blocking: off the loop, under the write lock."""
        return self.index.cluster_write(linking_plan(self.index, [doc_id], sigs, near), removal)

    async def _store_clusters(self) -> None:
        """At start: fill the store's cluster tables from the recovered clusters if it was made
        before them (once, O(N)); else write the clusters of the linked indexed documents
        (``_store_relinked``)."""
        if not await self._io_call(self.store.clusters_filled):
            async with self._writing():
                rows = await asyncio.to_thread(lambda: list(self.index.all_clusters()))
                if await self._write(self.store.fill_clusters, rows):
                    log.info("store clusters filled clusters=%d", len(rows))
            return
        async with self._lock:
            await self._store_relinked()

    async def _store_relinked(self, ids: Sequence[str] | None = None) -> None:
        """Write the clusters of linked indexed documents as this replica holds them
        (``sync_clusters``): of ``ids`` (documents a refresh or a delete linked or unlinked),
        or by default, after the state was read from the store (a start, a reload), whose
        ``_link_all`` links them anew, of the linked ones and of those the store holds as
        linked (linked before, maybe not now). Under the store's write lock, the other
        replicas' changes applied first, so it is never refused; a replica behind the kept
        log reloads instead (which writes every linked one's). The caller holds this
        process's lock (``_lock``)."""
        if self.served is None:
            return
        try:
            changes = await self._io_call(self.store.lock_writes)
        except LogPruned as exc:
            if self.reloading is not None:  # (the reload's own write)
                raise
            await self._reload(exc)
            return
        except SettingsChanged as exc:
            self._settings_changed(exc)
            raise
        try:
            self._synced = time.monotonic()
            await self._apply(changes)
            if ids is None and self.flusher is not None:
                # Only held ones are synced (the others' clusters are the tables'): the store's
                # rows of the held documents' clusters, not every linked member's (O(memory)).
                held = self.index.held_ids()
                stored = await self._io_call(self.store.stored_clusters, held)
                kept = set(held)
                linked = {i for c in stored.values() for i, own in c.members if not own}
                ids = self.index.linked_ids() + sorted(linked & kept)
            elif ids is None:
                ids = self.index.linked_ids() + await self._io_call(self.store.linked_members)
            if self.flusher is not None:  # the others' clusters are the tables' (not held)
                ids = [i for i in ids if i in self.index]
            if ids:  # (a write commits and ends the transaction; else it is rolled back)
                await self._write(sync_clusters, self.store, self.index, ids)
        finally:
            await self._io_call(self.store.unlock_writes)
            self.log_position = self.store.position()

    async def _sync_linked(self, ids: list[str]) -> None:
        """``_store_relinked(ids)`` after a linking (the caller holds ``_lock``); a failure is
        logged (the change it follows is durable; the next start writes them)."""
        try:
            await self._store_relinked(ids)
        except Exception:
            log.exception("could not write the clusters of linked documents; the next start will")

    def _indexed_digests(self, doc_ids: list[str]) -> dict[str, bytes]:
        """The 16-byte text digest of each of ``doc_ids`` that is in the served index."""
        if self.served is None or not doc_ids:
            return {}
        return self.served.digests(doc_ids)

    def _twin(self, doc_id: str) -> NDArray[np.uint32] | None:
        """The signature of the indexed document of id ``doc_id`` (None: none), which the
        service's own document of that id shadows until it is deleted. Blocking: off the loop."""
        return None if self.served is None else self.served.signature(doc_id)

    def _link_twin(self, doc_id: str, sig: NDArray[np.uint32] | None) -> bool:
        """Once the service's own ``doc_id`` is gone, serve the indexed document of that id
        (signature ``sig``; None: none) as a start would: linked if a document here matches
        it (True). Synchronous: one document's plan is bounded by its candidates."""
        if sig is None or doc_id in self.index:
            return False
        plan = matched_rows_plan(self.index, [doc_id], sig[None, :])
        if plan is not None:
            self.index.apply(plan)
        return plan is not None

    def _in_served(self, doc_id: str) -> bool:
        """Whether ``doc_id`` is a document of the served index. Blocking: off the loop."""
        return self.index.is_indexed(doc_id) or bool(self._indexed_digests([doc_id]))

    async def _refuse_indexed(self, doc_id: str, what: str) -> None:
        """Conflict (409) when ``doc_id`` is a document of the served index, which the service
        reads only (the URL is never named: it may hold credentials)."""
        if self.served is None or self.index.number(doc_id) is not None:
            return
        if await asyncio.to_thread(self._in_served, doc_id):
            raise Conflict(
                f"cannot {what} {doc_id!r}: it is in the index the service serves "
                "(neardup serve --index), which the service reads only",
                [doc_id],
            )

    def root(self, doc_id: str, index: ServiceIndex | None = None) -> str:
        """The root of ``doc_id``'s cluster: itself for an indexed document not linked here
        (nothing of the service's matches it: a singleton)."""
        index = self.index if index is None else index
        return index.root_of(doc_id) if doc_id in index else doc_id

    async def _reload(self, why: LogPruned) -> None:
        """Reload the whole state from the store's live documents, as a restart would (the
        caller holds the write lock): this replica's position is older than the log entries
        the store keeps. Not ready ("reloading") until done; it answers from its old state
        meanwhile."""
        if self.reloading is None:
            log.warning("%s: reloading every document from the store; not ready meanwhile", why)
        self.reloading = str(why)
        started = time.perf_counter()
        state = await self._io_call(self._read_state)  # the store's thread: no other call meanwhile
        self._install(state)
        try:  # the documents linked anew: their clusters written, as a start writes them
            await self._store_relinked()
        except (StoreUnavailable, StoreFull, LogPruned):
            log.exception("could not write the clusters of linked documents; the next start will")
        self.reloading = None
        self.reloads += 1
        log.info(
            "reloaded documents=%d log_position=%s seconds=%.3f",
            len(self.index), self.log_position, time.perf_counter() - started,
        )  # fmt: skip

    async def _prune(self) -> None:
        """Prune the shared store's history past LOG_RETENTION_SECONDS, a bounded step
        (PRUNE_BATCH rows) at a time under the write lock, every PRUNE_SECONDS (or a quarter of
        the window)."""
        retention = self.settings.log_retention_seconds
        every = min(PRUNE_SECONDS, retention / 4)
        while True:
            await asyncio.sleep(every)
            try:
                while True:
                    async with self._lock:
                        removed = await self._io_call(self.store.prune, retention, PRUNE_BATCH)
                    self.pruned += removed
                    if removed < PRUNE_BATCH:
                        break
            except StoreUnavailable:
                continue  # the database is away: prune when it is back
            except Exception:
                log.exception("could not prune the store's history; trying again later")

    async def close(self) -> None:
        """Flush into the served index (bounded: a failure is logged, the store holds every
        document), stop the pool and close the store (after in-flight requests finished)."""
        await self._stop_warming()
        if self.compactor is not None:  # abandoned: the flush at shutdown goes first
            await self.compactor.close()
        if self.flusher is not None:
            await self.flusher.close(flush=self.flushing)
        if self._refresher is not None:
            self._refresher.cancel()
            with suppress(asyncio.CancelledError):
                await self._refresher
        if self._pruner is not None:
            self._pruner.cancel()
            with suppress(asyncio.CancelledError):
                await self._pruner
        for task in (self._compacting, self._evicting, self._index_probe):
            if task is not None:
                with suppress(Exception):
                    await task
        if self._follower is not None:
            self._follower.cancel()
            with suppress(asyncio.CancelledError):
                await self._follower
        await asyncio.to_thread(self._listen.shutdown, True)
        await asyncio.to_thread(self._reads.shutdown, True)
        async with self._lock:
            self.pool.close()
            await asyncio.to_thread(self.budgets.close)
            await self._io_call(self.store.close)
        self._io.shutdown(wait=True)

    # --- documents ----------------------------------------------------------------------------

    async def signatures(self, texts: Sequence[str]) -> NDArray[np.uint32]:
        """Signatures of a batch, computed in the pool."""
        self.limits.check_texts(texts)
        with self.limits.admit():
            return await self.pool.signatures(texts)

    async def register(self, docs: Sequence[NewDoc], *, if_new: bool = False) -> list[Registered]:
        """Register a batch: durable first, then in memory; results in request order.

        ``if_new``: a document with a confirmed match (registered, or earlier in the batch and
        registered by it) is not registered but answered ``duplicate`` with its matches; decided
        under the write lock, so of racing copies exactly one is registered. The batch's own
        faults (a repeated id, then the limits) are found before it is admitted, as in a
        decontamination: a batch that cannot succeed is never told to retry (Overloaded)."""
        _refuse_repeated(d.id for d in docs)
        self.limits.check_texts([d.text for d in docs])
        with self.limits.admit():
            return await self._register(docs, if_new)

    async def _register(self, docs: Sequence[NewDoc], if_new: bool = False) -> list[Registered]:
        sigs = await self.pool.signatures([d.text for d in docs])
        digests = await asyncio.to_thread(lambda: [text_digest(d.text) for d in docs])
        async with self._writing():
            known = await self._io_call(self.store.digests, [d.id for d in docs])
            indexed = await asyncio.to_thread(
                self._indexed_digests, [d.id for d in docs if d.id not in known]
            )
            conflicts = [
                d.id
                for d, h in zip(docs, digests, strict=True)
                if known.get(d.id, h) != h or indexed.get(d.id, h[:16]) != h[:16]
            ]
            if conflicts:
                raise Conflict(
                    f"already registered with a different text: {', '.join(conflicts[:10])}"
                    + (f" and {len(conflicts) - 10} more" if len(conflicts) > 10 else ""),
                    conflicts,
                )
            fresh = [i for i, d in enumerate(docs) if d.id not in known and d.id not in indexed]
            # Planning reads the index only; the lock keeps every writer out meanwhile, so it
            # can run off the event loop while queries keep being answered from the index.
            fresh_ids = [docs[i].id for i in fresh]
            left: dict[int, Found] = {}
            if if_new:
                plan, left = await self._plan_if_new(fresh_ids, sigs[fresh])
            else:
                plan, _ = await self._looked_up(fresh_ids, sigs[fresh])
            duplicates = {docs[fresh[k]].id: found for k, found in left.items()}
            fresh = [i for k, i in enumerate(fresh) if k not in left]
            rows = [
                self._stored(docs[i], plan.start + k, digests[i], sigs[i])
                for k, i in enumerate(fresh)
            ]
            clusters = await asyncio.to_thread(self.index.cluster_write, plan)
            await self._write(self.store.add_documents, rows, clusters)
            self.index.apply(plan)
            found = dict(zip(plan.ids, plan.found, strict=True))
            # Documents re-sent unchanged (a resumed ingest, a retry): their matches among the
            # documents before them, in one pass off the event loop (the lock keeps writers out).
            again = [d.id for d in docs if d.id in known]
            await self._fault_in([*again, *indexed])
            if again:
                matched = await asyncio.to_thread(self.index.earlier_matches, again)
                found.update(zip(again, matched, strict=True))
            # An indexed document sent again: nothing of the index comes before it here.
            found.update((i, Found(0, [])) for i in indexed)
            return [
                self._duplicate(d, duplicates[d.id])
                if d.id in duplicates
                else self._result(d, found[d.id], created=d.id not in known and d.id not in indexed)
                for d in docs
            ]

    async def _plan_if_new(
        self, ids: list[str], sigs: NDArray[np.uint32]
    ) -> tuple[Plan, dict[int, Found]]:
        """``ServiceIndex.plan_if_new``, the indexed documents not linked here counted as
        registered matches (a document with one is a duplicate). Under the write lock."""
        near = await self._near_faulted(sigs)
        index, cap = self.index, self.settings.max_matches
        extra = None if near is None else [near.found(k, cap, index) for k in range(len(ids))]
        return await asyncio.to_thread(index.plan_if_new, ids, sigs, extra)

    def _duplicate(self, doc: NewDoc, found: Found) -> Registered:
        """A document left out under ``if_new``: its cluster is its best match's."""
        return Registered(doc.id, self.root(found.best[0][0]), "duplicate", found)

    def _stored(
        self, doc: NewDoc, num: int, text_digest: bytes, sig: np.ndarray[Any, Any]
    ) -> StoredDoc:
        text = doc.text if self.settings.store_text else None
        return StoredDoc(num, doc.id, text_digest, sig.astype("<u4").tobytes(), doc.meta, text)

    def _result(self, doc: NewDoc, found: Found, *, created: bool) -> Registered:
        """A registered document: ``created`` now (its planned matches) or unchanged (its
        matches among the documents before it)."""
        status: Literal["created", "unchanged"] = "created" if created else "unchanged"
        return Registered(doc.id, self.root(doc.id), status, found)

    async def query(
        self, texts: Sequence[str], threshold: float | None, limit: int | None
    ) -> list[tuple[int, list[tuple[str, float, str]]]]:
        """What registering would report, without registering: per text the count of matches
        and the best as (id, estimate, root). OutOfReach for a threshold below the bands'
        reach (``MinhashParams.query_floor``)."""
        bands, rows, floor = self.params.bands, self.params.rows, self.params.query_floor
        if threshold is not None and threshold < floor:
            chance = lsh_probability(threshold, bands, rows)
            raise OutOfReach(
                f"threshold {threshold} is below what the bands can find: with {bands} bands of "
                f"{rows} rows a pair of similarity {threshold} is a candidate with probability "
                f"{chance:.2f}; ask for at least {floor:.4f} (GET /v1/config: query_threshold_min)"
            )
        sigs = await self.signatures(texts)
        return await self.query_signatures(sigs, threshold, limit)

    async def query_signatures(
        self, sigs: NDArray[np.uint32], threshold: float | None, limit: int | None
    ) -> list[tuple[int, list[tuple[str, float, str]]]]:
        """``query`` of texts of those signatures (the threshold not checked again)."""
        found = await self.read_index(partial(_query_matches, sigs, threshold, limit, self))
        if self.flusher is None:
            return [(n, [(i, e, r or i) for i, e, r in best]) for n, best in found]
        # Matches memory does not hold (flushed, indexed): their roots are the tables'.
        held_not = sorted({i for _, b in found for i, _, r in b if r is None})
        rows = await self._read_call(self.store.read_cluster_rows, held_not)
        return [(n, [(i, e, r or rows.get(i, (i, 0))[0]) for i, e, r in best]) for n, best in found]

    async def indexed_signature(self, doc_id: str) -> NDArray[np.uint32] | None:
        """The signature of ``doc_id`` if it is a document of the served index that is not
        linked here (nothing of the service's matches it); None otherwise."""
        if self.served is None or doc_id in self.index:
            return None
        return await asyncio.to_thread(self._twin, doc_id)

    async def read_index(self, read: Callable[[ServiceIndex], _T]) -> _T:
        """``read(index)`` in a worker thread, as of one version of the index (readers never wait
        for writers): run again if a write changed the index meanwhile (what it saw may mix two
        versions; an error it raised then is discarded), and after READ_ATTEMPTS such tries
        under the write lock."""
        for _ in range(READ_ATTEMPTS):
            index = self.index  # a compaction swaps in another index; this one stays as it is
            version = index.version
            try:
                result = await asyncio.to_thread(read, index)
            except Exception:
                if index.version == version:
                    raise
                continue
            if index.version == version:
                return result
        async with self._lock:
            return await asyncio.to_thread(read, self.index)

    async def document(self, doc_id: str) -> tuple[str, str, dict[str, Any] | None, bool]:
        """(id, cluster root, meta, indexed) of a registered document: one of the service's
        own (the store's), or of the served index (no meta: None; indexed True)."""
        index = self.index
        held = doc_id in index
        # Held: the service's own if it has a number. Not held: flushed (the store's), or in
        # the served index only, or unknown (the store is asked only when documents leave
        # memory). Read on the read connection: never queued behind a write.
        stored = None
        if index.number(doc_id) is not None or (not held and self.flusher is not None):
            stored = await self._read_call(self.store.read_document, doc_id)
        if stored is None:
            if self.served is not None and await asyncio.to_thread(self._in_served, doc_id):
                return doc_id, (await self.root_and_size(doc_id))[0], None, True
            raise NotFound(f"no document {doc_id!r}")
        return doc_id, (await self.root_and_size(doc_id))[0], stored.meta, False

    async def root_and_size(self, doc_id: str) -> tuple[str, int]:
        """The root and size of ``doc_id``'s cluster: memory's if it holds the document, else
        the store's tables (a flushed document, or an indexed one), else itself alone."""
        index = self.index
        if doc_id in index:
            root = index.root_of(doc_id)
            return root, index.size_of(root)
        if self.flusher is None:  # nothing leaves memory: an indexed document in no cluster
            return doc_id, 1
        rows = await self._read_call(self.store.read_cluster_rows, [doc_id])
        return rows.get(doc_id, (doc_id, 1))

    async def signature_of(self, doc_id: str) -> NDArray[np.uint32] | None:
        """The signature of a registered document: memory's, the store's (one of the service's
        own flushed ones) or the served index's; None if unknown."""
        return (await self.member_signatures([doc_id])).get(doc_id)

    def _known(self, doc_id: str) -> int:
        num = self.index.number(doc_id)
        if num is None:
            raise NotFound(f"no document {doc_id!r}")
        return num

    async def texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """The stored texts of those documents (none when STORE_TEXT is off), read on the read
        connection (never queued behind a write)."""
        nums = {n: i for i in doc_ids if (n := self.index.number(i)) is not None}
        flushed = [i for i in doc_ids if i not in self.index]
        if flushed and self.flusher is not None:  # (in memory no more)
            numbered = await self._read_call(self.store.read_numbered, flushed)
            nums.update((num, i) for i, (num, _) in numbered.items())
        found = await self._read_call(self.store.read_texts, list(nums))
        return {nums[n]: text for n, text in found.items()}

    async def replace(self, doc: NewDoc, meta_given: bool = True) -> Registered:
        """Register ``doc`` in place of the document of its id, on purpose: a new text is
        stored durably under a new document number (as if registered now), then the old one
        leaves the index (its cluster regrouped) and the new one joins it; ``matches`` are then
        its matches among every other document. An unknown id is registered (``created``); the
        same text and meta is ``unchanged``. ``meta_given`` False keeps the stored meta."""
        self.limits.check_texts([doc.text])
        with self.limits.admit():
            [sig] = await self.pool.signatures([doc.text])
            digest = text_digest(doc.text)
            async with self._writing():
                await self._fault_in([doc.id])
                await self._refuse_indexed(doc.id, "replace")
                num = self.index.number(doc.id)
                stored = None if num is None else await self._io_call(self.store.document, doc.id)
                if num is None or stored is None:
                    plan, _ = await self._looked_up([doc.id], sig[None, :])
                    row = self._stored(doc, plan.start, digest, sig)
                    clusters = await asyncio.to_thread(self.index.cluster_write, plan)
                    await self._write(self.store.add_documents, [row], clusters)
                    self.index.apply(plan)
                    return self._result(doc, plan.found[plan.indexed], created=True)
                if not meta_given:
                    doc = NewDoc(doc.id, doc.text, stored.meta)
                # Compared in a worker thread, a slice a call: a meta of 13 M numbers is 0.1 s.
                same = stored.digest == digest and (
                    await asyncio.to_thread(same_json, stored.meta, doc.meta)
                )
                if same:
                    [found] = await asyncio.to_thread(self.index.earlier_matches, [doc.id])
                    return self._result(doc, found, created=False)
                row = self._stored(doc, self.index.next_number, digest, sig)
                near = await self._near_faulted(sig[None, :])
                removal = await asyncio.to_thread(self.index.plan_removal, doc.id)
                clusters = await asyncio.to_thread(
                    self._replace_clusters, removal, doc.id, sig[None, :], near
                )
                await self._write(self.store.replace_document, num, row, clusters)
                self._hide_flushed(doc.id, num)
                # Durable: now memory. One document's plan is bounded by its candidates (copies
                # are one class); it stays here so no reader sees the id missing meanwhile.
                self.index.apply_removal(removal)
                plan = linking_plan(self.index, [doc.id], sig[None, :], near)
                self.index.apply(plan)
                found = plan.found[plan.indexed]
                return Registered(doc.id, self.index.root_of(doc.id), "replaced", found)

    async def digests(self, doc_ids: Sequence[str]) -> dict[str, bytes]:
        """The text digests of those documents that are registered."""
        return await self._io_call(self.store.digests, list(doc_ids))

    async def delete(self, doc_id: str) -> None:
        """Delete a document; its cluster is regrouped from the remaining members."""
        async with self._writing():
            await self._fault_in([doc_id])
            await self._refuse_indexed(doc_id, "delete")
            num = self._known(doc_id)
            # Regrouping the cluster grows with its size: planned off the event loop.
            removal = await asyncio.to_thread(self.index.plan_removal, doc_id)
            flushed = self._flushed_number(num)
            # The index's row of a flushed document is this one: it must not come back.
            twin = None if flushed else await asyncio.to_thread(self._twin, doc_id)
            clusters = self.index.removal_write(removal)
            await self._write(self.store.delete_document, num, clusters)
            self._hide_flushed(doc_id, num)
            self.index.apply_removal(removal)
            if twin is not None:  # what it matches brought back: flushed documents too
                await self._near_faulted(twin[None, :])
            if self._link_twin(doc_id, twin):
                await self._sync_linked([doc_id])

    # --- clusters -----------------------------------------------------------------------------

    async def clusters_page(
        self, min_size: int, limit: int, after: str | None, most: int, per_cluster: int
    ) -> tuple[list[ClusterSlice], str | None]:
        """Clusters of at least ``min_size`` members ordered by root id (with ``min_size`` 1,
        the service's own documents in no cluster too), ``limit`` from after the root
        ``after``, and the next cursor: read from the store's cluster tables on its read thread.
        Each lists its first ``per_cluster`` members at most, all of them ``most`` at most
        (``cluster_reads.listing``)."""
        return await self._read_call(
            self.store.cluster_listing, min_size, after, limit, most, per_cluster
        )

    async def cluster_slice(
        self, root: str, after: str | None, limit: int, indexed: bool = True
    ) -> ClusterSlice:
        """The cluster rooted at ``root`` (its members after ``after``, at most ``limit``), from
        the store's tables: a document of the service's own in no cluster is one alone, and so
        is (with ``indexed``) a document of the served index that nothing here matches.

        Raises:
            NotFound: ``root`` is not the root of a cluster (a member of one, or unknown).
        """
        found = await self._read_call(self.store.cluster_slice, root, after, limit)
        served = found is None and indexed and self.served is not None
        if served and bool(await asyncio.to_thread(self._indexed_digests, [root])):
            found = _alone(root, after)
        if isinstance(found, ClusterSlice):
            return found
        raise NotFound(f"{root!r} is not the root of a cluster")

    async def cluster(self, root: str) -> list[str]:
        """The sorted member ids of the cluster rooted at ``root`` (a document of the service's
        own alone: itself), every one, from the store's tables (NotFound if not a root). The
        web pages' cluster pages: an indexed document in no cluster is not found (its document
        page shows it)."""
        return (await self.cluster_slice(root, None, _EVERY, indexed=False)).members

    async def member_signatures(self, ids: Sequence[str]) -> dict[str, NDArray[np.uint32]]:
        """The signature of each of ``ids`` that is a registered document: memory's, else the
        store's (the service's own flushed ones), else the served index's."""
        index = self.index
        held = [i for i in ids if i in index]
        found = dict(zip(held, index.signatures_of(held), strict=True)) if held else {}
        rest = [i for i in ids if i not in index]
        if rest:
            own = await self._read_call(self.store.read_numbered, rest)
            for doc_id, (_, sig) in own.items():
                found[doc_id] = np.frombuffer(sig, dtype="<u4").astype(np.uint32)
            rest = [i for i in rest if i not in own]
        served = self.served
        rest = [] if served is None else [i for i in rest if i not in served.hidden]
        if rest and served is not None:  # (a deleted flushed document's row: hidden)
            found.update(await asyncio.to_thread(served.signatures, rest))
        return found

    async def largest_clusters(
        self, offset: int, limit: int
    ) -> tuple[list[tuple[str, int]], dict[int, int]]:
        """(root, size) of the clusters of two or more, largest first, then by root, ``limit``
        from ``offset``; and how many there are of each size (the store's counts)."""

        def read() -> tuple[list[tuple[str, int]], dict[int, int]]:
            rows = self.store.clusters_page(2, None, limit, offset=offset)
            return rows, self.store.cluster_sizes()

        return await self._read_call(read)

    async def read_stats(self) -> dict[str, Any]:
        """``stats`` with ``clusters`` (of two or more, listed) and ``duplicates`` (their
        members but the roots), from the counts the store keeps per size (one row a distinct
        size); the last counts read while the store does not answer."""
        if self.store.available():
            with suppress(StoreUnavailable):
                sizes = await self._read_call(self.store.cluster_sizes)
                clusters = sum(sizes.values())
                members = sum(size * n for size, n in sizes.items())
                self._cluster_counts = {"clusters": clusters, "duplicates": members - clusters}
        return {**self.stats(), **self._cluster_counts}

    def stats(self) -> dict[str, Any]:
        """Counts for /v1/stats and /metrics but the clusters' (``read_stats`` adds them)."""
        unflushed = self.unflushed()
        return {
            "documents": len(self.index),
            "indexed_documents": self._indexed_others(),
            "index_version": 0 if self.served is None else self.served.version,
            "unflushed": unflushed,
            "index_flushes": self.flushes,
            "index_parts": 0 if self.served is None else len(self.served.index.parts),
            "part_compactions": 0 if self.compactor is None else self.compactor.done,
            "part_compactions_failed": 0 if self.compactor is None else self.compactor.failed,
            "indexed_linked": self.index.linked,
            "protected_sets": len(self.protected),
            "broken_protected_sets": len(self.broken_sets),
            "index_bytes": self.index.nbytes(),
            "pool_restarts": self.pool.restarts,
            "inflight": self.limits.inflight,
            "recovery_seconds": round(self.recovery_seconds, 3),
            "log_position": self.log_position,
            "log_lag_seconds": round(self.log_lag(), 3),
            "store_up": int(self.store.available()),
            "index_compactions": self.compactions,
            "log_reloads": self.reloads,
        }

    # --- flushing the service's documents into the served index (app/service/flush.py) ----------

    @property
    def flushing(self) -> bool:
        """Whether this service writes its documents into the index it serves."""
        return self.settings.flushes

    @property
    def flushes(self) -> int:
        """The flushes done since the start."""
        return 0 if self.flusher is None else self.flusher.flushes

    def _flushed_before(self) -> bool:
        """Whether the store recorded a flush committed (its rows are in an index). Blocking."""
        committed = Mark.from_json(self.store.flush_state().get("committed"))
        return committed is not None and committed.version > 0

    async def flush(self) -> int | None:
        """Flush into the served index now (``Flusher.flush``): the version committed, or None
        when there was nothing to write, another replica flushes, or this service does not."""
        if self.flusher is None or not self.flushing:
            return None
        return await self.flusher.flush()

    def unflushed(self) -> int:
        """The service's documents not in the index yet (0 when it never flushed, nor may)."""
        flusher = self.flusher
        return 0 if flusher is None else flusher.unflushed()

    def _indexed_others(self) -> int:
        """The served index's documents but the service's own (``Flusher.indexed_others``)."""
        if self.served is None:
            return 0
        flusher = self.flusher
        return self.served.rows if flusher is None else flusher.indexed_others()

    def _flushed_number(self, num: int) -> bool:
        """Whether document ``num`` has a row in the served index (or in a flush written)."""
        flusher = self.flusher
        return flusher is not None and flusher.flushed_number(num)

    def _hide_flushed(self, doc_id: str, num: int) -> None:
        """After document ``num`` was deleted or replaced: its row, if flushed, hidden."""
        flusher = self.flusher
        if flusher is not None:
            flusher.hide(doc_id, num)

    # --- replicas: following a shared store's log of changes -----------------------------------

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        """The write lock: this process's, then the store's, with the changes other replicas
        committed before it applied first, so the write sees everything acknowledged before."""
        async with self._lock:
            try:
                try:
                    changes = await self._io_call(self.store.lock_writes)
                except LogPruned as exc:
                    await self._reload(exc)
                    changes = await self._io_call(self.store.lock_writes)
            except SettingsChanged as exc:
                self._settings_changed(exc)
                raise
            self._synced = time.monotonic()
            try:
                await self._apply(changes)
                yield
            finally:
                await self._io_call(self.store.unlock_writes)
                self.log_position = self.store.position()  # this write's entry, if it made one
                self._compact_soon()
                if self.flusher is not None and self.flushing:
                    self.flusher.soon()

    def evict_soon(self) -> None:
        """Let the flushed documents leave memory, in the background (``_evict``), once a
        version holding them is served."""
        if self._evicting is None or self._evicting.done():
            self._evicting = asyncio.create_task(self._evict())

    async def _evict(self) -> None:
        """Swap in the index of the memtable and the clusters holding one of its documents
        (``ServiceIndex.evicted``): the flushed documents are answered from the index's parts
        and the store's tables, and brought back when a write touches them (``_fault_in``).
        Built off the event loop while writers wait for the lock."""
        flusher = self.flusher
        if flusher is None:
            return
        async with self._lock:
            through, before = flusher.served_through, self.index
            try:
                self.index = await asyncio.to_thread(before.evicted, through)
            except Exception:  # the index in use is intact: it keeps the flushed documents
                log.exception("could not let the flushed documents leave memory")
                return
            log.debug(
                "flushed documents left memory through=%d held=%d->%d",
                through, before.held, self.index.held,
            )  # fmt: skip

    def _compact_soon(self) -> None:
        """Compact the index in the background once its removed documents' slots are as many
        as the live documents (``ServiceIndex.wants_compaction``)."""
        running = self._compacting is not None and not self._compacting.done()
        if not running and self.index.wants_compaction():
            self._compacting = asyncio.create_task(self._compact())

    async def _compact(self) -> None:
        """Swap in the index of the live documents alone, built off the event loop while
        writers wait for the lock (readers keep reading the index being replaced, which
        answers the same); amortised, as each follows as many removals as it copies."""
        async with self._lock:
            if not self.index.wants_compaction():
                return
            started, before = time.perf_counter(), self.index.nbytes()
            try:
                self.index = await asyncio.to_thread(self.index.compacted)
            except Exception:  # the index in use is intact: log, and try after the next write
                log.exception("could not compact the index; it keeps its removed slots")
                return
            self.compactions += 1
            log.info(
                "index compacted documents=%d index_bytes=%d->%d seconds=%.3f",
                len(self.index), before, self.index.nbytes(), time.perf_counter() - started,
            )  # fmt: skip

    async def _follow(self) -> None:
        """Apply other replicas' changes as they are notified (or every POLL_SECONDS)."""
        loop = asyncio.get_running_loop()
        while True:
            await loop.run_in_executor(self._listen, self.store.wait_for_changes, POLL_SECONDS)
            try:
                async with self._lock:
                    try:
                        changes = await self._io_call(self.store.changes)
                    except LogPruned as exc:  # too far behind to replay: reload instead
                        await self._reload(exc)
                        changes = []
                    self._synced = time.monotonic()
                    await self._apply(changes)
                self._compact_soon()
            except SettingsChanged as exc:
                self._settings_changed(exc)
                return  # nothing more is applied: the replica must restart with them
            except StoreUnavailable:
                continue  # the database is away: memory still answers; try again later
            except Exception:
                log.exception("could not apply the store's changes; trying again")
                await asyncio.sleep(POLL_SECONDS)

    def _settings_changed(self, exc: SettingsChanged) -> None:
        """Stop answering (503, not ready) under settings the store no longer holds."""
        if self.settings_changed is None:
            log.error("%s", exc)
        self.settings_changed = str(exc)

    async def _apply(self, changes: Sequence[Change]) -> None:
        """Apply logged changes in order (planning off the event loop, applying on it).

        A replace is logged as a delete and the add of the same id: both are applied in one
        step, so no reader sees the document missing in between, and ``log_position`` never
        names the state between them, which no replica acknowledged. Consecutive deletes of
        flushed documents (what ``_drop_overruled`` logs, up to OVERRULED_BATCH a write) are
        applied in one step (``_apply_deletes``)."""
        skip = 0  # entries applied with an earlier one
        for k, (change, after) in enumerate(zip(changes, [*changes[1:], None], strict=False)):
            if skip:
                skip -= 1
                self.log_position = change.seq
                continue
            if _is_replace(change, after):
                assert after is not None and after.nums is not None
                await self._apply_replace(change, after)
                skip = 1
                continue
            run = self._flushed_deletes(changes, k)
            if len(run) > 1:
                await self._apply_deletes(run)
                skip = len(run) - 1
                self.log_position = change.seq
                continue
            if change.kind == "add" and change.ids:
                # Another replica stored an id this one serves from the index (it read an
                # older version of it): the store's document wins, the indexed one leaves.
                for doc_id in [i for i in change.ids if self.index.is_indexed(i)]:
                    removal = await asyncio.to_thread(self.index.plan_removal, doc_id)
                    self.index.apply_removal(removal)
                sigs = np.frombuffer(change.sigs, dtype="<u4").astype(np.uint32)
                sigs = sigs.reshape(len(change.ids), self.params.num_perm)
                plan, _ = await self._looked_up(change.ids, sigs)
                if change.nums is None or plan.start != change.nums[0]:
                    raise RuntimeError(f"log entry {change.seq} does not follow the index")
                self.index.apply(plan)
            elif change.kind == "delete" and change.nums is not None:
                await self._fault_in([change.name])
                if self.index.number(change.name) == change.nums[0]:
                    removal = await asyncio.to_thread(self.index.plan_removal, change.name)
                    flushed = self._flushed_number(change.nums[0])
                    twin = None if flushed else await asyncio.to_thread(self._twin, change.name)
                    self.index.apply_removal(removal)
                    self._hide_flushed(change.name, change.nums[0])
                    if twin is not None:
                        await self._near_faulted(twin[None, :])
                    self._link_twin(change.name, twin)
                elif change.name not in self.index:  # flushed and let go: its row hidden
                    self.index.dropped()
                    self._hide_flushed(change.name, change.nums[0])
            elif change.kind == "flush" and change.nums is not None:
                if (flusher := self.flusher) is not None:
                    flusher.batch_taken(change.nums[0])
            elif change.kind == "flushed":
                mark = Mark.from_json(change.name)
                if (flusher := self.flusher) is not None and mark is not None:
                    flusher.committed(mark)
            elif change.kind == "put_set" and change.row is not None:
                row = change.row
                try:
                    self.protected[row.name] = await asyncio.to_thread(
                        _parse_stored, row, self.params
                    )
                    self.broken_sets.pop(row.name, None)
                except NeardupError as exc:
                    self.protected.pop(row.name, None)
                    self.broken_sets[row.name] = str(exc)
                self._set_bytes[row.name] = len(row.body.encode("utf-8"))
            elif change.kind == "delete_set":
                self.protected.pop(change.name, None)
                self.broken_sets.pop(change.name, None)
                self._set_bytes.pop(change.name, None)
            self.log_position = change.seq

    def _flushed_deletes(self, changes: Sequence[Change], k: int) -> list[Change]:
        """The deletes of flushed documents from ``changes[k]`` on, consecutive (none part of
        a replace): applied together, their removals interact as in ``_drop_overruled``; a
        flushed document has no indexed twin to link (the index's row was its own)."""
        run: list[Change] = []
        for j in range(k, len(changes)):
            change = changes[j]
            after = changes[j + 1] if j + 1 < len(changes) else None
            if (
                change.kind != "delete"
                or change.nums is None
                or not self._flushed_number(change.nums[0])
                or _is_replace(change, after)
            ):
                break
            run.append(change)
        return run

    async def _apply_deletes(self, deletes: Sequence[Change]) -> None:
        """Logged deletes of flushed documents (``_flushed_deletes``) as one step on the
        index: each cluster they leave regrouped once (``ServiceIndex.plan_removals``)."""
        gone: dict[str, int] = {}
        let_go: dict[str, int] = {}  # flushed and not held: counted and hidden only
        for change in deletes:
            assert change.nums is not None
            if self.index.number(change.name) == change.nums[0]:
                gone[change.name] = change.nums[0]
            elif change.name not in self.index:
                let_go[change.name] = change.nums[0]
        if let_go:
            self.index.dropped(len(let_go))
            for doc_id, num in let_go.items():
                self._hide_flushed(doc_id, num)
        if not gone:
            return
        removals = await asyncio.to_thread(self.index.plan_removals, list(gone))
        self.index.apply_removals(removals)
        for doc_id, num in gone.items():
            self._hide_flushed(doc_id, num)

    async def _apply_replace(self, delete: Change, add: Change) -> None:
        """A logged replace (``delete`` of an id, then ``add`` of one document of that id) as
        one step on the index: the removal planned off the loop, then removal, planning and
        adding with no await between them (one document's plan is bounded by its
        candidates, as ``replace`` does on the replica that took it)."""
        sigs = np.frombuffer(add.sigs, dtype="<u4").astype(np.uint32)
        sigs = sigs.reshape(1, self.params.num_perm)
        removal = None
        await self._fault_in([delete.name])
        near = await self._near_faulted(sigs)
        if delete.nums is not None and self.index.number(delete.name) == delete.nums[0]:
            removal = await asyncio.to_thread(self.index.plan_removal, delete.name)
        if removal is not None or (delete.nums is not None and delete.name not in self.index):
            if removal is not None:
                self.index.apply_removal(removal)
            else:  # flushed and let go
                self.index.dropped()
            assert delete.nums is not None
            self._hide_flushed(delete.name, delete.nums[0])
        plan = linking_plan(self.index, [delete.name], sigs, near)
        if add.nums is None or plan.start != add.nums[0]:
            raise RuntimeError(f"log entry {add.seq} does not follow the index")
        self.index.apply(plan)

    # --- protected sets -----------------------------------------------------------------------

    async def put_protected_set(
        self, name: str, text: str, fmt: ProtectedFormat, *, allow_no_ngrams: bool = False
    ) -> ProtectedSet:
        """Check the limits (QuotaExceeded), parse off the event loop (CorpusError naming a bad
        line, or saying why a set protects no n-gram unless ``allow_no_ngrams``: checks against
        it would all say clean), store durably (a JSON array or CSV as JSON Lines of its
        items), then replace in memory. Its JSON (a JSON array, JSON Lines, a CSV's or Parquet
        file's rows as the JSON Lines stored) may hold at most MAX_JSON_VALUES values and
        MAX_JSON_CONTAINERS arrays and objects (TooLarge naming the setting, as a JSON body)."""
        with json_limits("the protected set"):
            text, fmt = await asyncio.to_thread(
                protected_as_jsonl, name, text, fmt, budget=self.json_budget()
            )
            size = len(text.encode("utf-8"))
            self._check_quota(name, size)
            parsed = await asyncio.to_thread(
                partial(parse_protected_set, budget=self.json_budget()),
                name, text, fmt, self.params.ngram, self.params.tokenizer,
            )  # fmt: skip
        empty = parsed.why_empty()
        if empty is not None and not allow_no_ngrams:
            raise CorpusError(
                name, None, f"{empty}; checks against it would all say clean (to store it "
                "anyway, say so: allow_no_ngrams=true)",
            )  # fmt: skip
        async with self._writing():
            self._check_quota(name, size)  # another upload may have landed meanwhile
            row = ProtectedSetRow(name, parsed.items, parsed.ngrams, fmt, text)
            await self._write(self.store.put_protected_set, row)
            self.protected[name] = parsed
            self._set_bytes[name] = size
            self.broken_sets.pop(name, None)
        return parsed

    def json_budget(self) -> JSONBudget:
        """What an uploaded file's JSON may hold: MAX_JSON_VALUES values, MAX_JSON_CONTAINERS
        arrays and objects (a fresh count; ``json_limits`` words the error)."""
        return JSONBudget(self.settings.max_json_values, self.settings.max_json_containers)

    def _check_quota(self, name: str, size: int) -> None:
        """QuotaExceeded if storing ``size`` bytes as set ``name`` (new or a replacement) would
        go over MAX_PROTECTED_SETS or MAX_PROTECTED_BYTES."""
        limit, most = self.settings.max_protected_bytes, self.settings.max_protected_sets
        others = {k: v for k, v in self._set_bytes.items() if k != name}
        if len(others) + 1 > most:
            raise QuotaExceeded(
                f"{len(others)} protected sets are stored, the limit is {most}: delete one, or "
                "raise NEARDUP_MAX_PROTECTED_SETS"
            )
        total = sum(others.values()) + size
        if total > limit:
            raise QuotaExceeded(
                f"the protected sets would hold {total} bytes, the limit is {limit}: delete a "
                "set, or raise NEARDUP_MAX_PROTECTED_BYTES"
            )

    async def delete_protected_set(self, name: str) -> None:
        """Delete a protected set."""
        async with self._writing():
            if name not in self.broken_sets:
                self.protected_set(name)
            await self._write(self.store.delete_protected_set, name)
            self.protected.pop(name, None)
            self.broken_sets.pop(name, None)
            del self._set_bytes[name]

    def protected_set(self, name: str) -> ProtectedSet:
        """One protected set; NotFound if unknown."""
        found = self.protected.get(name)
        if found is None:
            raise NotFound(f"no protected set {name!r}")
        return found

    def chosen_sets(self, names: Sequence[str] | None) -> list[ProtectedSet]:
        """The named protected sets, each once (all, by name, when None); NotFound for an unknown
        name."""
        chosen = sorted(self.protected) if names is None else dict.fromkeys(names)
        return [self.protected_set(name) for name in chosen]

    async def decontamination(
        self, docs: Sequence[Doc], sets: Sequence[str] | None, ask: DecontRequest, caller: str
    ) -> tuple[list[Doc], list[dict[str, str]], dict[str, Any]]:
        """``docs`` decontaminated in ``ask.params.mode``, those dropped whole (``{"id",
        "rule"}``: ``drop_rule``'s), and the report; bounded and charged as ``contamination``
        is (texts, memory, the per-caller rate), off the loop. A repeated id is refused
        (DuplicateIdError), as in a registration, before anything is charged.

        Without ``ask.protect`` the answer gives no offset into a protected match (annotated
        meta's ``spans`` are null) and the cut mode is refused (ProtectScopeNeeded): a cut
        piece's edges are match edges."""
        if not ask.protect and ask.params.mode is DecontMode.CUT:
            raise ProtectScopeNeeded(
                "the cut mode needs a key with the protect scope: a cut piece's edges are "
                "where protected text starts and ends; without it use drop or annotate "
                "(verdicts and counts, no offsets)"
            )
        _refuse_repeated(d.id for d in docs)
        texts = [d.text for d in docs]
        pieces = ask.params.max_pieces if ask.params.mode is DecontMode.CUT else 1
        self.limits.check_texts(texts, answer_per_text=pieces * DECONT_META_BYTES)
        chosen = self.chosen_sets(sets)
        with self.limits.admit():
            await self._charge(caller, texts, chosen, protect=ask.protect)
            return await asyncio.to_thread(_decontaminate, docs, chosen, ask)

    async def contamination(
        self, texts: Sequence[str], sets: Sequence[str] | None, caller: str, *, protect: bool
    ) -> list[Hits]:
        """Per text: how many protected items it shares an n-gram with, and (set, item, first
        shared n-gram) of the first MAX_MATCHES of them (in set order, then as found in the
        text; without ``protect`` by item and with no n-gram: that order would tell where each
        item matched, the n-gram which words).

        ``caller`` names who asks, for the per-caller rate (RateLimited past it); ``protect``:
        whether it has the protect scope (its rate is counted in texts, others' in words)."""
        self.limits.check_texts(texts)
        chosen = self.chosen_sets(sets)
        with self.limits.admit():
            await self._charge(caller, texts, chosen, protect=protect)
            cap = self.settings.max_matches
            return await asyncio.to_thread(_hits, texts, chosen, cap, protect=protect)

    async def _charge(
        self, caller: str, texts: Sequence[str], chosen: list[ProtectedSet], *, protect: bool
    ) -> None:
        """Charge a check to ``caller``'s rate before any of it is done (RateLimited or
        TooLarge, and nothing charged, if it does not fit): a key with the protect scope by
        texts, any other by words (``charged_words``: a text's words, at least NGRAM), so a
        verdict, about one bit, costs at least NGRAM words. Nothing is charged when no set is
        checked (nothing is scanned)."""
        if not chosen:
            return
        if protect:
            await self.probes.take(caller, len(texts))
            return
        params = self.params
        charged = await asyncio.to_thread(charged_words, texts, params.ngram, params.tokenizer)
        await self.word_probes.take(caller, int(charged.sum()))


@dataclass(frozen=True)
class DecontRequest:
    """One ``POST /v1/decontamination``: the mode and its numbers, the cap, the buckets'
    bounds, how many top items per set, and whether the caller has the protect scope (then
    n-grams are echoed, offsets given, the cut mode allowed and its rate counted in texts)."""

    params: DecontParams
    item_cap: int | None
    thresholds: Thresholds
    top: int
    protect: bool


def _parse_stored(row: ProtectedSetRow, params: MinhashParams) -> ProtectedSet:
    """A protected set as the store holds it. A body stored before NaN and Infinity were
    refused may hold them: read as null (they are never text: the same n-grams), with a
    warning naming the first, so the set keeps protecting. Any other fault: CorpusError."""
    args = (row.name, row.body, row.format, params.ngram, params.tokenizer)
    try:
        return parse_protected_set(*args)
    except CorpusError as exc:
        parsed = parse_protected_set(*args, nan_as_null=True)  # the same error if not that
        log.warning(
            "protected set %r: %s; it was stored before NaN and Infinity were refused: read "
            "as null (upload it again to store it without them)",
            row.name, exc,
        )  # fmt: skip
        return parsed


def _refuse_repeated(ids: Iterable[str]) -> None:
    """DuplicateIdError (422) naming every id that appears more than once in one batch (of a
    registration or a decontamination: an answer's documents are named by their ids)."""
    repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
    if repeated:
        raise DuplicateIdError(*repeated)


def _is_replace(change: Change, after: Change | None) -> bool:
    """Whether ``change`` deletes an id that ``after``, the next log entry, adds back as one
    document (a replace: one transaction, logged as a delete then an add)."""
    return (
        change.kind == "delete"
        and after is not None
        and after.kind == "add"
        and after.ids == [change.name]
        and after.nums is not None
        and len(after.nums) == 1
    )


def _decontaminate(
    docs: Sequence[Doc], chosen: list[ProtectedSet], ask: DecontRequest
) -> tuple[list[Doc], list[dict[str, str]], dict[str, Any]]:
    """What ``decontaminate_modes`` makes of ``docs``, those it dropped whole and why, the report
    (every list capped and counted; kept documents' meta names no n-gram)."""
    if ask.params.mode is DecontMode.CUT:
        collision = piece_collision((d.id for d in docs), ask.params.max_pieces)
        if collision is not None:
            raise ParameterError(collision_message(*collision))
    protection = Protection(chosen, item_cap=ask.item_cap)
    report = ContaminationReport(protection, ask.thresholds, top=ask.top)
    out: list[Doc] = []
    dropped: list[dict[str, str]] = []
    for doc, matches in zip(docs, protection.matches_many([d.text for d in docs]), strict=True):
        report.add(doc, matches)
        # Without the protect scope, nothing built says where a match is (no spans).
        kept = apply_mode(
            doc, matches, ask.params, tokenizer=protection.tokenizer, offsets=ask.protect
        )
        if not kept:
            rule = drop_rule(doc, matches, ask.params, protection.tokenizer)
            dropped.append({"id": doc.id, "rule": rule or ""})
        out.extend(kept)
    return out, dropped, report.as_dict(ngrams=ask.protect)


class Hits(NamedTuple):
    """One text's protected items: all counted, the first ``cap`` listed as (set, item, first
    shared n-gram, or None for a caller without the protect scope)."""

    total: int
    listed: list[tuple[str, str, str | None]]


def _hits(
    texts: Sequence[str], chosen: list[ProtectedSet], cap: int, *, protect: bool
) -> list[Hits]:
    """Each text's ``Hits``. With ``protect``: a set's items as found in the text, with the
    n-gram shared; without: by item, with no n-gram (neither their order nor an n-gram then
    says where, or on which words, they matched)."""
    counts = [0] * len(texts)
    listed: list[list[tuple[str, str, str | None]]] = [[] for _ in texts]
    for protected in chosen:
        for i, found in enumerate(protected.hits_many(texts)):
            hits = found if protect else sorted(found)
            counts[i] += len(hits)
            room = cap - len(listed[i])
            listed[i].extend(
                (protected.name, item, gram if protect else None)
                for item, gram in hits[: max(room, 0)]
            )
    return [Hits(c, found) for c, found in zip(counts, listed, strict=True)]


def _own_ids(store: Store) -> list[str]:
    """The ids of every document of the service's own (the store's: flushed ones are not
    held in memory). Blocking: the store's thread."""
    return [i for _, ids, _ in store.iter_signatures(RECOVERY_CHUNK) for i in ids]


def _alone(root: str, after: str | None) -> ClusterSlice:
    """A document in no cluster, as a cluster of one."""
    return ClusterSlice(root, 1, [root] if after is None or root > after else [], False)


def _matched_rows(
    ids: list[str], sigs: NDArray[np.uint32], served: ServedIndex | None, index: ServiceIndex
) -> list[int]:
    """``served.matched_rows`` with the index last (what ``Service.read_index`` passes), the
    served index's hidden rows left out."""
    return matched_rows(index, ids, sigs, () if served is None else served.hidden)


def _query_matches(
    sigs: NDArray[np.uint32],
    threshold: float | None,
    limit: int | None,
    service: Service,
    index: ServiceIndex,
) -> list[tuple[int, list[tuple[str, float, str | None]]]]:
    """Per signature, its matches' count and the best as (id, estimate, root), the served
    index's documents among them (root None: not held in memory); copies of one text are
    looked up once and share one result."""
    if not len(sigs):
        return []
    distinct, inverse = np.unique(sigs, axis=0, return_inverse=True)
    matched = index.matches(distinct, threshold, limit)
    near = service._near(distinct, threshold)
    if near is not None:
        cap = index.max_matches if limit is None else min(limit, index.max_matches)
        matched = [merged(f, near.found(d, cap, index), cap) for d, f in enumerate(matched)]
    found = [
        (f.count, [(i, e, index.root_of(i) if i in index else None) for i, e in f.best])
        for f in matched
    ]
    return [found[d] for d in inverse.reshape(-1).tolist()]


def _recovery_progress(
    chunks: Iterator[tuple[list[int], list[str], NDArray[np.uint32]]], extent: int, every: float
) -> Iterator[tuple[list[int], list[str], NDArray[np.uint32]]]:
    """``chunks`` as they are, logging the documents read so far (rate, seconds left) at most
    every ``every`` seconds, and one line when all are read (clustering them comes next)."""
    started = last = time.monotonic()
    done = 0
    for chunk in chunks:
        yield chunk
        done += len(chunk[0])
        now = time.monotonic()
        if now - last >= every:
            last = now
            rate = done / max(now - started, 1e-9)
            log.info(
                "recovering: read %d of up to %d documents (%.0f/s, about %.0f s left)",
                done, extent, rate, max(extent - done, 0) / rate,
            )  # fmt: skip
    log.info(
        "recovering: read %d documents in %.1f s; clustering them",
        done, time.monotonic() - started,
    )  # fmt: skip
