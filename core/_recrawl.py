"""Re-crawled ids: a new row whose id is already indexed, decided against that id's document.

A monthly dump re-crawls most pages it had before, under the same ids (often their URLs). Such
a row is compared with the indexed document of its id (docs/algorithm.md, incremental runs):

- ``SAME``: the same text (equal 128-bit digests);
- ``NEAR``: both have words and the estimate of their signatures reaches the threshold (the
  confirmation rule of every pair; the pair is known, so no band needs to match);
- ``CHANGED``: otherwise, and then the run's ``RecrawlPolicy`` says what happens:
  ``keep-both`` (the default) keeps the row under ``derived_id`` (``ID#rev-`` and 12 hex digits
  of its text's SHA-256: the same for the same id and text on any engine and any run),
  ``keep-indexed`` drops it, ``replace`` takes the indexed document out of the index and keeps
  the row under its own id.

``indexed_documents`` reads what the comparison needs of the index (digest, signature, part of
the ids asked for, found through each part's id table: ``_index_idrows``); ``rewrite_without``
writes the parts holding replaced documents again without them (copy on write: the index's
parts are never changed in place, a version lists the new parts instead of the old).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core._banding import empty_rows
from neardup.core._index import DocIndex, IndexPart, write_part
from neardup.core._index_idrows import IndexedDocs, find_ids
from neardup.core._index_parts import COLUMNS, part_matrix
from neardup.core._params import MinhashParams
from neardup.core.errors import ParameterError

__all__ = [
    "CHANGED",
    "NEAR",
    "RECRAWL_POLICIES",
    "REVISION",
    "SAME",
    "IndexedDocs",
    "derived_id",
    "derived_ids",
    "indexed_documents",
    "recrawl_policy",
    "recrawl_verdicts",
    "rewrite_without",
]

#: What ``--recrawled`` takes; the first is the default (docs/index.md says why).
RECRAWL_POLICIES = ("keep-both", "keep-indexed", "replace")
#: Verdicts of a re-crawled row against its indexed document.
SAME, NEAR, CHANGED = 0, 1, 2
#: What ``derived_id`` puts between the id and the text's hash.
REVISION = "#rev-"
#: Hex digits of the text's SHA-256 in a derived id (48 bits).
_REVISION_HEX = 12


def recrawl_policy(spelled: str) -> str:
    """``spelled`` if it is a policy; ParameterError naming the choices otherwise."""
    if spelled not in RECRAWL_POLICIES:
        raise ParameterError(
            f"--recrawled {spelled!r} is not a policy; use one of {', '.join(RECRAWL_POLICIES)}"
        )
    return spelled


def derived_id(doc_id: str, sha256_hex: str) -> str:
    """The id ``keep-both`` gives a changed re-crawled row: ``ID#rev-`` and the first 12 hex
    digits of its text's SHA-256 (``sha256_hex``, lower case)."""
    return f"{doc_id}{REVISION}{sha256_hex[:_REVISION_HEX]}"


def derived_ids(ids: Sequence[str], digests: NDArray[np.uint64]) -> list[str]:
    """``derived_id`` of every row (``digests``: ``text_digests``' first 128 bits of SHA-256)."""
    raw = np.ascontiguousarray(digests, dtype="<u8").tobytes()
    return [derived_id(doc_id, raw[16 * i : 16 * i + 8].hex()) for i, doc_id in enumerate(ids)]


def indexed_documents(index: DocIndex, ids: Collection[str]) -> IndexedDocs:
    """The indexed documents among ``ids``, with their digests and signatures: core's one
    lookup of ids (``_index_idrows.find_ids``: each part's id table, O(ids) pages read)."""
    return find_ids(index, ids)


def recrawl_verdicts(
    digests: NDArray[np.uint64],
    sigs: NDArray[np.uint32],
    indexed_digests: NDArray[np.uint64],
    indexed_sigs: NDArray[np.uint32],
    threshold: float,
) -> tuple[NDArray[np.int8], NDArray[np.float64]]:
    """Each re-crawled row (row ``i`` of ``digests``/``sigs``) against its indexed document (row
    ``i`` of ``indexed_*``): its verdict (``SAME``, ``NEAR``, ``CHANGED``) and the estimate of
    the two signatures (1.0 for ``SAME``)."""
    n = len(digests)
    if n == 0:
        return np.empty(0, dtype=np.int8), np.empty(0, dtype=np.float64)
    same = (digests == indexed_digests).all(axis=1)
    estimate = np.count_nonzero(sigs == indexed_sigs, axis=1) / sigs.shape[1]
    live = ~empty_rows(sigs) & ~empty_rows(indexed_sigs)
    verdict = np.full(n, CHANGED, dtype=np.int8)
    verdict[live & (estimate >= threshold)] = NEAR
    verdict[same] = SAME
    return verdict, np.where(same, 1.0, estimate).astype(np.float64)


def rewrite_without(
    index: DocIndex, params: MinhashParams, ids: Collection[str], run: dict[str, Any]
) -> tuple[list[IndexPart], list[str]]:
    """The index's parts holding one of ``ids`` written again without them (one new part each,
    none for a part left empty), and the names of the parts they replace: ``commit_index(add=...,
    drop=...)`` commits the swap. Parts holding none of ``ids`` are not read."""
    gone = set(ids)
    added: list[IndexPart] = []
    dropped: list[str] = []
    if not gone:
        return added, dropped
    holding = set(find_ids(index, gone, ()).parts)
    for part in index.parts:
        if part.name not in holding:
            continue
        keep_ids: list[str] = []
        digests, sigs = [], []
        deleted = index.deletes.ids(part)
        for f in part.files:
            with index.parquet(f) as parquet:
                table = parquet.read(columns=list(COLUMNS))
            every = table.column("id").to_pylist()
            keep = np.array([i not in gone and i not in deleted for i in every], dtype=bool)
            keep_ids.extend(
                i for i, k in zip(table.column("id").to_pylist(), keep, strict=True) if k
            )
            digests.append(part_matrix(index.url, f.path, table, "digest", 16, "<u8")[keep])
            sigs.append(
                part_matrix(index.url, f.path, table, "signature", 4 * params.num_perm, "<u4")[keep]
            )
        dropped.append(part.name)
        if keep_ids:
            added.append(
                write_part(index, params, keep_ids, np.concatenate(digests).astype(np.uint64),
                           np.concatenate(sigs).astype(np.uint32),
                           {**run, "mode": "replace", "from_parts": [part.name]})
            )  # fmt: skip
    return added, dropped
