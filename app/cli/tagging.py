"""Pass 2's rows out: survivors tagged with their cluster, dropped rows with why.

A kept row gets ``meta.minhash_cluster`` (its cluster's smallest id). A dropped row (in
``--removed``), or with ``--keep-duplicates`` a row that would be dropped, gets a ``neardup``
object: ``reason`` (``exact``, ``near`` or ``contaminated``), ``duplicate_of`` (the kept row it
duplicates) and ``estimate`` (to it), or for ``contaminated`` the protected ``set``, ``item`` and
first shared ``ngram``. With ``--index``, ``index_part`` too: the part holding
``duplicate_of`` when it is an indexed document. Every key is always there (null when it does
not apply), so Parquet outputs have one schema. Nothing else of the input row changes.

Decontamination checks the rows the near stage keeps (all rows with ``--keep-duplicates``), in
the mode of ``--decontamination``: ``drop`` sends a contaminated row to ``--removed``;
``annotate`` keeps it with ``meta.decontamination``; ``cut`` writes its kept pieces in its place
(id ``ID#K`` in the id field, the piece in the text field, ``meta.decontamination`` saying what
was cut, the cluster tag of the row they come from) and sends the row to ``--removed`` only when
it is dropped whole (more than ``--max-pieces`` pieces, or none left: its
``meta.decontamination`` says which, as ``dropped``). Pieces are not
deduplicated again: they are parts of a row the near stage already kept.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from neardup.app.cli.decisions import EXACT, KEPT, NEAR, RECRAWLED, Decisions
from neardup.app.cli.manifest import Manifest
from neardup.app.cli.options import DedupOptions
from neardup.app.cli.progress import Progress
from neardup.core.engine import (
    CLUSTER_KEY,
    DECONT_KEY,
    ContaminationReport,
    CorpusError,
    DecontMode,
    DecontParams,
    Doc,
    Match,
    ProtectedSet,
    Protection,
    Record,
    RowWriter,
    Schema,
    apply_mode,
    drop_rule,
    expand_inputs,
    get_field,
    match_summary,
    read_protected_set,
    set_field,
)

__all__ = ["REASON_KEY", "Tagger", "arrow_hint", "check_reserved", "load_protected"]

#: The field a dropped (or, with --keep-duplicates, would-be-dropped) row says why in.
REASON_KEY = "neardup"
_REASONS = {EXACT: "exact", NEAR: "near", RECRAWLED: "recrawled"}
_REASON_KEYS = ("duplicate_of", "estimate", "set", "item", "ngram")


def arrow_hint(base: Any, reasons: bool, indexed: bool = False) -> Any:
    """The Arrow columns a Parquet output writes: the inputs' (``base``, or None), ``meta`` with
    its ``minhash_cluster`` string, and with ``reasons`` the ``neardup`` object (typed even when
    a first batch of rows holds no contaminated one, or no dropped one; ``index_part`` in it
    for a run with an index)."""
    import pyarrow as pa

    text = pa.string()
    keys = [*_REASON_KEYS, *(("index_part",) if indexed else ())]
    reason = pa.struct([(k, pa.float64() if k == "estimate" else text) for k in ("reason", *keys)])
    own = None if base is None else pa.schema([f for f in base if f.name != REASON_KEY])
    return RowWriter.hint(own, CLUSTER_KEY, [pa.field(REASON_KEY, reason)] if reasons else [])


def check_reserved(record: Record) -> None:
    """CorpusError (file:line) when ``record`` has a ``neardup`` field of its own. A run that
    writes reasons refuses it on every row as read in pass 1, as the Spark engine does: a kept
    row's would be mistaken for a reason with ``--keep-duplicates``, and whether a run fails
    must not depend on which rows turn out to be duplicates."""
    if REASON_KEY in record.row:
        raise CorpusError(
            record.name, record.line, f"the row already has a '{REASON_KEY}' field, the one "
            "neardup says why a row is dropped in",
        )  # fmt: skip


def load_protected(options: DedupOptions, manifest: Manifest) -> list[ProtectedSet]:
    """Every protected set of the run, parsed before any signature (so a bad one fails early)."""
    if not options.protected:
        return []
    sources = expand_inputs(options.protected, corpus=False)
    n = options.params.minhash.ngram
    sets = []
    total = sum(s.size for s in sources)
    with Progress("protected", total=total, unit="B", quiet=options.quiet) as progress:
        for source in sources:
            sets.append(
                read_protected_set(
                    source.url(), n, name=source.name, tokenizer=options.params.minhash.tokenizer
                )
            )
            progress.update(source.size)
    manifest.protected = [
        {"path": s.name, "bytes": src.size, "items": s.items, "ngrams": s.ngrams}
        for s, src in zip(sets, sources, strict=True)
    ]
    warn_if_empty("dedup", sets)
    return sets


def warn_if_empty(command: str, sets: list[ProtectedSet]) -> None:
    """One warning a protected set that protects no n-gram: every check against it says clean
    (the service refuses such a set unless asked; a batch run goes on, saying so)."""
    for s in sets:
        why = s.why_empty()
        if why is not None:
            print(f"neardup {command}: warning: --protected {s.name}: {why}", file=sys.stderr)


class Tagger:
    """Decides, per row of pass 2, what is written where, and counts it."""

    def __init__(
        self,
        ids: list[str],
        decisions: Decisions,
        sets: list[ProtectedSet],
        keep_all: bool,
        *,
        decont: DecontParams | None = None,
        item_cap: int | None = None,
        schema: Schema | None = None,
        indexed: bool = False,
        renamed: dict[int, str] | None = None,
    ) -> None:
        self.ids = ids
        #: rows written under another id (``--recrawled keep-both``'s derived ids), in ``ids``
        self.renamed = renamed or {}
        #: every reason says ``index_part`` (a run with an index)
        self.indexed = indexed
        #: rows the protected-set check found contaminated (never added to an index)
        self.contaminated: set[int] = set()
        self.decisions = decisions
        self.sets = sets
        self.keep_all = keep_all
        self.decont = decont or DecontParams()
        self.schema = schema or Schema()
        self.protection = Protection(sets, item_cap=item_cap) if sets else None
        self.report = ContaminationReport(self.protection) if self.protection else None
        self.counts = {"read": len(ids), "exact_dropped": 0, "near_dropped": 0,
                       "decontaminated": 0}  # fmt: skip
        if indexed:  # --recrawled keep-indexed: changed re-crawled rows
            self.counts["recrawled_dropped"] = 0
        if self.decont.mode is DecontMode.CUT:
            self.counts.update(cut=0, pieces=0)
        elif self.decont.mode is DecontMode.ANNOTATE:
            self.counts["annotated"] = 0

    def rows(self, batch: list[tuple[Record, int]]) -> Iterator[tuple[dict[str, Any], bool]]:
        """(row, kept) for every record of a batch (increasing row numbers): kept rows go to the
        output, the others to ``--removed``."""
        if self.renamed:
            batch = [(self._renamed(r, i), i) for r, i in batch]
        lo = batch[0][1] if batch else 0
        hi = batch[-1][1] + 1 if batch else 0
        # One slice per batch as Python ints: no numpy scalar per row.
        outcome = self.decisions.outcome[lo:hi].tolist()
        checked = [(r, i) for r, i in batch if self.keep_all or outcome[i - lo] == KEPT]
        dirty: dict[int, list[Match]] = {}
        if self.protection is not None and self.report is not None and checked:
            found = self.protection.matches_many([r.text for r, _ in checked])
            for (record, i), hits in zip(checked, found, strict=True):
                self.report.add(Doc(record.id, record.text), hits)
                if hits:
                    dirty[i] = hits
                    self.contaminated.add(i)
        for record, i in batch:
            matches = dirty.get(i)
            if matches is not None and self.decont.mode is not DecontMode.DROP:
                yield from self._decontaminated(record, i, outcome[i - lo], matches)
            elif matches is not None:
                self.counts["decontaminated"] += 1
                yield _with_reason(record, self._contamination(matches)), False
            elif outcome[i - lo] == KEPT:
                yield self._tagged(record, i), True
            elif self.keep_all:
                yield _with_reason(record, self._duplicate(i), self._tagged(record, i)), True
            else:
                self.dropped(outcome[i - lo])
                yield _with_reason(record, self._duplicate(i)), False

    def _decontaminated(
        self, record: Record, i: int, outcome: int, matches: list[Match]
    ) -> Iterator[tuple[dict[str, Any], bool]]:
        """A contaminated row under ``cut`` or ``annotate``."""
        tagged = self._tagged(record, i)
        doc = Doc(record.id, record.text)
        tokenizer = self.protection.tokenizer if self.protection is not None else "words"
        docs = apply_mode(doc, matches, self.decont, tokenizer=tokenizer)
        if not docs:
            self.counts["decontaminated"] += 1
            # Dropped whole by a rule of cut: says which, with its matches (no protected text).
            why = {"mode": "cut", "dropped": drop_rule(doc, matches, self.decont, tokenizer),
                   **match_summary(matches)}  # fmt: skip
            row = set_field(record.row, f"meta.{DECONT_KEY}", why)
            yield _with_reason(record, self._contamination(matches), row), False
            return
        self.counts["cut" if self.decont.mode is DecontMode.CUT else "annotated"] += 1
        own_id = get_field(record.row, self.schema.id_field)
        for k, doc in enumerate(docs, start=1):
            row = set_field(tagged, f"meta.{DECONT_KEY}", doc.meta[DECONT_KEY])
            if self.decont.mode is DecontMode.CUT:
                self.counts["pieces"] += 1
                row = set_field(row, self.schema.id_field, f"{own_id}#{k}")
                row = set_field(row, self.schema.text_field, doc.text)
            if outcome != KEPT:  # --keep-duplicates: still says why it would be dropped
                row = _with_reason(record, self._duplicate(i), row)
            yield row, True

    def _renamed(self, record: Record, i: int) -> Record:
        """``record`` under its derived id (in its id field too) when it has one."""
        new = self.renamed.get(i)
        if new is None:
            return record
        return record._replace(id=new, row=set_field(record.row, self.schema.id_field, new))

    def dropped(self, outcome: int) -> None:
        """Count a row the dedup stages drop (``outcome`` EXACT or NEAR)."""
        self.counts[f"{_REASONS[outcome]}_dropped"] += 1

    def root_id(self, i: int) -> str:
        """The id of row ``i``'s cluster (what ``minhash_cluster`` says)."""
        return self.decisions.name(self.ids, int(self.decisions.root[i]))

    def reason(self, i: int) -> dict[str, Any]:
        """Why row ``i`` is (or, with ``--keep-duplicates``, would be) dropped by dedup."""
        return self._duplicate(i)

    def _tagged(self, record: Record, i: int) -> dict[str, Any]:
        meta = record.row.get("meta")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise CorpusError(
                record.name, record.line, f"'meta' must be an object to hold {CLUSTER_KEY}"
            )
        return {**record.row, "meta": {**meta, CLUSTER_KEY: self.root_id(i)}}

    def _duplicate(self, i: int) -> dict[str, Any]:
        decisions = self.decisions
        node = int(decisions.duplicate_of[i])
        reason = _reason(
            _REASONS[int(decisions.outcome[i])],
            duplicate_of=decisions.name(self.ids, node),
            estimate=float(decisions.estimate[i]),
        )
        if self.indexed:
            reason["index_part"] = decisions.part(self.ids, node)
        return reason

    def _contamination(self, matches: list[Match]) -> dict[str, Any]:
        reason = _contamination(matches)
        if self.indexed:
            reason["index_part"] = None
        return reason


def _contamination(matches: list[Match]) -> dict[str, Any]:
    """The reason of a contaminated row: its first match's set, first item and n-gram."""
    first = matches[0]
    return _reason("contaminated", set=first.set, item=first.items[0], ngram=first.ngram)


def _reason(reason: str, **fields: Any) -> dict[str, Any]:
    return {"reason": reason, **{k: fields.get(k) for k in _REASON_KEYS}}


def _with_reason(
    record: Record, reason: dict[str, Any], row: dict[str, Any] | None = None
) -> dict[str, Any]:
    row = record.row if row is None else row
    return {**row, REASON_KEY: reason}  # no own field: refused in pass 1 (check_reserved)
