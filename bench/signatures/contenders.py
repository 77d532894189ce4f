"""The contenders of the signature benchmark: neardup, datasketch and rensa, from texts.

Every contender turns the same texts into 128-entry MinHash signatures over 5-word shingles.
The peers' shingles are built in Python the way their users build them, and count in their time.

The peers are imported lazily, inside the functions that call them, so that the spawn workers
of the ``workers=2`` section (which re-import ``bench/signatures/__main__.py`` as
``__mp_main__``) start no slower than they would in an application.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from core.engine import MinhashParams, batch_signatures

#: 128 permutations, seed 0, 5-word shingles: what every contender computes.
PARAMS = MinhashParams(num_perm=128, seed=0, k=5)
NUM_PERM = PARAMS.num_perm
SEED = PARAMS.seed
K = PARAMS.k
#: The case name of neardup called batch by batch.
BATCHED = "neardup/batched"
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


def run_neardup(texts: Sequence[str], batch_size: int = 0) -> NDArray[np.uint32]:
    """neardup on this process: ``batch_signatures`` over the list, or batch by batch.

    Args:
        texts: the documents.
        batch_size: documents per ``batch_signatures`` call; 0 for one call over all of them.

    Returns:
        The ``[len(texts), 128]`` uint32 signatures.
    """
    if batch_size <= 0:
        return batch_signatures(texts, PARAMS)
    parts = [
        batch_signatures(texts[i : i + batch_size], PARAMS)
        for i in range(0, len(texts), batch_size)
    ]
    return np.concatenate(parts, axis=0)


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
