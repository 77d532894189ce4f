"""Re-crawled ids on the local engine: rows whose id is indexed, decided before the rest.

``plan_recrawl`` compares every such row with the indexed document of its id (core's
``recrawl_verdicts``) and applies ``--recrawled``: the rows it drops (the same or a near text,
and with ``keep-indexed`` a changed one; with ``keep-both``, a changed text kept before under its
derived id) are decided here and take no further part in the run; ``keep-both`` renames the
other changed rows to their derived ids, ``replace`` lists the indexed documents this run takes
out of the index. ``isolate`` then makes the dropped rows unlinkable, so that ``decide`` sees
the rest of the batch only, and ``merge`` writes the plan's outcomes over its decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from neardup.app.cli.decisions import EXACT, NEAR, RECRAWLED, Decisions
from neardup.core.engine import (
    RECRAWL_CHANGED,
    RECRAWL_NEAR,
    RECRAWL_SAME,
    DocIndex,
    DuplicateIdError,
    IndexIdError,
    derived_ids,
    indexed_documents,
    recrawl_verdicts,
)
from neardup.core.minhash import MERSENNE31

__all__ = ["RecrawlPlan", "isolate", "merge", "plan_recrawl"]

_OUTCOME = {RECRAWL_SAME: EXACT, RECRAWL_NEAR: NEAR, RECRAWL_CHANGED: RECRAWLED}
#: The verdicts as the manifest counts them.
_NAMES = ("same", "near", "changed")


@dataclass
class RecrawlPlan:
    """What ``--recrawled`` decided.

    Attributes:
        policy: ``keep-both``, ``keep-indexed`` or ``replace``.
        rows: the rows decided here (dropped), ascending.
        outcome: EXACT, NEAR or RECRAWLED of each.
        target: the indexed id each names (its own id; a derived id for a text kept before).
        parts: the part of each target.
        estimate: of each to its target.
        renamed: row -> derived id (``keep-both``: a changed text kept under it).
        replaced: the indexed ids ``replace`` takes out of the index.
        verdicts: how many re-crawled rows had the same, a near and a changed text.
    """

    policy: str
    rows: NDArray[np.int64] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    outcome: NDArray[np.int8] = field(default_factory=lambda: np.empty(0, dtype=np.int8))
    target: list[str] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    estimate: NDArray[np.float64] = field(default_factory=lambda: np.empty(0, dtype=np.float64))
    renamed: dict[int, str] = field(default_factory=dict)
    replaced: list[str] = field(default_factory=list)
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_NAMES, 0))

    def record(self) -> dict[str, object]:
        """The manifest's ``index.recrawled`` object."""
        return {"policy": self.policy, **self.verdicts, "renamed": len(self.renamed),
                "replaced": len(self.replaced)}  # fmt: skip

    def ids(self, ids: list[str]) -> list[str]:
        """The run's ids with ``renamed`` applied."""
        if not self.renamed:
            return ids
        out = list(ids)
        for row, new in self.renamed.items():
            out[row] = new
        return out


def plan_recrawl(
    index: DocIndex,
    ids: list[str],
    digests: NDArray[np.uint64],
    sigs: NDArray[np.uint32],
    threshold: float,
    policy: str,
) -> RecrawlPlan:
    """The plan of the rows of ``ids`` whose id is indexed (none: an empty plan)."""
    plan = RecrawlPlan(policy)
    found = indexed_documents(index, ids)
    if not found.ids:
        return plan
    row_of = {doc_id: i for i, doc_id in enumerate(ids)}
    rows = np.array([row_of[i] for i in found.ids], dtype=np.int64)
    verdict, estimate = recrawl_verdicts(
        digests[rows], sigs[rows], found.digests, found.sigs, threshold
    )
    for code, name in zip((RECRAWL_SAME, RECRAWL_NEAR, RECRAWL_CHANGED), _NAMES, strict=True):
        plan.verdicts[name] = int(np.count_nonzero(verdict == code))
    dropped = verdict != RECRAWL_CHANGED
    if policy == "keep-indexed":
        dropped[:] = True
    elif policy == "replace":
        plan.replaced = [found.ids[j] for j in np.flatnonzero(~dropped).tolist()]
    outcome = np.array([_OUTCOME[int(v)] for v in verdict], dtype=np.int8)
    target, parts = list(found.ids), list(found.parts)
    if policy == "keep-both":
        _derive(index, ids, digests, rows[~dropped], plan)
    taken = np.flatnonzero(dropped)
    extra = sorted(set(plan.renamed) & set(plan.rows.tolist()))  # a text kept before
    order = np.argsort(np.concatenate((rows[taken], plan.rows)), kind="stable")
    plan.rows = np.concatenate((rows[taken], plan.rows))[order]
    plan.outcome = np.concatenate((outcome[taken], plan.outcome))[order]
    plan.estimate = np.concatenate((estimate[taken], plan.estimate))[order]
    targets = [*(target[j] for j in taken.tolist()), *plan.target]
    named = [*(parts[j] for j in taken.tolist()), *plan.parts]
    plan.target = [targets[k] for k in order.tolist()]
    plan.parts = [named[k] for k in order.tolist()]
    for row in extra:
        del plan.renamed[row]
    _check_renamed(ids, plan)
    return plan


