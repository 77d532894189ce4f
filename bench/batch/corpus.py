"""A large seeded JSON Lines corpus for the batch benchmark, with planted duplicates.

``bench.common.corpus.documents`` renders about 2,800 documents a second here, too slow for a
million. So it renders a pool of base documents once, cuts them into sentences, and splices every
document of the corpus from random sentences of the pool (150-400 words, cheap numpy draws and
a ``join``). Two spliced documents share a sentence now and then, never most of their text.

The pool is one of the benchmark corpora of ``bench.common.corpora`` (``--corpus``): ``c``, the
ASCII documents of ``bench.common.corpus.documents`` (the earlier results), or ``a``, the same
dressed as web text (typographic punctuation, accented names, a little of other scripts:
``web_documents``), so nearly every line holds ``\\uXXXX`` escapes (the file is written by
``json.dumps`` with its defaults, as most JSON Lines writers in Python do).

Planted among them, each copying a recent earlier original (one of the last ``WINDOW``):

- ``exact``: the same text under a new id (about ``EXACT_RATE`` of the documents);
- ``near``: the text with one word in ``NEAR_WORDS_PER_CHANGE`` replaced by a random
  vocabulary word (about ``NEAR_RATE``; Jaccard of 5-word shingles about 0.9).

Ids are ``d`` + 8 digits in file order, so string order is file order and every copy has a
larger id than its original: a correct dedup keeps exactly the originals. Planted documents say
so in their meta (``{"kind": "exact"|"near", "src": original id}``); originals have ``{}``.

Run by ``bench.batch`` in its own process (so the benchmark process stays small); by hand::

    python -m bench.batch.corpus --out corpus.jsonl --docs N [--corpus a|c] [--seed S] [--prefix M]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import numpy as np
from numpy.typing import NDArray

from bench.common.corpora import web_documents
from bench.common.corpus import doc_id, documents, near_copy, vocabulary
from neardup.core.minhash import jaccard, shingles

__all__ = ["POOLS", "PlantedCounts", "write_corpus"]

#: The pools a corpus is spliced from, by ``--corpus`` key: (renderer, how the record names it).
POOLS: dict[str, tuple[Callable[..., list[str]], str]] = {
    "c": (documents, "`bench.common.corpus.documents` (ASCII, corpus (c))"),
    "a": (web_documents, "`bench.common.corpora.web_documents` (web-like, corpus (a))"),
}

EXACT_RATE = 0.05
NEAR_RATE = 0.05
#: About one word changed per this many words: Jaccard of 5-word shingles about 0.9.
NEAR_WORDS_PER_CHANGE = 95
#: Copies pick their original among the last WINDOW originals.
WINDOW = 20_000
MIN_WORDS = 150
MAX_WORDS = 400
_DRAWS = 64  # sentences drawn per document, more than the longest needs
_CHUNK = 2_000
_JACCARD_SAMPLE = 300
_SENTENCE_END = re.compile(r"(?<=[.?!;])\s+")


@dataclass
class PlantedCounts:
    """What the corpus holds (whole file, and its first ``prefix`` documents).

    Attributes:
        docs: documents in the file.
        originals: documents that are no copy (a correct dedup keeps exactly these).
        exact: planted exact copies.
        near: planted near copies.
        prefix: the prefix length counted separately (the datasketch run's input).
        prefix_originals: originals among the prefix.
        prefix_exact: exact copies among the prefix.
        prefix_near: near copies among the prefix.
        near_jaccard_mean: mean true Jaccard (5-word shingles) of a sample of near copies.
        near_jaccard_min: the smallest of that sample.
        corpus: the pool's ``POOLS`` key.
        pool_docs: base documents rendered for the pool.
        pool_sentences: sentences cut from them.
        bytes: file size.
        seconds: time to generate and write the file.
    """

    docs: int = 0
    originals: int = 0
    exact: int = 0
    near: int = 0
    prefix: int = 0
    prefix_originals: int = 0
    prefix_exact: int = 0
    prefix_near: int = 0
    corpus: str = "c"
    near_jaccard_mean: float = 0.0
    near_jaccard_min: float = 0.0
    pool_docs: int = 0
    pool_sentences: int = 0
    bytes: int = 0
    seconds: float = 0.0


def _sentences(
    pool_docs: int, seed: int, corpus: str = "c"
) -> tuple[NDArray[np.object_], NDArray[np.int64]]:
    """The sentences of ``pool_docs`` rendered documents of ``corpus``, and their word counts."""
    render = POOLS[corpus][0]
    sentences = [s for doc in render(pool_docs, seed=seed) for s in _SENTENCE_END.split(doc)]
    counts = np.array([s.count(" ") + 1 for s in sentences], dtype=np.int64)
    return np.array(sentences, dtype=object), counts


def _spliced(
    rng: np.random.Generator, sentences: NDArray[np.object_], counts: NDArray[np.int64], n: int
) -> list[str]:
    """``n`` documents of random pool sentences, each just reaching a 150-400 word target."""
    target = rng.integers(MIN_WORDS, MAX_WORDS + 1, size=n)
    idx = rng.integers(0, len(sentences), size=(n, _DRAWS))
    cum = np.cumsum(counts[idx], axis=1)
    take = np.minimum((cum < target[:, None]).sum(axis=1) + 1, _DRAWS)
    return [" ".join(sentences[row[:m]].tolist()) for row, m in zip(idx, take, strict=True)]


class _Writer:
    """Writes documents, keeping the last ``WINDOW`` originals and the planted counts."""

    def __init__(self, out: IO[str], counts: PlantedCounts, vocab: list[str]) -> None:
        self.out, self.counts, self.vocab = out, counts, vocab
        self.recent: list[tuple[str, str]] = []  # (id, text) ring of originals
        self.jaccards: list[float] = []

    def _emit(self, text: str, meta: dict[str, str]) -> None:
        i = self.counts.docs
        self.out.write(json.dumps({"id": doc_id(i), "text": text, "meta": meta}) + "\n")
        kind = meta.get("kind", "original")
        field = "originals" if kind == "original" else kind
        setattr(self.counts, field, getattr(self.counts, field) + 1)
        if i < self.counts.prefix:
            setattr(self.counts, f"prefix_{field}", getattr(self.counts, f"prefix_{field}") + 1)
        self.counts.docs += 1
        if kind == "original":
            entry = (doc_id(i), text)
            if len(self.recent) < WINDOW:
                self.recent.append(entry)
            else:
                self.recent[self.counts.originals % WINDOW] = entry

    def chunk(self, rng: np.random.Generator, fresh: list[str]) -> None:
        """Write one chunk: each fresh text is an original or is replaced by a planted copy."""
        kinds = rng.random(len(fresh))
        for text, u in zip(fresh, kinds, strict=True):
            if not self.recent or u >= EXACT_RATE + NEAR_RATE:
                self._emit(text, {})
                continue
            src, original = self.recent[int(rng.integers(len(self.recent)))]
            if u < EXACT_RATE:
                self._emit(original, {"kind": "exact", "src": src})
                continue
            copy = near_copy(original, rng, NEAR_WORDS_PER_CHANGE, self.vocab)
            if len(self.jaccards) < _JACCARD_SAMPLE:
                self.jaccards.append(jaccard(shingles(original), shingles(copy)))
            self._emit(copy, {"kind": "near", "src": src})


def write_corpus(
    path: Path, n: int, *, seed: int = 0, prefix: int = 0, corpus: str = "c"
) -> PlantedCounts:
    """Write ``n`` documents to ``path`` (JSON Lines) and return what was planted.

    Args:
        path: the output file.
        n: how many documents.
        seed: fixes the whole file.
        prefix: also count the planted documents among the first ``prefix``.
        corpus: the pool's ``POOLS`` key.
    """
    started = time.perf_counter()
    pool = int(np.clip(n // 10, 2_000, 20_000))
    sentences, counts = _sentences(pool, seed, corpus)
    rng = np.random.default_rng([seed, 2])
    planted = PlantedCounts(
        prefix=min(prefix, n), corpus=corpus, pool_docs=pool, pool_sentences=len(sentences)
    )
    with path.open("w", encoding="utf-8") as out:
        writer = _Writer(out, planted, vocabulary(20_000, seed))
        for lo in range(0, n, _CHUNK):
            writer.chunk(rng, _spliced(rng, sentences, counts, min(_CHUNK, n - lo)))
    if writer.jaccards:
        planted.near_jaccard_mean = float(np.mean(writer.jaccards))
        planted.near_jaccard_min = float(np.min(writer.jaccards))
    planted.bytes = path.stat().st_size
    planted.seconds = time.perf_counter() - started
    return planted


def main(argv: Sequence[str] | None = None) -> int:
    """Write the corpus and print the planted counts as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.batch.corpus", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="the .jsonl file to write")
    parser.add_argument("--docs", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prefix", type=int, default=0, help="also count the first M docs")
    parser.add_argument("--corpus", choices=sorted(POOLS), default="c", help="the pool (c)")
    args = parser.parse_args(argv)
    planted = write_corpus(
        args.out, args.docs, seed=args.seed, prefix=args.prefix, corpus=args.corpus
    )
    print(json.dumps(asdict(planted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
