"""Batch runs over corpus files: exact dedup, near dedup and decontamination, in two passes.

Pass 1 streams the inputs once: ids (a repeated id stops the run where it is read), a 128-bit
text digest and the uint32 signature of every row (signatures on a spawn pool, chunks collected
in submission order), and what ``--keep`` compares. Deciding then needs only those arrays
(``app.cli.decisions``). Pass 2 streams the inputs again and writes the survivors, in input
order, and with ``--removed`` every dropped row with why; every file is written under a
temporary name and renamed when complete.

With ``--index IDX`` (docs/algorithm.md, incremental runs): before any signature the index is
opened and its parameters checked; after pass 1 the rows whose id is indexed (re-crawled) are
decided against that id's document (``app.cli.recrawl``: ``--recrawled``), the other rows are
looked up in it; the decisions take the indexed documents in; after pass 2 (outputs
committed), in append mode, the survivors become one new part and the next version is committed
(with ``--recrawled replace``, the parts holding replaced documents swapped for rewritten ones;
none when there is nothing to add). The survivors' signatures wait in a temporary file
meanwhile: pass 2 holds no signature.
"""

from __future__ import annotations

import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from contextlib import ExitStack, closing
from dataclasses import asdict, dataclass
from typing import IO

import numpy as np
from numpy.typing import NDArray

from neardup.app.cli.decisions import KEPT, Decisions, decide
from neardup.app.cli.inputs import batches
from neardup.app.cli.manifest import Manifest, write_manifest
from neardup.app.cli.options import DedupOptions
from neardup.app.cli.pause import pause_point
from neardup.app.cli.progress import Ledger, Progress
from neardup.app.cli.recrawl import RecrawlPlan, isolate, merge, plan_recrawl
from neardup.app.cli.splice import GENERAL, SKIP, classify, tagged_line, with_reason_line
from neardup.app.cli.tagging import (
    REASON_KEY,
    Tagger,
    arrow_hint,
    check_reserved,
    load_protected,
)
from neardup.app.cli.version import neardup_version
from neardup.core.engine import (
    STDIO,
    CorpusError,
    DecontMode,
    DocIndex,
    IndexConflictError,
    IndexLookup,
    IndexPart,
    Output,
    ParameterError,
    RawLine,
    Record,
    RecordReader,
    RowWriter,
    Source,
    atomic_output,
    check_apart,
    check_output,
    check_target,
    collision_message,
    commit_index,
    corpus_format,
    expand_inputs,
    get_field,
    index_record,
    lookup_without,
    nan_as_null_note,
    parquet_schema,
    piece_source,
    run_info,
    signature_stream,
    text_digests,
    value_ranks,
    write_deletes,
    write_part,
)

__all__ = ["BATCH", "run_dedup"]

#: Rows per signature batch (and per decontamination batch in pass 2).
BATCH = 4096


@dataclass
class _Lines:
    """Pass 1's record of every row for pass 2's fast path (``app.cli.splice``): the hash of
    its line (pass 2 checks it is the line pass 1 read) and its shape."""

    hashes: array[int]
    shapes: bytearray


@dataclass
class _Pass1:
    ids: list[str]
    digests: NDArray[np.uint64]
    sigs: NDArray[np.uint32]
    lengths: NDArray[np.int64] | None
    values: NDArray[np.float64] | None
    lines: _Lines | None = None


def _splicing(options: DedupOptions) -> bool:
    """Whether pass 2 may splice lines: every file it writes is JSON Lines, no protected sets
    (their check needs every kept text) and ids written as read (no ``--id-prefix``)."""
    targets = [] if options.dry_run else [options.output, options.removed]
    return (
        not options.protected
        and not options.schema.id_prefix
        and all(t is None or t == STDIO or corpus_format(t) != ".parquet" for t in targets)
    )


