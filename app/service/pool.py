"""The spawn process pool the service computes signatures on, awaited without blocking.

A batch goes to the pool in chunks of about the same work (characters, as core's
``slab_bounds`` cuts them), a multiple of the workers in number. A batch of up to
``CHUNK_CHARS`` characters a worker is one chunk per worker: each chunk is a round trip through
the pool, and with nothing queued behind it, its latency is not hidden (a 1,000-document batch
in four 256-text chunks took 50 ms where two chunks took 36 ms). A larger batch goes in chunks
of ``STREAM_CHUNK_CHARS``, at most two per worker queued at a time: the round trips overlap the
work, and as the pool's queue is first come, first served, a query that arrives while a
10,000-document batch is being signed waits for a couple of small chunks, not for the batch.

The workers load the compiled kernels as they start (``spawn_pool(warm=warm_worker)``): a
long-lived pool pays the ~0.5 s once instead of running the numpy kernel, about 3x slower,
until each worker has hashed enough. A chunk is bounded in time, not in size: where the
workers run numpy (no numba, ``NEARDUP_JIT=0``) chunks are ``NUMPY_SLOWER`` times smaller.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial

import numpy as np
from numpy.typing import NDArray

from neardup.core.engine import (
    MinhashParams,
    Utf8Texts,
    WorkerError,
    batch_signatures,
    raise_worker_error,
    slab_bounds,
    spawn_pool,
    stop_pool,
    warm_worker,
)

__all__ = ["CHUNK_CHARS", "NUMPY_SLOWER", "STREAM_CHUNK_CHARS", "SignaturePool"]

#: Characters a worker up to which a batch is one chunk per worker (give or take a text), with
#: compiled workers: ~50 ms of one worker on English-like text (~50 ns a character), so a
#: batch of 1,000 typical documents is one round trip.
CHUNK_CHARS = 1 << 20
#: Characters per chunk at most in a larger batch: ~13 ms of one worker. (10,000 documents of
#: ~1,300 characters took 0.22 s in these chunks, 0.35 s in chunks of CHUNK_CHARS: the tail.)
STREAM_CHUNK_CHARS = 1 << 18
#: Where the workers run the numpy kernel (~200 ns a character), both bounds are this many
#: times smaller.
NUMPY_SLOWER = 4
#: Chunks queued per worker at most, so the workers never idle between chunks.
_QUEUED_PER_WORKER = 2


class SignaturePool:
    """A spawn pool started once and reused by every request batch.

    A batch is cut into contiguous chunks; they are concatenated in order, so the result equals
    ``core.minhash.signatures`` of the batch.

    Attributes:
        compiled: whether the workers run the compiled kernels (known after ``warm_up``).
    """

    def __init__(self, workers: int, params: MinhashParams) -> None:
        self.workers = workers
        self.params = params
        self.restarts = 0
        self.compiled = False
        self._pool: ProcessPoolExecutor = spawn_pool(
            workers, warm=partial(warm_worker, params.tokenizer)
        )

    def chunk_chars(self, texts: Sequence[str]) -> int:
        """The most characters in one chunk of ``texts``, by its size and the workers' kernel."""
        slower = 1 if self.compiled else NUMPY_SLOWER
        if sum(map(len, texts)) <= self.workers * CHUNK_CHARS // slower:
            return CHUNK_CHARS // slower
        return STREAM_CHUNK_CHARS // slower

    async def signatures(self, texts: Sequence[str]) -> NDArray[np.uint32]:
        """Signatures of ``texts``; a dead worker replaces the pool and the batch runs once more."""
        failed = self._pool
        try:
            return await self._run(texts)
        except WorkerError:
            # Concurrent batches may all see the same broken pool: only the first replaces it.
            if self._pool is failed:
                self._replace()
                await self.warm_up()
            return await self._run(texts)

    async def _run(self, texts: Sequence[str]) -> NDArray[np.uint32]:
        if not texts:
            return np.empty((0, self.params.num_perm), dtype=np.uint32)
        queued: deque[asyncio.Future[NDArray[np.uint32]]] = deque()
        chunks: list[NDArray[np.uint32]] = []
        try:
            for lo, hi in slab_bounds(texts, self.workers, self.chunk_chars(texts)):
                chunk = Utf8Texts.encode(texts[lo:hi], lo)  # pickles as one bytes object
                task = self._pool.submit(batch_signatures, chunk, self.params)
                queued.append(asyncio.wrap_future(task))
                if len(queued) >= _QUEUED_PER_WORKER * self.workers:
                    chunks.append(await queued.popleft())
            # Taken in submission (chunk) order, whatever order the chunks finish in.
            chunks.extend([await future for future in queued])
        except (BrokenProcessPool, RuntimeError) as exc:  # RuntimeError: submit after shutdown
            for future in queued:
                future.cancel()
            raise_worker_error(exc)  # no exit codes to wait for: a server runs no script
        return np.concatenate(chunks, axis=0)

    def _replace(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = spawn_pool(self.workers, warm=partial(warm_worker, self.params.tokenizer))
        self.restarts += 1

    async def start(self) -> None:
        """``warm_up``, and once more on a fresh pool if a worker died meanwhile (killed, or out
        of memory): a worker lost while starting is replaced as one lost later is.

        Raises:
            WorkerError: a worker of the fresh pool died too.
        """
        failed = self._pool
        try:
            await self.warm_up()
        except WorkerError:
            if self._pool is failed:  # a batch that saw it first may have replaced it already
                self._replace()
            await self.warm_up()

    async def warm_up(self) -> None:
        """Start every worker (spawned interpreters import numpy, load the compiled kernels and
        build the code-point tables once, here, not on a request's time), and learn whether
        they run the compiled kernels. A batch submitted meanwhile queues behind the workers'
        start (the service does not wait for this to say ready)."""
        try:
            tasks = [
                self._pool.submit(warm_worker, self.params.tokenizer) for _ in range(self.workers)
            ]
            loaded = await asyncio.gather(*map(asyncio.wrap_future, tasks))
        except (BrokenProcessPool, RuntimeError) as exc:
            raise_worker_error(exc)  # no exit codes to wait for: a server runs no script
        self.compiled = all(loaded)

    def close(self) -> None:
        """Shut the pool down: its workers are ended, not waited for (``stop_pool``). The service
        closes it once no request awaits it (the requests in flight finished), so no chunk
        anyone wants is lost, and a stop does not wait for a warm-up nobody needs."""
        stop_pool(self._pool)
