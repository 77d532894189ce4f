"""Lookups by band key (issue 30): ``neardup index query`` of one document and appends of new
documents against big indexes, through the parts' key tables and, in the same run, through the
scan an index of the first layout takes (the same parts without key tables).

Each index is built straight through the index writer (``write_part``) with synthetic
signatures and digests, in parts of ``--part-docs`` documents (``neardup index compact``'s
default part size), plus one small part of real texts that the queried and appended documents
copy (so a lookup finds and confirms something). Measured, per size: the build (seconds a
million documents, disk bytes a document of data and of key tables), then, per layout, the wall
time of whole processes: ``neardup index query IDX ONE.jsonl`` (median of ``--repeat``), and
``neardup dedup NEW.jsonl --output OUT --index IDX`` of 1,000 and of 100,000 new documents
(each append's version and part removed afterwards, so every run sees the same index). The
first layout is the same index with its newest version rewritten as ``format_version`` 1 without
key tables (the tables stay on disk, unlisted).

Run from the repository root::

    python -m bench.index.lookups [--docs 1000000 10000000] [--markdown] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.machine import now

__all__ = ["build", "main"]

#: Documents of real text that the queries and appends copy.
REAL_DOCS = 2_000
#: The appends measured (new documents).
APPENDS = (1_000, 100_000)


def _text(i: int, rng: np.random.Generator) -> str:
    words = rng.integers(0, 50_000, size=60)
    return f"document {i} " + " ".join(f"w{w}" for w in words.tolist())


def _write_jsonl(path: Path, docs: list[tuple[str, str]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for doc_id, text in docs:
            out.write(json.dumps({"id": doc_id, "text": text}) + "\n")


def dump_id(i: int, part_docs: int) -> str:
    """The ``i``-th indexed id, named by its dump (ids of a part apart from the others')."""
    return f"dump-{i // part_docs:03d}/doc{i % part_docs:09d}"


def build(
    url: str,
    docs: int,
    part_docs: int,
    texts: list[str],
    id_of: Callable[[int], str] | None = None,
    real: str = "real/",
) -> float:
    """A synthetic index of ``docs`` documents (plus ``texts`` as a real part, ids ``real``
    + a number), the ``i``-th named ``id_of(i)`` (default: ``dump_id``); its seconds."""
    from neardup.core.engine import (
        DocIndex,
        MinhashParams,
        batch_signatures,
        commit_index,
        run_info,
        text_digests,
        write_part,
    )

    params = MinhashParams()
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    index = DocIndex.open(url, missing_ok=True)
    real = write_part(
        index, params, [f"{real}{i:06d}" for i in range(len(texts))], text_digests(texts),
        batch_signatures(texts, params), run_info("local", "bench", []),
    )  # fmt: skip
    commit_index(index, params, [real])
    for k in range(0, docs, part_docs):
        n = min(part_docs, docs - k)
        index = DocIndex.open(url)
        ids = [id_of(i) if id_of else dump_id(i, part_docs) for i in range(k, k + n)]
        sigs = rng.integers(0, 2**31 - 1, size=(n, params.num_perm), dtype=np.uint32)
        digests = rng.integers(0, 2**63, size=(n, 2), dtype=np.uint64)
        part = write_part(index, params, ids, digests, sigs, run_info("local", "bench", []))
        commit_index(index, params, [part])
        del sigs, digests, ids
        print(f"  built {k + n:,} of {docs:,}", file=sys.stderr, flush=True)
    return time.perf_counter() - start


def _neardup(*args: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of a ``neardup`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "neardup", *args], check=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _versions(url: Path) -> dict[int, Path]:
    """Every version file of the index at ``url``, both logs (docs/index.md, "The version
    log"; the seal's copy in the grouped log gives way to its flat file)."""
    found = {int(p.stem): p for p in (url / "_index" / "log").glob("*/[0-9]*.json")}
    found.update({int(p.stem): p for p in (url / "_index").glob("[0-9]*.json")})
    return found


def _latest(url: Path) -> int:
    return max(_versions(url))


def _newest_file(url: Path) -> Path:
    return _versions(url)[_latest(url)]


def _undo_append(url: Path, version: int) -> None:
    """Remove the versions after ``version`` and the parts they added (a benchmark's reset)."""
    files = _versions(url)
    keep = json.loads(files[version].read_text())
    listed = {p["name"] for p in keep["parts"]}
    for newer in range(version + 1, _latest(url) + 1):
        body = json.loads(files[newer].read_text())
        for part in body["parts"]:
            if part["name"] not in listed:
                shutil.rmtree(url / "parts" / part["name"], ignore_errors=True)
        for path in (
            url / "_index" / f"{newer:08d}.json",
            url / "_index" / "log" / f"{newer // 1000:05d}" / f"{newer:08d}.json",
        ):
            path.unlink(missing_ok=True)  # fmt: skip


def _flat_layout(url: Path) -> None:
    """The index as a neardup before format_version 4 left it: every version in the flat log
    (format_version 3 at most, no ``sealed``), the grouped log removed."""
    for version, path in sorted(_versions(url).items()):
        body = json.loads(path.read_text())
        body.pop("sealed", None)
        body["format_version"] = min(body["format_version"], 3)
        target = url / "_index" / f"{version:08d}.json"
        target.write_text(json.dumps(body, sort_keys=True, indent=1) + "\n")
    shutil.rmtree(url / "_index" / "log", ignore_errors=True)


def _first_layout(url: Path) -> None:
    """Rewrite the newest version as format_version 1: no key table (nor id table) listed (the
    log made flat first: an older format is only read there)."""
    _flat_layout(url)
    path = _newest_file(url)
    body = json.loads(path.read_text())
    for part in body["parts"]:
        part.pop("keys", None)
        part.pop("ids", None)
    body["format_version"] = 1
    path.write_text(json.dumps(body, sort_keys=True, indent=1) + "\n")


def _disk(url: Path) -> tuple[int, int]:
    body = json.loads(_newest_file(url).read_text())
    data = sum(f["bytes"] for p in body["parts"] for f in p["files"])
    keys = sum(p["keys"]["bytes"] for p in body["parts"] if "keys" in p)
    return data, keys


def _layout_runs(
    url: Path, work: Path, repeat: int, appends: Sequence[int]
) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds of a one-document query (medians) and of each append, on the index
    as it is."""
    version = _latest(url)
    query = [
        _neardup("index", "query", str(url), str(work / "one.jsonl"), "--output",
                 str(work / "answer.jsonl"), "--quiet")
        for _ in range(repeat)
    ]  # fmt: skip
    got = {
        "query": (statistics.median(q[0] for q in query), statistics.median(q[1] for q in query))
    }
    answer = json.loads((work / "answer.jsonl").read_text().splitlines()[0])
    if answer["match_count"] < 1:
        raise RuntimeError(f"the query found nothing: {answer}")
    for n in appends:
        got[f"append_{n}"] = _neardup(
            "dedup", str(work / f"new-{n}.jsonl"), "--output", str(work / f"out-{n}.jsonl"),
            "--index", str(url), "--quiet",
        )  # fmt: skip
        _undo_append(url, version)
        (work / f"out-{n}.jsonl").unlink(missing_ok=True)
        for extra in work.glob(f"out-{n}.jsonl*"):
            extra.unlink() if extra.is_file() else shutil.rmtree(extra)
    return got


def measure(
    docs: int, part_docs: int, work: Path, repeat: int, appends: Sequence[int] = APPENDS
) -> dict[str, Any]:
    """Build an index of ``docs`` documents, then time lookups in both layouts."""
    rng = np.random.default_rng(1)
    texts = [_text(i, rng) for i in range(REAL_DOCS)]
    url = work / f"idx-{docs}"
    seconds = build(str(url), docs, part_docs, texts)
    data, keys = _disk(url)
    _write_jsonl(work / "one.jsonl", [("q-0", texts[7] + " changed")])
    for n in appends:  # a few copies of indexed texts, the rest new
        new = [(f"new-{i}", texts[i] if i < 50 else _text(10**7 + i, rng)) for i in range(n)]
        _write_jsonl(work / f"new-{n}.jsonl", new)
    result: dict[str, Any] = {"docs": docs, "build_s": seconds, "data_bytes": data,
                              "keys_bytes": keys}  # fmt: skip
    result["new"] = _layout_runs(url, work, repeat, appends)
    _first_layout(url)
    result["old"] = _layout_runs(url, work, repeat, appends)
    shutil.rmtree(url)
    return result


def markdown(results: list[dict[str, Any]], command: str, appends: Sequence[int] = APPENDS) -> str:
    """The section bench/RESULTS.md holds."""
    lines = [
        "## Index lookups by band key (`bench.index.lookups`)",
        "",
        f"{now()}; `{command}`; load average {os.getloadavg()[0]:.1f} at the end. Synthetic "
        "indexes (128 permutations, 16 bands) built through the writer in parts of 1,000,000 "
        "documents (plus 2,000 real texts that the query and appends copy). Whole `neardup` "
        "processes: CPU seconds (user + system) / wall seconds; *keys* = parts with key "
        "tables, *scan* = the same parts read as the first layout (no key table).",
        "",
        "| indexed | build s / M docs | data B/doc | keys B/doc | `index query` 1 doc: keys "
        "| scan |" + "".join(f" append {n:,}: keys | scan |" for n in appends),
        "|---:" * (6 + 2 * len(appends)) + "|",
    ]

    def cell(run: tuple[float, float]) -> str:
        return f"{run[1]:.2f} / {run[0]:.2f}"

    for r in results:
        n, new, old = r["docs"], r["new"], r["old"]
        row = (
            f"| {n:,} | {r['build_s'] / n * 1e6:,.0f} | {r['data_bytes'] / n:,.0f} "
            f"| {r['keys_bytes'] / n:,.0f} | {cell(new['query'])} | {cell(old['query'])} |"
        )
        row += "".join(
            f" {cell(new[f'append_{a}'])} | {cell(old[f'append_{a}'])} |" for a in appends
        )
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index.lookups")
    parser.add_argument("--docs", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--part-docs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None, help="where the indexes are built")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--appends", type=int, nargs="+", default=list(APPENDS))
    parser.add_argument("--quick", action="store_true", help="100,000 documents only")
    args = parser.parse_args(argv)
    sizes = [100_000] if args.quick else sorted(args.docs)
    with tempfile.TemporaryDirectory(prefix="neardup-bench-lookups-", dir=args.work) as work:
        results = []
        for n in sizes:
            results.append(measure(n, args.part_docs, Path(work), args.repeat, args.appends))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    command = "python -m bench.index.lookups " + " ".join(argv or sys.argv[1:])
    print(markdown(results, command.strip(), args.appends))
    return 0


if __name__ == "__main__":
    sys.exit(main())
