"""The public surface of core: every name of CORE.md section 7.

>>> from core.minhash import shingles, jaccard
>>> round(jaccard(shingles("the cat sat on the mat today", 3),
...               shingles("the cat sat on the mat again", 3)), 3)
0.667
"""

from __future__ import annotations

from core.cluster import clusters
from core.decont import contaminated, decontaminate, protected_ngrams
from core.hashing import MERSENNE31, PCG32, fnv1a64, perm_params
from core.lsh import LSH
from core.signatures import signatures
from core.sketch import estimate, minhash, shingle_hashes
from core.stages import Doc, exact_dedup, near_dedup
from core.text import jaccard, shingles, words
from core.unionfind import UnionFind

__all__ = [
    "LSH",
    "MERSENNE31",
    "PCG32",
    "Doc",
    "UnionFind",
    "clusters",
    "contaminated",
    "decontaminate",
    "estimate",
    "exact_dedup",
    "fnv1a64",
    "jaccard",
    "minhash",
    "near_dedup",
    "perm_params",
    "protected_ngrams",
    "shingle_hashes",
    "shingles",
    "signatures",
    "words",
]
