"""``neardup contamination``: which protected eval items a corpus contains, where, and how badly.

The report is ``core.engine.ContaminationReport``'s, the one a dedup run's manifest and
``POST /v1/decontamination`` give: the items sharing an n-gram with the corpus (their documents,
the share of their n-grams found, the share of their words covered, their Llama 2 subsets) and
every set's totals and most-matched items. It stays small: every list is capped and counted in
full; ``ids_file`` gets the full lists, one JSON line per contaminated document with its items.
A frequency cap (``item_cap``, or ``sample_share`` of ``sample``) ignores boilerplate n-grams,
which the report counts and lists.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from itertools import islice
from typing import Any

from neardup.app.cli.inputs import batches
from neardup.app.cli.progress import Progress
from neardup.app.cli.tagging import warn_if_empty
from neardup.core.engine import (
    ContaminationReport,
    Doc,
    ParameterError,
    Protection,
    RecordReader,
    RowWriter,
    Schema,
    Thresholds,
    atomic_output,
    check_apart,
    check_output,
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
    ids_file: str | None = None,
    output: str = "-",
) -> dict[str, Any]:
    """The report of ``inputs`` against the ``protected`` files (see the module docstring);
    ``ids_file`` (any corpus format, written atomically) gets every contaminated document's
    ``{"id", "items": [{"set", "item"}, ...]}``; ``output`` is where the report goes (the ids
    file may be neither it nor any file read)."""
    if (*inputs, *protected, *sample).count("-") > 1:
        raise ParameterError("standard input ('-') can be read once: name it once")
    if ids_file == "-":
        raise ParameterError("--ids-file -: the report is on standard output; name a file")
    reads = [("INPUT", p) for p in inputs] + [("--protected", p) for p in protected]
    reads += [("--sample", p) for p in sample]
    check_apart(reads, [("--output", output), ("--ids-file", ids_file)])  # the CLI's guard too
    ids_format = None if ids_file is None else check_output(ids_file)
    if (sample_share is None) != (not sample):
        raise ParameterError("--sample and --sample-cap go together")
    schema = schema or Schema()
    sources = expand_inputs(inputs)
    sets = [
        read_protected_set(s.url(), n, name=s.name, tokenizer=tokenizer)
        for s in expand_inputs(protected, corpus=False)
    ]
    warn_if_empty("contamination", sets)
    capped: set[str] = set()
    if sample_share is not None:
        capped = sample_capped(sets, sample_texts(sample, schema, sample_size), sample_share)
    protection = Protection(sets, item_cap=item_cap, capped=capped)
    report = ContaminationReport(protection, thresholds, top=top)
    reader = RecordReader(sources, schema, fields=[])
    with ExitStack() as stack:
        ids: RowWriter | None = None
        if ids_file is not None and ids_format is not None:
            handle, _ = stack.enter_context(atomic_output(ids_file))
            ids = stack.enter_context(RowWriter(handle, ids_format, ids_file))
        total = reader.total_bytes
        progress = stack.enter_context(
            Progress("contamination", total=total, unit="B", quiet=quiet)
        )
        for batch in batches(reader, BATCH):
            found = protection.matches_many([d.text for d in batch])
            for record, matches in zip(batch, found, strict=True):
                entry = report.add(Doc(record.id, record.text), matches)
                if entry is not None and ids is not None:
                    ids.write(entry)
            progress.advance_to(reader.bytes_done)
    return report.as_dict()
