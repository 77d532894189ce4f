"""The service's signature pool: one seed, chunks in submission order, cut by characters."""

import asyncio
import os
import signal
import threading
import time
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from neardup.app.service import pool as pool_module
from neardup.app.service.pool import CHUNK_CHARS, NUMPY_SLOWER, STREAM_CHUNK_CHARS, SignaturePool
from neardup.core.engine import MinhashParams, Utf8Texts
from neardup.core.minhash import signatures
from tests.pools import ReversePool


def test_service_pool_keeps_chunk_order_and_one_seed():
    pool = SignaturePool(3, MinhashParams(num_perm=128))
    pool.close()
    pool._pool = ReversePool(3)  # type: ignore[assignment]
    texts = [f"document {i} has its own words {i * 7} and {i * 13}" for i in range(9)]
    got = asyncio.run(pool.signatures(texts))
    assert np.array_equal(got, signatures(texts))


class _BrokenPool:
    """A pool whose every task fails as if its worker had died."""

    _max_workers = 2

    def submit(self, fn, *args):
        from concurrent.futures import Future
        from concurrent.futures.process import BrokenProcessPool

        fut = Future()
        fut.set_exception(BrokenProcessPool("a worker died"))
        return fut

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def test_concurrent_batches_on_a_broken_pool_replace_it_once():
    pool = SignaturePool(2, MinhashParams(num_perm=16))
    pool.close()
    pool._pool = _BrokenPool()  # type: ignore[assignment]
    texts = [f"text {i} with some words in it" for i in range(6)]

    async def both():
        return await asyncio.gather(pool.signatures(texts), pool.signatures(texts[:3]))

    try:
        first, second = asyncio.run(both())
        assert np.array_equal(first, signatures(texts, num_perm=16))
        assert np.array_equal(second, signatures(texts[:3], num_perm=16))
        assert pool.restarts == 1
    finally:
        pool.close()


class _RecordingPool(ReversePool):
    """The stand-in pool, recording how many texts and characters each task was given."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.chunks: list[tuple[int, int]] = []

    def submit(self, fn, *args):
        chunk = args[0]
        assert isinstance(chunk, Utf8Texts), "a chunk is sent encoded"
        self.chunks.append((len(chunk), sum(map(len, chunk.texts()))))
        return super().submit(fn, *args)


def _chunks_of(texts, compiled):
    pool = SignaturePool(2, MinhashParams(num_perm=16))
    pool.close()
    pool._pool = _RecordingPool(2)  # type: ignore[assignment]
    pool.compiled = compiled
    got = asyncio.run(pool.signatures(texts))
    assert np.array_equal(got, signatures(texts, num_perm=16))
    return pool._pool.chunks


def test_a_batch_is_cut_by_characters_one_chunk_a_worker_when_it_is_small():
    # 1,000 documents of ~1,300 characters: 1.3 M characters, one chunk per worker.
    texts = [f"document {i} " + "some words of english text " * 48 for i in range(1000)]
    chunks = _chunks_of(texts, compiled=True)
    assert len(chunks) == 2 and all(abs(n - 500) <= 2 for n, _ in chunks)
    # The same batch with numpy workers is a large one for them: chunks of at most
    # STREAM_CHUNK_CHARS / NUMPY_SLOWER (give or take their last text), an even number of them.
    numpy_chunks = _chunks_of(texts, compiled=False)
    assert len(numpy_chunks) % 2 == 0 and len(numpy_chunks) > 2
    assert all(chars <= STREAM_CHUNK_CHARS // NUMPY_SLOWER + 1400 for _, chars in numpy_chunks)
    # Half the batch with numpy workers: one chunk a worker again.
    assert len(_chunks_of(texts[:300], compiled=False)) == 2


def test_a_large_batch_is_cut_into_small_chunks():
    texts = [f"text {i} " + "word " * (50 + 37 * (i % 60)) for i in range(6000)]
    assert sum(map(len, texts)) > 2 * CHUNK_CHARS
    chunks = _chunks_of(texts, compiled=True)
    assert sum(n for n, _ in chunks) == 6000 and len(chunks) % 2 == 0
    longest = max(map(len, texts))
    assert all(chars <= STREAM_CHUNK_CHARS + longest for _, chars in chunks)


@pytest.mark.parametrize("jit", ["1", "0"])
def test_warm_up_learns_which_kernel_the_workers_run(monkeypatch, jit):
    monkeypatch.setenv("NEARDUP_JIT", jit)
    pool = SignaturePool(1, MinhashParams(num_perm=16))
    try:
        asyncio.run(pool.warm_up())
        assert pool.compiled is (jit == "1")
        slower = 1 if jit == "1" else NUMPY_SLOWER
        assert pool.chunk_chars(["a few words"]) == CHUNK_CHARS // slower
    finally:
        pool.close()


def _never_warm(folder: str, tokenizer: str = "words") -> bool:
    """A worker's warm-up that does not end by itself (a first compile, on a busy machine),
    once it has said so with a file in ``folder``."""
    Path(folder, str(os.getpid())).touch()
    time.sleep(3600)
    return True


def test_close_ends_workers_still_warming_up_instead_of_waiting(monkeypatch, tmp_path):
    """A stopping service closes its pool once no request awaits it: a warm-up nobody needs any
    more is not waited for (a server's stop waited 0.5 to 3 s for it)."""
    monkeypatch.setattr(pool_module, "warm_worker", partial(_never_warm, str(tmp_path)))
    pool = SignaturePool(1, MinhashParams(num_perm=16))
    pool._pool.submit(os.getpid)  # starts the worker, which starts warming up
    (worker,) = pool._pool._processes.values()
    closing = threading.Thread(target=pool.close, daemon=True)
    try:
        deadline = time.monotonic() + 120
        while not any(tmp_path.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(tmp_path.iterdir()), "the worker did not start warming up"
        closing.start()
        closing.join(timeout=120)  # an hour of warm-up, were it waited for
        assert not closing.is_alive(), "close waited for the warm-up"
        assert worker.exitcode == -signal.SIGTERM
    finally:
        if worker.exitcode is None:  # nothing left behind, whatever failed
            worker.kill()
        if closing.is_alive():
            closing.join(timeout=60)
