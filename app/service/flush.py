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
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from contextlib import suppress
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.app.service.store import SQLiteStore
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

__all__ = ["Batch", "Mark", "Written", "commit_flush", "run_store", "start_mark", "write_flush"]

log = logging.getLogger("neardup")


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


def start_mark(store: SQLiteStore, index: DocIndex) -> tuple[str, Mark]:
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
