"""A persistent index the service answers for (``neardup serve --index``), read here; the
service's own documents are written into it by app/service/flush.py.

At start only the manifest is read (and checked: the parameters against the service's, every
part with a key table); nothing per indexed document is loaded. Lookups go through core's
``DocIndex.near`` (by band key: O(keys) pages of each part) and ``DocIndex.id_digests`` /
``id_signatures`` (core's one lookup of ids: each part's id table, O(ids) pages; the statistics
of a part written before id tables), so the cost of a request grows with the request, not with
the index.
Parts committed after the start are served once ``newer`` finds them (the service reads the
manifest every INDEX_REFRESH seconds).

Every read of the served index goes through ``ServedIndex``: one its storage cannot answer (an
object store away, timing out or refusing the credentials: ``storage_failed``) raises
IndexUnavailable (503) and marks the index ``down`` until a read of it succeeds again.
"""

from __future__ import annotations

import errno
import logging
import sys
from collections.abc import Container, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from neardup.app.service.errors import IndexNotServable, IndexUnavailable
from neardup.app.service.index import Found, Plan, ServiceIndex
from neardup.core.engine import (
    DocIndex,
    IndexConflictError,
    IndexDamagedError,
    MinhashParams,
    NeardupError,
    commit_index,
)

__all__ = [
    "Near",
    "ServedIndex",
    "linking_plan",
    "matched_rows",
    "matched_rows_plan",
    "storage_failed",
]

log = logging.getLogger("neardup")

#: An OSError of these numbers is a file that is not there (or not a file): the index's state
#: (core names it: IndexDamagedError, IndexChangedError), not its storage failing to answer.
_ABSENT = {errno.ENOENT, errno.ENOTDIR, errno.EISDIR}


def storage_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is the index's storage failing to answer, not the index's content:
    botocore's errors (s3fs's client: endpoint unreachable, connect or read timeouts, no
    credentials, after its retries), aiohttp's client errors, timeouts, and OSError but a
    missing file (access denied, throttling, a connection reset); core reports some of those
    as IndexDamagedError (a part it could not open or read), whose context they are then."""
    if isinstance(exc, IndexDamagedError):
        return exc.__context__ is not None and storage_failed(exc.__context__)
    if isinstance(exc, NeardupError):  # core's and the service's own (StoreFull is an OSError)
        return False
    if isinstance(exc, OSError):
        return exc.errno not in _ABSENT and not isinstance(
            exc, FileNotFoundError | NotADirectoryError | IsADirectoryError
        )
    if isinstance(exc, TimeoutError):
        return True
    clients = [sys.modules.get("botocore.exceptions"), sys.modules.get("aiohttp")]
    kinds = [getattr(m, n) for m, n in zip(clients, ("BotoCoreError", "ClientError"), strict=True)
             if m is not None and hasattr(m, n)]  # fmt: skip
    return bool(kinds) and isinstance(exc, tuple(kinds))


@dataclass(frozen=True)
class Near:
    """What rows matched in the index: per row its ``(indexed id, estimate)`` pairs (every one,
    best first: estimate descending, then id), and the signature of each indexed id matched."""

    rows: list[list[tuple[str, float]]]
    sigs: dict[str, NDArray[np.uint32]]

    def found(self, row: int, cap: int, skip: Container[str] = ()) -> Found:
        """Row ``row``'s matches but those in ``skip`` (ids held elsewhere), counted, the
        ``cap`` best listed."""
        hits = [m for m in self.rows[row] if m[0] not in skip]
        return Found(len(hits), hits[:cap])


class ServedIndex:
    """One committed version of a persistent index, checked for serving.

    Attributes:
        url: where it is (may hold credentials: never shown in an answer).
        index: core's ``DocIndex`` of the version read at start.
    """

    def __init__(self, url: str, index: DocIndex) -> None:
        self.url = url
        self.index = index
        #: Ids of the service's own rows in the index whose documents were deleted or replaced
        #: since they were flushed (app/service/flush.py): never answered, until the next flush
        #: commits their deletion.
        self.hidden: set[str] = set()
        #: Why the last read of the index failed for its storage (``storage_failed``), until a
        #: read succeeds again; None while it answers.
        self.down: str | None = None

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A read of the index: a failure of its storage raised as IndexUnavailable (the URL
        left out of the message: it may hold credentials) and remembered in ``down``; a
        success clears ``down``."""
        try:
            yield
        except Exception as exc:
            if not storage_failed(exc):
                raise
            said = " ".join(str(exc).replace(self.url, "<index>").split())
            reason = f"{type(exc).__name__}: {said}"
            if self.down is None:
                log.warning("index unavailable, answering 503 until it is back: %s", reason)
            self.down = reason
            raise IndexUnavailable(f"the index cannot be read: {reason}") from exc
        if self.down is not None:
            log.info("index readable again")
            self.down = None

    def probe(self) -> None:
        """Read the index's manifest (IndexUnavailable while its storage fails). Blocking."""
        with self.reading():
            DocIndex.open(self.url)

    @classmethod
    def open(cls, url: str, params: MinhashParams, *, create: bool = False) -> ServedIndex:
        """The latest version at ``url``, checked: IndexMissingError (none there; with
        ``create``, an empty index of ``params`` is committed there first), IndexDamagedError,
        IndexParameterError naming the first parameter that differs from ``params``,
        IndexNotServable for a part without a key table."""
        if create:
            created(url, params)
        index = _checked(url, DocIndex.open(url), params)
        if any(p.ids is None for p in index.parts):
            # What id checks of a part without an id table use, imported now rather than by
            # the first registration (~0.2 s).
            import pyarrow.compute  # noqa: F401
        return cls(url, index)

    def newer(self, params: MinhashParams) -> DocIndex | None:
        """The index's latest version if newer than the one served, checked as at start (the
        same errors); None if it is the one served. Reads the manifest only."""
        with self.reading():
            latest = DocIndex.open(self.url)
        if latest.version <= self.index.version:
            return None
        return _checked(self.url, latest, params)

    @property
    def rows(self) -> int:
        """Documents in the index."""
        return self.index.rows

    @property
    def version(self) -> int:
        """The version served."""
        return self.index.version

    def near(
        self, sigs: NDArray[np.uint32], threshold: float, version: DocIndex | None = None
    ) -> Near:
        """Every indexed document each of ``sigs`` matches (``DocIndex.near``) in the version
        served, or in ``version`` (one ``newer`` returned, not served yet)."""
        with self.reading():
            found = (self.index if version is None else version).near(sigs, threshold)
        rows: list[list[tuple[str, float]]] = [[] for _ in range(len(sigs))]
        hidden = self.hidden
        used: set[int] = set()
        for (row, at), est in zip(found.pairs.tolist(), found.estimate.tolist(), strict=True):
            if found.ids[at] not in hidden:
                rows[row].append((found.ids[at], est))
                used.add(at)
        for hits in rows:
            hits.sort(key=lambda m: (-m[1], m[0]))
        return Near(rows, {found.ids[i]: found.sigs[i] for i in sorted(used)})

    def digests(self, ids: list[str]) -> dict[str, bytes]:
        """The 16-byte text digest of every id of ``ids`` in the index (hidden ones not)."""
        with self.reading():
            return self.index.id_digests([i for i in ids if i not in self.hidden])

    def signature(self, doc_id: str) -> NDArray[np.uint32] | None:
        """The signature of the indexed document ``doc_id`` (None: not in the index)."""
        if doc_id in self.hidden:
            return None
        return self.signatures([doc_id]).get(doc_id)

    def signatures(self, ids: Sequence[str]) -> dict[str, NDArray[np.uint32]]:
        """The signature of every id of ``ids`` in the index (hidden ones too)."""
        with self.reading():
            return self.index.id_signatures(list(ids))


