"""Tokenizers on real multilingual text: near copies found, cluster quality and speed.

Per language group (space-separated Latin and Cyrillic; Chinese; Japanese; Thai), a corpus of
real translated messages from the catalogs installed on this machine
(``bench.multilingual.catalogs``) with planted near copies (1 % of the words replaced, words of
the multilingual tokenizer) and exact copies, clustered at the defaults (128 permutations,
16 bands, threshold 0.8, k = 5) under three tokenizations:

- ``words``: the contract's ``\\w+`` runs (today's only tokenizer);
- ``multilingual``: ``--tokenizer multilingual``;
- ``chars``: the alternative, character n-grams over the whole lower-cased text (whitespace
  collapsed), ``--char-n`` characters a shingle (5; NeMo Curator shingles this way with 24).

For each: the planted near copies in their original's cluster; and recall and precision of the
clusters against the pairs with exact Jaccard >= 0.8 on that tokenization's own shingles (recall:
such pairs that share a cluster; precision: pairs sharing a cluster that are such pairs).

Speed: the signature kernel, one process, compiled kernels, per MB of UTF-8, on the generated
corpora of ``bench.common.corpora``: ``words`` on (a) web-like English and (c) ASCII, and
``multilingual`` on (b) multilingual against ``words`` on (a).

Run from the repository root::

    python -m bench.multilingual [--docs N] [--speed-docs M] [--quick] [--markdown]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from bench.common import options
from bench.common.corpora import corpus
from bench.common.machine import at_start, facts
from bench.common.options import Size
from bench.multilingual.catalogs import GROUPS, Corpus, build
from neardup.core.engine import MinhashParams, cluster_roots, shingles
from neardup.core.minhash import minhash, signatures

SIZES = {
    "docs": Size("documents per language group (before copies)", 1_500, 300),
    "speed_docs": Size("documents of each generated corpus timed", 8_000, 2_000),
    "char_n": Size("characters per shingle of the chars alternative", 5, 5),
}
THRESHOLD = 0.8
TOKENIZATIONS = ("words", "multilingual", "chars")


def char_shingles(text: str, n: int) -> set[str]:
    """Every ``n`` consecutive characters of the lower-cased text, whitespace collapsed (one
    shingle of all of it when shorter)."""
    flat = " ".join(text.lower().split())
    if len(flat) <= n:
        return {flat} if flat else set()
    return {flat[i : i + n] for i in range(len(flat) - n + 1)}


def _own_shingles(tokenization: str, char_n: int) -> Callable[[str], set[str]]:
    if tokenization == "chars":
        return lambda text: char_shingles(text, char_n)
    return lambda text: shingles(text, 5, tokenization)


def _signatures(texts: list[str], tokenization: str, char_n: int) -> NDArray[np.uint32]:
    if tokenization != "chars":
        return signatures(texts, tokenizer=tokenization)
    return np.stack([minhash(char_shingles(t, char_n)).astype(np.uint32) for t in texts])


def _true_pairs(sets: list[set[str]]) -> set[tuple[int, int]]:
    """The pairs of documents whose shingle sets have Jaccard >= THRESHOLD (an inverted index
    finds the pairs sharing a shingle; only those are measured)."""
    holders: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(sets):
        for g in s:
            holders[g].append(i)
    out = set()
    for i, s in enumerate(sets):
        if not s:
            continue
        shared: dict[int, int] = defaultdict(int)
        for g in s:
            for j in holders[g]:
                if j > i:
                    shared[j] += 1
        for j, common in shared.items():
            if common / (len(s) + len(sets[j]) - common) >= THRESHOLD:
                out.add((i, j))
    return out


def quality(data: Corpus, tokenization: str, char_n: int) -> dict[str, float]:
    """Planted copies found, recall and precision against exact Jaccard, and shingles per
    document, for one group."""
    sigs = _signatures(data.texts, tokenization, char_n)
    roots = cluster_roots(sigs, MinhashParams()).tolist()
    found = sum(roots[a] == roots[b] for a, b in data.near) / max(1, len(data.near))
    exact = sum(roots[a] == roots[b] for a, b in data.exact) / max(1, len(data.exact))
    sets = [_own_shingles(tokenization, char_n)(t) for t in data.texts]
    truth = _true_pairs(sets)
    members: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(roots):
        members[r].append(i)
    clustered = {(a, b) for m in members.values() for i, a in enumerate(m) for b in m[i + 1 :]}
    recall = len(truth & clustered) / len(truth) if truth else 1.0
    precision = len(truth & clustered) / len(clustered) if clustered else 1.0
    return {"near": found, "exact": exact, "recall": recall, "precision": precision,
            "pairs": len(truth), "shingles": sum(map(len, sets)) / len(sets)}  # fmt: skip


def _seconds(texts: list[str], tokenizer: str, repeats: int = 5) -> float:
    signatures(texts[:64], tokenizer=tokenizer)  # tables built, kernels warm
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        signatures(texts, tokenizer=tokenizer)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def speed(n: int) -> list[tuple[str, str, float, float]]:
    """(corpus, tokenizer, MB of UTF-8, seconds per MB) of the signature kernel."""
    from neardup.core import _compiled

    if _compiled.load() is None:
        raise SystemExit("the compiled kernels did not load: the speed figures would be numpy's")
    out = []
    for key, tokenizer in (("web", "words"), ("ascii", "words"), ("multilingual", "words"),
                           ("multilingual", "multilingual"), ("web", "multilingual")):  # fmt: skip
        texts = corpus(key, n)
        size = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        out.append((key, tokenizer, size, _seconds(texts, tokenizer) / size))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = options.parser("bench.multilingual", __doc__, SIZES, "print markdown tables")
    args = parser.parse_args(argv)
    _, command = options.command_line("bench.multilingual", argv)
    sizes = options.sizes(args, SIZES)
    start = at_start()
    rows = []
    for group in GROUPS:
        data = build(group, sizes["docs"])
        if not data.near:
            print(f"{group}: no catalogs installed, left out", file=sys.stderr)
            continue
        for tokenization in TOKENIZATIONS:
            got = quality(data, tokenization, sizes["char_n"])
            rows.append((group, len(data.texts) - len(data.near) - len(data.exact),
                         data.catalogs, tokenization, got))  # fmt: skip
            print(f"{group:9} {tokenization:12} {got}", file=sys.stderr)
    timed = speed(sizes["speed_docs"])
    for key, tokenizer, size, per_mb in timed:
        print(f"{key:13} {tokenizer:12} {size:6.1f} MB {per_mb:.3f} s/MB", file=sys.stderr)
    if args.markdown:
        print("## Tokenizers on real multilingual text (`bench.multilingual`)\n")
        print(f"- command: `{command}`")
        for key, value in facts(start).items():
            print(f"- {key}: {value}")
        print(f"\nChar n-grams: {sizes['char_n']} characters. Near copies: 1 % of the words "
              "replaced.\n")  # fmt: skip
        print("| group | documents | catalogs | tokenization | shingles a document | near copies "
              "found | exact copies found | pairs J >= 0.8 | recall | precision |")  # fmt: skip
        print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        for group, docs, read, tokenization, got in rows:
            print(f"| {group} | {docs} | {read} | {tokenization} | {got['shingles']:.0f} | "
                  f"{got['near']:.3f} | {got['exact']:.3f} | {got['pairs']} | "
                  f"{got['recall']:.3f} | {got['precision']:.3f} |")  # fmt: skip
        print("\n| corpus | tokenizer | MB | s per MB |\n|---|---|---:|---:|")
        for key, tokenizer, size, per_mb in timed:
            print(f"| {key} | {tokenizer} | {size:.1f} | {per_mb:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
