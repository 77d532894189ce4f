"""The service's signature pool: one seed, chunks in submission order."""

import asyncio

import numpy as np

from app.service.pool import SignaturePool
from core.engine import MinhashParams
from core.minhash import signatures
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
