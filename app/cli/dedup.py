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
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.cli.inputs import batches, read_corpus
from app.cli.progress import Progress
from core.engine import (
    CLUSTER_KEY,
    CorpusError,
    Doc,
    MinhashParams,
    NgramIndex,
    batch_signatures,
    cluster_roots,
    corpus_format,
    exact_keepers,
    id_rank,
    ordered_map,
    spawn_pool,
    text_digests,
    write_docs,
)
from core.minhash import protected_ngrams

__all__ = ["BATCH", "DedupParams", "Manifest", "run_dedup"]

#: Documents per signature batch (and per decontamination batch in pass 2).
BATCH = 4096


@dataclass(frozen=True)
class DedupParams:
    """The knobs of ``neardup dedup``: core's parameters, the worker count, what to keep."""

    minhash: MinhashParams = field(default_factory=MinhashParams)
    workers: int = 1
    keep_duplicates: bool = False

    def as_dict(self) -> dict[str, Any]:
        """Flat, as the flags are spelled (for the manifest)."""
        return {**self.minhash.as_dict(), "workers": self.workers,
                "keep_duplicates": self.keep_duplicates}  # fmt: skip


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


@dataclass
class _Pass1:
    ids: list[str]
    digests: NDArray[np.uint64]
    sigs: NDArray[np.uint32]


def _signature_pass(inputs: Sequence[Path], params: DedupParams, quiet: bool) -> _Pass1:
    ids: list[str] = []
    digests: list[NDArray[np.uint64]] = []

    def texts() -> Iterator[list[str]]:
        for batch in batches(read_corpus(inputs), BATCH):
            ids.extend(d.id for d in batch)
            texts = [d.text for d in batch]
            digests.append(text_digests(texts))
            yield texts

    # Signatures go to a temporary file as they come and are read back as one matrix: a list of
    # chunks joined at the end would hold the matrix twice.
    pool = spawn_pool(params.workers) if params.workers > 1 else None
    try:
        with tempfile.TemporaryFile(prefix="neardup-signatures-") as sigs:
            with Progress("signatures", quiet=quiet) as progress:
                signed = ordered_map(pool, batch_signatures, texts(), params.minhash)
                for batch, chunk in signed:
                    sigs.write(chunk.tobytes())
                    progress.update(len(batch))
            sigs.seek(0)
            matrix = np.fromfile(sigs, dtype=np.uint32).reshape(-1, params.minhash.num_perm)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    empty_digests = np.empty((0, 2), dtype=np.uint64)
    return _Pass1(ids, np.concatenate(digests) if digests else empty_digests, matrix)


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
    corpus_format(output)
    manifest = Manifest(
        parameters=params.as_dict(),
        inputs=[{"path": str(p), "bytes": p.stat().st_size} for p in inputs],
        protected=[{"path": str(p), "bytes": p.stat().st_size} for p in protected],
    )
    started = time.perf_counter()
    first = _signature_pass(inputs, params, quiet)
    manifest.seconds["signatures"] = time.perf_counter() - started
    started = time.perf_counter()
    rank = id_rank(first.ids)
    exact = exact_keepers(first.digests, rank)
    root = cluster_roots(first.sigs, params.minhash, rank)
    near = exact & (root == np.arange(len(root)))
    keep = np.ones(len(root), dtype=np.bool_) if params.keep_duplicates else near
    sizes = np.bincount(root, minlength=len(root))
    manifest.clusters = int(np.count_nonzero(sizes >= 2))
    manifest.seconds["cluster"] = time.perf_counter() - started
    started = time.perf_counter()
    n = params.minhash.ngram
    index = NgramIndex(protected_ngrams(protected, n), n) if protected else None
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
