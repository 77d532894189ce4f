"""The public contract of core: every name of docs/algorithm.md section 7, for users of the library.

The engine that app/, the CLI and other engines build on is ``core.engine``.

>>> from neardup.core.minhash import shingles, jaccard
>>> round(jaccard(shingles("the cat sat on the mat today", 3),
...               shingles("the cat sat on the mat again", 3)), 3)
0.667
"""

from __future__ import annotations

from neardup.core._cluster import clusters
from neardup.core._corpus import Doc
from neardup.core._decont import decontaminate
from neardup.core._hashing import MERSENNE31, PCG32, fnv1a64, perm_params
from neardup.core._lsh import LSH
from neardup.core._ngrams import contaminated
from neardup.core._protected import protected_ngrams
from neardup.core._signatures import signatures
from neardup.core._sketch import estimate, minhash, shingle_hashes
from neardup.core._stages import exact_dedup, near_dedup
from neardup.core._text import jaccard, shingles, words
from neardup.core._unionfind import UnionFind

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
