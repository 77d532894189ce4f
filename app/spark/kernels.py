"""The work Spark's executors do on Arrow batches: pure numpy and pyarrow, no pyspark.

Every function takes and returns ``pyarrow.RecordBatch`` (or arrays), so ``mapInArrow`` runs
each on whole batches and core's vectorised kernels see whole batches too: no Python call per
document for signatures, band keys, confirmations or n-gram checks.

- ``signature_batch``: (id, text) -> (id, sig, live), ``sig`` the uint32 signature as bytes.
- ``band_batch``: (cid, sig) of live classes -> one (band, key, cid) row per band, ``key`` the
  band's rows as bytes (equal keys are equal rows: no digest collision can make a candidate).
- ``BucketEdges``: the rows of each bucket, sorted by (band, key, cid), -> a star of every
  bucket's confirmed components: (child cid, smallest cid of its component in the bucket).
- ``clean_batch``: which texts share no protected n-gram (``NgramIndex``'s exact verdicts).
- ``estimate_batch``: (id, sig, root_sig) -> (id, estimate), core's ``estimates`` of each pair.
- ``line_documents`` and ``parquet_documents``: input rows -> (id, text, bad, row), checked as
  the local reader checks them, ``row`` the whole row as JSON text (every field kept).
- ``tagged_rows``: the output rows, built as the local engine builds them (``meta``'s
  ``minhash_cluster``; with ``--keep-duplicates``, a would-be-dropped row's ``neardup`` object
  last), written with ``RowWriter.dumps`` (JSON Lines) or to the schema ``row_schema`` infers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from neardup.core.engine import (
    CLUSTER_KEY,
    CorpusError,
    Match,
    MinhashParams,
    NgramIndex,
    Protection,
    RowWriter,
    Schema,
    band_digests,
    batch_signatures,
    empty_rows,
    estimates,
    get_field,
    id_problem,
    jsonl_items,
    min_label_components,
    recrawl_verdicts,
    set_field,
)

__all__ = [
    "BIG_BUCKET",
    "OUTPUT",
    "PROBE_DIGEST",
    "PROBE_ID",
    "REASON_KEY",
    "REMOVED",
    "BucketEdges",
    "ProbeFilter",
    "band_batch",
    "band_key_batch",
    "binary_rows",
    "bucket_star",
    "clean_batch",
    "confirm_batch",
    "contamination_reasons",
    "estimate_batch",
    "file_label",
    "line_documents",
    "line_problem",
    "parquet_documents",
    "part_batch",
    "probe_batch",
    "reason_object",
    "recrawl_batch",
    "renamed_batch",
    "route_rows",
    "row_schema",
    "signature_batch",
    "tagged_rows",
    "text_of",
]

#: The field a would-be-dropped row says why in (``app.cli.tagging.REASON_KEY``).
REASON_KEY = "neardup"
#: A bucket of more members than this is compared block by block, skipping pairs already in one
#: component; smaller ones are compared all at once with every other small bucket of the batch.
BIG_BUCKET = 256
#: Pairs compared per step in a big bucket (bounds the pair arrays to ~16 MiB).
_BLOCK_PAIRS = 1 << 20


def binary_rows(matrix: NDArray[Any]) -> pa.Array:
    """Every row of a C-contiguous 2-d array as one fixed-width ``binary`` value (no copy per
    row: one offsets buffer over the matrix's bytes)."""
    data = np.ascontiguousarray(matrix)
    width = data.shape[1] * data.itemsize
    offsets = np.arange(len(data) + 1, dtype=np.int32) * np.int32(width)
    return pa.Array.from_buffers(
        pa.binary(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())]
    )