class _Columns:
    """What pass 1 keeps of every row besides its signature."""

    def __init__(self, options: DedupOptions) -> None:
        self.keep = options.params.keep
        self.ids: list[str] = []
        self.seen: set[str] = set()
        self.digests: list[NDArray[np.uint64]] = []
        self.lengths: list[int] = []
        self.values: list[int | float | None] = []
        self.lines = _Lines(array("q"), bytearray()) if _splicing(options) else None
        decont = options.params.decont
        # Cut mode names a row's pieces ID#1, ID#2, ...: no input id may be one of them.
        self.max_pieces = decont.max_pieces if decont.mode is DecontMode.CUT else 0
        self.piece_like: dict[str, str] = {}  # source id -> an input id naming one of its pieces
        self.reserved = options.writes_reasons  # no row may have a `neardup` field of its own

    def add(self, batch: list[Record]) -> list[str]:
        if self.lines is not None:
            self.lines.hashes.extend(hash(r.raw) for r in batch)
            self.lines.shapes.extend(classify(r, REASON_KEY) for r in batch)
        for r in batch:
            if r.id in self.seen:
                raise CorpusError(
                    r.name, r.line, f"id {r.id!r} appears again: ids must be unique across all "
                    "inputs (--id-prefix file prefixes each id with its file's name)",
                )  # fmt: skip
            if self.max_pieces:
                self._check_piece_id(r)
            if self.reserved:
                check_reserved(r)
            self.seen.add(r.id)
        self.ids.extend(r.id for r in batch)
        texts = [r.text for r in batch]
        self.digests.append(text_digests(texts))
        if self.keep.kind == "longest":
            self.lengths.extend(len(t) for t in texts)
        elif self.keep.kind == "max":
            self.values.extend(self._value(r) for r in batch)
        return texts

    def _check_piece_id(self, r: Record) -> None:
        """CorpusError naming both ids when ``r``'s id is a piece id of a row read before, or a
        row read before has a piece id of ``r``'s (pass 1 stops there, before any writing)."""
        found = piece_source(r.id, self.max_pieces)
        if found is not None:
            if found[0] in self.seen:
                raise CorpusError(r.name, r.line, collision_message(r.id, found[0]))
            self.piece_like.setdefault(found[0], r.id)
        piece = self.piece_like.get(r.id)
        if piece is not None:
            raise CorpusError(r.name, r.line, collision_message(piece, r.id))

    def _value(self, record: Record) -> int | float | None:
        field = self.keep.field or ""
        value = get_field(record.row, field)
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            return value  # exact: value_ranks orders integers past 2**53 as Python does
        raise CorpusError(
            record.name, record.line, f"'{field}' must be a number for --keep max:{field}"
        )


def _signature_pass(sources: list[Source], options: DedupOptions) -> _Pass1:
    """Pass 1 (``_Pass1``)."""
    params = options.params
    extra = [params.keep.field] if params.keep.field else []
    if options.writes_reasons:  # a Parquet `neardup` column is read, to be refused
        extra.append(REASON_KEY)
    reader = RecordReader(sources, options.schema, fields=extra)
    columns = _Columns(options)
    read = batches(reader, BATCH)
    # Signatures go to a temporary file as they come and are read back as one matrix: a list
    # of chunks joined at the end would hold the matrix twice.
    with tempfile.TemporaryFile(prefix="neardup-signatures-") as sigs:
        with Progress(
            "signatures", total=reader.total_bytes, unit="B", quiet=options.quiet
        ) as progress:
            rows = (columns.add(batch) for batch in read)
            # Bytes count once signed: the reader runs ahead of the pool's workers.
            ledger = Ledger(progress, lambda: reader.bytes_done)
            # A spawn pool only once the texts read are worth one (a small run starts none).
            stream = signature_stream(ledger.track(rows), params.minhash, params.workers)
            with closing(stream):
                for chunk in stream:
                    sigs.write(chunk.tobytes())
                    ledger.settle()
                    pause_point("read")
        sigs.seek(0)
        matrix = np.fromfile(sigs, dtype=np.uint32).reshape(-1, params.minhash.num_perm)
    digests = (
        np.concatenate(columns.digests) if columns.digests else np.empty((0, 2), dtype=np.uint64)
    )
    lengths = np.array(columns.lengths, dtype=np.int64) if params.keep.kind == "longest" else None
    values = value_ranks(columns.values) if params.keep.kind == "max" else None
    return _Pass1(columns.ids, digests, matrix, lengths, values, columns.lines)


class _Discard:
    """A writer for ``--dry-run`` (and no ``--removed``): counts rows, writes nothing."""

    count = 0
    nan_as_null = 0

    def write(self, row: object) -> None:
        self.count += 1

    def write_json(self, lines: list[str]) -> None:
        self.count += len(lines)


def _changed(sources: list[Source]) -> CorpusError:
    return CorpusError(sources[0].name, None, "the inputs changed during the run")


