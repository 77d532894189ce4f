"""Background compaction of the index the service serves and writes into (``neardup serve
--index``): every flush commits a new part, so without it a year of flushes is ~105,000 parts,
each read by every lookup and listed by every manifest.

**Policy.** Core's size-tiered ``compaction_group`` (COMPACT_PARTS parts of one size tier
merged into one, at most COMPACT_ROWS live rows; a part mostly deleted rewritten alone): the
parts stay logarithmic in the rows below COMPACT_ROWS, larger parts are left alone.

**One at a time, with the flushes.** A compaction runs under the flush lock (the flusher's
own, and ``Store.lock_flush``: PostgreSQL's advisory lock for replicas), so a flush and a
compaction never race and only one replica compacts; on a shared store a dead flusher's
commit is adopted first (``Flusher._adopt``), so no part past the store's mark is ever merged.
Its rows are written by a child process (``main``: core's ``rewrite_group``), so its memory
(~750 bytes a row compacted, plus ~0.3 GB) is returned when it ends and the event loop never
waits for it; the commit (``commit_compaction``: the batch engines' commit) is the parent's. A
commit lost to a batch append is retried later (at the next refresh that serves the winner);
an error is logged, counted, and retried after RETRY_SECONDS. At shutdown the child is killed:
its files are leftovers.

**Old parts.** The merged parts' files stay for readers of earlier versions (another
replica, a batch run reading the index, a lookup under way): each is marked dropped, and
removed once dropped for ``LEFTOVER_AGE`` (an hour) by a later compaction (or ``neardup index
compact``).

**Refresh.** A compaction adds no documents: ``linked_parts`` tells the parts whose rows a
refresh must look up (a compacted part whose sources the version served held, or this store
flushed, is not read), and ``deleted_between`` the rows deleted between two versions though a
compaction dropped the parts that held them (the one rule for flushed ids).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from neardup.app.service.flush import _version, run_store
from neardup.core.engine import (
    DocIndex,
    IndexConflictError,
    IndexPart,
    commit_compaction,
    compaction_group,
    compaction_run,
    deleted_since,
    index_part_version,
    read_json,
    remove_leftovers,
    rewrite_group,
)

if TYPE_CHECKING:
    from neardup.app.service.flush import Flusher
    from neardup.app.service.operations import Service

__all__ = [
    "CHILD", "RETRY_SECONDS", "CompactionFailed", "Compactor", "deleted_between", "linked_parts",
    "write_compacted", "write_in_child",
]  # fmt: skip

log = logging.getLogger("neardup")

#: The compaction's child process: ``python -c CHILD PARENT_PID`` (``main``).
CHILD = "from neardup.app.service.compaction import main; main()"
#: Seconds after a failed compaction before the next is tried.
RETRY_SECONDS = 30.0
#: Compacted parts followed back through their sources (a part compacted again and again).
MAX_DEPTH = 64


class CompactionFailed(RuntimeError):
    """The child process writing a compaction's part failed (its error, last line)."""


def write_compacted(job: dict[str, Any]) -> dict[str, Any] | None:
    """A compaction's part, written: the parts ``job["parts"]`` of version ``job["version"]``
    of the index at ``job["url"]`` rewritten as one (``rewrite_group``, with ``job["run"]``);
    the part as a manifest lists it, or None (every row deleted). Blocking."""
    latest = DocIndex.open(str(job["url"]))
    index = latest.at_version(int(job["version"]))
    if index is None:
        raise CompactionFailed(f"the index has no version {job['version']}")
    by_name = {p.name: p for p in index.parts}
    group = [by_name[str(name)] for name in job["parts"]]
    part = rewrite_group(index, group, dict(job["run"]))
    return None if part is None else part.as_json()


