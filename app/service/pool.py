"""The spawn process pool the service computes signatures on, awaited without blocking.

A large batch goes to the pool in chunks of at most ``CHUNK_TEXTS`` texts, with at most two
chunks per worker queued at a time: a query that arrives while a 10,000-document batch is
being signed waits for a couple of small chunks, not for the whole batch (the pool's queue is
first come, first served).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np
from numpy.typing import NDArray

from core.engine import MinhashParams, WorkerError, batch_signatures, chunk_bounds, spawn_pool

__all__ = ["CHUNK_TEXTS", "SignaturePool"]

#: Texts per task at most; a batch is cut into at least one chunk per worker.
CHUNK_TEXTS = 256
#: Chunks queued per worker at most, so the workers never idle between chunks.
_QUEUED_PER_WORKER = 2


class SignaturePool:
    """A spawn pool started once and reused by every request batch.

    A batch is cut into one contiguous chunk per worker; chunks are concatenated in order, so
    the result equals ``core.minhash.signatures`` of the batch.
    """

    def __init__(self, workers: int, params: MinhashParams) -> None:
        self.workers = workers
        self.params = params
        self.restarts = 0
        self._pool: ProcessPoolExecutor = spawn_pool(workers)

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
        parts = max(self.workers, -(-len(texts) // CHUNK_TEXTS))
        queued: deque[asyncio.Future[NDArray[np.uint32]]] = deque()
        chunks: list[NDArray[np.uint32]] = []
        try:
            for lo, hi in chunk_bounds(len(texts), parts):
                task = self._pool.submit(batch_signatures, list(texts[lo:hi]), self.params)
                queued.append(asyncio.wrap_future(task))
                if len(queued) >= _QUEUED_PER_WORKER * self.workers:
                    chunks.append(await queued.popleft())
            # Taken in submission (chunk) order, whatever order the chunks finish in.
            chunks.extend([await future for future in queued])
        except (BrokenProcessPool, RuntimeError) as exc:  # RuntimeError: submit after shutdown
            for future in queued:
                future.cancel()
            raise WorkerError(f"a signature worker process died: {exc}") from exc
        return np.concatenate(chunks, axis=0)

    def _replace(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = spawn_pool(self.workers)
        self.restarts += 1

    async def warm_up(self) -> None:
        """Start every worker (spawned interpreters import numpy once, here, not per request)."""
        await self._run(["warm up"] * self.workers)

    def close(self) -> None:
        """Shut the pool down."""
        self._pool.shutdown(wait=True, cancel_futures=True)
