"""``neardup contamination``: which protected eval items a corpus contains, where, and how badly.

The report (``core.engine.ContaminationReport``) lists every item sharing an n-gram with the
corpus (its documents, the share of its n-grams found, the share of its words covered and its
Llama 2 subsets) and every set's totals and most-matched items; ``documents`` says per document
whether it is contaminated. A frequency cap (``item_cap``, or ``sample_share`` of ``sample``)
ignores boilerplate n-grams, which the report lists.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

from neardup.app.cli.inputs import batches
from neardup.app.cli.progress import Progress
from neardup.core.engine import (
    ContaminationReport,
    Doc,
    ParameterError,
    Protection,
    RecordReader,
    Schema,
    Thresholds,
    expand_inputs,
    read_protected_set,
    sample_capped,
)

__all__ = ["contamination_report", "sample_texts"]

#: Documents per batch.
BATCH = 4096


def sample_texts(paths: Sequence[str], schema: Schema, size: int) -> Iterator[str]:
    """The texts of the first ``size`` documents of ``paths`` (the sample of a sample cap)."""
    if size < 1:
        raise ParameterError(f"--sample-size {size}: give at least 1")
    reader = RecordReader(expand_inputs(paths), schema, fields=[])
    return (r.text for r in islice(reader, size))


def contamination_report(
    inputs: Sequence[str],
    protected: Sequence[str],
    *,
    n: int = 13,
    tokenizer: str = "words",
    schema: Schema | None = None,
    quiet: bool = False,
    item_cap: int | None = None,
    sample: Sequence[str] = (),
    sample_share: float | None = None,
    sample_size: int = 10_000,
    thresholds: Thresholds | None = None,
    top: int = 10,
) -> dict[str, Any]:
    """The report of ``inputs`` against the ``protected`` files (see the module docstring)."""
    if (*inputs, *protected, *sample).count("-") > 1:
        raise ParameterError("standard input ('-') can be read once: name it once")
    if (sample_share is None) != (not sample):
        raise ParameterError("--sample and --sample-cap go together")
    schema = schema or Schema()
    sources = expand_inputs(inputs)
    sets = [
        read_protected_set(s.url(), n, name=s.name, tokenizer=tokenizer)
        for s in expand_inputs(protected, corpus=False)
    ]
    capped: set[str] = set()
    if sample_share is not None:
        capped = sample_capped(sets, sample_texts(sample, schema, sample_size), sample_share)
    protection = Protection(sets, item_cap=item_cap, capped=capped)
    report = ContaminationReport(protection, thresholds, examples=None, top=top)
    documents: dict[str, bool] = {}
    reader = RecordReader(sources, schema, fields=[])
    with Progress("contamination", total=reader.total_bytes, unit="B", quiet=quiet) as progress:
        for batch in batches(reader, BATCH):
            found = protection.matches_many([d.text for d in batch])
            for record, matches in zip(batch, found, strict=True):
                report.add(Doc(record.id, record.text), matches)
                documents[record.id] = bool(matches)
            progress.advance_to(reader.bytes_done)
    out = report.as_dict()
    return {
        **out,
        "protected": [{"file": s.name, "items": s.items, "ngrams": s.ngrams} for s in sets],
        "items": [_item(i) for i in out["items"]],
        "documents": documents,
    }


def _item(item: dict[str, Any]) -> dict[str, Any]:
    """A report item as the CLI has always named it: ``file``, and ``documents`` its ids."""
    rest = {k: v for k, v in item.items() if k not in ("set", "documents", "document_ids")}
    return {"file": item["set"], "item": item["item"], "documents": item["document_ids"],
            "document_count": item["documents"], **rest}  # fmt: skip
