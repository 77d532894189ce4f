"""Batch runs over corpus files: exact dedup, near dedup and decontamination, in two passes.

Pass 1 streams the inputs once: ids, a 128-bit text digest and the uint32 signature of every
document (signatures on a spawn pool, chunks collected in submission order). Clustering then
needs only those arrays. Pass 2 streams the inputs again and writes the survivors, in input
order, to a temporary file that is renamed over the output only when complete.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.progress import Progress
from core.cluster import check_params, cluster_roots
from core.corpus import corpus_format, read_docs, write_docs
from core.decont import NgramIndex, protected_ngrams
from core.errors import CorpusError, DuplicateIdError, WorkerError
from core.signatures import batch_signatures, spawn_pool
from core.stages import CLUSTER_KEY, Doc

__all__ = ["BATCH", "DedupParams", "Manifest", "batches", "read_corpus", "run_dedup"]

#: Documents per signature batch (and per decontamination batch in pass 2).
BATCH = 4096


@dataclass(frozen=True)
class DedupParams:
    """The knobs of ``neardup dedup``, spelled as everywhere else."""

    num_perm: int = 128
    bands: int = 16
    threshold: float = 0.8
    k: int = 5
    seed: int = 0
    ngram: int = 13
    workers: int = 1
    keep_duplicates: bool = False


@dataclass
class Manifest:
    """What a run did: parameters, inputs, counts per stage, timings and the output's digest."""

    parameters: dict[str, Any]
    inputs: list[dict[str, Any]]
    protected: list[dict[str, Any]]
    counts: dict[str, int] = field(default_factory=dict)
    clusters: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The manifest as a JSON-ready dict."""
        return asdict(self)


def read_corpus(inputs: Sequence[Path]) -> Iterator[Doc]:
    """The documents of every input, in order: one corpus."""
    for path in inputs:
        yield from read_docs(path)


def batches(docs: Iterable[Doc], size: int) -> Iterator[list[Doc]]:
    batch: list[Doc] = []
    for doc in docs:
        batch.append(doc)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _digests(texts: Sequence[str]) -> NDArray[np.uint64]:
    """The first 128 bits of SHA-256 of each text: identical texts, identical digests."""
    raw = b"".join(hashlib.sha256(t.encode("utf-8")).digest()[:16] for t in texts)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).astype(np.uint64)


@dataclass
class _Pass1:
    ids: list[str]
    digests: NDArray[np.uint64]
    sigs: NDArray[np.uint32]


def _signature_pass(inputs: Sequence[Path], params: DedupParams, quiet: bool) -> _Pass1:
    ids: list[str] = []
    digests: list[NDArray[np.uint64]] = []
    # Signatures go to a temporary file as they come and are read back as one matrix: a list of
    # chunks joined at the end would hold the matrix twice.
    with tempfile.TemporaryFile(prefix="neardup-signatures-") as sigs:
        with Progress("signatures", quiet=quiet) as progress:
            for texts, chunk in _signed_batches(inputs, params, ids, digests):
                sigs.write(chunk.tobytes())
                progress.update(len(texts))
        sigs.seek(0)
        matrix = np.fromfile(sigs, dtype=np.uint32).reshape(-1, params.num_perm)
    empty_digests = np.empty((0, 2), dtype=np.uint64)
    return _Pass1(ids, np.concatenate(digests) if digests else empty_digests, matrix)


def _signed_batches(
    inputs: Sequence[Path],
    params: DedupParams,
    ids: list[str],
    digests: list[NDArray[np.uint64]],
) -> Iterator[tuple[list[str], NDArray[np.uint32]]]:
    """(texts, signatures) batch by batch, in input order; collects ids and digests on the way.

    With workers, batches run on a spawn pool with a bounded read-ahead, and results are taken
    in submission order, never as they finish.
    """
    args = (params.num_perm, params.seed, params.k)
    pool = spawn_pool(params.workers) if params.workers > 1 else None
    pending: deque[tuple[list[str], Future[NDArray[np.uint32]]]] = deque()
    try:
        for batch in batches(read_corpus(inputs), BATCH):
            texts = [d.text for d in batch]
            ids.extend(d.id for d in batch)
            digests.append(_digests(texts))
            if pool is None:
                yield texts, batch_signatures(texts, *args)
                continue
            pending.append((texts, pool.submit(batch_signatures, texts, *args)))
            while len(pending) > 2 * params.workers:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
    except BrokenProcessPool as exc:
        raise WorkerError(f"a signature worker process died: {exc}") from exc
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _id_order(ids: list[str]) -> NDArray[np.int64]:
    """Row numbers in id order; DuplicateIdError for a repeated id."""
    order = np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.int64)
    repeated = sorted({ids[a] for a, b in pairwise(order.tolist()) if ids[a] == ids[b]})
    if repeated:
        raise DuplicateIdError(*repeated)
    return order


def _exact_keepers(digests: NDArray[np.uint64], rank: NDArray[np.int64]) -> NDArray[np.bool_]:
    """True for the smallest id of each group of identical texts."""
    order = np.lexsort((rank, digests[:, 1], digests[:, 0]))
    d = digests[order]
    first = np.ones(len(order), dtype=np.bool_)
    first[1:] = (d[1:] != d[:-1]).any(axis=1)
    keep = np.zeros(len(order), dtype=np.bool_)
    keep[order[first]] = True
    return keep


def _roots(
    sigs: NDArray[np.uint32], rank: NDArray[np.int64], params: DedupParams
) -> NDArray[np.int64]:
    """For every row, the row of its cluster's root (the smallest id)."""
    return cluster_roots(sigs, bands=params.bands, threshold=params.threshold, rank=rank)


