"""The service's operations over the index, the store, the pool and the protected sets.

Handlers stay thin: they parse, call one method here, and return a model. Mutations are
serialised by one lock and are durable before they touch memory; reads never wait for them.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import logging
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from app.config import Settings
from app.index import ServiceIndex
from app.limits import BatchLimits
from app.pool import SignaturePool
from app.protected import ProtectedSet, parse_protected_set
from app.store import ProtectedSetRow, SQLiteStore, Store, StoredDoc
from core.errors import DuplicateIdError, NeardupError

__all__ = ["Conflict", "NewDoc", "NotFound", "Service"]

log = logging.getLogger("neardup")
_T = TypeVar("_T")


class NotFound(NeardupError, LookupError):
    """An unknown document, cluster root or protected set."""


class Conflict(NeardupError):
    """A registered id sent again with a different text."""


@dataclass(frozen=True)
class NewDoc:
    """A document as registered: id, text, meta."""

    id: str
    text: str
    meta: dict[str, Any]


@dataclass(frozen=True)
class Registered:
    """One result of a registration, in request order."""

    id: str
    cluster: str
    status: str
    matches: list[tuple[str, float]]


def _release_free_memory() -> None:
    """Hand the heap that recovery's temporaries freed back to the OS (glibc keeps it otherwise,
    about 130 bytes a document at 1M documents); a no-op where there is no glibc."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def index_params(settings: Settings) -> dict[str, int]:
    """The parameters a data directory is created with and must be reopened with."""
    return {
        "num_perm": settings.num_perm,
        "bands": settings.bands,
        "k": settings.k,
        "seed": settings.seed,
    }


