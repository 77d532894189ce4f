"""What the web pages show, computed here so their handlers only render: a cluster's members
against its root (estimates, exact Jaccard, word differences, the estimate matrix) and a text's
shared n-grams.

The heavy parts run off the event loop, within caps that bound their work whatever the input
(members shown, words diffed, characters highlighted); a view says what it left out.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.service.diffs import Piece, highlight_ngrams, word_diff, words_end
from app.service.errors import NotFound
from app.service.operations import Service
from core.engine import ProtectedSet, estimate, jaccard, shingles

__all__ = [
    "DIFF_WORDS",
    "HIGHLIGHT_CHARS",
    "MATRIX_LIMIT",
    "MEMBERS_SHOWN",
    "ClusterView",
    "ContaminationView",
    "cluster_view",
    "contamination_view",
]

#: Clusters up to this many members get the full estimate matrix.
MATRIX_LIMIT = 20
#: Members shown on a cluster page (the root first, then by id); the rest are counted.
MEMBERS_SHOWN = 50
#: Words of each text that are diffed (difflib's cost grows faster than the text); the rest is
#: shown undiffed.
DIFF_WORDS = 2000
#: Characters of a checked text that are highlighted and shown (the check covers all of it).
HIGHLIGHT_CHARS = 200_000
#: Texts longer than this get no exact Jaccard (its shingle sets would be this large too).
JACCARD_CHARS = 1_000_000


@dataclass(frozen=True)
class MemberView:
    """One member beside the root."""

    id: str
    estimate: float
    jaccard: float | None
    diff: list[Piece]
    #: characters of the member's text past the diffed words, shown without a diff
    undiffed: int = 0


@dataclass(frozen=True)
class ClusterView:
    """A cluster page: the root's text, its members, and the matrix when small enough."""

    root: str
    #: the root's text up to its DIFF_WORDS-th word (None when texts are not stored)
    root_text: str | None
    members: list[MemberView]
    ids: list[str]
    matrix: list[list[float]] | None
    #: members of the cluster not shown (past MEMBERS_SHOWN)
    hidden: int = 0


@dataclass(frozen=True)
class ContaminationView:
    """A checked text with its shared n-grams marked, and the items they come from."""

    text: str
    pieces: list[Piece]
    hits: list[tuple[str, str, str]]
    #: characters past HIGHLIGHT_CHARS, checked but not shown
    not_shown: int = 0
    #: whether shared n-grams are named (keys with the protect scope only)
    echo: bool = True
    #: the names of the protected sets checked (none: nothing was checked, no verdict)
    checked: tuple[str, ...] = ()


async def cluster_view(service: Service, root: str) -> ClusterView:
    """The cluster rooted at ``root``; NotFound if it is not a root."""
    members = service.cluster(root)
    ids = members[:MEMBERS_SHOWN]
    sigs = service.index.signatures_of(ids)
    texts = await service.texts(ids)
    view = await asyncio.to_thread(_cluster_view, root, ids, sigs, texts, service.params.k)
    return replace(view, hidden=len(members) - len(ids))


def _cluster_view(
    root: str, ids: list[str], sigs: NDArray[np.uint32], texts: dict[str, str], k: int
) -> ClusterView:
    root_text = texts.get(root)
    root_shingles = _shingles(root_text, k)
    members = []
    for i, member in enumerate(ids):
        text = texts.get(member)
        view = MemberView(member, estimate(sigs[0], sigs[i]), None, [])
        if root_text is not None and text is not None:
            member_shingles = _shingles(text, k)
            if root_shingles is not None and member_shingles is not None:
                view = replace(view, jaccard=jaccard(root_shingles, member_shingles))
            view = _with_diff(view, root_text, text)
        members.append(view)
    matrix = _matrix(sigs) if len(ids) <= MATRIX_LIMIT else None
    # The root is shown beside each member as far as the diffs go.
    shown = root_text[: words_end(root_text, DIFF_WORDS)] if root_text is not None else None
    return ClusterView(root, shown, members, ids, matrix)


def _shingles(text: str | None, k: int) -> set[str] | None:
    return shingles(text, k) if text is not None and len(text) <= JACCARD_CHARS else None


def _with_diff(view: MemberView, root_text: str, text: str) -> MemberView:
    """The member's diff against the root over their first DIFF_WORDS words."""
    end = words_end(text, DIFF_WORDS)
    diff = word_diff(root_text[: words_end(root_text, DIFF_WORDS)], text[:end])
    return replace(view, diff=diff, undiffed=len(text) - end)


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
    service: Service, text: str, sets: list[str] | None, caller: str, *, echo: bool
) -> ContaminationView:
    """The items the text shares n-grams with, from the chosen sets (all when None); with
    ``echo`` (a key with the protect scope) the shared n-grams are named and highlighted."""
    chosen = service.chosen_sets(sets)
    checked = tuple(s.name for s in chosen)
    [hits] = await service.contamination([text], sets, caller)
    shown = text[:HIGHLIGHT_CHARS]
    if not echo:
        hits = [(s, item, "") for s, item, _ in hits]
        plain = [Piece(shown, "same")]
        return ContaminationView(text, plain, hits, len(text) - len(shown), echo, checked)
    pieces = await asyncio.to_thread(_highlighted, shown, chosen)
    return ContaminationView(text, pieces, hits, len(text) - len(shown), echo, checked)


def _highlighted(text: str, chosen: list[ProtectedSet]) -> list[Piece]:
    shared: set[str] = set()
    for protected in chosen:
        shared |= protected.shared(text)
    n = chosen[0].n if chosen else 1
    return highlight_ngrams(text, shared, n)
