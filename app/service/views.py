"""What the web pages show, computed here so their handlers only render: a cluster's members
against its root (estimates, exact Jaccard, word differences, the estimate matrix) and a text's
shared n-grams.

The heavy parts run off the event loop, within caps that bound their work whatever the input
(members shown, words diffed, characters highlighted); a view says what it left out.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.app.service.diffs import Piece, highlight_ngrams, word_diff, words_end
from neardup.app.service.errors import NotFound
from neardup.app.service.operations import Service
from neardup.core.engine import ProtectedSet, batch_matches, estimate, jaccard, shingles

__all__ = [
    "CHAIN_LIMIT",
    "DIFF_WORDS",
    "HIGHLIGHT_CHARS",
    "PAGE_ROWS",
    "ClusterView",
    "ContaminationView",
    "cluster_rows",
    "cluster_view",
    "contamination_view",
]

#: Rows (distinct texts) of a cluster page; the page's rows also get the estimate matrix.
PAGE_ROWS = 20
#: Distinct texts up to which the chain of confirmed pairs joining a member is traced (the
#: pairs among them are confirmed all at once: at most this squared over two).
CHAIN_LIMIT = 1000
#: Copies of a text named in its row (the rest are counted).
COPIES_NAMED = 10
#: Words of each text that are diffed (difflib's cost grows faster than the text); the rest is
#: shown undiffed.
DIFF_WORDS = 2000
#: Characters of a checked text that are highlighted and shown (the check covers all of it).
HIGHLIGHT_CHARS = 200_000
#: Characters of a shared n-gram a contamination page's table shows (13 long words can be
#: longer: the whole n-gram is marked in the text).
NGRAM_CHARS = 300
#: Texts longer than this get no exact Jaccard (its shingle sets would be this large too).
JACCARD_CHARS = 1_000_000
#: Members whose signatures are compared with the root's at a time (bounds the temporary).
_SLAB = 8192


@dataclass(frozen=True)
class MemberView:
    """One row of a cluster page: a distinct text, by its smallest id, beside the root."""

    id: str
    estimate: float
    jaccard: float | None
    diff: list[Piece]
    #: characters of the member's text past the diffed words, shown without a diff
    undiffed: int = 0
    #: the other ids with exactly this text (the first COPIES_NAMED), and how many there are
    copies: tuple[str, ...] = ()
    copy_count: int = 0
    #: for a member below the threshold: the confirmed pairs from the root to it, as (id,
    #: estimate to the previous id); None when not traced (at or above the threshold, or the
    #: cluster has more than CHAIN_LIMIT distinct texts)
    chain: tuple[tuple[str, float], ...] | None = None


@dataclass(frozen=True)
class ClusterView:
    """One page of a cluster: the root's text, and a page of its distinct texts, the root's
    first, then by estimate to the root ascending (the borderline first), then by id."""

    root: str
    #: the root's text up to its DIFF_WORDS-th word (None when texts are not stored)
    root_text: str | None
    members: list[MemberView]
    ids: list[str]
    matrix: list[list[float]] | None
    size: int = 0
    distinct: int = 0
    page: int = 1
    pages: int = 1
    threshold: float = 0.0
    #: whether chains were traced (False past CHAIN_LIMIT distinct texts)
    chains: bool = True
    #: the row (its first id) of the id asked for with ``find``, on this page; or None
    found: str | None = None


@dataclass(frozen=True)
class _Ranked:
    """A cluster's distinct texts in page order, with their copies, estimates and chains."""

    groups: list[list[str]]
    estimates: list[float]
    chains: dict[str, tuple[tuple[str, float], ...]] | None


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
    #: the text was empty (or only white space): nothing to check, no verdict
    empty: bool = False

    def rows(self) -> list[tuple[str, str, str | None, int | None]]:
        """The hits as table rows (set, item, n-gram, row showing it): each n-gram shown once,
        on the first row sharing it and cut at NGRAM_CHARS (it is marked in the text above);
        a later row names that row (from 1) instead. The page then grows with the text, not
        with the hits times the n-gram's length."""
        first: dict[str, int] = {}
        out: list[tuple[str, str, str | None, int | None]] = []
        for row, (name, item, gram) in enumerate(self.hits, start=1):
            if gram in first:
                out.append((name, item, None, first[gram]))
                continue
            first[gram] = row
            shown = gram if len(gram) <= NGRAM_CHARS else gram[:NGRAM_CHARS] + "…"
            out.append((name, item, shown, None))
        return out


#: Attempts at drawing a cluster page while writes keep changing the cluster under it.
_ATTEMPTS = 3


