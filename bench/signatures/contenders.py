"""The contenders of the signature benchmark: neardup, datasketch and rensa, from texts.

Every contender turns the same texts into 128-entry MinHash signatures over 5-word shingles.
The peers' shingles are built in Python the way their users build them, and count in their time.
rensa runs both ways its users call it: one ``RMinHash`` per document, and the bulk
``RMinHash.digest_matrix_from_token_sets``. neardup runs as users call it (``batch_signatures``,
the compiled kernels once loaded) and with its numpy reference kernel, for comparison.

The peers are imported lazily, inside the functions that call them, so that the spawn workers
of the ``workers=2`` section (which re-import ``bench/signatures/__main__.py`` as
``__mp_main__``) start no slower than they would in an application.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from neardup.core.engine import MinhashParams, batch_signatures

#: 128 permutations, seed 0, 5-word shingles: what every contender computes.
PARAMS = MinhashParams(num_perm=128, seed=0, k=5)
NUM_PERM = PARAMS.num_perm
SEED = PARAMS.seed
K = PARAMS.k
#: The case names, in the order the tables list them.
NEARDUP = "neardup"
NEARDUP_NUMPY = "neardup/numpy"
RENSA_BULK = "rensa/bulk"
RENSA = "rensa/per-doc"
DATASKETCH = "datasketch"
#: What each case name stands for.
LABELS = {
    NEARDUP: "neardup, 1 process, batch_signatures (compiled kernels)",
    NEARDUP_NUMPY: "neardup, 1 process, numpy reference kernel (NEARDUP_JIT=0)",
    RENSA_BULK: "rensa RMinHash.digest_matrix_from_token_sets, Python shingles (counted)",
    RENSA: "rensa RMinHash per document, Python shingles (counted)",
    DATASKETCH: "datasketch MinHash.bulk, SHA-1, Python shingles (counted)",
}
_WORD = re.compile(r"\w+")


def word_shingles(text: str, k: int = K) -> list[str]:
    """The k-word shingles of ``text`` as their users build them for datasketch and rensa.

    Args:
        text: a document.
        k: words per shingle.

    Returns:
        The windows of k words joined by single spaces; one shingle of all the words for a text
        of 1 to k-1 words; none for a text without words.
    """
    words = _WORD.findall(text.lower())
    if len(words) < k:
        return [" ".join(words)] if words else []
    return [" ".join(words[i : i + k]) for i in range(len(words) - k + 1)]


def run_neardup(texts: Sequence[str]) -> NDArray[np.uint32]:
    """neardup on this process: one ``batch_signatures`` call over the list.

    Args:
        texts: the documents.

    Returns:
        The ``[len(texts), 128]`` uint32 signatures.
    """
    return batch_signatures(texts, PARAMS)


def run_neardup_numpy(texts: Sequence[str]) -> NDArray[np.uint32]:
    """neardup's kernel with the numpy tokeniser, FNV and minima (what runs without numba).

    Args:
        texts: the documents.

    Returns:
        The ``[len(texts), 128]`` uint32 signatures.
    """
    from neardup.core._signatures import _kernel

    return _kernel(texts, NUM_PERM, SEED, K, jit=False)


def run_datasketch(texts: Sequence[str]) -> list[NDArray[np.uint64]]:
    """datasketch ``MinHash.bulk`` with its default (SHA-1 based) hash over UTF-8 shingles.

    Args:
        texts: the documents.

    Returns:
        The hash values of each document's MinHash.
    """
    from datasketch import MinHash  # type: ignore[import-untyped]

    data = [[s.encode("utf-8") for s in word_shingles(t)] for t in texts]
    return [m.hashvalues for m in MinHash.bulk(data, num_perm=NUM_PERM)]


def run_rensa(texts: Sequence[str]) -> list[list[int]]:
    """rensa ``RMinHash(num_perm=128, seed=0)``, ``update`` with the shingles, then ``digest``.

    Args:
        texts: the documents.

    Returns:
        The digest of each document.
    """
    from rensa import RMinHash  # type: ignore[import-untyped]

    digests = []
    for text in texts:
        m = RMinHash(num_perm=NUM_PERM, seed=SEED)
        m.update(word_shingles(text))
        digests.append(m.digest())
    return digests


def run_rensa_bulk(texts: Sequence[str]) -> object:
    """rensa's bulk API: ``RMinHash.digest_matrix_from_token_sets`` over every document's shingles.

    Args:
        texts: the documents.

    Returns:
        rensa's ``RMinHashDigestMatrix`` (rows as ``to_rows()``), as its users get it.
    """
    from rensa import RMinHash

    sets = [word_shingles(t) for t in texts]
    return RMinHash.digest_matrix_from_token_sets(sets, NUM_PERM, SEED)


#: Every contender, by case name.
RUNS = {
    NEARDUP: run_neardup,
    NEARDUP_NUMPY: run_neardup_numpy,
    RENSA_BULK: run_rensa_bulk,
    RENSA: run_rensa,
    DATASKETCH: run_datasketch,
}