def _partial_path(output: Path) -> Path:
    fmt = corpus_format(output)
    return output.with_name(f".{output.name[: -len(fmt)]}.partial-{os.getpid()}{fmt}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _survivors(
    inputs: Sequence[Path],
    first: _Pass1,
    keep: NDArray[np.bool_],
    root: NDArray[np.int64],
    index: NgramIndex | None,
    counts: dict[str, int],
    quiet: bool,
) -> Iterator[Doc]:
    """Pass 2: the kept documents, tagged, minus the contaminated ones, in input order."""
    row = 0
    with Progress("write", total=len(first.ids), quiet=quiet) as progress:
        for batch in batches(read_corpus(inputs), BATCH):
            rows = range(row, row + len(batch))
            row += len(batch)
            if row > len(first.ids) or any(
                d.id != first.ids[r] for d, r in zip(batch, rows, strict=True)
            ):
                raise CorpusError(str(inputs[0]), None, "the inputs changed during the run")
            kept = [(d, r) for d, r in zip(batch, rows, strict=True) if keep[r]]
            dirty = index.contaminated_many([d.text for d, _ in kept]) if index else None
            for j, (doc, r) in enumerate(kept):
                if dirty is not None and dirty[j]:
                    counts["decontaminated"] += 1
                    continue
                yield doc._replace(meta={**doc.meta, CLUSTER_KEY: first.ids[int(root[r])]})
            progress.update(len(batch))


def run_dedup(
    inputs: Sequence[Path],
    output: Path,
    *,
    protected: Sequence[Path] = (),
    params: DedupParams = DedupParams(),
    quiet: bool = False,
) -> Manifest:
    """Exact dedup, near dedup and decontamination of ``inputs`` into ``output``."""
    check_params(params.num_perm, params.bands, params.threshold)
    corpus_format(output)
    manifest = Manifest(
        parameters=asdict(params),
        inputs=[{"path": str(p), "bytes": p.stat().st_size} for p in inputs],
        protected=[{"path": str(p), "bytes": p.stat().st_size} for p in protected],
    )
    started = time.perf_counter()
    first = _signature_pass(inputs, params, quiet)
    manifest.seconds["signatures"] = time.perf_counter() - started
    started = time.perf_counter()
    order = _id_order(first.ids)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    exact = _exact_keepers(first.digests, rank)
    root = _roots(first.sigs, rank, params)
    near = exact & (root == np.arange(len(root)))
    keep = np.ones(len(root), dtype=np.bool_) if params.keep_duplicates else near
    sizes = np.bincount(root, minlength=len(root))
    manifest.clusters = int(np.count_nonzero(sizes >= 2))
    manifest.seconds["cluster"] = time.perf_counter() - started
    started = time.perf_counter()
    index = (
        NgramIndex(protected_ngrams(protected, params.ngram), params.ngram) if protected else None
    )
    manifest.seconds["protected"] = time.perf_counter() - started
    counts = {"read": len(first.ids), "decontaminated": 0}
    counts["exact_dropped"] = 0 if params.keep_duplicates else int(np.count_nonzero(~exact))
    counts["near_dropped"] = 0 if params.keep_duplicates else int(np.count_nonzero(exact & ~near))
    del first.sigs  # pass 2 needs ids and roots only
    started = time.perf_counter()
    partial = _partial_path(output)
    try:
        written = write_docs(partial, _survivors(inputs, first, keep, root, index, counts, quiet))
        os.replace(partial, output)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    manifest.seconds["write"] = time.perf_counter() - started
    counts["written"] = written
    manifest.counts = counts
    manifest.output = {
        "path": str(output),
        "bytes": output.stat().st_size,
        "sha256": _sha256(output),
    }
    return manifest
