"""SignaturePool's own logic in process: its spawn pool replaced by a stand-in executor.

The stand-in runs each task in this process when the test (a "driver" coroutine on the same
event loop) says so, so a test sees how many chunks are queued, which futures are cancelled,
how a broken pool is shut down and replaced, and what the fresh pool is warmed with; the real
spawn pool is covered by test_pool.py.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np
import pytest

from neardup.app.service import pool as pool_module
from neardup.app.service.pool import CHUNK_CHARS, NUMPY_SLOWER, STREAM_CHUNK_CHARS, SignaturePool
from neardup.core.engine import MinhashParams, ParameterError, WorkerError
from neardup.core.minhash import signatures

PARAMS = MinhashParams(num_perm=16, tokenizer="multilingual")


class _Pool:
    """A stand-in executor: tasks run here, in order, when ``step`` is called (or at once with
    ``eager``); ``broken`` fails every task as a dead worker does; ``closed`` fails ``submit``
    as a shut-down executor does."""

    def __init__(self, workers: int, warm: Any) -> None:
        self.workers = workers
        self.warm = warm
        self.eager = True
        self.broken = False
        self.closed = False
        self.pending: list[tuple[Future[Any], Any, tuple[Any, ...]]] = []
        self.tasks: list[tuple[Any, tuple[Any, ...]]] = []
        self.shutdowns: list[tuple[bool, bool]] = []

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        if self.closed:
            raise RuntimeError("cannot schedule new futures after shutdown")
        fut: Future[Any] = Future()
        self.tasks.append((fn, args))
        self.pending.append((fut, fn, args))
        if self.eager:
            self.step()
        return fut

    def step(self) -> None:
        """Finish the oldest pending task."""
        fut, fn, args = self.pending.pop(0)
        if fut.cancelled():
            return
        if self.broken:
            fut.set_exception(BrokenProcessPool("a worker died"))
        else:
            fut.set_result(fn(*args))

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        # As ProcessPoolExecutor: only whether each is true matters.
        self.shutdowns.append((bool(wait), bool(cancel_futures)))
        self.closed = True


@pytest.fixture
def spawned(monkeypatch):
    """Every pool SignaturePool spawns, in order; its workers warm with ``_warm``."""
    pools: list[_Pool] = []
    warmed: list[str] = []

    def spawn_pool(workers, *, warm=None):
        pools.append(_Pool(workers, warm))
        return pools[-1]

    def warm_worker(tokenizer: str = "words") -> bool:
        warmed.append(tokenizer)
        return tokenizer != "uncompiled"

    monkeypatch.setattr(pool_module, "spawn_pool", spawn_pool)
    monkeypatch.setattr(pool_module, "warm_worker", warm_worker)
    return pools, warmed


def test_a_new_pool_spawns_its_workers_warmed_with_the_tokenizer(spawned):
    pools, warmed = spawned
    pool = SignaturePool(3, PARAMS)
    assert (pool.workers, pool.params, pool.restarts, pool.compiled) == (3, PARAMS, 0, False)
    assert [p.workers for p in pools] == [3]
    assert pools[0].warm() is True  # what each worker runs as it starts
    assert warmed == ["multilingual"]


@pytest.mark.parametrize("compiled", [True, False])
def test_chunk_chars_cuts_at_a_chunk_a_worker(spawned, compiled):
    pool = SignaturePool(2, PARAMS)
    pool.compiled = compiled
    slower = 1 if compiled else NUMPY_SLOWER
    small = 2 * CHUNK_CHARS // slower
    assert pool.chunk_chars(["a" * (small - 10), "b" * 10]) == CHUNK_CHARS // slower
    assert pool.chunk_chars(["a" * (small - 10), "b" * 11]) == STREAM_CHUNK_CHARS // slower
    assert pool.chunk_chars([]) == CHUNK_CHARS // slower


def test_an_empty_batch_is_an_empty_uint32_array_and_no_task(spawned):
    pools, _ = spawned
    got = asyncio.run(SignaturePool(2, PARAMS).signatures([]))
    assert got.shape == (0, 16) and got.dtype == np.uint32
    assert pools[0].tasks == []


def _texts(n: int, size: int) -> list[str]:
    return [f"text {i} " + f"w{i % 7} words here " * (size // 16) for i in range(n)]


def test_a_large_batch_keeps_two_chunks_a_worker_queued(spawned):
    pools, _ = spawned
    pool = SignaturePool(3, MinhashParams(num_perm=16))
    fake = pools[0]
    fake.eager = False
    texts = _texts(240, 4000)  # ~0.96 M characters: a large batch for numpy workers
    queued: list[int] = []

    async def drive():
        task = asyncio.ensure_future(pool.signatures(texts))
        while not task.done():
            await asyncio.sleep(0)
            if fake.pending:
                queued.append(len(fake.pending))
                fake.step()
        return task.result()

    got = asyncio.run(drive())
    assert np.array_equal(got, signatures(texts, num_perm=16))
    assert len(fake.tasks) > 6 and max(queued) == 6
    # Each chunk is sent encoded, in order, with its parameters.
    firsts = [len(args[0]) for _, args in fake.tasks]
    assert sum(firsts) == 240 and all(args[1] is pool.params for _, args in fake.tasks)


def test_a_bad_text_is_named_by_its_place_in_the_whole_batch(spawned):
    texts = _texts(8, 64)
    texts[6] = "a lone \ud800 surrogate"
    with pytest.raises(ParameterError, match=r"^text 6 is not valid Unicode"):
        asyncio.run(SignaturePool(2, PARAMS).signatures(texts))


def test_a_dead_worker_cancels_the_queued_chunks_and_raises_worker_error(spawned):
    pools, _ = spawned
    pool = SignaturePool(2, PARAMS)
    fake = pools[0]
    fake.eager = False
    fake.broken = True
    texts = _texts(200, 6000)  # large: more chunks than are queued at once

    async def drive():
        try:
            await pool._run(texts)
        finally:
            await asyncio.sleep(0)  # the cancellations reach the executor's futures

    async def fail_first():
        task = asyncio.ensure_future(drive())
        while not fake.pending and not task.done():
            await asyncio.sleep(0)
        if fake.pending:
            fake.step()
        await task

    with pytest.raises(
        WorkerError, match=r"^a signature worker process died: a worker died$"
    ) as err:
        asyncio.run(fail_first())
    assert isinstance(err.value.__cause__, BrokenProcessPool)
    assert len(fake.pending) == 3 and all(fut.cancelled() for fut, _, _ in fake.pending)


def test_a_pool_shut_down_underneath_raises_worker_error(spawned):
    pools, _ = spawned
    pool = SignaturePool(2, PARAMS)
    pools[0].closed = True
    with pytest.raises(WorkerError, match=r"^a signature worker process died: cannot schedule"):
        asyncio.run(pool._run(["some text"]))
    with pytest.raises(WorkerError, match=r"^a signature worker process died: cannot schedule"):
        asyncio.run(pool.warm_up())


def test_a_broken_pool_is_dropped_without_waiting_and_a_fresh_warm_one_signs(spawned):
    pools, warmed = spawned
    pool = SignaturePool(2, PARAMS)
    pools[0].broken = True
    texts = _texts(5, 64)
    got = asyncio.run(pool.signatures(texts))
    assert np.array_equal(got, signatures(texts, num_perm=16, tokenizer="multilingual"))
    assert pool.restarts == 1 and pool._pool is pools[1]
    # Dropped without waiting for its workers, its queued chunks cancelled.
    assert pools[0].shutdowns == [(False, True)] and pools[1].shutdowns == []
    assert pools[1].workers == 2 and pools[1].warm() is True
    # The fresh pool was warmed on every worker before the batch ran again.
    assert [fn for fn, _ in pools[1].tasks[:2]] == [pool_module.warm_worker] * 2
    assert warmed == ["multilingual"] * 3
    assert pool.compiled is True
    # Each replacement is counted.
    pools[1].broken = True
    asyncio.run(pool.signatures(texts))
    assert pool.restarts == 2 and pool._pool is pools[2]


def test_a_second_dead_pool_is_an_error(spawned):
    pools, _ = spawned
    pool = SignaturePool(2, PARAMS)
    pools[0].broken = True
    pool._replace = lambda: None  # type: ignore[method-assign]  # the fresh pool breaks too
    with pytest.raises(WorkerError):
        asyncio.run(pool.signatures(["a text"]))


def test_warm_up_runs_once_on_every_worker_and_learns_the_kernel(spawned):
    pools, warmed = spawned
    pool = SignaturePool(3, PARAMS)
    asyncio.run(pool.warm_up())
    assert warmed == ["multilingual"] * 3 and pool.compiled is True
    assert pools[0].tasks == [(pool_module.warm_worker, ("multilingual",))] * 3
    # One worker without the compiled kernels: the chunks are cut for numpy.
    results = iter([True, False, True])
    pool._pool.submit = lambda fn, *a: _done(next(results))  # type: ignore[method-assign]
    asyncio.run(pool.warm_up())
    assert pool.compiled is False


def _done(value: Any) -> Future[Any]:
    fut: Future[Any] = Future()
    fut.set_result(value)
    return fut


def test_start_warms_the_workers(spawned):
    _, warmed = spawned
    pool = SignaturePool(2, PARAMS)
    asyncio.run(pool.start())
    assert pool.compiled is True and pool.restarts == 0 and warmed == ["multilingual"] * 2


def test_start_replaces_a_pool_whose_worker_died_while_starting(spawned):
    pools, _ = spawned
    pool = SignaturePool(2, PARAMS)
    pools[0].broken = True
    asyncio.run(pool.start())
    assert pool.restarts == 1 and pool._pool is pools[1] and pool.compiled is True
    assert pools[0].shutdowns == [(False, True)]
    assert pools[1].tasks == [(pool_module.warm_worker, ("multilingual",))] * 2


def test_start_keeps_a_pool_a_batch_already_replaced(spawned):
    pools, _ = spawned
    pool = SignaturePool(2, PARAMS)
    pools[0].broken = True

    async def both():
        await asyncio.gather(pool.signatures(_texts(3, 64)), pool.start())

    asyncio.run(both())
    assert pool.restarts == 1 and len(pools) == 2


def test_start_raises_when_the_fresh_pool_dies_too(spawned, monkeypatch):
    pools, _ = spawned
    pool = SignaturePool(2, PARAMS)
    pools[0].broken = True
    real = pool_module.spawn_pool

    def broken_spawn(workers, *, warm=None):
        fresh = real(workers, warm=warm)
        fresh.broken = True
        return fresh

    monkeypatch.setattr(pool_module, "spawn_pool", broken_spawn)
    with pytest.raises(WorkerError):
        asyncio.run(pool.start())
    assert pool.restarts == 1


def test_close_waits_for_the_workers_and_cancels_queued_chunks(spawned):
    pools, _ = spawned
    SignaturePool(2, PARAMS).close()
    assert pools[0].shutdowns == [(True, True)]
