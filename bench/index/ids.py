"""Id checks against big indexes (issue 30): through the parts' id tables, and in the same run
through the data files' id statistics (the path of a part written before id tables).

The index is built once through the writer (``write_part``) with synthetic signatures and
URL-like ids (``https://site{h}.example/page/{i}``) that interleave across parts: every part's
id range spans the others', so the statistics path reads every row group's ids. Kept in
``--keep DIR`` between runs (a 10M index takes a while to build). Measured, per size:

- in one process, ``find_ids`` of 1,000 and 10,000 asked ids (half indexed, half new ids
  falling between indexed ones) with their digests and signatures: CPU seconds, tables / stats;
- whole processes: ``neardup index query IDX ONE.jsonl`` (median of ``--repeat``) and
  ``neardup dedup NEW.jsonl --output OUT --index IDX`` of 1,000 new documents (100 of them
  re-crawled ids), each append undone afterwards; with id tables, then with the same index's
  newest version listing none (format_version 2: the statistics path).

Run from the repository root::

    python -m bench.index.ids [--docs 1000000 10000000] [--keep DIR] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.machine import now
from bench.index import lookups
from bench.index.lookups import (
    REAL_DOCS,
    _flat_layout,
    _neardup,
    _newest_file,
    _text,
    _undo_append,
    _write_jsonl,
)

__all__ = ["build", "main"]

#: Ids asked at once, in process.
CHECKS = (1_000, 10_000)
#: New documents of the append measured.
APPEND = 1_000


def url_id(i: int) -> str:
    """The ``i``-th indexed id: URL-like, hashed across sites so parts interleave."""
    return f"https://site{(i * 2654435761) % 9973:04d}.example/page/{i}"


def build(url: str, docs: int, part_docs: int, texts: list[str]) -> float:
    """A synthetic index of ``docs`` documents with URL-like ids (``url_id``), plus ``texts`` as
    a real part (``bench.index.lookups.build``); its seconds."""
    return lookups.build(url, docs, part_docs, texts, url_id, "https://real.example/")


def asked_ids(n: int, docs: int, seed: int, indexed: bool = True) -> list[str]:
    """New ids falling between indexed ids; with ``indexed``, every other one an indexed id
    instead."""
    rng = np.random.default_rng(seed)
    at = rng.integers(0, docs, size=n).tolist()
    return [
        url_id(a) if indexed and k % 2 == 0 else url_id(a) + f"/new-{k}" for k, a in enumerate(at)
    ]


#: The mixes of asked ids: all new (a registration of new documents), half indexed.
MIXES = ("new", "half")


def _checks(url: str, docs: int) -> dict[str, float]:
    """CPU seconds of ``find_ids`` (with digests and signatures) of each size of ``CHECKS`` and
    each mix of ``MIXES``, by id tables and by statistics."""
    from neardup.core._index_idrows import find_ids
    from neardup.core.engine import DocIndex

    index = DocIndex.open(url)
    find_ids(index, asked_ids(10, docs, 1), scan=True)  # imports, first maps
    find_ids(index, asked_ids(10, docs, 2))
    out = {}
    for n in CHECKS:
        for mix in MIXES:
            asked = asked_ids(n, docs, 100 + n, indexed=mix == "half")
            want = len(set(asked[::2])) if mix == "half" else 0
            for name, scan in (("tables", False), ("stats", True)):
                start = time.process_time()
                found = find_ids(index, asked, scan=scan)
                out[f"check_{n}_{mix}_{name}"] = time.process_time() - start
                if len(found.ids) != want:
                    raise RuntimeError(f"found {len(found.ids)} of {want} ids")
    return out


def _statistics_layout(url: Path) -> None:
    """Rewrite the newest version as format_version 2: no id table listed (the log made flat
    first: an older format is only read there)."""
    _flat_layout(url)
    path = _newest_file(url)
    body = json.loads(path.read_text())
    for part in body["parts"]:
        part.pop("ids", None)
    body["format_version"] = 2
    path.write_text(json.dumps(body, sort_keys=True, indent=1) + "\n")


def _processes(url: Path, work: Path, repeat: int) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds of a one-document query (median) and of the append."""
    version = int(_newest_file(url).stem)
    query = [
        _neardup("index", "query", str(url), str(work / "one.jsonl"), "--output",
                 str(work / "answer.jsonl"), "--quiet")
        for _ in range(repeat)
    ]  # fmt: skip
    wall, cpu = statistics.median(q[0] for q in query), statistics.median(q[1] for q in query)
    got = {"query": (wall, cpu)}
    got["append"] = _neardup(
        "dedup", str(work / "new.jsonl"), "--output", str(work / "out.jsonl"),
        "--index", str(url), "--quiet",
    )  # fmt: skip
    _undo_append(url, version)
    for extra in work.glob("out.jsonl*"):
        extra.unlink()
    return got


