"""Contamination reports: per protected item and per protected set, accumulated over a stream.

Per item: the documents sharing at least one of its n-grams, the share of its distinct n-grams
found in them, and the share of its words those found n-grams cover, bucketed as in the Llama 2
report (Touvron et al. 2023, appendix A.6): ``clean`` below ``clean_below`` coverage, ``not
clean`` from it, ``not dirty`` below ``dirty_from``, ``dirty`` from it (so every item is in two
of the four subsets). Capped n-grams (``Protection``) are never found. Items are named by id:
a report holds no protected text except, when asked, the first shared and the capped n-grams.

A report stays small however large the corpus: every list is capped and counted in full
(``document_ids`` at most ``examples`` of an item's ``documents``, ``contaminated_ids`` of
``contaminated``, ``capped.list`` of ``capped.ngrams``, ``items`` at most ``max_items`` of
``items_matched``, ``top_items`` at most ``top`` of a set's ``items_matched``). The full lists
are what ``add`` returns, one entry per contaminated document, for a caller to write out.
One report for every surface: ``neardup contamination``, a dedup run's manifest and
``POST /v1/decontamination`` all give ``as_dict``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from neardup.core._corpus import Doc
from neardup.core._matches import MAX_LISTED, Match, Protection
from neardup.core._protected import ProtectedSet
from neardup.core._scripts import tokenizer_version
from neardup.core._windows import window_version
from neardup.core.errors import ParameterError

__all__ = ["MAX_ITEMS", "SUBSETS", "ContaminationReport", "Thresholds"]

#: The Llama 2 subsets, in report order.
SUBSETS = ("clean", "not clean", "not dirty", "dirty")
#: Matched items a report lists at most (``items_matched`` counts them all).
MAX_ITEMS = 1000


@dataclass(frozen=True)
class Thresholds:
    """Coverage bounds of the buckets (Llama 2's: 20% and 80% of an item's tokens)."""

    clean_below: float = 0.2
    dirty_from: float = 0.8

    def __post_init__(self) -> None:
        if not 0.0 <= self.clean_below <= self.dirty_from <= 1.0:
            raise ParameterError(
                "thresholds must satisfy 0 <= clean_below <= dirty_from <= 1, got "
                f"{self.clean_below!r} and {self.dirty_from!r}"
            )

    def subsets(self, coverage: float) -> list[str]:
        """The two Llama 2 subsets an item of this coverage is in."""
        first = "clean" if coverage < self.clean_below else "not clean"
        return [first, "not dirty" if coverage < self.dirty_from else "dirty"]


class ContaminationReport:
    """Accumulates matches document by document (``add``), then reports (``as_dict``).

    Args:
        protection: the sets checked and their caps.
        thresholds: the bucket bounds.
        examples: document ids listed per item, contaminated ids and capped n-grams listed
            (None: all; the counts are always whole).
        top: most-matched items listed per set.
        max_items: matched items listed (None: all).
    """

    def __init__(
        self,
        protection: Protection,
        thresholds: Thresholds | None = None,
        *,
        examples: int | None = MAX_LISTED,
        top: int = 10,
        max_items: int | None = MAX_ITEMS,
    ) -> None:
        for name, value in (("examples", examples), ("top", top), ("max_items", max_items)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):  # fmt: skip
                raise ParameterError(f"{name} must be a whole number >= 0, got {value!r}")
        self.protection = protection
        self.thresholds = thresholds or Thresholds()
        self.examples = examples
        self.top = top
        self.max_items = max_items
        self.documents = 0
        self.contaminated = 0
        self.contaminated_ids: list[str] = []
        self.set_documents: Counter[str] = Counter()
        self.item_documents: Counter[tuple[str, str]] = Counter()
        self.item_ids: dict[tuple[str, str], list[str]] = {}
        self.first: dict[tuple[str, str], str] = {}
        self.found: dict[str, set[str]] = {s.name: set() for s in protection.sets}

    def add(self, doc: Doc, matches: list[Match]) -> dict[str, Any] | None:
        """Count one document and its matches; a contaminated one's entry of the full lists
        (``{"id", "items": [{"set", "item"}, ...]}``, JSON-ready), None for a clean one."""
        self.documents += 1
        if not matches:
            return None
        self.contaminated += 1
        if self.examples is None or len(self.contaminated_ids) < self.examples:
            self.contaminated_ids.append(doc.id)
        items: set[tuple[str, str]] = set()
        for m in matches:
            self.found[m.set].add(m.ngram)
            for i in m.items:
                items.add((m.set, i))
                self.first.setdefault((m.set, i), m.ngram)
        for s in {m.set for m in matches}:
            self.set_documents[s] += 1
        for key in sorted(items):
            self.item_documents[key] += 1
            ids = self.item_ids.setdefault(key, [])
            if self.examples is None or len(ids) < self.examples:
                ids.append(doc.id)
        return {"id": doc.id, "items": [{"set": s, "item": i} for s, i in sorted(items)]}

    def items(self, ngrams: bool = True) -> list[dict[str, Any]]:
        """Every item with at least one document, by set, then most documents, then id;
        ``ngrams=False``: without the first shared n-gram (null)."""
        out = []
        for s in self.protection.sets:
            keys = [k for k in self.item_documents if k[0] == s.name]
            keys.sort(key=lambda k: (-self.item_documents[k], k[1]))
            for key in keys:
                out.append(self._item(s, key[1], ngrams))
        return out

    def _item(self, protected: ProtectedSet, item: str, ngrams: bool) -> dict[str, Any]:
        """One matched item's numbers (per-window Python: matched items are few)."""
        found = self.found[protected.name]
        covered = total_words = 0
        distinct: set[str] = set()
        for words, lo, hi in protected.layout.get(item, []):
            total_words += words
            windows = protected.windows[lo:hi]
            distinct.update(windows)
            matched = np.fromiter((g in found for g in windows), dtype=np.bool_, count=hi - lo)
            # Words covered: each matched window covers its words (the k-th starts at word k;
            # its words are one more than its spaces: n under ``words``).
            delta = np.zeros(words + 1, dtype=np.int64)
            starts = np.flatnonzero(matched)
            lengths = np.fromiter((windows[k].count(" ") + 1 for k in starts.tolist()),
                                  dtype=np.int64, count=len(starts))  # fmt: skip
            np.add.at(delta, starts, 1)
            np.add.at(delta, starts + lengths, -1)
            covered += int(np.count_nonzero(np.cumsum(delta)[:words]))
        grams_found = len(distinct & found)
        coverage = covered / total_words if total_words else 0.0
        key = (protected.name, item)
        return {
            "set": protected.name,
            "item": item,
            "documents": self.item_documents[key],
            "document_ids": self.item_ids.get(key, []),
            "first_ngram": self.first[key] if ngrams else None,
            "ngrams": len(distinct),
            "ngrams_found": grams_found,
            "share_found": grams_found / len(distinct) if distinct else 0.0,
            "coverage": coverage,
            "subsets": self.thresholds.subsets(coverage),
        }

    def as_dict(self, ngrams: bool = True) -> dict[str, Any]:
        """The report as JSON-ready data; ``ngrams=False`` names no n-gram: capped ones are
        counted, first shared ones null (the service, but to keys that may see protected text)."""
        items = self.items(ngrams)
        sets = []
        for s in self.protection.sets:
            mine = [i for i in items if i["set"] == s.name]
            counts = dict.fromkeys(SUBSETS, 0)
            for i in mine:
                for name in i["subsets"]:
                    counts[name] += 1
            # Items no document matched have coverage 0.
            clean = s.items - len(mine)
            for name in self.thresholds.subsets(0.0):
                counts[name] += clean
            capped = self.protection.capped[s.name]
            sets.append({
                "set": s.name, "items": s.items, "ngrams": s.ngrams,
                "documents": self.set_documents[s.name], "items_matched": len(mine),
                "subsets": counts,
                "capped": {"ngrams": len(capped),
                           "list": sorted(capped)[: self.examples] if ngrams else None},
                "top_items": [{"item": i["item"], "documents": i["documents"],
                               "coverage": i["coverage"]} for i in mine[: self.top]],
            })  # fmt: skip
        return {
            "tokenizer": tokenizer_version(self.protection.tokenizer),
            "windows": window_version(self.protection.tokenizer),
            "ngram": self.protection.n,
            "item_cap": self.protection.item_cap,
            "thresholds": {
                "clean_below": self.thresholds.clean_below,
                "dirty_from": self.thresholds.dirty_from,
            },
            "documents": self.documents,
            "contaminated": self.contaminated,
            "contaminated_ids": list(self.contaminated_ids),
            "items_matched": len(items),
            "sets": sets,
            "items": items[: self.max_items],
        }
