"""``neardup index info|compact|delete|query``: look at, tidy, delete from and search a
persistent index (docs/index.md) without a server.

- ``info``: the latest version, its parameters, parts (rows, bytes, the run that made each),
  totals and the leftovers (of killed runs, and parts compacted away); ``--json`` for machines.
- ``compact``: runs of small parts rewritten as few, committed as the next version; the old
  parts' files and leftovers older than an hour removed after the commit.
- ``delete``: the ids of a file (one a line, or JSON Lines with ``id``) taken out of the index
  by a deletion vector per part holding one, committed as the next version (exit 3 on a lost
  race, as the others); ids not in the index are reported, not an error.
- ``query``: for every row of the inputs (read as ``dedup`` reads them), the indexed documents it
  near-duplicates under the index's own parameters, with estimates and parts, exact copies
  flagged; one JSON line per row, the best ``--limit`` matches listed and all counted.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import closing
from typing import Any

import numpy as np

from neardup.app.cli.inputs import batches
from neardup.app.cli.options import default_workers
from neardup.app.cli.pause import pause_point
from neardup.app.cli.progress import Ledger, Progress
from neardup.app.cli.version import neardup_version
from neardup.core.engine import (
    CorpusError,
    DocIndex,
    IndexLookup,
    ParameterError,
    RecordReader,
    Schema,
    atomic_output,
    check_output,
    compact_index,
    delete_ids,
    expand_inputs,
    index_info,
    lookup_index,
    signature_stream,
    text_digests,
)

__all__ = ["index_command"]

#: Rows per signature batch of ``query``.
BATCH = 4096


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "age unknown"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min old"
    return f"{seconds / 3600:.1f} h old"


def _run(run: dict[str, Any]) -> str:
    """A part's run in one line: when, how, from what."""
    what = [str(run.get(k, "?")) for k in ("created", "engine", "mode")]
    what.append(f"neardup {run.get('neardup', '?')}")
    if run.get("from_parts"):
        sources = [str(p) for p in run["from_parts"]]
    else:
        sources = [str(i) for i in run.get("inputs", [])]
    total = int(run.get("inputs_total", len(sources)) or len(sources))
    shown = ", ".join(sources[:3])
    if total > 3:
        shown += f" (+{total - 3} more)"
    return " ".join(what) + (f": {shown}" if shown else "")


#: What ``index info`` says of a part of an older layout (``index_info``'s ``layout``).
_LAYOUT_NOTE = {
    1: "first layout (scanned; compact it)  ",
    2: "no id table (ids checked by statistics; compact it)  ",
}


def info_text(info: dict[str, Any]) -> str:
    """``neardup index info`` for people."""
    params = " ".join(f"{k}={v}" for k, v in sorted((info["params"] or {}).items()))
    lines = [
        f"index {info['index']}: version {info['version']} ({info['versions_total']:,} "
        f"committed), {info['rows']:,} documents in {info['parts_total']:,} parts "
        f"({info['files']:,} files, {_size(info['bytes'])})"
        + (
            f"; {info['deleted']:,} deleted rows (`neardup index compact` drops them)"
            if info.get("deleted")
            else ""
        ),
        f"parameters: {params}",
        "parts:",
    ]
    for p in info["parts"]:
        lines.append(
            f"  {p['name']}  {p['rows']:,} rows  "
            + (f"({p['deleted']:,} deleted)  " if p.get("deleted") else "")
            + f"{_size(p['bytes'])}  {p['files']} file(s)  "
            + _LAYOUT_NOTE.get(p.get("layout", 3), "")
            + f"{_run(p['run'])}"
        )
    if info["parts_total"] > len(info["parts"]):
        lines.append(f"  ... and {info['parts_total'] - len(info['parts']):,} more (--limit)")
    count = info["leftovers_total"]
    if not count:
        lines.append("leftovers (killed runs, parts compacted away): none")
        return "\n".join(lines)
    lines.append(
        "leftovers of killed runs and parts compacted away (no version lists them; `neardup "
        f"index compact` removes those over an hour old): {count:,}, "
        f"{_size(info['leftovers_bytes'])}"
    )
    for x in info["leftovers"]:
        lines.append(f"  {x['path']}  {_size(x['bytes'])}  {_age(x['age_seconds'])}")
    if count > len(info["leftovers"]):
        lines.append(f"  ... and {count - len(info['leftovers']):,} more (--limit)")
    return "\n".join(lines)


