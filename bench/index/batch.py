"""The new dump of the index benchmark: a batch of fresh documents with planted copies of
documents already indexed.

The batch is ``bench.batch.corpus.write_corpus`` run with another seed (its own planted exact and
near copies among themselves included), its ids prefixed with ``n`` (``nd00000123``, never an
id of the indexed corpus), and, inserted at random places, copies of originals of the indexed
corpus (``--base``, a ``bench.batch.corpus`` file):

- ``index-exact``: an indexed original's text under a new id ``nx...`` (about ``INDEX_EXACT_RATE``
  of the batch);
- ``index-near``: the text with about one word in ``NEAR_WORDS_PER_CHANGE`` replaced (about
  ``INDEX_NEAR_RATE``; Jaccard of 5-word shingles about 0.9).

Each planted line says so in its meta (``{"kind": "index-exact"|"index-near", "src": indexed
id}``). A correct incremental run drops every ``index-exact`` copy and nearly every
``index-near`` one; a run without the index keeps them all (nothing in the batch is like them).

Run by ``bench.index`` in its own process; by hand::

    python -m bench.index.batch --base corpus.jsonl --out batch.jsonl --docs N [--seed S]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.batch.corpus import NEAR_WORDS_PER_CHANGE, POOLS, write_corpus
from bench.common.corpus import near_copy, vocabulary

__all__ = ["INDEX_EXACT_RATE", "INDEX_NEAR_RATE", "BatchCounts", "write_batch"]

INDEX_EXACT_RATE = 0.05
INDEX_NEAR_RATE = 0.05
#: Indexed lines drawn per planted copy: about 10 % of them are copies, not originals.
_OVERDRAW = 2


@dataclass
class BatchCounts:
    """What the batch holds.

    Attributes:
        docs: documents in the batch.
        fresh: documents of the batch's own corpus (originals and copies among themselves).
        fresh_exact: planted exact copies among the fresh documents.
        fresh_near: planted near copies among the fresh documents.
        index_exact: planted exact copies of indexed originals.
        index_near: planted near copies of indexed originals.
        base_docs: lines of the indexed corpus.
        bytes: file size.
        seconds: time to generate and write the file.
    """

    docs: int = 0
    fresh: int = 0
    fresh_exact: int = 0
    fresh_near: int = 0
    index_exact: int = 0
    index_near: int = 0
    base_docs: int = 0
    bytes: int = 0
    seconds: float = 0.0


def _indexed_originals(base: Path, base_docs: int, k: int, rng: np.random.Generator) -> list[dict]:
    """``k`` random originals (rows with an empty meta) of the ``base_docs`` lines of ``base``."""
    draw = min(base_docs, _OVERDRAW * k + 16)
    wanted = set(rng.choice(base_docs, size=draw, replace=False).tolist())
    found: list[dict] = []
    with base.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i in wanted:
                row = json.loads(line)
                if not row.get("meta"):
                    found.append(row)
    if len(found) < k:
        raise SystemExit(f"{base}: {len(found)} originals drawn, {k} needed")
    order = rng.permutation(len(found))[:k]
    return [found[i] for i in order]


def _renamed(line: str) -> str:
    """A fresh line with its id (and its meta's ``src``) prefixed with ``n``."""
    row = json.loads(line)
    row["id"] = "n" + row["id"]
    if "src" in row["meta"]:
        row["meta"]["src"] = "n" + row["meta"]["src"]
    return json.dumps(row)


def write_batch(
    base: Path, out: Path, n: int, *, base_docs: int, seed: int = 0, corpus: str = "a"
) -> BatchCounts:
    """Write the batch of ``n`` documents to ``out`` (JSON Lines); what was planted.

    Args:
        base: the indexed corpus (``bench.batch.corpus`` JSON Lines).
        out: the batch file to write.
        n: documents in the batch.
        base_docs: lines of ``base``.
        seed: fixes the batch (the fresh documents use ``seed + 1``, not the base's ``seed``).
        corpus: the pool the fresh documents are spliced from (``POOLS``).
    """
    started = time.perf_counter()
    rng = np.random.default_rng([seed, 20])
    exact = round(n * INDEX_EXACT_RATE)
    near = round(n * INDEX_NEAR_RATE)
    counts = BatchCounts(docs=n, fresh=n - exact - near, base_docs=base_docs)
    sources = _indexed_originals(base, base_docs, exact + near, rng)
    vocab = vocabulary(20_000, seed)
    planted: list[str] = []
    for k, row in enumerate(sources):
        kind = "index-exact" if k < exact else "index-near"
        text = (
            row["text"] if k < exact else near_copy(row["text"], rng, NEAR_WORDS_PER_CHANGE, vocab)
        )
        meta = {"kind": kind, "src": row["id"]}
        planted.append(json.dumps({"id": f"nx{k:08d}", "text": text, "meta": meta}))
    counts.index_exact, counts.index_near = exact, near
    at = set(rng.choice(n, size=len(planted), replace=False).tolist())
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        fresh_path = Path(tmp) / "fresh.jsonl"
        fresh = write_corpus(fresh_path, counts.fresh, seed=seed + 1, corpus=corpus)
        counts.fresh_exact, counts.fresh_near = fresh.exact, fresh.near
        next_planted = iter(planted)
        with fresh_path.open(encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:
            for i in range(n):
                line = next(next_planted) if i in at else _renamed(next(src))
                dst.write(line + "\n")
    counts.bytes = out.stat().st_size
    counts.seconds = time.perf_counter() - started
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    """Write the batch and print what was planted as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.index.batch", description=__doc__)
    parser.add_argument("--base", type=Path, required=True, help="the indexed corpus (.jsonl)")
    parser.add_argument("--base-docs", type=int, required=True, help="its lines")
    parser.add_argument("--out", type=Path, required=True, help="the .jsonl file to write")
    parser.add_argument("--docs", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", choices=sorted(POOLS), default="a", help="the pool (a)")
    args = parser.parse_args(argv)
    counts = write_batch(
        args.base, args.out, args.docs, base_docs=args.base_docs, seed=args.seed,
        corpus=args.corpus,
    )  # fmt: skip
    print(json.dumps(asdict(counts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
