"""Exact dedup: text digests, and the smallest id of every group of identical texts."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from neardup.core.errors import DuplicateIdError

__all__ = ["exact_keepers", "id_rank", "text_digest", "text_digests"]


def text_digest(text: str) -> bytes:
    """SHA-256 of the UTF-8 text: a text's identity."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def text_digests(texts: Sequence[str]) -> NDArray[np.uint64]:
    """``[len(texts), 2]``: the first 128 bits of each text's SHA-256 (identical texts, identical
    rows; two different texts share one with odds of about 2**-128 per pair)."""
    raw = b"".join(text_digest(t)[:16] for t in texts)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).astype(np.uint64)


def id_rank(ids: Sequence[str]) -> NDArray[np.int64]:
    """Every row's position in id order; DuplicateIdError naming every repeated id."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    repeated = sorted({ids[a] for a, b in pairwise(order) if ids[a] == ids[b]})
    if repeated:
        raise DuplicateIdError(*repeated)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.array(order, dtype=np.int64)] = np.arange(len(ids))
    return rank


def exact_keepers(digests: NDArray[np.uint64], rank: NDArray[np.int64]) -> NDArray[np.bool_]:
    """True for the row of smallest rank (id) in each group of identical digests."""
    order = np.lexsort((rank, digests[:, 1], digests[:, 0]))
    d = digests[order]
    first = np.ones(len(order), dtype=np.bool_)
    first[1:] = (d[1:] != d[:-1]).any(axis=1)
    keep = np.zeros(len(order), dtype=np.bool_)
    keep[order[first]] = True
    return keep
