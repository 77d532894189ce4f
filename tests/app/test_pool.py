"""The service's signature pool: one seed, chunks in submission order."""

import asyncio

import numpy as np

from app.pool import SignaturePool
from core.minhash import signatures
from tests.pools import ReversePool


def test_service_pool_keeps_chunk_order_and_one_seed():
    pool = SignaturePool(3, num_perm=128, seed=0, k=5)
    pool.close()
    pool._pool = ReversePool(3)  # type: ignore[assignment]
    texts = [f"document {i} has its own words {i * 7} and {i * 13}" for i in range(9)]
    got = asyncio.run(pool.signatures(texts))
    assert np.array_equal(got, signatures(texts))