def _rows(
    sources: list[Source], options: DedupOptions, ids: list[str]
) -> Iterator[list[tuple[Record, int]]]:
    """Pass 2: the inputs again, a batch of (record, row number) at a time, checked against
    pass 1's ids."""
    reader = RecordReader(sources, options.schema)
    row = 0
    with Progress("write", total=reader.total_bytes, unit="B", quiet=options.quiet) as progress:
        for batch in batches(reader, BATCH):
            numbered = list(zip(batch, range(row, row + len(batch)), strict=True))
            row += len(batch)
            if row > len(ids) or any(r.id != ids[i] for r, i in numbered):
                raise _changed(sources)
            yield numbered
            progress.advance_to(reader.bytes_done)
            pause_point("write")
    if row != len(ids):
        raise _changed(sources)


def _spliced_pass(
    sources: list[Source],
    options: DedupOptions,
    first: _Pass1,
    lines: _Lines,
    tagger: Tagger,
    out: RowWriter | _Discard,
    removed: RowWriter | _Discard,
) -> None:
    """Pass 2 with the fast path: a row whose line pass 1 found spliceable is written from its
    line, a dropped row nobody writes is skipped unparsed; every other row is parsed and goes
    through ``tagger.rows`` as in ``_rows``, in input order. Every line is checked against the
    hash pass 1 took of it."""
    hashes, shapes = lines.hashes, lines.shapes
    ids, decisions = first.ids, tagger.decisions
    keep_all, removing = tagger.keep_all, options.removed is not None and not options.dry_run
    reader = RecordReader(sources, options.schema)
    # Parsed rows wait here for ``tagger.rows`` (a batch at a time, for the protected-set
    # check); spliced rows wait in the lists until the batch ends or a parsed row follows.
    pending: list[tuple[Record, int]] = []
    out_lines: list[str] = []
    removed_lines: list[str] = []

    def flush_lines() -> None:
        out.write_json(out_lines)
        removed.write_json(removed_lines)
        out_lines.clear()
        removed_lines.clear()

    def flush() -> None:
        flush_lines()
        for row, kept in tagger.rows(pending):
            (out if kept else removed).write(row)
        pending.clear()

    def spliced(raw: str, i: int, outcome: int, shape: int) -> bool:
        """Write (or skip) row ``i`` from its line; False if it must be parsed."""
        if shape == GENERAL or (shape == SKIP and (outcome == KEPT or keep_all or removing)):
            return False
        if i in tagger.renamed:  # written under a derived id: parsed
            return False
        if outcome != KEPT and not keep_all:
            tagger.dropped(outcome)
            if removing:
                if pending:
                    flush()
                removed_lines.append(with_reason_line(raw, REASON_KEY, tagger.reason(i)))
            return True
        line = tagged_line(raw, shape, tagger.root_id(i))
        if outcome != KEPT:
            line = with_reason_line(line, REASON_KEY, tagger.reason(i))
        if pending:
            flush()
        out_lines.append(line)
        return True

    n = 0
    with Progress("write", total=reader.total_bytes, unit="B", quiet=options.quiet) as progress:
        for batch in batches(reader.unparsed(), BATCH):
            lo, n = n, n + len(batch)
            if n > len(ids):
                raise _changed(sources)
            outcomes = decisions.outcome[lo:n].tolist()
            for i, item, outcome in zip(range(lo, n), batch, outcomes, strict=True):
                if isinstance(item, RawLine):
                    if hash(item.raw) != hashes[i]:
                        raise _changed(sources)
                    if spliced(item.raw, i, outcome, shapes[i]):
                        continue
                    record = reader.parse(item)
                else:
                    record = item
                if record.id != ids[i]:
                    raise _changed(sources)
                if not pending:  # what was spliced before it goes first
                    flush_lines()
                pending.append((record, i))
            flush()
            progress.advance_to(reader.bytes_done)
            pause_point("write")
    if n != len(ids):
        raise _changed(sources)


def _writer(
    stack: ExitStack, target: str, sources: list[Source], reasons: bool, indexed: bool
) -> tuple[RowWriter, Output]:
    """A RowWriter onto ``target``, committed when ``stack`` closes cleanly; a Parquet target
    gets the inputs' Arrow types (read only then: JSON Lines never imports pyarrow)."""
    fmt = check_output(target)
    hint = arrow_hint(parquet_schema(sources), reasons, indexed) if fmt == ".parquet" else None
    handle, done = stack.enter_context(atomic_output(target))
    return stack.enter_context(RowWriter(handle, fmt, target, hint)), done


