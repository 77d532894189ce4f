"""The oracle of incremental dedup (docs/algorithm.md, incremental runs), by brute force.

Every pair is looked at: two documents are linked when their texts are identical, or when both
have words, one band of their signatures is equal and the estimate reaches the threshold
(pairs of two indexed documents are not looked at: an index made by neardup has none). Indexed
documents always survive; a new document of a component holding indexed documents is dropped
naming the smallest indexed id; components without one keep their preferred row under
``--keep``. A copy of a new text whose kept row is dropped too names what that row names: every
``duplicate_of`` is a survivor or an indexed document. No numpy past the signatures, no code of
the engine's decisions: a Python union-find and loops.
"""

from __future__ import annotations

from dataclasses import dataclass

from neardup.core.engine import MinhashParams, batch_signatures

EMPTY = 2**31 - 1


@dataclass(frozen=True)
class New:
    """A new row: id, text, ``q`` (for ``--keep max:q``) and its place in the input."""

    id: str
    text: str
    q: int | None = None


@dataclass(frozen=True)
class Outcome:
    """What the oracle says of a new row."""

    reason: str  # "kept", "exact" or "near"
    cluster: str  # the smallest id of its component, indexed ids included
    duplicate_of: str | None = None
    estimate: float | None = None
    indexed: bool = False  # duplicate_of is an indexed document


def _linked(a: list[int], b: list[int], params: MinhashParams) -> bool:
    if all(v == EMPTY for v in a) or all(v == EMPTY for v in b):
        return False
    r = params.rows
    if not any(a[i * r : (i + 1) * r] == b[i * r : (i + 1) * r] for i in range(params.bands)):
        return False
    return _estimate(a, b) >= params.threshold


def _estimate(a: list[int], b: list[int]) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def _preference(keep: str, rows: list[New]):
    def key(i: int):
        row = rows[i]
        if keep == "first":
            return (i,)
        if keep == "longest":
            return (-len(row.text), row.id)
        if keep.startswith("max:"):
            return (row.q is None, -(row.q or 0), row.id)
        return (row.id,)

    return key


def oracle(
    new: list[New], indexed: dict[str, str], params: MinhashParams, keep: str = "smallest-id"
) -> dict[str, Outcome]:
    """The outcome of every new row against ``indexed`` (id -> text)."""
    names = [r.id for r in new] + sorted(indexed)
    texts = [r.text for r in new] + [indexed[i] for i in sorted(indexed)]
    sigs = [s.tolist() for s in batch_signatures(texts, params)] if texts else []
    n = len(new)
    parent = list(range(len(names)))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for i in range(n):
        for j in range(i + 1, len(names)):  # new-new and new-indexed, never indexed-indexed
            if texts[i] == texts[j] or _linked(sigs[i], sigs[j], params):
                parent[find(i)] = find(j)
    members: dict[int, list[int]] = {}
    for x in range(len(names)):
        members.setdefault(find(x), []).append(x)
    pref = _preference(keep, new)
    out: dict[str, Outcome] = {}
    for i in sorted(range(n), key=lambda i: _is_copy(i, new, texts, n, pref)):
        comp = members[find(i)]
        cluster = min(names[x] for x in comp)
        same_indexed = [names[j] for j in range(n, len(names)) if texts[j] == texts[i]]
        same_new = [j for j in range(n) if texts[j] == texts[i]]
        in_index = [x for x in comp if x >= n]
        if same_indexed:
            out[new[i].id] = Outcome("exact", cluster, min(same_indexed), 1.0, True)
        elif min(same_new, key=pref) != i:
            # Its text's kept row, or what that row names when it is dropped too (decided
            # first: the copies come last in this loop).
            keeper = out[new[min(same_new, key=pref)].id]
            if keeper.reason == "kept":
                out[new[i].id] = Outcome("exact", cluster, names[min(same_new, key=pref)], 1.0)
            else:
                out[new[i].id] = Outcome(
                    "exact", cluster, keeper.duplicate_of, keeper.estimate, keeper.indexed
                )
        elif in_index:
            first = min(in_index, key=lambda x: names[x])
            est = _estimate(sigs[i], sigs[first])
            out[new[i].id] = Outcome("near", cluster, names[first], est, True)
        else:
            best = min((x for x in comp if x < n), key=pref)
            if best == i:
                out[new[i].id] = Outcome("kept", cluster)
            else:
                est = _estimate(sigs[i], sigs[best])
                out[new[i].id] = Outcome("near", cluster, names[best], est)
    return out


def _is_copy(i: int, new: list[New], texts: list[str], n: int, pref) -> bool:
    """Whether new row ``i`` is a copy of another new row's text that is preferred to it."""
    same_new = [j for j in range(n) if texts[j] == texts[i]]
    return min(same_new, key=pref) != i
