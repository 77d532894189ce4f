"""A large index written straight into the service's SQLite store, from realistic signatures.

Generating and hashing a million texts would take most of the benchmark's time, so only a pool
of real documents is signed (``neardup.core.minhash.signatures``). The index then holds:

- rows ``0 .. pool-1``: the pool's real signatures, unchanged (ids ``d00000000`` ...), so that
  near-copies of pool texts have something to match;
- every later row: either (``dup_rate``) a planted near duplicate, a copy of a uniformly chosen
  earlier row with ``dup_changes`` entries replaced, recorded as a confirmed pair when its
  estimate is at least the threshold; or a distinct document, a pool row with all but about
  ``keep`` entries replaced. A replaced entry of column j takes column j of a random pool row,
  so every value is a real minimum of that permutation (realistic magnitudes, all below
  2**31 - 1) while two synthetic rows almost never share a whole band.

Texts are not stored (``text`` is NULL, as with ``STORE_TEXT=false``); digests are SHA-256 of
the pool texts, and of ``synthetic:<num>`` for the rest.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.common.corpus import doc_id

__all__ = ["BuildResult", "SynthParams", "build_store", "synthetic_rows"]

_CHUNK = 100_000


@dataclass(frozen=True)
class SynthParams:
    """How the synthetic rows are made.

    Attributes:
        n: rows in total (pool rows included).
        dup_rate: the share of synthetic rows that are planted near duplicates.
        dup_changes: entries replaced in a planted near duplicate (8 of 128 -> 0.9375).
        keep: entries of the base pool row a distinct synthetic row keeps, on average.
        threshold: a planted pair is recorded as confirmed when its estimate reaches this.
        seed: the seed of ``numpy.random.default_rng``.
    """

    n: int
    dup_rate: float = 0.05
    dup_changes: int = 8
    keep: int = 16
    threshold: float = 0.8
    seed: int = 0


@dataclass
class BuildResult:
    """What ``build_store`` wrote and how long each part took.

    Attributes:
        documents: rows written.
        pool_rows: rows that are real signatures of pool texts.
        planted: planted near duplicates.
        pairs: confirmed pairs written (planted ones with an estimate >= threshold).
        generate_seconds: making the signature rows and pairs in memory.
        write_seconds: digests, ``ensure_params`` and every ``add_documents`` transaction.
        db_bytes: the size of the SQLite file (and its WAL) afterwards.
    """

    documents: int
    pool_rows: int
    planted: int
    pairs: int
    generate_seconds: float
    write_seconds: float
    db_bytes: int


def _mixed_values(
    pool: NDArray[np.uint32], rows: int, rng: np.random.Generator
) -> NDArray[np.uint32]:
    """``[rows, num_perm]`` values, column j of each taken from column j of a random pool row."""
    donors = rng.integers(0, len(pool), size=(rows, pool.shape[1]))
    return pool[donors, np.arange(pool.shape[1])]


def _plant(
    sigs: NDArray[np.uint32],
    planted: NDArray[np.int64],
    pool: NDArray[np.uint32],
    params: SynthParams,
    rng: np.random.Generator,
) -> list[tuple[int, int, float]]:
    """Overwrite rows ``planted`` (ascending) with near copies of earlier rows; their pairs."""
    num_perm = sigs.shape[1]
    sources = (rng.random(len(planted)) * planted).astype(np.int64)  # uniform in [0, row)
    fresh = _mixed_values(pool, len(planted), rng)
    pairs: list[tuple[int, int, float]] = []
    for k, (row, src) in enumerate(zip(planted.tolist(), sources.tolist(), strict=True)):
        changed = rng.choice(num_perm, size=params.dup_changes, replace=False)
        sigs[row] = sigs[src]  # an earlier planted row is already final: rows go in order
        sigs[row, changed] = fresh[k, changed]
        estimate = float(np.count_nonzero(sigs[row] == sigs[src])) / num_perm
        if estimate >= params.threshold:
            pairs.append((src, row, estimate))
    return pairs


def synthetic_rows(
    pool: NDArray[np.uint32], params: SynthParams
) -> tuple[NDArray[np.uint32], list[tuple[int, int, float]], int]:
    """The ``[n, num_perm]`` signature rows and the confirmed pairs (a < b) of the planted ones.

    Args:
        pool: real signatures of the pool documents.
        params: sizes, rates and seed.

    Returns:
        The rows, the confirmed pairs, and how many rows were planted near duplicates.
    """
    rng = np.random.default_rng([params.seed, 7])
    n, num_perm = params.n, pool.shape[1]
    head = min(len(pool), n)
    sigs = np.empty((n, num_perm), dtype=np.uint32)
    sigs[:head] = pool[:head]
    rest = n - head
    if rest == 0:
        return sigs, [], 0
    for lo in range(head, n, _CHUNK):  # in chunks: a few temporaries of 100k rows at a time
        rows = min(_CHUNK, n - lo)
        base = pool[rng.integers(0, len(pool), size=rows)]
        kept = rng.random((rows, num_perm)) < params.keep / num_perm
        sigs[lo : lo + rows] = np.where(kept, base, _mixed_values(pool, rows, rng))
    planted = head + np.flatnonzero(rng.random(rest) < params.dup_rate).astype(np.int64)
    pairs = _plant(sigs, planted, pool, params, rng)
    return sigs, pairs, len(planted)


def _digests(pool_texts: Sequence[str], n: int) -> list[bytes]:
    """SHA-256 of the pool texts, then of ``synthetic:<num>`` for every later row."""
    out = [hashlib.sha256(t.encode("utf-8")).digest() for t in pool_texts[:n]]
    out += [hashlib.sha256(f"synthetic:{i}".encode()).digest() for i in range(len(out), n)]
    return out


def _db_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("neardup.sqlite3*") if p.is_file())


def write_store(
    data_dir: Path,
    sigs: NDArray[np.uint32],
    digests: list[bytes],
    index_params: dict[str, int],
    chunk: int = 50_000,
) -> None:
    """Write every row through ``SQLiteStore.add_documents``, ``chunk`` a time (the store keeps
    signatures only; recovery clusters them, so the planted pairs are found again).

    Args:
        data_dir: the data directory (created if missing).
        sigs: the signature rows; row i becomes document number i, id ``doc_id(i)``.
        digests: the text digest of every row.
        index_params: what ``ensure_params`` records (num_perm, bands, k, seed).
        chunk: rows per transaction.
    """
    from neardup.app.service.store import SQLiteStore, StoredDoc

    store = SQLiteStore(data_dir)
    try:
        store.ensure_params(index_params)
        little = sigs.astype("<u4", copy=False)
        for lo in range(0, len(sigs), chunk):
            hi = min(lo + chunk, len(sigs))
            docs = [
                StoredDoc(i, doc_id(i), digests[i], little[i].tobytes(), {}, None)
                for i in range(lo, hi)
            ]
            store.add_documents(docs)
    finally:
        store.close()


def build_store(
    data_dir: Path,
    pool: NDArray[np.uint32],
    pool_texts: Sequence[str],
    params: SynthParams,
    index_params: dict[str, int],
) -> BuildResult:
    """Generate the synthetic rows and write them into a fresh data directory.

    Args:
        data_dir: the (empty) data directory.
        pool: real signatures of ``pool_texts``.
        pool_texts: the pool documents (only their digests are stored).
        params: sizes, rates and seed.
        index_params: the index parameters the store is created with.

    Returns:
        Counts, timings and the database size.
    """
    t0 = time.perf_counter()
    sigs, pairs, planted = synthetic_rows(pool, params)
    t1 = time.perf_counter()
    write_store(data_dir, sigs, _digests(pool_texts, params.n), index_params)
    t2 = time.perf_counter()
    return BuildResult(
        documents=params.n,
        pool_rows=min(len(pool), params.n),
        planted=planted,
        pairs=len(pairs),
        generate_seconds=t1 - t0,
        write_seconds=t2 - t1,
        db_bytes=_db_bytes(data_dir),
    )