def created(url: str, params: MinhashParams) -> bool:
    """Commit an empty index of ``params`` at ``url`` (version 1, no parts) if nothing is
    committed there yet (True); False if an index is there (or another process created it
    meanwhile)."""
    empty = DocIndex.open(url, missing_ok=True)
    if empty.version:
        return False
    try:
        commit_index(empty, params)
    except IndexConflictError:  # created meanwhile: that one is served
        return False
    return True


def _checked(url: str, index: DocIndex, params: MinhashParams) -> DocIndex:
    """``index`` if the service can serve it: its parameters are ``params`` (else
    IndexParameterError) and every part has a key table (else IndexNotServable)."""
    index.check_params(params)
    old = [p.name for p in index.parts if p.keys is None]
    if old:
        raise IndexNotServable(
            f"{url}: part {old[0]} of the index is of the first layout (no key table), "
            f"which the service does not read: run `neardup index compact {url}` first"
        )
    return index


def matched_rows(
    index: ServiceIndex, ids: list[str], sigs: NDArray[np.uint32], hidden: Container[str] = ()
) -> list[int]:
    """The rows of ``ids``/``sigs`` (indexed rows, of a part added to the served index) not
    linked yet, nor ``hidden`` (``ServedIndex.hidden``), that a document of the service's own
    matches. Reads ``index`` only."""
    found = index.matches(sigs)
    return [
        k
        for k, f in enumerate(found)
        if ids[k] not in index
        and ids[k] not in hidden
        and any(not index.is_indexed(i) for i, _ in f.best)
    ]


def matched_rows_plan(index: ServiceIndex, ids: list[str], sigs: NDArray[np.uint32]) -> Plan | None:
    """The plan linking those indexed rows (of a part added to the served index) that a
    document of the service's own matches (None: none does), as a start links them."""
    rows = matched_rows(index, ids, sigs)
    if not rows:
        return None
    return index.plan([ids[k] for k in rows], sigs[rows], indexed=len(rows))


def linking_plan(
    index: ServiceIndex, ids: list[str], sigs: NDArray[np.uint32], near: Near | None
) -> Plan:
    """``index.plan`` of new documents ``ids``, after the indexed documents they match
    (``near``) that are not linked yet: those first, as ``indexed`` rows, so each new document
    counts and joins them as it would documents registered before it. An indexed row of one
    of ``ids`` is never linked (the store's document of an id wins: a replaced flushed
    document's old row, seen before it was hidden)."""
    new = set(ids)
    linked = [] if near is None else sorted(i for i in near.sigs if i not in index and i not in new)
    if near is None or not linked:
        return index.plan(ids, sigs)
    both = np.concatenate((np.stack([near.sigs[i] for i in linked]), sigs)).astype(np.uint32)
    return index.plan([*linked, *ids], both, indexed=len(linked))