def digest(text: str) -> bytes:
    """SHA-256 of the UTF-8 text: what makes a re-registration 'unchanged'."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class Service:
    """Everything the routes call. Create with ``await Service.start(settings)``."""

    def __init__(self, settings: Settings, store: Store, pool: SignaturePool) -> None:
        self.settings = settings
        self.store = store
        self.pool = pool
        self.index = ServiceIndex(settings.num_perm, settings.bands, settings.threshold)
        self.protected: dict[str, ProtectedSet] = {}
        self._lock = asyncio.Lock()
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store")
        self.limits = BatchLimits(settings)
        self._roots_cache: tuple[tuple[int, int], list[str]] | None = None
        self.recovery_seconds = 0.0

    @classmethod
    async def start(cls, settings: Settings) -> Service:
        """Open the store (refusing other index parameters), recover the index, start the pool."""
        store = SQLiteStore(settings.data_dir)
        store.ensure_params(index_params(settings))
        pool = SignaturePool(
            settings.workers, num_perm=settings.num_perm, seed=settings.seed, k=settings.k
        )
        service = cls(settings, store, pool)
        await service._recover()
        await pool.warm_up()
        return service

    async def _io_call(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    async def _recover(self) -> None:
        started = time.perf_counter()
        num_perm = self.settings.num_perm
        chunks = (
            (nums, ids, np.frombuffer(blob, dtype="<u4").reshape(-1, num_perm).astype(np.uint32))
            for nums, ids, blob in self.store.iter_signatures(50_000)
        )
        pairs = [p for chunk in self.store.iter_pairs(100_000) for p in chunk]
        self.index.load(self.store.extent(), chunks, pairs)
        _release_free_memory()
        for row in self.store.protected_sets():
            self.protected[row.name] = self._parse_set(row.name, row.body)
        self.recovery_seconds = time.perf_counter() - started
        log.info(
            "recovered documents=%d pairs=%d protected_sets=%d seconds=%.3f",
            len(self.index), len(pairs), len(self.protected), self.recovery_seconds,
        )  # fmt: skip

    async def close(self) -> None:
        """Stop the pool and close the store (after in-flight requests finished)."""
        async with self._lock:
            self.pool.close()
            await self._io_call(self.store.close)
        self._io.shutdown(wait=True)

    # --- documents ----------------------------------------------------------------------------

    async def signatures(self, texts: Sequence[str]) -> NDArray[np.uint32]:
        """Signatures of a batch, computed in the pool."""
        self.limits.check_texts(texts)
        with self.limits.admit():
            return await self.pool.signatures(texts)

    async def register(self, docs: Sequence[NewDoc]) -> list[Registered]:
        """Register a batch: durable first, then in memory; results in request order."""
        self.limits.check_texts([d.text for d in docs])
        with self.limits.admit():
            return await self._register(docs)

    async def _register(self, docs: Sequence[NewDoc]) -> list[Registered]:
        repeated = sorted(i for i, n in Counter(d.id for d in docs).items() if n > 1)
        if repeated:
            raise DuplicateIdError(*repeated)
        sigs = await self.pool.signatures([d.text for d in docs])
        async with self._lock:
            known = await self._io_call(self.store.digests, [d.id for d in docs])
            digests = [digest(d.text) for d in docs]
            conflicts = [
                d.id for d, h in zip(docs, digests, strict=True) if known.get(d.id, h) != h
            ]
            if conflicts:
                raise Conflict(
                    f"already registered with a different text: {', '.join(conflicts[:10])}"
                )
            fresh = [i for i, d in enumerate(docs) if d.id not in known]
            plan = self.index.plan([docs[i].id for i in fresh], sigs[fresh])
            rows = [
                self._stored(docs[i], num, digests[i], sigs[i])
                for i, num in zip(fresh, plan.nums, strict=True)
            ]
            await self._io_call(self.store.add_documents, rows, plan.pairs())
            self.index.apply(plan)
            return [self._result(d, d.id not in known) for d in docs]

    def _stored(
        self, doc: NewDoc, num: int, text_digest: bytes, sig: np.ndarray[Any, Any]
    ) -> StoredDoc:
        text = doc.text if self.settings.store_text else None
        return StoredDoc(num, doc.id, text_digest, sig.astype("<u4").tobytes(), doc.meta, text)

    def _result(self, doc: NewDoc, created: bool) -> Registered:
        num = self.index.num_of[doc.id]
        earlier = [(o, e) for o, e in self.index.clusters.pairs.get(num, {}).items() if o < num]
        return Registered(
            doc.id,
            self.index.root_id(num),
            "created" if created else "unchanged",
            self.index.sorted_matches(earlier),
        )

    async def query(
        self, texts: Sequence[str], threshold: float | None, limit: int | None
    ) -> list[list[tuple[str, float, str]]]:
        """What registering would report as matches, without registering: (id, estimate, root)."""
        sigs = await self.signatures(texts)
        out = []
        for found in self.index.matches(sigs, threshold):
            ranked = self.index.sorted_matches(found)[:limit]
            out.append([(i, e, self.index.root_id(self.index.num_of[i])) for i, e in ranked])
        return out

    async def document(self, doc_id: str) -> tuple[str, str, dict[str, Any]]:
        """(id, cluster root, meta) of a registered document."""
        if doc_id not in self.index.num_of:
            raise NotFound(f"no document {doc_id!r}")
        stored = await self._io_call(self.store.document, doc_id)
        if stored is None or doc_id not in self.index.num_of:
            raise NotFound(f"no document {doc_id!r}")
        return doc_id, self.index.root_id(self.index.num_of[doc_id]), stored.meta

    async def texts(self, nums: Sequence[int]) -> dict[int, str]:
        """The stored texts of those documents (none when STORE_TEXT is off)."""
        return await self._io_call(self.store.texts, list(nums))

    async def delete(self, doc_id: str) -> None:
        """Delete a document; its cluster is recomputed from the remaining confirmed pairs."""
        async with self._lock:
            num = self.index.num_of.get(doc_id)
            if num is None:
                raise NotFound(f"no document {doc_id!r}")
            await self._io_call(self.store.delete_document, num)
            self.index.remove(doc_id)

    # --- clusters -----------------------------------------------------------------------------

    def clusters(
        self, min_size: int, limit: int, after: str | None
    ) -> tuple[list[list[str]], str | None]:
        """Clusters ordered by root id, ``limit`` from after ``after``; and the next cursor."""
        roots = self._sorted_roots(min_size)
        start = bisect_right(roots, after) if after is not None else 0
        page = roots[start : start + limit]
        groups = [self.cluster(root) for root in page]
        more = start + limit < len(roots)
        return groups, (page[-1] if more and page else None)

    def _sorted_roots(self, min_size: int) -> list[str]:
        """Root ids of clusters of at least ``min_size``, sorted; kept until the next write, so
        paging through a million singletons sorts them once, not once a page."""
        key = (self.index.version, max(min_size, 1))
        if self._roots_cache is not None and self._roots_cache[0] == key:
            return self._roots_cache[1]
        index = self.index
        if min_size <= 1:
            find = index.clusters.find
            roots = sorted(index.ids[n] for n in index.num_of.values() if find(n) == n)
        else:
            members = index.clusters.members
            roots = sorted(index.ids[r] for r, m in members.items() if len(m) >= min_size)
        self._roots_cache = (key, roots)
        return roots

    def cluster(self, root: str) -> list[str]:
        """The sorted member ids of the cluster rooted at ``root``."""
        num = self.index.num_of.get(root)
        if num is None or self.index.clusters.find(num) != num:
            raise NotFound(f"{root!r} is not the root of a cluster")
        members = self.index.clusters.members.get(num, [num])
        return sorted(self.index.ids[m] for m in members)

    def stats(self) -> dict[str, Any]:
        """Counts for /v1/stats and /metrics."""
        members = self.index.clusters.members
        return {
            "documents": len(self.index),
            "clusters": len(members),
            "duplicates": sum(len(m) - 1 for m in members.values()),
            "protected_sets": len(self.protected),
            "index_bytes": self.index.nbytes(),
            "pool_restarts": self.pool.restarts,
            "inflight": self.limits.inflight,
            "recovery_seconds": round(self.recovery_seconds, 3),
        }

    # --- protected sets -----------------------------------------------------------------------

    def _parse_set(self, name: str, body: str) -> ProtectedSet:
        jsonl, text = body[0] == "j", body[1:]
        return parse_protected_set(name, text, jsonl=jsonl, n=self.settings.ngram)

    async def put_protected_set(self, name: str, text: str, *, jsonl: bool) -> ProtectedSet:
        """Parse (422 naming a bad line), store durably, then replace in memory."""
        body = ("j" if jsonl else "t") + text
        parsed = self._parse_set(name, body)
        async with self._lock:
            row = ProtectedSetRow(name, parsed.items, parsed.ngrams, body)
            await self._io_call(self.store.put_protected_set, row)
            self.protected[name] = parsed
        return parsed

    async def delete_protected_set(self, name: str) -> None:
        """Delete a protected set."""
        async with self._lock:
            if name not in self.protected:
                raise NotFound(f"no protected set {name!r}")
            await self._io_call(self.store.delete_protected_set, name)
            del self.protected[name]

    def protected_set(self, name: str) -> ProtectedSet:
        """One protected set's metadata holder; NotFound if unknown."""
        found = self.protected.get(name)
        if found is None:
            raise NotFound(f"no protected set {name!r}")
        return found

    async def contamination(
        self, texts: Sequence[str], sets: Sequence[str] | None
    ) -> list[list[tuple[str, str, str]]]:
        """Per text: (set, item, first shared n-gram) of every protected item it shares with."""
        self.limits.check_texts(texts)
        names = sorted(self.protected) if sets is None else list(sets)
        chosen = [self.protected_set(name) for name in names]
        with self.limits.admit():
            # Python work per n-gram: off the event loop.
            return await asyncio.to_thread(self._hits, texts, chosen)

    def _hits(
        self, texts: Sequence[str], chosen: list[ProtectedSet]
    ) -> list[list[tuple[str, str, str]]]:
        out: list[list[tuple[str, str, str]]] = [[] for _ in texts]
        for protected in chosen:
            for found, hits in zip(out, protected.hits_many(texts), strict=True):
                found.extend((protected.name, item, gram) for item, gram in hits)
        return out
