"""The datasketch peer of the batch benchmark: the common MinHashLSH dedup recipe, end to end.

Run in its own process (so its RSS is clean), over the first ``--limit`` documents of a JSON
Lines corpus:

1. read the file; exact dedup by the MD5 of the text (the first occurrence stays; in
   ``bench.batch.corpus`` files that is the smallest id);
2. 5-word shingles built in Python (``re.findall(r"\\w+", text.lower())``, windows of 5 words
   joined by one space, a 1-4-word text is one shingle), UTF-8 encoded, and
   ``MinHash.bulk(..., num_perm=128)`` a chunk at a time (datasketch's default ``affine32``
   scheme, SHA-1 based hashing); every MinHash is kept, keyed by id;
3. ``MinHashLSH(threshold=0.8, num_perm=128)``, every MinHash inserted;
4. every document queried; each candidate unioned with it (union-find, the smallest id the
   root), NOT confirmed on the estimate: this is the recipe as usually written;
5. a second read of the file writes the survivors (the roots), as the input lines.

Untimed, after that: the candidate pairs are checked with ``MinHash.jaccard >= 0.8`` to count
the survivors the recipe would have had with neardup's confirmation step.

By hand (``bench.batch`` runs it)::

    python -m bench.batch.peer --input corpus.jsonl --output out.jsonl [--limit N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

__all__ = ["PeerRun", "UnionFind", "shingle_bytes"]

NUM_PERM = 128
THRESHOLD = 0.8
K = 5
_CHUNK = 1_000
_WORD = re.compile(r"\w+")


@dataclass
class PeerRun:
    """What the datasketch recipe did (times in seconds).

    Attributes:
        docs: documents read (the prefix).
        exact_dropped: documents whose text was seen before.
        near_dropped: documents not their cluster's root after the LSH union-find.
        written: survivors written.
        candidate_pairs: distinct (id, id) pairs returned by the queries.
        unconfirmed_pairs: of those, pairs with ``jaccard < 0.8`` (merged anyway).
        written_if_confirmed: survivors had only confirmed pairs been merged (untimed).
        bands: b of the LSH datasketch chose for the threshold.
        rows: r.
        seconds: per stage: read+exact+minhash, insert, query+union, write, total.
    """

    docs: int = 0
    exact_dropped: int = 0
    near_dropped: int = 0
    written: int = 0
    candidate_pairs: int = 0
    unconfirmed_pairs: int = 0
    written_if_confirmed: int = 0
    bands: int = 0
    rows: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


class UnionFind:
    """Union-find over string ids; the root of every group is its smallest id."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        """The root of ``x`` (path halving)."""
        parent = self.parent
        while (p := parent.get(x, x)) != x:
            grand = parent.get(p, p)
            parent[x] = grand
            x = grand
        return x

    def union(self, x: str, y: str) -> None:
        """Merge the groups of ``x`` and ``y``; the smaller root wins."""
        rx, ry = self.find(x), self.find(y)
        if rx != ry:
            self.parent[max(rx, ry)] = min(rx, ry)


def shingle_bytes(text: str, k: int = K) -> list[bytes]:
    """The distinct ``k``-word shingles of ``text``, UTF-8 encoded, as datasketch takes them."""
    w = _WORD.findall(text.lower())
    if len(w) < k:
        return [" ".join(w).encode()] if w else []
    return [s.encode() for s in {" ".join(w[i : i + k]) for i in range(len(w) - k + 1)}]


def _lines(path: Path, limit: int) -> Iterator[str]:
    with path.open(encoding="utf-8") as fh:
        yield from islice(fh, limit)


def _minhashes(path: Path, limit: int, run: PeerRun) -> dict[str, Any]:
    """Read, exact-dedup, and MinHash every remaining document, a chunk at a time."""
    from datasketch import MinHash  # type: ignore[import-untyped]

    seen: set[bytes] = set()
    out: dict[str, Any] = {}
    ids: list[str] = []
    sets: list[list[bytes]] = []
    for line in _lines(path, limit):
        doc = json.loads(line)
        run.docs += 1
        digest = hashlib.md5(doc["text"].encode("utf-8")).digest()
        if digest in seen:
            run.exact_dropped += 1
            continue
        seen.add(digest)
        ids.append(doc["id"])
        sets.append(shingle_bytes(doc["text"]))
        if len(ids) == _CHUNK:
            out.update(zip(ids, MinHash.bulk(sets, num_perm=NUM_PERM), strict=True))
            ids, sets = [], []
    out.update(zip(ids, MinHash.bulk(sets, num_perm=NUM_PERM), strict=True))
    return out


def _dedup(path: Path, output: Path, limit: int) -> tuple[PeerRun, dict[str, Any], set[Any]]:
    """The timed recipe; returns the run, the MinHashes and the candidate pairs."""
    from datasketch import MinHashLSH

    run = PeerRun()
    t0 = time.perf_counter()
    minhashes = _minhashes(path, limit, run)
    t1 = time.perf_counter()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    run.bands, run.rows = lsh.b, lsh.r
    for key, m in minhashes.items():
        lsh.insert(key, m)
    t2 = time.perf_counter()
    uf = UnionFind()
    pairs: set[tuple[str, str]] = set()
    for key, m in minhashes.items():
        for other in lsh.query(m):
            if other != key:
                uf.union(key, other)
                pairs.add((min(key, other), max(key, other)))
    t3 = time.perf_counter()
    with output.open("w", encoding="utf-8") as out:
        for line in _lines(path, limit):
            key = json.loads(line)["id"]
            if key in minhashes and uf.find(key) == key:
                out.write(line)
                run.written += 1
    t4 = time.perf_counter()
    run.near_dropped = len(minhashes) - run.written
    names = ("minhash", "insert", "query_union", "write")
    run.seconds = dict(zip(names, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True))
    run.seconds["total"] = t4 - t0
    return run, minhashes, pairs


def _confirmed(run: PeerRun, minhashes: dict[str, Any], pairs: set[tuple[str, str]]) -> None:
    """Untimed: how many survivors had only pairs with ``jaccard >= 0.8`` been merged."""
    uf = UnionFind()
    run.candidate_pairs = len(pairs)
    for a, b in pairs:
        if minhashes[a].jaccard(minhashes[b]) >= THRESHOLD:
            uf.union(a, b)
        else:
            run.unconfirmed_pairs += 1
    run.written_if_confirmed = sum(1 for key in minhashes if uf.find(key) == key)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the recipe and print the run as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.batch.peer", description=__doc__)
    parser.add_argument("--input", type=Path, required=True, help="a JSON Lines corpus")
    parser.add_argument("--output", type=Path, required=True, help="survivors (JSON Lines)")
    parser.add_argument("--limit", type=int, default=sys.maxsize, help="first N documents")
    args = parser.parse_args(argv)
    run, minhashes, pairs = _dedup(args.input, args.output, args.limit)
    _confirmed(run, minhashes, pairs)
    print(json.dumps(asdict(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
