"""What the document and query pages show: a registered document (its text, meta, cluster and
best matches) and a pasted text's near duplicates, found as ``POST /v1/query`` finds them.

Both are bounded whatever the document: the text and the meta shown are cut (the view says how
much is left out), and matches are counted whole but listed up to a cap.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from neardup.app.service.errors import NotFound
from neardup.app.service.operations import Service

__all__ = [
    "DOC_MATCHES",
    "META_CHARS",
    "TEXT_CHARS",
    "DocumentView",
    "MatchRow",
    "QueryView",
    "document_view",
    "query_view",
]

#: Characters of a document's text shown on its page.
TEXT_CHARS = 200_000
#: Characters of a document's meta (as indented JSON) shown on its page.
META_CHARS = 20_000
#: Matches listed on a document's page (all are counted).
DOC_MATCHES = 20


@dataclass(frozen=True)
class MatchRow:
    """A registered near duplicate: its id, its estimate to the text, and its cluster's root."""

    id: str
    estimate: float
    cluster: str


@dataclass(frozen=True)
class DocumentView:
    """A registered document's page."""

    id: str
    cluster: str
    cluster_size: int
    #: the meta as indented JSON, cut at META_CHARS, and the characters cut
    meta: str
    meta_cut: int
    #: the text up to TEXT_CHARS (None when texts are not stored), and the characters cut
    text: str | None
    text_cut: int
    #: the other documents whose estimate to this one reaches the threshold (all counted), and
    #: the best of them, highest estimate first, then by id
    match_count: int
    matches: list[MatchRow]
    threshold: float
    #: a document of the served index (``neardup serve --index``): read only, no meta or text
    indexed: bool = False


@dataclass(frozen=True)
class QueryView:
    """A pasted text's registered near duplicates, as ``POST /v1/query`` answers them."""

    #: False for an empty text (or only white space): nothing was checked
    checked: bool
    threshold: float
    match_count: int
    matches: list[MatchRow]
    #: matches listed at most (MAX_MATCHES)
    limit: int


async def document_view(service: Service, doc_id: str) -> DocumentView:
    """The page of a registered document (one of the service's own or of the served index);
    NotFound for an unknown id."""
    _, root, stored_meta, indexed = await service.document(doc_id)
    if doc_id not in service.index:
        return await _index_view(service, doc_id, stored_meta, indexed)
    meta = stored_meta or {}
    texts = await service.texts([doc_id])
    index = service.index
    try:
        sigs = index.signatures_of([doc_id])
        root = index.root_of(doc_id)
        size = index.size_of(root)
    except KeyError:  # deleted while its page was drawn
        raise NotFound(f"no document {doc_id!r}") from None
    # Itself among the best: it matches itself (estimate 1), so one more is asked for.
    [found] = index.matches(sigs, None, DOC_MATCHES + 1)
    best = [MatchRow(i, e, index.root_of(i)) for i, e in found.best if i != doc_id]
    shown, meta_cut, text, text_cut = await asyncio.to_thread(_cut, meta, texts.get(doc_id))
    return DocumentView(doc_id, root, size, shown, meta_cut, text, text_cut, found.count - 1,
                        best[:DOC_MATCHES], service.params.threshold, indexed)  # fmt: skip


async def _index_view(
    service: Service, doc_id: str, meta: dict[str, Any] | None, indexed: bool
) -> DocumentView:
    """The page of a document memory does not hold (a flushed one of the service's own, or one
    of the served index): its signature the store's or the index's, its matches looked up as
    ``POST /v1/query`` looks a text up, its cluster the store's tables'."""
    sig = await service.signature_of(doc_id)
    if sig is None:  # deleted while its page was drawn
        raise NotFound(f"no document {doc_id!r}")
    [(count, best)] = await service.query_signatures(sig[None, :], None, DOC_MATCHES + 1)
    root, size = await service.root_and_size(doc_id)
    texts = {} if indexed else await service.texts([doc_id])
    rows = [MatchRow(i, e, c) for i, e, c in best if i != doc_id]
    shown, meta_cut, text, text_cut = await asyncio.to_thread(_cut, meta or {}, texts.get(doc_id))
    return DocumentView(doc_id, root, size, shown, meta_cut, text, text_cut, count - 1,
                        rows[:DOC_MATCHES], service.params.threshold, indexed)  # fmt: skip


def _cut(meta: dict[str, Any], text: str | None) -> tuple[str, int, str | None, int]:
    dumped = json.dumps(meta, indent=2, ensure_ascii=False)
    shown = None if text is None else text[:TEXT_CHARS]
    text_cut = 0 if text is None else max(0, len(text) - TEXT_CHARS)
    return dumped[:META_CHARS], max(0, len(dumped) - META_CHARS), shown, text_cut


async def query_view(service: Service, text: str, threshold: float | None) -> QueryView:
    """The registered near duplicates of ``text``: ``Service.query``, the call behind ``POST
    /v1/query``, with its threshold (default THRESHOLD; OutOfReach below the bands' reach) and
    its cap (MAX_MATCHES listed, all counted). An empty text is not checked."""
    limit = service.settings.max_matches
    used = service.params.threshold if threshold is None else threshold
    if not text.strip():
        return QueryView(False, used, 0, [], limit)
    [(count, best)] = await service.query([text], threshold, None)
    return QueryView(True, used, count, [MatchRow(i, e, c) for i, e, c in best], limit)