def _matrix(column: pa.Array, width: int, dtype: type[np.generic]) -> NDArray[Any]:
    """A ``binary`` column of fixed-width values back as a ``[len, width]`` array."""
    if len(column) == 0:
        return np.empty((0, width), dtype=dtype)
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[
        column.offset : column.offset + len(column) + 1
    ]
    raw = np.frombuffer(column.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    return raw.view(dtype).reshape(len(column), width)


def signature_batch(batch: pa.RecordBatch, params: MinhashParams) -> pa.RecordBatch:
    """(text, *others) -> (*others, sig, live): core's signatures of the batch, bit for bit, the
    other columns passed through."""
    sigs = batch_signatures(batch.column("text").to_pylist(), params)
    others = [name for name in batch.schema.names if name != "text"]
    return pa.RecordBatch.from_arrays(
        [*(batch.column(name) for name in others), binary_rows(sigs), pa.array(~empty_rows(sigs))],
        names=[*others, "sig", "live"],
    )


def band_batch(batch: pa.RecordBatch, params: MinhashParams) -> pa.RecordBatch:
    """(cid, sig) -> (band, key, cid), band-major: one row per band of every class."""
    sigs = _matrix(batch.column("sig"), params.num_perm, np.uint32)
    n, rows = len(sigs), params.rows
    keys = sigs.reshape(n, params.bands, rows).transpose(1, 0, 2).reshape(n * params.bands, rows)
    band = np.repeat(np.arange(params.bands, dtype=np.int32), n)
    cid = pa.concat_arrays([batch.column("cid")] * params.bands) if n else batch.column("cid")
    return pa.RecordBatch.from_arrays(
        [pa.array(band, type=pa.int32()), binary_rows(keys), cid], names=["band", "key", "cid"]
    )


def _run_starts(band: NDArray[np.int32], keys: NDArray[np.uint32]) -> NDArray[np.int64]:
    """Where each run of equal (band, key) starts in rows sorted by them."""
    if len(band) == 0:
        return np.empty(0, dtype=np.int64)
    differs = (band[1:] != band[:-1]) | (keys[1:] != keys[:-1]).any(axis=1)
    return np.flatnonzero(np.concatenate(([True], differs)))


def _spans(first: NDArray[np.int64], count: NDArray[np.int64]) -> NDArray[np.int64]:
    """``first[r], first[r] + 1, ..., first[r] + count[r] - 1`` for every r, concatenated."""
    total = int(count.sum())
    return np.repeat(first - np.cumsum(count) + count, count) + np.arange(total, dtype=np.int64)


def _pairs_within(starts: NDArray[np.int64], ends: NDArray[np.int64]) -> NDArray[np.int64]:
    """Every pair (i, j), i < j, of rows inside each run ``[starts[r], ends[r])``."""
    size = ends - starts
    pos = _spans(starts, size)
    run_end = np.repeat(ends, size)
    out = [np.empty((0, 2), dtype=np.int64)]
    d = 1
    live = pos + d < run_end
    pos, run_end = pos[live], run_end[live]
    while len(pos):
        out.append(np.stack((pos, pos + d), axis=1))
        d += 1
        live = pos + d < run_end
        pos, run_end = pos[live], run_end[live]
    return np.concatenate(out)


def bucket_star(sigs: NDArray[np.uint32], threshold: float) -> NDArray[np.int64]:
    """For the members of one bucket (sorted by cid), the smallest member of each one's
    component of confirmed pairs; block by block, skipping pairs already joined.

    Exact: a skipped pair's members are already connected, so its edge changes nothing. The
    comparisons are at most the m(m - 1)/2 core makes for the bucket, and far fewer when many
    members are near copies of each other (one block joins them, later blocks skip them).
    """
    m = len(sigs)
    label = np.arange(m, dtype=np.int64)
    step = max(1, _BLOCK_PAIRS // max(m, 1))
    for lo in range(0, m - 1, step):
        hi = min(m - 1, lo + step)
        rows = np.arange(lo, hi, dtype=np.int64)
        i = np.repeat(rows, m - 1 - rows)
        j = _spans(rows + 1, m - 1 - rows)
        keep = label[i] != label[j]
        pairs = np.stack((i[keep], j[keep]), axis=1)
        confirmed = pairs[estimates(sigs, pairs) >= threshold]
        if len(confirmed):
            left = np.concatenate((confirmed[:, 0], np.arange(m)))
            right = np.concatenate((confirmed[:, 1], label))
            label = min_label_components(m, left, right)
    return label


class BucketEdges:
    """Turns a partition's stream of bucket rows, sorted by (band, key, cid), into star edges.

    A bucket may straddle two Arrow batches: its rows are held back and processed with the next
    batch. Small buckets of a batch are compared all at once (their pairs vectorised), big ones
    by ``bucket_star``; each bucket yields (child, root) for every member whose component in the
    bucket has a smaller cid, so a bucket of m members gives at most m - 1 edges.
    """

    def __init__(self, params: MinhashParams) -> None:
        self.params = params

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        held: pa.Table | None = None
        for batch in batches:
            table = pa.Table.from_batches([batch])
            table = table if held is None else pa.concat_tables([held, table])
            band, keys, _, _ = self._columns(table)
            starts = _run_starts(band, keys)
            last = int(starts[-1]) if len(starts) else 0
            yield self._edges(table.slice(0, last))
            held = table.slice(last)
        if held is not None:
            yield self._edges(held)

    def _columns(
        self, table: pa.Table
    ) -> tuple[NDArray[np.int32], NDArray[np.uint32], pa.Array, NDArray[np.uint32]]:
        p = self.params
        band = table.column("band").to_numpy().astype(np.int32)
        keys = _matrix(table.column("key").combine_chunks(), p.rows, np.uint32)
        cid = table.column("cid").combine_chunks()
        sigs = _matrix(table.column("sig").combine_chunks(), p.num_perm, np.uint32)
        return band, keys, cid, sigs

    def _edges(self, table: pa.Table) -> pa.RecordBatch:
        band, keys, cid, sigs = self._columns(table)
        n = len(band)
        if n == 0:
            return pa.RecordBatch.from_arrays(
                [pa.array([], pa.string()), pa.array([], pa.string())], names=["child", "parent"]
            )
        starts = _run_starts(band, keys)
        ends = np.append(starts[1:], n).astype(np.int64)
        size = ends - starts
        small = (size >= 2) & (size <= BIG_BUCKET)
        pairs = _pairs_within(starts[small], ends[small])
        confirmed = pairs[estimates(sigs, pairs) >= self.params.threshold]
        label = min_label_components(n, confirmed[:, 0], confirmed[:, 1])
        big = size > BIG_BUCKET
        for s, e in zip(starts[big].tolist(), ends[big].tolist(), strict=True):
            label[s:e] = s + bucket_star(sigs[s:e], self.params.threshold)
        child = np.flatnonzero(label != np.arange(n))
        return pa.RecordBatch.from_arrays(
            [cid.take(pa.array(child)), cid.take(pa.array(label[child]))],
            names=["child", "parent"],
        )


def estimate_batch(batch: pa.RecordBatch, num_perm: int) -> pa.RecordBatch:
    """(id, sig, root_sig) -> (id, estimate): core's ``estimates`` of every row's signature and
    its root's (the share of equal positions), vectorised over the batch."""
    sigs = _matrix(batch.column("sig"), num_perm, np.uint32)
    roots = _matrix(batch.column("root_sig"), num_perm, np.uint32)
    rows = np.arange(len(sigs), dtype=np.int64)
    values = estimates(sigs, np.stack((rows, rows), axis=1), roots)
    return pa.RecordBatch.from_arrays(
        [batch.column("id"), pa.array(values, pa.float64())], names=["id", "estimate"]
    )


def clean_batch(texts: list[str], index: NgramIndex | None) -> NDArray[np.bool_]:
    """True for every text sharing no protected n-gram (all of them without an index)."""
    if index is None:
        return np.ones(len(texts), dtype=np.bool_)
    return ~index.contaminated_many(texts)


def reason_object(
    reason: str | None,
    duplicate_of: str | None,
    estimate: float | None,
    index_part: str | None = None,
    indexed: bool = False,
) -> dict[str, Any]:
    """The ``neardup`` object of a would-be-dropped row (``--keep-duplicates``), keys in the
    local engine's order, the contamination ones null; in a run with an index (``indexed``)
    ``index_part`` last: the part holding ``duplicate_of`` when it is indexed, else null."""
    out = {"reason": reason, "duplicate_of": duplicate_of, "estimate": estimate,
           "set": None, "item": None, "ngram": None}  # fmt: skip
    if indexed:
        out["index_part"] = index_part
    return out


#: Where a document's id and text are by default (``--id-field``, ``--text-field`` and
#: ``--id-prefix`` give another ``Schema``).
_SCHEMA = Schema()


def file_label(uri: str, root: str | None) -> str:
    """What ``--id-prefix file`` puts before the ids of the file at ``uri`` (as Spark names it,
    ``file:/d/a%20b.jsonl``), as the local engine's ``Source.label``: its path relative to
    ``root`` (the unquoted path of the directory or of a glob's fixed part it was found by), or
    without a ``root`` (a file named on its own) its base name."""
    import posixpath
    from urllib.parse import unquote, urlsplit

    path = unquote(urlsplit(uri).path)
    return posixpath.basename(path) if root is None else posixpath.relpath(path, root)


def _checked(
    row: dict[str, Any], reserved: str | None, schema: Schema = _SCHEMA
) -> tuple[str, str]:
    """A row's id and text (before any ``--id-prefix``); CorpusError when it is not a document
    the output can be written from: no id or text (as the local reader says), a ``meta`` that is
    not an object (the local engine says so when it writes the row), or a ``reserved`` field
    (``--keep-duplicates``, ``--removed``)."""
    doc_id, text = schema.id_and_text(row, "", None)
    meta = row.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise CorpusError("", None, f"'meta' must be an object to hold {CLUSTER_KEY}")
    if reserved is not None and reserved in row:
        raise CorpusError(
            "", None, f"the row already has a '{reserved}' field, the one neardup says why a row "
            "is dropped in",
        )  # fmt: skip
    return doc_id, text


def line_problem(line: str, reserved: str | None, schema: Schema = _SCHEMA) -> str | None:
    """Why a JSON Lines line is not a document; None for a document or a blank line. (An id
    that only its ``--id-prefix`` label makes bad is found by ``check_rows``, not here.)"""
    try:
        for _, row in jsonl_items([line], ""):
            _checked(row, reserved, schema)
    except CorpusError as exc:
        return exc.reason
    return None


def _prefixed(
    row: dict[str, Any], doc_id: str, schema: Schema, label: str | None
) -> tuple[str, dict[str, Any] | None]:
    """With ``--id-prefix file`` (a ``label``): the id ``LABEL/ID`` (checked as the local reader
    checks it) and the row holding it in its id field; else the id and None."""
    if label is None or not schema.id_prefix:
        return doc_id, None
    doc_id = schema.prefixed(label, doc_id)
    problem = id_problem(doc_id)
    if problem is not None:  # as the local reader says it
        raise CorpusError("", None, f"the id {doc_id!r} {problem}")
    return doc_id, set_field(row, schema.id_field, doc_id)


def _documents(
    batch: pa.RecordBatch, keep: list[int], ids: list[str | None], texts: list[str | None],
    bad: list[str | None], rows: list[str | None], passed: list[str],
) -> pa.RecordBatch:  # fmt: skip
    taken = batch.take(pa.array(keep, pa.int64())) if len(keep) != len(batch) else batch
    text = pa.string()
    return pa.RecordBatch.from_arrays(
        [pa.array(ids, text), pa.array(texts, text), pa.array(bad, text),
         *(taken.column(name) for name in passed), pa.array(rows, text)],
        names=["id", "text", "bad", *passed, "row"],
    )  # fmt: skip


def _labels(batch: pa.RecordBatch, schema: Schema, root: str | None) -> list[str | None]:
    """Every row's ``--id-prefix`` label (from its ``file`` column), or None without one."""
    if not schema.id_prefix:
        return [None] * len(batch)
    return [file_label(f, root) for f in batch.column("file").to_pylist()]


def _decoded(column: pa.Array) -> tuple[list[Any], dict[int, str]]:
    """The lines of a text column, and why each one that is not UTF-8 is not (by position;
    its line is None): Spark's text reader passes a file's bytes on as they are."""
    try:
        return column.to_pylist(), {}
    except UnicodeDecodeError:
        pass  # the slow path, on a batch holding a line that is not UTF-8
    lines: list[Any] = []
    problems: dict[int, str] = {}
    for i, raw in enumerate(column.cast(pa.binary()).to_pylist()):
        try:
            lines.append(None if raw is None else raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            lines.append(None)
            problems[i] = f"not UTF-8 ({exc.reason} at byte {exc.start} of the line)"
    return lines, problems


def line_documents(
    batch: pa.RecordBatch, reserved: str | None, schema: Schema = _SCHEMA, root: str | None = None
) -> pa.RecordBatch:
    """(value, file, *passed) JSON Lines -> (id, text, bad, file, *passed, row): every non-blank
    line's id and text in ``schema``'s fields (both null, and ``bad`` saying why, for a line that
    is not a document) and the line itself as ``row``, parsed by the local reader's parser;
    blank lines are left out. With ``schema.id_prefix`` the id is ``LABEL/ID`` (``file_label``
    of the row's file and ``root``) and ``row`` the row holding it, as the local reader has it."""
    passed = [name for name in batch.schema.names if name != "value"]
    labels = _labels(batch, schema, root)
    keep: list[int] = []
    ids: list[str | None] = []
    texts: list[str | None] = []
    bad: list[str | None] = []
    rows: list[str | None] = []
    lines, not_utf8 = _decoded(batch.column("value"))
    for i, line in enumerate(lines):
        try:
            if i in not_utf8:
                raise CorpusError("", None, not_utf8[i])
            items = list(jsonl_items([line], ""))
            if not items:
                continue  # a blank line, as the local reader skips it
            doc_id, text = _checked(items[0][1], reserved, schema)
            doc_id, row = _prefixed(items[0][1], doc_id, schema, labels[i])
            why = None
        except CorpusError as exc:
            doc_id, text, why, row = None, None, exc.reason, None
        keep.append(i)
        ids.append(doc_id)
        texts.append(text)
        bad.append(why)
        rows.append(line if row is None else RowWriter.dumps(row))
    return _documents(batch, keep, ids, texts, bad, rows, passed)


def parquet_documents(
    batch: pa.RecordBatch,
    columns: list[str],
    reserved: str | None,
    schema: Schema = _SCHEMA,
    root: str | None = None,
) -> pa.RecordBatch:
    """(*columns, file, *passed) of a Parquet input -> (id, text, bad, file, *passed, row): each
    row's id and text in ``schema``'s fields (or why it is not a document) and the row as the
    JSON text the local engine writes for it (``RowWriter.dumps``: every column, in order; dates,
    decimals and bytes as its JSON Lines output has them); ``--id-prefix`` as
    ``line_documents``."""
    passed = [name for name in batch.schema.names if name not in columns]
    labels = _labels(batch, schema, root)
    ids: list[str | None] = []
    texts: list[str | None] = []
    bad: list[str | None] = []
    rows: list[str | None] = []
    for row, label in zip(batch.select(columns).to_pylist(), labels, strict=True):
        try:
            doc_id, text = _checked(row, reserved, schema)
            doc_id, prefixed = _prefixed(row, doc_id, schema, label)
            # before any append: a failure adds one entry each
            dumped = RowWriter.dumps(row if prefixed is None else prefixed)
            ids.append(doc_id)
            texts.append(text)
            bad.append(None)
            rows.append(dumped)
        except (CorpusError, TypeError, ValueError) as exc:
            ids.append(None)
            texts.append(None)
            bad.append(exc.reason if isinstance(exc, CorpusError) else str(exc))
            rows.append(None)
    return _documents(batch, list(range(len(batch))), ids, texts, bad, rows, passed)


#: Where ``route_rows`` sends a row: the output, or ``--removed`` (when there is one).
OUTPUT, REMOVED = 0, 1


def contamination_reasons(
    texts: list[str], check: Protection | NgramIndex | None
) -> list[dict[str, Any] | None]:
    """Per text, None when it shares no protected n-gram, else what the local engine's reason
    says of it (its first match's ``set``, first ``item`` and ``ngram``; an ``NgramIndex``,
    which has only verdicts, says nothing: ``{}``)."""
    if check is None or not texts:
        return [None] * len(texts)
    if isinstance(check, NgramIndex):
        return [{} if dirty else None for dirty in check.contaminated_many(texts).tolist()]
    out: list[dict[str, Any] | None] = []
    for matches in check.matches_many(texts):
        first: Match | None = matches[0] if matches else None
        out.append(
            None
            if first is None
            else {"set": first.set, "item": first.items[0], "ngram": first.ngram}
        )
    return out


def route_rows(
    rows: list[str],
    roots: list[str],
    reasons: list[tuple[str | None, str | None, float | None]] | None,
    parts: list[str | None] | None,
    check: Protection | NgramIndex | None,
    *,
    keep_all: bool,
    schema: Schema = _SCHEMA,
) -> list[tuple[dict[str, Any], int]]:
    """Every row (JSON text) of a batch as the local engine writes it, and where (``OUTPUT`` or
    ``REMOVED``): a row the protected sets catch (survivors are checked, and with
    ``keep_all`` every row) goes to ``--removed`` as read with the ``contaminated`` reason; a
    survivor (null reason) to the output tagged with its root; a would-be-dropped row to the
    output tagged and with its ``neardup`` object with ``keep_all``, else to ``--removed`` as
    read with it. ``parts``: a run with an index (every reason says ``index_part``)."""
    parsed = [json.loads(raw) for raw in rows]
    why = reasons if reasons is not None else [(None, None, None)] * len(rows)
    checked = [i for i, r in enumerate(why) if keep_all or r[0] is None]
    dirty = dict(
        zip(
            checked,
            contamination_reasons([text_of(parsed[i], schema) for i in checked], check),
            strict=True,
        )
    )
    indexed = parts is not None
    out: list[tuple[dict[str, Any], int]] = []
    for i, row in enumerate(parsed):
        found = dirty.get(i)
        if found is not None:
            caught = {**reason_object("contaminated", None, None, None, indexed), **found}
            out.append(({**row, REASON_KEY: caught}, REMOVED))
            continue
        part = None if parts is None else parts[i]
        reason = None if why[i][0] is None else reason_object(*why[i], part, indexed)
        if reason is None:
            out.append((_tagged(row, roots[i]), OUTPUT))
        elif keep_all:
            out.append(({**_tagged(row, roots[i]), REASON_KEY: reason}, OUTPUT))
        else:
            out.append(({**row, REASON_KEY: reason}, REMOVED))
    return out


def tagged_rows(
    rows: list[str],
    roots: list[str],
    reasons: list[tuple[str | None, str | None, float | None]] | None = None,
    parts: list[str | None] | None = None,
) -> list[dict[str, Any]]:
    """The output rows of the input rows ``rows`` (JSON text), as the local engine builds them:
    the row with ``meta.minhash_cluster`` set to its root (``meta`` where it was, or last), and
    with ``reasons`` (reason, duplicate_of, estimate; a null reason for a survivor) the
    ``neardup`` object last (with ``parts``, the index part of an indexed ``duplicate_of``)."""
    out = []
    for i, (raw, root) in enumerate(zip(rows, roots, strict=True)):
        tagged = _tagged(json.loads(raw), root)
        if reasons is not None and reasons[i][0] is not None:
            part = None if parts is None else parts[i]
            tagged[REASON_KEY] = reason_object(*reasons[i], part, parts is not None)
        out.append(tagged)
    return out


def _tagged(row: dict[str, Any], root: str) -> dict[str, Any]:
    """``row`` with ``meta.minhash_cluster`` set to ``root`` (``meta`` where it was, or last)."""
    meta = row.get("meta")
    return {**row, "meta": {**({} if meta is None else meta), CLUSTER_KEY: root}}


def text_of(row: dict[str, Any], schema: Schema = _SCHEMA) -> str:
    """A checked row's text."""
    text: str = get_field(row, schema.text_field)
    return text


def row_schema(rows: list[dict[str, Any]], hint: pa.Schema | None) -> pa.Schema:
    """The Arrow schema the local engine writes ``rows`` with to Parquet (``RowWriter.table``);
    ArrowInvalid, ArrowTypeError or OverflowError when they fit none."""
    schema: pa.Schema = RowWriter.table(rows, hint).schema
    return schema


# --- The persistent index (``--index``): probes of indexed rows, confirmations, part rows ---

#: Rows per Parquet row group of an index part (core writes the same; docs/index.md).
INDEX_ROW_GROUP = 1 << 13
#: ``probe_batch``'s ``band`` of an id of the new batch found in the index, and of a text digest
#: found there (band hits have the band's number, 0 or more).
PROBE_ID, PROBE_DIGEST = -1, -2


def band_key_batch(batch: pa.RecordBatch, params: MinhashParams) -> pa.RecordBatch:
    """(cid, sig) -> (band, key, cid): one row per band of every class, ``key`` the band's
    digest as the index stores it (``band_digests``, 8 bytes little-endian)."""
    sigs = _matrix(batch.column("sig"), params.num_perm, np.uint32)
    digests = band_digests(sigs, params.bands).astype("<u8")
    n = len(sigs)
    keys = np.ascontiguousarray(digests.T).reshape(n * params.bands, 1)
    band = np.repeat(np.arange(params.bands, dtype=np.int32), n)
    cid = pa.concat_arrays([batch.column("cid")] * params.bands) if n else batch.column("cid")
    return pa.RecordBatch.from_arrays(
        [pa.array(band, type=pa.int32()), binary_rows(keys), cid], names=["band", "key", "cid"]
    )


class ProbeFilter:
    """What a probe of the index looks for: the new batch's ids, text digests and band keys
    (sorted per band). Broadcast to the executors; ``None`` in a probe means "emit every
    indexed row's keys" (the join fallback for a big new batch)."""

    def __init__(
        self, ids: list[str], digests: list[bytes], keys: NDArray[np.uint64], bands: int
    ) -> None:
        self.ids = ids
        self.digests = digests
        #: ``[bands]`` sorted arrays of the band digests the new batch has in each band.
        self.keys = [np.unique(keys[:, b]) for b in range(bands)] if len(keys) else []

    def hits(self, column: pa.Array, values: list[Any]) -> NDArray[np.bool_]:
        """Which entries of ``column`` are among ``values``."""
        import pyarrow.compute as pc

        if not values:
            return np.zeros(len(column), dtype=np.bool_)
        found = pc.is_in(column, value_set=pa.array(values, column.type))
        return np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.bool_)


def probe_batch(batch: pa.RecordBatch, probe: ProbeFilter | None, bands: int) -> pa.RecordBatch:
    """(id, digest, bands, part, file) of indexed rows -> (band, key, iid, part, file): a row
    per id of the new batch found (band ``PROBE_ID``), per text digest found (``PROBE_DIGEST``,
    key the digest) and per band key found (the band, key its digest); with no ``probe``, every
    row's digest and band keys (the join fallback; its band rows without part and file, which
    would be most of what it shuffles), never its id."""
    n = len(batch)
    iid, part, file = batch.column("id"), batch.column("part"), batch.column("file")
    digest = batch.column("digest").cast(pa.binary())
    matrix = _matrix(batch.column("bands").cast(pa.binary()), bands, np.uint64)
    if probe is None:
        take_ids = np.zeros(n, dtype=np.bool_)
        take_digests = np.ones(n, dtype=np.bool_)
        band_rows = [np.arange(n, dtype=np.int64)] * bands
    else:
        take_ids = probe.hits(iid, probe.ids)
        take_digests = probe.hits(digest, probe.digests)
        band_rows = []
        for b in range(bands):
            keys = probe.keys[b] if probe.keys else np.empty(0, dtype=np.uint64)
            if not len(keys):
                band_rows.append(np.empty(0, dtype=np.int64))
                continue
            at = np.minimum(np.searchsorted(keys, matrix[:, b]), len(keys) - 1)
            band_rows.append(np.flatnonzero(keys[at] == matrix[:, b]))
    rows = [np.flatnonzero(take_ids), np.flatnonzero(take_digests), *band_rows]
    codes = [PROBE_ID, PROBE_DIGEST, *range(bands)]
    band = np.concatenate(
        [np.full(len(r), c, dtype=np.int32) for r, c in zip(rows, codes, strict=True)]
    )
    at = pa.array(np.concatenate(rows))
    band_keys = [
        binary_rows(np.ascontiguousarray(matrix[r, b : b + 1]).astype("<u8"))
        for b, r in enumerate(band_rows)
    ]
    key = pa.concat_arrays(
        [pa.nulls(len(rows[0]), pa.binary()), digest.take(pa.array(rows[1])), *band_keys]
    )
    named = len(at) if probe is not None else len(rows[0]) + len(rows[1])
    where = at.slice(0, named)
    gone = len(at) - named
    return pa.RecordBatch.from_arrays(
        [
            pa.array(band, pa.int32()),
            key,
            iid.take(at),
            pa.concat_arrays([part.take(where), pa.nulls(gone, pa.string())]),
            pa.concat_arrays([file.take(where), pa.nulls(gone, pa.string())]),
        ],
        names=["band", "key", "iid", "part", "file"],
    )


def confirm_batch(batch: pa.RecordBatch, params: MinhashParams) -> pa.RecordBatch:
    """(cid, sig, iid, isig) candidate (new class, indexed row) pairs -> (cid, iid, estimate)
    of the confirmed ones: the two signatures share one band exactly (a band digest match may
    be a collision) and their estimate is at least the threshold."""
    sigs = _matrix(batch.column("sig"), params.num_perm, np.uint32)
    isigs = _matrix(batch.column("isig"), params.num_perm, np.uint32)
    n = len(sigs)
    rows = np.arange(n, dtype=np.int64)
    values = estimates(sigs, np.stack((rows, rows), axis=1), isigs)
    same = (sigs == isigs).reshape(n, params.bands, params.rows).all(axis=2).any(axis=1)
    keep = pa.array(same & (values >= params.threshold))
    return pa.RecordBatch.from_arrays(
        [
            batch.column("cid").filter(keep),
            batch.column("iid").filter(keep),
            pa.array(values, pa.float64()).filter(keep),
        ],
        names=["cid", "iid", "estimate"],
    )


def part_batch(batch: pa.RecordBatch, params: MinhashParams) -> pa.RecordBatch:
    """(id, digest, sig) of survivors -> (id, digest, bands, signature): an index part's rows
    (``band_digests`` as little-endian uint64, the signature as little-endian uint32)."""
    sigs = _matrix(batch.column("sig"), params.num_perm, np.uint32)
    bands = band_digests(sigs, params.bands).astype("<u8")
    return pa.RecordBatch.from_arrays(
        [
            batch.column("id"),
            batch.column("digest"),
            binary_rows(bands),
            binary_rows(sigs.astype("<u4")),
        ],
        names=["id", "digest", "bands", "signature"],
    )


def recrawl_batch(batch: pa.RecordBatch, params: MinhashParams) -> pa.RecordBatch:
    """(id, digest, sig, idigest, isig) of re-crawled rows and the indexed documents of their
    ids -> (id, verdict, estimate): core's ``recrawl_verdicts`` (same, near or changed)."""
    digests = _matrix(batch.column("digest").cast(pa.binary()), 2, np.uint64)
    indexed = _matrix(batch.column("idigest").cast(pa.binary()), 2, np.uint64)
    sigs = _matrix(batch.column("sig"), params.num_perm, np.uint32)
    isigs = _matrix(batch.column("isig").cast(pa.binary()), params.num_perm, np.uint32)
    verdict, estimate = recrawl_verdicts(digests, sigs, indexed, isigs, params.threshold)
    return pa.RecordBatch.from_arrays(
        [batch.column("id"), pa.array(verdict.astype(np.int32)), pa.array(estimate, pa.float64())],
        names=["id", "verdict", "estimate"],
    )


def renamed_batch(batch: pa.RecordBatch, id_field: str) -> pa.RecordBatch:
    """(id, row, pos, new) -> (id, row, pos): a row with a ``new`` id (``--recrawled
    keep-both``'s derived id) gets it as its id and in its id field (``set_field``, written
    back with ``RowWriter.dumps``, as the local engine's writer has it)."""
    ids, rows, new = (batch.column(c).to_pylist() for c in ("id", "row", "new"))
    for i, name in enumerate(new):
        if name is not None:
            ids[i] = name
            rows[i] = RowWriter.dumps(set_field(json.loads(rows[i]), id_field, name))
    return pa.RecordBatch.from_arrays(
        [pa.array(ids, pa.string()), pa.array(rows, pa.string()), batch.column("pos")],
        names=["id", "row", "pos"],
    )