async def cluster_view(
    service: Service, root: str, page: int = 1, find: str | None = None
) -> ClusterView:
    """A page of the cluster rooted at ``root`` (NotFound if it is not a root); with ``find``,
    the page holding that member's row. Drawn again if one of its members was deleted while it
    was drawn (other writes meanwhile leave it as drawn: a page is a snapshot)."""
    for _ in range(_ATTEMPTS):
        try:
            return await _cluster_view(service, root, page, find)
        except KeyError:  # a member (or the root) was deleted meanwhile
            continue
    raise NotFound(f"the cluster of {root!r} kept changing while its page was drawn: reload")


async def _cluster_view(service: Service, root: str, page: int, find: str | None) -> ClusterView:
    members = await service.cluster(root)
    ranked = await _ranking(service, root, members)
    pages = max(1, -(-len(ranked.groups) // PAGE_ROWS))
    at = None if find is None else next((k for k, g in enumerate(ranked.groups) if find in g), None)
    if at is not None:
        page = at // PAGE_ROWS + 1
    page = min(max(1, page), pages)
    lo = (page - 1) * PAGE_ROWS
    rows = list(range(lo, min(lo + PAGE_ROWS, len(ranked.groups))))
    ids = [ranked.groups[k][0] for k in rows]
    shown = ids if ids[:1] == [root] else [root, *ids]
    signatures = await service.member_signatures(shown)
    sigs = np.stack([signatures[i] for i in shown])  # (KeyError: deleted meanwhile)
    texts = await service.texts(shown)
    params = service.params
    view = await asyncio.to_thread(_page_view, root, shown, sigs, texts, params.k, params.tokenizer)
    by_id = {m.id: m for m in view.members}
    members_shown = []
    for k in rows:
        group = ranked.groups[k]
        chain = ranked.chains.get(group[0]) if ranked.chains is not None else None
        copies = tuple(group[1 : 1 + COPIES_NAMED])
        member = by_id[group[0]]
        members_shown.append(
            replace(member, estimate=ranked.estimates[k], copies=copies,
                    copy_count=len(group) - 1, chain=chain)
        )  # fmt: skip
    matrix = _matrix(np.stack([signatures[i] for i in ids])) if ids else None
    return replace(
        view, members=members_shown, ids=ids, matrix=matrix, size=len(members),
        distinct=len(ranked.groups), page=page, pages=pages, threshold=params.threshold,
        chains=ranked.chains is not None,
        found=None if at is None else ranked.groups[at][0],
    )  # fmt: skip


async def _ranking(service: Service, root: str, members: list[str]) -> _Ranked:
    """The cluster's rows, kept until the index changes (paging does not recompute them).

    Bounded whatever the cluster's size: copies are grouped by digest off the event loop, the
    estimates to the root are computed _SLAB signatures at a time (yielding to the loop between
    slabs), and chains are traced only up to CHAIN_LIMIT distinct texts."""
    key = (service.index.version, root)
    cached = service.cluster_pages.get(key)
    if isinstance(cached, _Ranked):
        return cached
    digests = await service.digests(members)
    groups = await asyncio.to_thread(_copies, members, digests)
    reps = [g[0] for g in groups]
    # Memory's, the store's or the index's (a flushed cluster is not held in memory).
    root_sig = (await service.member_signatures([root]))[root]
    est = np.zeros(len(reps), dtype=np.float64)
    kept: dict[str, NDArray[np.uint32]] = {}
    for lo in range(0, len(reps), _SLAB):
        found = await service.member_signatures(reps[lo : lo + _SLAB])
        slab = [(k, i) for k, i in enumerate(reps[lo : lo + _SLAB], start=lo) if i in found]
        if slab:  # (a member deleted meanwhile keeps estimate 0)
            sigs = np.stack([found[i] for _, i in slab])
            est[[k for k, _ in slab]] = (sigs == root_sig).mean(axis=1)
        if len(reps) <= CHAIN_LIMIT:
            kept.update(found)
        await asyncio.sleep(0)
    order = sorted(range(len(groups)), key=lambda k: (reps[k] != root, est[k], reps[k]))
    chains = None
    if len(reps) <= CHAIN_LIMIT and all(i in kept for i in reps):
        params = service.params
        sigs = np.stack([kept[i] for i in reps])
        chains = await asyncio.to_thread(
            _chains, reps, sigs, est, reps.index(root), params.bands, params.threshold
        )
    ranked = _Ranked([groups[k] for k in order], [float(est[k]) for k in order], chains)
    service.cluster_pages.clear()  # one cluster at a time: bounded memory
    service.cluster_pages[key] = ranked
    return ranked


async def cluster_rows(service: Service, root: str) -> tuple[list[list[str]], list[float]]:
    """Every member of the cluster rooted at ``root`` in its pages' order, as its pages count
    them: the distinct texts (each a sorted list of the ids holding it) and each one's estimate
    to the root (NotFound if ``root`` is not a root)."""
    for _ in range(_ATTEMPTS):
        try:
            ranked = await _ranking(service, root, await service.cluster(root))
        except KeyError:  # the root was deleted meanwhile
            continue
        return ranked.groups, ranked.estimates
    raise NotFound(f"the cluster of {root!r} kept changing while it was read: retry")


def _copies(members: list[str], digests: dict[str, bytes]) -> list[list[str]]:
    """The members grouped by text digest, each group sorted (``members`` is sorted, so each
    group's first id is its smallest); a member without a digest (deleted meanwhile) alone."""
    by_digest: dict[bytes, list[str]] = {}
    for member in members:
        digest = digests.get(member, b"deleted:" + member.encode("utf-8", "surrogatepass"))
        by_digest.setdefault(digest, []).append(member)
    return list(by_digest.values())


def _chains(
    ids: list[str],
    sigs: NDArray[np.uint32],
    est: NDArray[np.float64],
    root: int,
    bands: int,
    threshold: float,
) -> dict[str, tuple[tuple[str, float], ...]]:
    """For every row below the threshold: a shortest path of confirmed pairs from the root."""
    later, earlier, pair_est = batch_matches(sigs, bands, threshold)
    edges: list[list[tuple[int, float]]] = [[] for _ in ids]
    for a, b, e in zip(later.tolist(), earlier.tolist(), pair_est.tolist(), strict=True):
        edges[a].append((b, e))
        edges[b].append((a, e))
    parent: dict[int, tuple[int, float]] = {root: (root, 1.0)}
    todo = deque([root])
    while todo:
        at = todo.popleft()
        for nxt, e in sorted(edges[at], key=lambda x: (-x[1], ids[x[0]])):
            if nxt not in parent:
                parent[nxt] = (at, e)
                todo.append(nxt)
    chains = {}
    for k in np.flatnonzero(est < threshold).tolist():
        if k not in parent:
            continue
        path: list[tuple[str, float]] = []
        at = k
        while at != root:
            prev, e = parent[at]
            path.append((ids[at], e))
            at = prev
        chains[ids[k]] = tuple(reversed(path))
    return chains


def _page_view(
    root: str,
    ids: list[str],
    sigs: NDArray[np.uint32],
    texts: dict[str, str],
    k: int,
    tokenizer: str,
) -> ClusterView:
    """Estimates, exact Jaccard and word diffs of ``ids`` (the root first) against the root."""
    root_text = texts.get(root)
    root_shingles = _shingles(root_text, k, tokenizer)
    members = []
    for i, member in enumerate(ids):
        text = texts.get(member)
        view = MemberView(member, estimate(sigs[0], sigs[i]), None, [])
        if root_text is not None and text is not None:
            member_shingles = _shingles(text, k, tokenizer)
            if root_shingles is not None and member_shingles is not None:
                view = replace(view, jaccard=jaccard(root_shingles, member_shingles))
            if member != root:
                view = _with_diff(view, root_text, text)
        members.append(view)
    shown = root_text[: words_end(root_text, DIFF_WORDS)] if root_text is not None else None
    return ClusterView(root, shown, members, ids, None)


def _shingles(text: str | None, k: int, tokenizer: str) -> set[str] | None:
    return shingles(text, k, tokenizer) if text is not None and len(text) <= JACCARD_CHARS else None


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
    ``echo`` (a key with the protect scope) the shared n-grams are named and highlighted. An
    empty text (or only white space) is not checked: there is nothing to check."""
    chosen = service.chosen_sets(sets)
    checked = tuple(s.name for s in chosen)
    if not text.strip():
        return ContaminationView(text, [], [], 0, echo, checked, empty=True)
    [found] = await service.contamination([text], sets, caller, protect=echo)
    hits = [(s, item, gram or "") for s, item, gram in found.listed]  # no n-gram without echo
    shown = text[:HIGHLIGHT_CHARS]
    if not echo:
        plain = [Piece(shown, "same")]
        return ContaminationView(text, plain, hits, len(text) - len(shown), echo, checked)
    pieces = await asyncio.to_thread(_highlighted, shown, chosen)
    return ContaminationView(text, pieces, hits, len(text) - len(shown), echo, checked)


def _highlighted(text: str, chosen: list[ProtectedSet]) -> list[Piece]:
    shared: set[str] = set()
    for protected in chosen:
        shared |= protected.shared(text)
    n = chosen[0].n if chosen else 1
    tokenizer = chosen[0].tokenizer if chosen else "words"
    return highlight_ngrams(text, shared, n, tokenizer)
