"""Ordered fan-out over a spawn process pool: contiguous chunks out, results back in submission
order (never as they finish), so the output is the same for any worker count or timing."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context, process
from typing import Any, NoReturn, TypeVar

from neardup.core.errors import ParameterError, UnguardedMainError, WorkerError

__all__ = [
    "chunk_bounds",
    "fan_out",
    "in_order",
    "ordered_map",
    "pool_size",
    "raise_worker_error",
    "spawn_pool",
    "start_worker",
    "stop_pool",
]

_T = TypeVar("_T")
_R = TypeVar("_R")

#: The exit code of a spawned worker that was asked to start a pool of its own while it was still
#: importing the main script (the script calls neardup outside ``if __name__ == "__main__":``).
UNGUARDED_MAIN_EXIT = 87

#: How often a worker checks that the process that started it is still alive (seconds).
PARENT_CHECK_SECONDS = 0.25


def spawn_pool(workers: int, *, warm: Callable[[], object] | None = None) -> ProcessPoolExecutor:
    """A process pool with the spawn start method (no forked copies of threads or locks).

    Each worker exits on its own when the process that started the pool is gone, even after a
    SIGKILL that gave it no chance to shut the pool down (the workers would otherwise wait on
    their task queue forever).

    ``warm``: a module-level function every worker calls as it starts, before its first task
    (``core._signatures.warm_worker`` for a long-lived pool, such as the service's).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ParameterError(f"workers must be a whole number >= 1, got {workers!r}")
    if getattr(process.current_process(), "_inheriting", False):
        # A spawned worker importing an unguarded script reached the script's call to us.
        # Python would raise a page-long RuntimeError here, in every worker; exiting quietly
        # with a code of our own lets the parent raise one UnguardedMainError instead.
        os._exit(UNGUARDED_MAIN_EXIT)
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=get_context("spawn"),
        initializer=start_worker,
        initargs=(os.getpid(), warm),
    )


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Shut ``pool`` down now, for its owner that wants nothing more from it: queued tasks are
    cancelled and every worker still running is ended (SIGTERM), whether it runs a task, is
    still starting (importing, loading or compiling the kernels: ``warm``) or is idle; returns
    once they have exited.

    A worker holds no state, so nothing is lost. Left to exit by itself, a worker first finishes
    its start and then tears its interpreter down, numba's modules with it: 0.5 to 3 s that a
    stopping server or an ending run waited for (measured on 2 busy cores). A pool whose worker
    died (broken) is shut down the same way.
    """
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for worker in workers:
        if worker.exitcode is None:
            worker.terminate()
    # The pool's own thread sees its workers gone, fails what was pending and joins them.
    pool.shutdown(wait=True, cancel_futures=True)


def start_worker(parent: int, warm: Callable[[], object] | None = None) -> None:
    """Pool initializer: ``watch_parent(parent)``, then ``warm()`` if given."""
    watch_parent(parent)
    if warm is not None:
        warm()


def watch_parent(parent: int) -> None:
    """Pool initializer: a daemon thread that ends this worker once ``parent`` is no longer its
    parent process (it died and the worker was re-parented)."""
    thread = threading.Thread(
        target=_exit_when_orphaned, args=(parent,), name="watch-parent", daemon=True
    )
    thread.start()


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(1)


def raise_worker_error(exc: BaseException, pool: ProcessPoolExecutor | None = None) -> NoReturn:
    """Raise the error for a broken ``pool`` (``exc``, what the pool raised).

    UnguardedMainError, alone (the pool's own error says nothing more), when its workers exited
    because they re-ran an unguarded main script; else WorkerError, caused by ``exc``.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    if any(_exit_code(p) == UNGUARDED_MAIN_EXIT for p in processes):
        main = sys.modules.get("__main__")
        raise UnguardedMainError(getattr(main, "__file__", None)) from None
    raise WorkerError(f"a signature worker process died: {exc}") from exc


def _exit_code(process: Any, wait: float = 2.0) -> int | None:
    """A pool worker's exit code, once it has exited (at most ``wait`` seconds): the pool's own
    thread may be reaping it at this moment, and until it has noted the code, none is seen."""
    deadline = time.monotonic() + wait
    process.join(wait)
    while process.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.01)
    code: int | None = process.exitcode
    return code


def pool_size(pool: ProcessPoolExecutor) -> int:
    """How many worker processes ``pool`` runs."""
    return int(getattr(pool, "_max_workers", 1))


def chunk_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``[lo, hi)`` ranges covering ``range(n)``, sizes differing by <= 1."""
    parts = max(1, min(parts, n))
    q, r = divmod(n, parts)
    bounds = []
    lo = 0
    for i in range(parts):
        hi = lo + q + (1 if i < r else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def fan_out(
    pool: ProcessPoolExecutor,
    fn: Callable[..., _R],
    items: Sequence[_T],
    parts: int,
    *args: Any,
) -> list[Future[_R]]:
    """Submit ``fn(items[lo:hi], *args)`` for ``parts`` contiguous chunks, in chunk order.

    Raises:
        WorkerError: the pool is broken or shut down.
    """
    try:
        return [
            pool.submit(fn, list(items[lo:hi]), *args) for lo, hi in chunk_bounds(len(items), parts)
        ]
    except (BrokenProcessPool, RuntimeError) as exc:  # RuntimeError: submit after shutdown
        raise_worker_error(exc, pool)


def in_order(futures: Iterable[Future[_R]]) -> list[_R]:
    """The results of ``futures`` in submission order; WorkerError if a worker died."""
    try:
        return [f.result() for f in futures]
    except BrokenProcessPool as exc:
        raise_worker_error(exc)


def ordered_map(
    pool: ProcessPoolExecutor | None,
    fn: Callable[..., _R],
    batches: Iterable[_T],
    *args: Any,
    ahead: int = 2,
) -> Iterator[tuple[_T, _R]]:
    """``(batch, fn(batch, *args))`` for every batch, in input order, reading at most ``ahead``
    batches per worker past the one being waited for; computed here when ``pool`` is None.

    Raises:
        WorkerError: a worker process died.
    """
    if pool is None:
        for batch in batches:
            yield batch, fn(batch, *args)
        return
    limit = ahead * pool_size(pool)
    pending: deque[tuple[_T, Future[_R]]] = deque()
    try:
        for batch in batches:
            pending.append((batch, pool.submit(fn, batch, *args)))
            while len(pending) > limit:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
    except BrokenProcessPool as exc:
        raise_worker_error(exc, pool)