def _check_renamed(ids: list[str], plan: RecrawlPlan) -> None:
    """DuplicateIdError when a derived id is the id of a row that goes on (not dropped here)."""
    if not plan.renamed:
        return
    gone = set(plan.rows.tolist()) | set(plan.renamed)
    going = {doc_id for i, doc_id in enumerate(ids) if i not in gone}
    clash = going & set(plan.renamed.values())
    if clash:
        raise DuplicateIdError(*sorted(clash))


def _derive(
    index: DocIndex,
    ids: list[str],
    digests: NDArray[np.uint64],
    rows: NDArray[np.int64],
    plan: RecrawlPlan,
) -> None:
    """``keep-both``: the derived id of every changed row in ``rows``. One already indexed holds
    the same text (the id carries its hash): the row is dropped as its exact copy; with another
    text (a hash collision, or an input that names its ids so), IndexIdError."""
    names = derived_ids([ids[r] for r in rows.tolist()], digests[rows])
    found = indexed_documents(index, names)
    at = found.position()
    same_rows, same_parts, same_names = [], [], []
    for row, name in zip(rows.tolist(), names, strict=True):
        plan.renamed[row] = name
        j = at.get(name)
        if j is None:
            continue
        if not bool((found.digests[j] == digests[row]).all()):
            raise IndexIdError(index.url, {name: found.parts[j]})
        same_rows.append(row)
        same_parts.append(found.parts[j])
        same_names.append(name)
    plan.rows = np.array(same_rows, dtype=np.int64)
    plan.outcome = np.full(len(same_rows), EXACT, dtype=np.int8)
    plan.estimate = np.ones(len(same_rows), dtype=np.float64)
    plan.target, plan.parts = same_names, same_parts


def isolate(
    plan: RecrawlPlan, ids: list[str], digests: NDArray[np.uint64], sigs: NDArray[np.uint32]
) -> list[str]:
    """Make the plan's rows link to nothing (``digests`` and ``sigs`` in place): a signature
    without shingles (never banded) and a digest of their own (no text is theirs), so that
    ``decide`` and the index lookup see the rest of the batch only; returns the ids ``decide``
    takes, the plan's rows under names no id can have (a control character: their own ids may
    be indexed ones the lookup matches). Their own outcomes come from ``merge``."""
    if len(plan.rows) == 0:
        return ids
    sigs[plan.rows] = MERSENNE31
    digests[plan.rows, 0] = plan.rows.astype(np.uint64)
    digests[plan.rows, 1] = np.uint64(2**64 - 1)  # a SHA-256 prefix with odds 2**-64
    out = list(ids)
    for row in plan.rows.tolist():
        out[row] = f"\x00{row}"
    return out


def merge(decisions: Decisions, plan: RecrawlPlan, n: int) -> None:
    """Write the plan's outcomes over ``decisions`` (of all ``n`` rows): each dropped row names
    its indexed document (a node after the matched ones, unless already matched) and is a member
    of that document's cluster."""
    if len(plan.rows) == 0:
        return
    node_of = {doc_id: n + j for j, doc_id in enumerate(decisions.indexed_ids)}
    roots = list(decisions.indexed_root.tolist())
    for doc_id, part in zip(plan.target, plan.parts, strict=True):
        if doc_id not in node_of:
            node_of[doc_id] = n + len(decisions.indexed_ids)
            decisions.indexed_ids.append(doc_id)
            decisions.indexed_parts.append(part)
            roots.append(node_of[doc_id])
    decisions.indexed_root = np.array(roots, dtype=np.int64)
    nodes = np.array([node_of[t] for t in plan.target], dtype=np.int64)
    decisions.outcome[plan.rows] = plan.outcome
    decisions.duplicate_of[plan.rows] = nodes
    decisions.estimate[plan.rows] = plan.estimate
    decisions.root[plan.rows] = decisions.indexed_root[nodes - n]
