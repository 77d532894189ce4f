"""Corpus stages: ``Doc`` in, a list of ``Doc`` out (docs/algorithm.md section 5)."""

from __future__ import annotations

from collections.abc import Iterable

from neardup.core._cluster import cluster_roots
from neardup.core._corpus import Doc
from neardup.core._digests import id_rank
from neardup.core._params import MinhashParams
from neardup.core._signatures import signatures
from neardup.core.errors import DuplicateIdError

__all__ = ["CLUSTER_KEY", "exact_dedup", "near_dedup"]

#: The meta key ``near_dedup`` writes: the id of the document's cluster root.
CLUSTER_KEY = "minhash_cluster"


def _unique_ids(docs: Iterable[Doc]) -> list[Doc]:
    """The whole input as a list; raises DuplicateIdError at the first repeated id."""
    seen: set[str] = set()
    out = []
    for doc in docs:
        if doc.id in seen:
            raise DuplicateIdError(doc.id)
        seen.add(doc.id)
        out.append(doc)
    return out


def exact_dedup(docs: Iterable[Doc]) -> list[Doc]:
    """Of documents with identical text, keep the one with the smallest id; input order kept.

    Reads its whole input first (a later document may have a smaller id) and returns a list,
    so the survivors can be looked at and then passed on. Raises DuplicateIdError for a
    repeated id.
    """
    batch = _unique_ids(docs)
    keeper: dict[str, str] = {}
    for doc in batch:
        best = keeper.get(doc.text)
        if best is None or doc.id < best:
            keeper[doc.text] = doc.id
    return [doc for doc in batch if keeper[doc.text] == doc.id]


def near_dedup(
    docs: Iterable[Doc],
    *,
    num_perm: int = 128,
    bands: int = 16,
    threshold: float = 0.8,
    k: int = 5,
    seed: int = 0,
    workers: int = 1,
    tokenizer: str = "words",
    drop: bool = True,
) -> list[Doc]:
    """Tag every document ``meta["minhash_cluster"] = root id``; with ``drop``, keep only roots.

    Reads its whole input (clusters need every signature), then returns a list in input order
    with all other meta kept: it can be looked at and still passed on whole (a one-shot
    generator would come back empty the second time). The input's meta dicts are not modified.
    Raises DuplicateIdError for a repeated id.
    """
    params = MinhashParams(
        num_perm=num_perm, bands=bands, threshold=threshold, k=k, seed=seed, tokenizer=tokenizer
    )
    batch = _unique_ids(docs)
    sigs = signatures(
        [d.text for d in batch], num_perm=num_perm, seed=seed, k=k, workers=workers,
        tokenizer=tokenizer,
    )  # fmt: skip
    roots = cluster_roots(sigs, params, id_rank([d.id for d in batch]))
    return _tagged(batch, [batch[r].id for r in roots.tolist()], drop)


def _tagged(batch: list[Doc], root_id: list[str], drop: bool) -> list[Doc]:
    return [
        doc._replace(meta={**doc.meta, CLUSTER_KEY: root})
        for doc, root in zip(batch, root_id, strict=True)
        if not drop or root == doc.id
    ]