async def write_in_child(job: dict[str, Any]) -> dict[str, Any] | None:
    """``write_compacted`` in a child process (its memory returned when it ends); cancelled,
    the child is killed (what it wrote is a leftover)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(os.getpid()),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await child.communicate(json.dumps(job).encode("utf-8"))
    except BaseException:
        with suppress(ProcessLookupError):
            child.kill()
        await asyncio.shield(child.wait())
        raise
    if child.returncode != 0:
        lines = err.decode("utf-8", "replace").strip().splitlines() or ["no message"]
        raise CompactionFailed(f"exit {child.returncode}: {lines[-1]}")
    part: dict[str, Any] | None = read_json(out.decode("utf-8"))["part"]
    return part


def _source_known(index: DocIndex, name: str, known: set[str], store_id: str, depth: int) -> bool:
    """Whether the rows of the part ``name`` (no longer listed: a compaction merged it) are
    rows the version served holds, or this store flushed (found in the version it was
    written for, followed back through compactions)."""
    if name in known:
        return True
    version = index_part_version(name)
    older = None if version is None or depth > MAX_DEPTH else index.at_version(version)
    part = None if older is None else next((p for p in older.parts if p.name == name), None)
    return part is not None and _rows_known(older or index, part, known, store_id, depth + 1)


def _rows_known(
    index: DocIndex, part: IndexPart, known: set[str], store_id: str, depth: int = 0
) -> bool:
    """Whether every row of ``part`` (of ``index``) is known without reading it: a part the
    version served lists, this store flushed, or compacted from such parts only."""
    if part.name in known:
        return True
    if part.run.get("mode") == "compact":
        sources = part.run.get("from_parts")
        return isinstance(sources, list) and all(
            _source_known(index, str(n), known, store_id, depth) for n in sources
        )
    return bool(store_id) and run_store(part) == store_id


def linked_parts(served: DocIndex, latest: DocIndex, store_id: str) -> list[IndexPart]:
    """The parts of ``latest`` whose rows a refresh from ``served`` must read and look up:
    those bringing rows ``served`` did not hold, but the parts this store flushed (its own
    documents) and compactions of known rows. Blocking (may read earlier manifests)."""
    known = {p.name for p in served.parts}
    return [p for p in latest.parts if not _rows_known(latest, p, known, store_id)]


def deleted_between(old: DocIndex, new: DocIndex) -> list[str] | None:
    """The ids of rows live in ``old`` that a version up to ``new`` deleted (``deleted_since``),
    also when a compaction since dropped the part that held the row: then each version between
    is compared with the one before it. None when that cannot be read (a part and its vectors
    removed at once by ``neardup index compact``; ``deleted_since`` is all that is known then).
    Blocking."""
    names = {p.name for p in new.parts}
    if all(p.name in names for p in old.parts):
        return deleted_since(old, new)
    found: set[str] = set()
    before = old
    try:
        for version in range(old.version + 1, new.version + 1):
            after = new.at_version(version) or new  # (versions are never removed)
            found.update(deleted_since(before, after))
            before = after
    except IndexConflictError:  # a vector removed with its part: IndexChangedError
        return None
    return sorted(found)


class Compactor:
    """The service's background compactions of the index it serves (see the module's
    docstring): woken (``soon``) at start and whenever a new version is served; one at a
    time, under the flush lock. ``done`` and ``failed`` count them since the start."""

    def __init__(self, service: Service, flusher: Flusher) -> None:
        self.service = service
        self.flusher = flusher
        self.done = 0
        self.failed = 0
        #: The child's work; tests run it in a thread (``write_compacted``).
        self.write: Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]] = write_in_child
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Compact in the background from now on (a first look at once)."""
        self._task = asyncio.create_task(self._run())
        self.soon()

    def soon(self) -> None:
        """Look for a compaction to do (after the one under way, if any)."""
        self._wake.set()

    async def close(self) -> None:
        """Stop: a compaction under way is abandoned (its child killed, a commit under way
        awaited); what it wrote is a leftover."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                while await self.compact():
                    pass
            except Exception:
                self.failed += 1
                log.exception("could not compact the index; trying again later")
                await asyncio.sleep(RETRY_SECONDS)
                self._wake.set()

    async def compact(self) -> bool:
        """One compaction, if the policy finds one and the flush lock is free: True once it
        is committed (and served); False when there is nothing to do, another replica holds
        the lock, or another run committed first (tried again at the next version served)."""
        flusher, service = self.flusher, self.service
        if not self._due(flusher.served.index):  # the version served: no lock taken for it
            return False
        async with flusher._lock:  # after a flush under way (whose refresh woke this)
            if not await service._io_call(service.store.lock_flush):
                return False  # another replica flushes or compacts
            try:
                if flusher.shared and await flusher._adopt():
                    await flusher._serve_flushed_version()
                version = await self._compact_locked()
            finally:
                await service._io_call(service.store.unlock_flush)
        flusher.soon()  # a flush by size skipped meanwhile
        if version is None:
            return False
        try:  # committed: what follows failing is not the compaction's failure
            await service.refresh_index()
            latest = await asyncio.to_thread(DocIndex.open, flusher.served.url)
            removed = await asyncio.to_thread(remove_leftovers, latest)
        except Exception:
            log.exception("compacted the index (version %d), but could not serve it or remove "
                          "its leftovers; the refresh tries again", version)  # fmt: skip
            return True
        if removed:
            log.info("removed leftovers of the index dropped over an hour ago: %d", len(removed))
        return True

    def _due(self, index: DocIndex) -> list[IndexPart]:
        """The parts of ``index`` the next compaction merges (none: nothing to do)."""
        settings = self.service.settings
        return compaction_group(index.parts, settings.compact_parts, settings.compact_rows)

    async def _compact_locked(self) -> int | None:
        """Under the flush lock: plan on the latest version, write in the child, commit."""
        flusher = self.flusher
        latest = await asyncio.to_thread(DocIndex.open, flusher.served.url)
        group = self._due(latest)
        if not group:
            return None
        own = [int(p.run.get("through", -1)) for p in group if run_store(p) == flusher.store_id]
        run = {
            **compaction_run(_version(), group, engine="service"),
            "store": flusher.store_id,
            "through": max(own, default=-1),
        }
        job = {"url": flusher.served.url, "version": latest.version, "run": run,
               "parts": [p.name for p in group]}  # fmt: skip
        started = time.perf_counter()
        written = await self.write(job)
        part = None if written is None else IndexPart.from_json(written)
        added = [] if part is None else [part]
        commit = asyncio.ensure_future(
            asyncio.to_thread(commit_compaction, latest, [group], added, keep_merged=True)
        )
        try:  # never left running after the flush lock is released, nor undone once committed
            version = await asyncio.shield(commit)
        except asyncio.CancelledError:
            with suppress(BaseException):
                await commit
            if not commit.done() or commit.cancelled() or commit.exception() is not None:
                await asyncio.to_thread(_remove_part, latest, part)
            else:  # committed as the service stops: served at the next start
                self.done += 1
            raise
        except IndexConflictError as exc:
            await asyncio.to_thread(_remove_part, latest, part)
            log.info("compaction: %s; compacting again later", exc)
            return None
        except BaseException:
            await asyncio.to_thread(_remove_part, latest, part)
            raise
        self.done += 1
        log.info(
            "compacted the index version=%d parts=%d->1 rows=%d seconds=%.3f",
            version, len(group), 0 if part is None else part.rows, time.perf_counter() - started,
        )  # fmt: skip
        return version


def _remove_part(index: DocIndex, part: IndexPart | None) -> None:
    """Remove the directory of ``part`` (if any), written but committed by no version."""
    if part is None:
        return
    with suppress(OSError, FileNotFoundError):
        index.fs.rm(index.path(f"parts/{part.name}"), recursive=True)


#: Linux's prctl option: the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Have this child killed when its parent (the server, pid ``parent``) dies, even by a
    SIGKILL to the server alone: a part nobody would commit is not written on (what it wrote
    is a leftover). Linux only (prctl); elsewhere the parent's end of the job's pipe closing
    ends a child still reading it, and one already writing ends with its work."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)


def main() -> None:
    """The child (``CHILD``, the parent's pid its argument): a job (JSON) on standard input,
    ``{"part": ...}`` on standard output."""
    _die_with_parent(int(sys.argv[1]))
    job = read_json(sys.stdin.buffer.read().decode("utf-8"))
    sys.stdout.write(json.dumps({"part": write_compacted(job)}))
