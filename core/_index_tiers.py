"""Which parts a background compaction rewrites next (``neardup serve --index``): a size-tiered
merge policy that keeps the number of parts logarithmic in the rows, each compaction bounded.

A part's tier is ``floor(log_factor(live rows))`` (tier 0 below ``factor`` rows). Once a tier
holds ``factor`` parts or more, they are merged into one (the lowest such tier first, its
parts in listing order, as many as fit in ``max_rows`` live rows): the merged part lands a
tier up, so at rest every tier below the largest holds fewer than ``factor`` parts:

    parts <= (factor - 1) * (tiers up to max_rows) + the parts too large to merge

(with flushes of 100,000 rows, ``factor`` 10 and ``max_rows`` 1,000,000: at most 54 parts below
a million rows, plus one part per ~million rows). A part larger than ``max_rows / factor`` is
left alone once ``factor`` of its like would exceed ``max_rows``: one compaction never rewrites
the whole index, and its memory is bounded by ``max_rows``. Merging drops deleted rows; a part
too large to be merged with its like (over ``max_rows / factor`` live rows) whose deletion
vector deletes at least ``DELETED_SHARE`` of its rows is rewritten alone (its deleted rows
dropped) when no tier is due. A smaller part keeps its deleted rows until its tier is merged
(fewer than ``factor`` such parts a tier: a bounded waste, and no version for each delete).
Pure: parts in, the group out.
"""

from __future__ import annotations

from collections.abc import Sequence

from neardup.core._index import IndexPart

__all__ = ["DELETED_SHARE", "next_group", "tier"]

#: The share of a part's rows its deletion vector must delete for it to be rewritten alone.
DELETED_SHARE = 0.5


def tier(rows: int, factor: int) -> int:
    """The tier of a part of ``rows`` live rows: the largest ``t`` with ``factor**t <= rows``
    (0 below ``factor``)."""
    if factor < 2:
        raise ValueError(f"factor is {factor}: parts are merged by 2 or more (COMPACT_PARTS)")
    level, bound = 0, factor
    while rows >= bound:
        level, bound = level + 1, bound * factor
    return level


def next_group(parts: Sequence[IndexPart], factor: int, max_rows: int) -> list[IndexPart]:
    """The parts the next compaction merges (in listing order), or none: the lowest tier with
    at least ``factor`` parts that fit together in ``max_rows`` live rows (as many of its
    parts as fit), else of the parts over ``max_rows / factor`` live rows (and at most
    ``max_rows``) the one with the largest share of deleted rows, at least ``DELETED_SHARE``
    (alone)."""
    tiers: dict[int, list[IndexPart]] = {}
    for part in parts:
        if part.live_rows <= max_rows:
            tiers.setdefault(tier(part.live_rows, factor), []).append(part)
    for level in sorted(tiers):
        group: list[IndexPart] = []
        total = 0
        for part in tiers[level]:
            if total + part.live_rows > max_rows:
                break
            group.append(part)
            total += part.live_rows
        if len(group) >= factor:
            return group
    heavy = [
        p for p in parts
        if p.deleted is not None and max_rows < p.live_rows * factor
        and p.live_rows <= max_rows and p.deleted.rows >= DELETED_SHARE * p.rows
    ]  # fmt: skip
    if heavy:
        return [max(heavy, key=lambda p: p.deleted.rows / p.rows if p.deleted else 0.0)]
    return []