def measure(docs: int, part_docs: int, keep: Path, work: Path, repeat: int) -> dict[str, Any]:
    """Build (or reuse) an index of ``docs`` documents under ``keep``, then time its id checks
    and whole processes, with id tables and by statistics."""
    rng = np.random.default_rng(1)
    texts = [_text(i, rng) for i in range(REAL_DOCS)]
    url = keep / f"idx-ids-{docs}"
    if not (url / "_index").exists():
        result: dict[str, Any] = {"docs": docs, "build_s": build(str(url), docs, part_docs, texts)}
    else:
        result = {"docs": docs, "build_s": None}
    original = work / "_index.kept"  # the log as built, restored at the end
    shutil.rmtree(original, ignore_errors=True)
    shutil.copytree(url / "_index", original)
    _write_jsonl(work / "one.jsonl", [("q-0", texts[7] + " changed")])
    picked = np.random.default_rng(7).choice(docs, size=min(100, docs), replace=False)
    recrawled = [url_id(i) for i in picked.tolist()]  # 100 indexed ids, crawled again
    new = [(recrawled[i] if i < len(recrawled) else url_id(docs + i) + "/x", _text(10**7 + i, rng))
           for i in range(APPEND)]  # fmt: skip
    _write_jsonl(work / "new.jsonl", new)
    try:
        result.update(_checks(str(url), docs))
        result["tables"] = _processes(url, work, repeat)
        _statistics_layout(url)
        result["stats"] = _processes(url, work, repeat)
    finally:
        shutil.rmtree(url / "_index")
        shutil.copytree(original, url / "_index")
    return result


def markdown(results: list[dict[str, Any]], command: str) -> str:
    """The section bench/RESULTS.md holds."""
    lines = [
        "## Id checks by id table (`bench.index.ids`)",
        "",
        f"{now()}; `{command}`; load average {os.getloadavg()[0]:.1f} at the end. Synthetic "
        "indexes (128 permutations, 16 bands) built through the writer in parts of 1,000,000 "
        "documents with URL-like ids interleaving across parts. *ids* = parts with id tables, "
        "*stats* = the same parts without (the id statistics path). `find_ids` with digests "
        "and signatures, CPU seconds in one process: *new* = ids between indexed ones, none "
        "indexed; *half* = every other asked id indexed. Whole `neardup` processes: CPU "
        "seconds / wall seconds.",
        "",
        "| indexed | "
        + "".join(f"{n:,} {m} ids: ids | stats | " for n in CHECKS for m in MIXES)
        + f"`index query` 1 doc: ids | stats | append {APPEND:,} (100 re-crawled): ids | stats |",
        "|---:" * (1 + 2 * len(CHECKS) * len(MIXES) + 4) + "|",
    ]  # fmt: skip

    def cell(run: tuple[float, float]) -> str:
        return f"{run[1]:.2f} / {run[0]:.2f}"

    for r in results:
        row = f"| {r['docs']:,} | " + "".join(
            f"{r[f'check_{n}_{m}_tables']:.3f} | {r[f'check_{n}_{m}_stats']:.3f} | "
            for n in CHECKS
            for m in MIXES
        )
        row += f"{cell(r['tables']['query'])} | {cell(r['stats']['query'])} | "
        row += f"{cell(r['tables']['append'])} | {cell(r['stats']['append'])} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index.ids")
    parser.add_argument("--docs", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--part-docs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="where indexes are kept")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--quick", action="store_true", help="100,000 documents only")
    args = parser.parse_args(argv)
    sizes = [100_000] if args.quick else sorted(args.docs)
    with tempfile.TemporaryDirectory(prefix="neardup-bench-ids-") as work:
        keep = args.keep or Path(work)
        results = []
        for n in sizes:
            results.append(measure(n, args.part_docs, keep, Path(work), args.repeat))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    command = "python -m bench.index.ids " + " ".join(argv or sys.argv[1:])
    print(markdown(results, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