def _write_pass(
    sources: list[Source], options: DedupOptions, first: _Pass1, tagger: Tagger, manifest: Manifest
) -> None:
    written: dict[str, Output] = {}
    with ExitStack() as stack:
        out: RowWriter | _Discard = _Discard()
        removed: RowWriter | _Discard = _Discard()
        if not options.dry_run:
            keep_all = options.params.keep_duplicates
            indexed = options.index is not None
            out, written["output"] = _writer(stack, options.output, sources, keep_all, indexed)
            if options.removed is not None:
                removed, written["removed"] = _writer(
                    stack, options.removed, sources, True, indexed
                )
        if first.lines is not None:
            _spliced_pass(sources, options, first, first.lines, tagger, out, removed)
        else:
            for batch in _rows(sources, options, first.ids):
                for row, kept in tagger.rows(batch):
                    (out if kept else removed).write(row)
    manifest.counts.update(tagger.counts, written=out.count)
    _count_nulls(out.nan_as_null + removed.nan_as_null, manifest)
    if tagger.report is not None:
        manifest.contamination = tagger.report.as_dict()
    if "output" in written:
        manifest.output = asdict(written["output"])
    if "removed" in written:
        manifest.removed = {**asdict(written["removed"]), "rows": removed.count}


def _count_nulls(nulls: int, manifest: Manifest) -> None:
    """NaN and infinite floats (Parquet's; JSON numbers past the float range) written to JSON
    Lines as null: counted in the manifest (``nan_as_null``), with one warning."""
    if not nulls:
        return
    manifest.counts["nan_as_null"] = nulls
    print(f"neardup dedup: warning: {nan_as_null_note(nulls)}", file=sys.stderr)


def _check_keep_field(
    values: NDArray[np.float64], options: DedupOptions, manifest: Manifest
) -> None:
    """``--keep max:FIELD``: ParameterError when no row has FIELD (the policy would be
    ``smallest-id`` in disguise); a warning, and ``keep_field_missing`` counted in the manifest,
    when some rows lack it (they lose to any member that has it)."""
    field, rows = options.params.keep.field, len(values)
    missing = int(np.count_nonzero(np.isnan(values)))
    if not missing:
        return
    if missing == rows:
        raise ParameterError(
            f"--keep max:{field}: no row of the {rows} read has the field '{field}'; name a "
            "numeric field the rows have (a dotted path for a nested one, e.g. meta.quality)"
        )
    manifest.counts["keep_field_missing"] = missing
    print(
        f"neardup dedup: warning: {missing} of {rows} rows have no '{field}' (--keep "
        f"max:{field}): they survive a cluster only when no member has it",
        file=sys.stderr,
    )


def _open_index(options: DedupOptions) -> DocIndex | None:
    """The index of ``--index``, checked against the run's parameters (None without one)."""
    if options.index is None:
        return None
    index = DocIndex.open(options.index, missing_ok=options.index_mode == "append")
    index.check_params(options.params.minhash)
    index.verify()
    return index


@dataclass
class _Survivors:
    """What pass 2 may add to the index: the kept rows' numbers, digests and signatures (in a
    temporary file until the append: pass 2 does not hold them)."""

    rows: NDArray[np.int64]
    digests: NDArray[np.uint64]
    sigs: IO[bytes]
    num_perm: int

    def signatures(self, taken: NDArray[np.bool_]) -> NDArray[np.uint32]:
        """The signatures of the rows ``taken`` (a mask over ``rows``), read back."""
        self.sigs.seek(0)
        matrix = np.fromfile(self.sigs, dtype=np.uint32).reshape(-1, self.num_perm)
        return matrix if bool(taken.all()) else matrix[taken]


def _survivors(options: DedupOptions, first: _Pass1, decisions: Decisions) -> _Survivors | None:
    """The rows an append run adds (kept; contaminated ones are taken out after pass 2)."""
    if options.index is None or options.index_mode != "append" or options.dry_run:
        return None
    rows = np.flatnonzero(decisions.outcome == KEPT)
    spill = tempfile.TemporaryFile(prefix="neardup-survivors-")  # noqa: SIM115 (run_dedup closes it)
    for lo in range(0, len(rows), BATCH):  # a slice at a time: never a second matrix
        spill.write(first.sigs[rows[lo : lo + BATCH]].tobytes())
    return _Survivors(rows, first.digests[rows], spill, first.sigs.shape[1])


