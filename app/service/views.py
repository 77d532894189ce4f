"""What the web pages show, computed here so their handlers only render: a cluster's members
against its root (estimates, exact Jaccard, word differences, the estimate matrix) and a text's
shared n-grams. The heavy parts run off the event loop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.service.diffs import Piece, highlight_ngrams, word_diff
from app.service.errors import NotFound
from app.service.operations import Service
from core.engine import ProtectedSet, estimate, jaccard, shingles

__all__ = ["MATRIX_LIMIT", "ClusterView", "ContaminationView", "cluster_view", "contamination_view"]

#: Clusters up to this many members get the full estimate matrix.
MATRIX_LIMIT = 20


@dataclass(frozen=True)
class MemberView:
    """One member beside the root."""

    id: str
    estimate: float
    jaccard: float | None
    text: str | None
    diff: list[Piece]


@dataclass(frozen=True)
class ClusterView:
    """A cluster page: the root's text, its members, and the matrix when small enough."""

    root: str
    root_text: str | None
    members: list[MemberView]
    ids: list[str]
    matrix: list[list[float]] | None


@dataclass(frozen=True)
class ContaminationView:
    """A checked text with its shared n-grams marked, and the items they come from."""

    text: str
    pieces: list[Piece]
    hits: list[tuple[str, str, str]]


async def cluster_view(service: Service, root: str) -> ClusterView:
    """The cluster rooted at ``root``; NotFound if it is not a root."""
    ids = service.cluster(root)
    sigs = service.index.signatures_of(ids)
    texts = await service.texts(ids)
    return await asyncio.to_thread(_cluster_view, root, ids, sigs, texts, service.params.k)


def _cluster_view(
    root: str, ids: list[str], sigs: NDArray[np.uint32], texts: dict[str, str], k: int
) -> ClusterView:
    root_text = texts.get(root)
    root_shingles = shingles(root_text, k) if root_text is not None else None
    members = []
    for i, member in enumerate(ids):
        text = texts.get(member)
        exact = diff = None
        if root_text is not None and root_shingles is not None and text is not None:
            exact = jaccard(root_shingles, shingles(text, k))
            diff = word_diff(root_text, text)
        members.append(MemberView(member, estimate(sigs[0], sigs[i]), exact, text, diff or []))
    matrix = _matrix(sigs) if len(ids) <= MATRIX_LIMIT else None
    return ClusterView(root, root_text, members, ids, matrix)


def _matrix(sigs: NDArray[np.uint32]) -> list[list[float]]:
    equal: NDArray[Any] = sigs[:, None, :] == sigs[None, :, :]
    return [[float(v) for v in row] for row in equal.mean(axis=2)]


async def registered_text(service: Service, doc_id: str) -> str:
    """The stored text of a registered document; NotFound without one."""
    texts = await service.texts([doc_id])
    if doc_id not in texts:
        raise NotFound(f"no stored text for document {doc_id!r}")
    return texts[doc_id]


async def contamination_view(
    service: Service, text: str, sets: list[str] | None
) -> ContaminationView:
    """The text's n-grams shared with the chosen sets (all when None), highlighted."""
    chosen = service.chosen_sets(sets)
    [hits] = await service.contamination([text], sets)
    pieces = await asyncio.to_thread(_highlighted, text, chosen)
    return ContaminationView(text, pieces, hits)


def _highlighted(text: str, chosen: list[ProtectedSet]) -> list[Piece]:
    shared: set[str] = set()
    for protected in chosen:
        shared |= protected.shared(text)
    n = chosen[0].n if chosen else 1
    return highlight_ngrams(text, shared, n)