def _info(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise ParameterError(f"--limit {args.limit}: give 0 or more")
    info = index_info(args.index, limit=args.limit)
    if args.json:
        sys.stdout.write(json.dumps(info, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(info_text(info) + "\n")
    return 0


def _compact(args: argparse.Namespace) -> int:
    sizes = {} if args.part_rows is None else {"part_rows": args.part_rows}
    if args.part_rows is not None and args.part_rows < 1:
        raise ParameterError(f"--part-rows {args.part_rows}: give at least 1")
    done = compact_index(
        args.index, neardup=neardup_version(), before_commit=lambda: pause_point("commit"),
        **sizes,
    )  # fmt: skip
    if not args.quiet:
        if done.merged:
            what = (
                f"version {done.version}: {len(done.merged)} parts rewritten as "
                f"{len(done.added)} ({done.parts_before} parts before, {done.parts_after} after; "
                f"{done.rows:,} documents)"
            )
        else:
            what = f"nothing to compact (version {done.version}, {done.parts_before} parts)"
        removed = (
            f"; removed {len(done.removed)} leftovers over an hour old" if done.removed else ""
        )
        print(f"neardup index compact: {what}{removed}", file=sys.stderr)
    return 0


def _matches(found: IndexLookup, rows: int) -> list[list[tuple[float, str, str, bool]]]:
    """Per new row: (estimate, indexed id, part, exact) of every match, best first."""
    out: list[list[tuple[float, str, str, bool]]] = [[] for _ in range(rows)]
    exact = found.exact
    for (row, at), est in zip(found.pairs.tolist(), found.estimate.tolist(), strict=True):
        out[row].append((est, found.ids[at], found.parts[at], at == int(exact[row])))
    for row in np.flatnonzero(exact >= 0).tolist():
        at = int(exact[row])
        if not any(m[3] for m in out[row]):  # an empty text has no bands: only its digest
            out[row].append((1.0, found.ids[at], found.parts[at], True))
    for matches in out:
        matches.sort(key=lambda m: (-m[0], not m[3], m[1]))
    return out


def _query(args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise ParameterError(f"--limit {args.limit}: give 0 or more")
    workers = default_workers() if args.workers is None else args.workers
    if workers < 1:
        raise ParameterError(f"--workers {workers}: give at least 1")
    check_output(args.output)  # apart from the inputs and the index: the CLI's guard
    index = DocIndex.open(args.index)
    index.verify()
    params = index.minhash_params()
    sources = expand_inputs(args.inputs)
    reader = RecordReader(sources, Schema(args.id_field, args.text_field))
    ids: list[str] = []
    digests, sigs = [], []
    with Progress("signatures", total=reader.total_bytes, unit="B", quiet=args.quiet) as progress:

        def texts() -> Any:
            for batch in batches(reader, BATCH):
                ids.extend(r.id for r in batch)
                texts = [r.text for r in batch]
                digests.append(text_digests(texts))
                yield texts

        # Bytes count once signed: the reader runs ahead of the pool's workers.
        ledger = Ledger(progress, lambda: reader.bytes_done)
        with closing(signature_stream(ledger.track(texts()), params, workers)) as stream:
            for chunk in stream:
                sigs.append(chunk)
                ledger.settle()
    matrix = np.concatenate(sigs) if sigs else np.empty((0, params.num_perm), dtype=np.uint32)
    digest = np.concatenate(digests) if digests else np.empty((0, 2), dtype=np.uint64)
    found = lookup_index(index, matrix, digest)
    with atomic_output(args.output) as (handle, _):
        for doc_id, matches in zip(ids, _matches(found, len(ids)), strict=True):
            listed = [
                {"id": i, "estimate": round(e, 6), "part": p, "exact": x}
                for e, i, p, x in matches[: args.limit]
            ]
            line = {"id": doc_id, "match_count": len(matches), "matches": listed}
            handle.write((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
    if not args.quiet:
        hit = found.exact >= 0
        hit[found.pairs[:, 0]] = True
        hits = int(np.count_nonzero(hit))
        print(
            f"neardup index query: {len(ids):,} texts against {index.rows:,} indexed documents "
            f"(version {index.version}): {hits:,} near-duplicate indexed documents",
            file=sys.stderr,
        )
    return 0


#: Ids of ``delete`` not in the index named in its summary at most (all counted).
SHOWN_MISSING = 5


def read_ids(path: str) -> list[str]:
    """The ids of ``path`` (``-``: standard input): one a line, or JSON Lines objects with a
    string ``id``; blank lines skipped. CorpusError naming the line of a bad one."""
    from neardup.core.engine import read_json

    out: list[str] = []
    handle = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        for number, raw in enumerate(handle, 1):
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise CorpusError(path, number, "is not UTF-8 text") from None
            if not text.strip():
                continue
            if not text.lstrip().startswith("{"):
                out.append(text)
                continue
            try:
                value = read_json(text)
            except ValueError as exc:
                raise CorpusError(path, number, f"is not a JSON object ({exc})") from None
            doc_id = value.get("id") if isinstance(value, dict) else None
            if not isinstance(doc_id, str) or not doc_id:
                raise CorpusError(path, number, 'has no "id" that is a non-empty string')
            out.append(doc_id)
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
    return out


def _delete(args: argparse.Namespace) -> int:
    ids = read_ids(args.ids)
    done = delete_ids(args.index, ids, before_commit=lambda: pause_point("commit"))
    if not args.quiet:
        what = (
            f"version {done.version}: deleted {len(done.deleted):,} documents "
            f"({len(done.parts)} parts given a deletion vector; {done.rows:,} documents left)"
            if done.deleted
            else f"nothing deleted (version {done.version}, {done.rows:,} documents)"
        )
        if done.missing:
            shown = ", ".join(repr(i) for i in done.missing[:SHOWN_MISSING])
            more = len(done.missing) - SHOWN_MISSING
            what += f"; {len(done.missing):,} ids not in the index: {shown}"
            what += f" and {more:,} more" if more > 0 else ""
        print(f"neardup index delete: {what}", file=sys.stderr)
    return 0


_SUBCOMMANDS = {"info": _info, "compact": _compact, "delete": _delete, "query": _query}


def index_command(args: argparse.Namespace) -> int:
    """Run ``neardup index SUBCOMMAND``."""
    return _SUBCOMMANDS[args.index_command](args)