def _append(
    index: DocIndex,
    options: DedupOptions,
    ids: list[str],
    kept: _Survivors,
    tagger: Tagger,
    sources: list[Source],
    record: dict[str, object],
    plan: RecrawlPlan,
) -> None:
    """Add the survivors that passed the protected-set check to the index as one new part; with
    ``--recrawled replace``, the replaced documents are deleted in the same version (a
    deletion vector for each part holding one)."""
    clean = np.array([r not in tagger.contaminated for r in kept.rows.tolist()], dtype=np.bool_)
    rows = kept.rows[clean]
    if len(rows) == 0 and not plan.replaced:
        return
    params = options.params.minhash
    run = run_info("local", neardup_version(), [s.name for s in sources])
    added: list[IndexPart] = []
    if len(rows):
        added.append(write_part(
            index, params, [ids[i] for i in rows.tolist()], kept.digests[clean],
            kept.signatures(clean), run,
        ))  # fmt: skip
        record.update(part=added[0].name)
    deletes, _ = write_deletes(index, plan.replaced)
    pause_point("commit")
    try:
        record["version_written"] = commit_index(index, params, added, deletes=deletes)
    except IndexConflictError as exc:
        record.update(part=None, conflict=str(exc))
        raise
    record["rows_added"] = len(rows)


def _index_record(options: DedupOptions, index: DocIndex, lookup: IndexLookup) -> dict[str, object]:
    """The manifest's ``index`` object, before the part is added."""
    matching = (lookup.exact >= 0) | np.isin(np.arange(len(lookup.exact)), lookup.pairs[:, 0])
    return index_record(
        options.index or "", options.index_mode, index.version, index.rows, len(lookup.ids),
        int(np.count_nonzero(matching)),
    )  # fmt: skip


def run_dedup(options: DedupOptions) -> Manifest:
    """Exact dedup, near dedup and decontamination of ``options.inputs`` into ``options.output``
    (against ``options.index`` when given).

    Every named file is checked (inputs exist, output directories exist, protected sets parse,
    the index's parameters) before the first signature.
    """
    for target in (options.output, options.removed):
        if target is not None:
            check_output(target)
    if options.manifest_target is not None:
        check_target(options.manifest_target)
    index_flag = None if options.index is None else ("--index", options.index)
    check_apart(*options.reads_and_writes(), index=index_flag)
    index = _open_index(options)
    sources = expand_inputs(options.inputs)
    manifest = Manifest.start(options, sources)
    started = time.perf_counter()
    sets = load_protected(options, manifest)
    manifest.seconds["protected"] = time.perf_counter() - started
    started = time.perf_counter()
    first = _signature_pass(sources, options)
    manifest.seconds["signatures"] = time.perf_counter() - started
    if first.values is not None:
        _check_keep_field(first.values, options, manifest)
    lookup = None
    plan = RecrawlPlan(options.recrawled)
    ids = isolated = first.ids
    if index is not None:
        started = time.perf_counter()
        plan = plan_recrawl(
            index, first.ids, first.digests, first.sigs, options.params.minhash.threshold,
            options.recrawled,
        )  # fmt: skip
        ids = plan.ids(first.ids)
        isolated = isolate(plan, ids, first.digests, first.sigs)
        lookup = lookup_without(index.lookup(first.sigs, first.digests), set(plan.replaced))
        manifest.index = _index_record(options, index, lookup)
        manifest.index["recrawled"] = plan.record()
        manifest.seconds["index_lookup"] = time.perf_counter() - started
    started = time.perf_counter()
    decisions: Decisions = decide(
        isolated, first.digests, first.sigs, options.params, first.lengths, first.values, lookup
    )  # fmt: skip
    merge(decisions, plan, len(ids))
    kept = _survivors(options, first, decisions)
    del first.sigs  # pass 2 needs ids and decisions only (the survivors' are in a file)
    try:
        manifest.clusters = decisions.clusters
        manifest.cluster_sizes = decisions.cluster_sizes()
        manifest.singletons = manifest.cluster_sizes.pop("1", 0)
        manifest.seconds["cluster"] = time.perf_counter() - started
        started = time.perf_counter()
        params = options.params
        tagger = Tagger(
            ids, decisions, sets, params.keep_duplicates,
            decont=params.decont, item_cap=params.item_cap, schema=options.schema,
            indexed=index is not None, renamed=plan.renamed,
        )  # fmt: skip
        pause_point("signatures")
        _write_pass(sources, options, first, tagger, manifest)
        manifest.seconds["write"] = time.perf_counter() - started
        try:
            if index is not None and kept is not None and manifest.index is not None:
                started = time.perf_counter()
                _append(index, options, ids, kept, tagger, sources, manifest.index, plan)
                manifest.seconds["index_append"] = time.perf_counter() - started
        finally:
            if not options.dry_run and (target := options.manifest_target) is not None:
                write_manifest(target, manifest)
    finally:
        if kept is not None:
            kept.sigs.close()
    return manifest
