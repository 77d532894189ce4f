"""Incremental Spark benchmark: ``neardup dedup --engine spark --index`` on a new dump.

1. The indexed corpus: the first N documents of the batch benchmark's web-like corpus (a) (the
   cached million of ``bench.batch`` when there, else written); the new dump: the next M
   documents, of which 5 % are replaced by exact and 5 % by near copies (a few words changed)
   of indexed documents, under new ids.
2. The index is built from the N documents by the local engine (the same format either way).
3. Measured as subprocesses (wall time, process tree peak RSS, ``bench.batch.proctree``), on
   ``--spark-master local[2]``: ``no index`` (the new dump alone), ``read``
   (``--index-mode read``) and ``append`` (the incremental run; adds a part). The survivors of
   ``read`` and ``append`` must equal the local engine's ``read`` run (checked).
4. Per indexed document: the bytes a probe reads (the ``id``, ``digest`` and ``bands`` column
   chunks of the index's Parquet files) and the ``signature`` bytes (read for the files holding
   candidates), and the index stage's seconds and shuffle bytes (the manifest's).

Run from the repository root::

    python -m bench.spark.incremental [--docs N] [--batch M] [--quick] [--markdown]

Defaults: N = 200,000, M = 20,000 (about 10 minutes on 2 shared cores); ``--quick``: N = 20,000,
M = 2,000.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.batch.cache import default_cache_dir
from bench.batch.proctree import TreeRun, run_checked
from bench.common import options
from bench.common.machine import at_start, facts
from bench.common.options import Size
from bench.spark.engines import run_dedup

__all__ = ["Config", "main", "run"]

SIZES = {
    "docs": Size("indexed documents (N)", 200_000, 20_000),
    "batch": Size("documents of the new dump (M)", 20_000, 2_000),
}
SOURCES = {"app/spark": ["app/spark"], "core": ["core"]}
DISTS = ["pyspark", "numpy", "pyarrow"]
#: The index columns a probe reads, and the one read for candidates only.
PROBED, CONFIRMED = ("id", "digest", "bands"), ("signature",)


@dataclass(frozen=True)
class Config:
    """Sizes, seed, Spark master and driver memory, local workers (the build)."""

    docs: int = SIZES["docs"].full
    batch: int = SIZES["batch"].full
    seed: int = 0
    master: str = "local[2]"
    driver_memory: str = "4g"
    workers: int = 2
    timeout: float = 3600.0


@dataclass
class Runs:
    """What was measured."""

    trees: dict[str, TreeRun] = field(default_factory=dict)
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)
    survivors: dict[str, set[str]] = field(default_factory=dict)
    columns: dict[str, int] = field(default_factory=dict)
    index_rows: int = 0
    index_files: int = 0


def _say(message: str) -> None:
    print(f"[bench.spark.incremental] {message}", file=sys.stderr, flush=True)


def _source(cfg: Config, tmp: Path) -> Path:
    """A web-like corpus of at least N + M documents (the cached million when there)."""
    for cached in sorted(default_cache_dir().glob("batch-a-1000000-seed0-*.jsonl")):
        if cfg.docs + cfg.batch <= 1_000_000:
            _say(f"using the cached corpus {cached}")
            return cached
    out = tmp / "source.jsonl"
    _say(f"writing a {cfg.docs + cfg.batch:,}-document corpus ...")
    argv = [sys.executable, "-m", "bench.batch.corpus", "--out", str(out)]
    argv += ["--docs", str(cfg.docs + cfg.batch), "--seed", str(cfg.seed)]
    run_checked(argv, timeout=cfg.timeout, log=tmp / "gen", what="corpus")
    return out


def _near(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    for _ in range(max(1, len(words) // 50)):
        words[rng.randrange(len(words))] = f"w{rng.randrange(10**6)}"
    return " ".join(words)


def _split(cfg: Config, source: Path, indexed: Path, batch: Path) -> None:
    """The first N documents to ``indexed``; the next M to ``batch``, 10 % of them replaced by
    exact and near copies of indexed documents."""
    rng = random.Random(cfg.seed)
    kept: list[str] = []
    with source.open(encoding="utf-8") as src, indexed.open("w", encoding="utf-8") as out:
        for n, line in enumerate(src):
            if n == cfg.docs:
                break
            out.write(line)
            if rng.random() < 0.2:
                kept.append(line)
        rest = [line for line, _ in zip(src, range(cfg.batch), strict=False)]
    with batch.open("w", encoding="utf-8") as out:
        for n, line in enumerate(rest):
            roll = rng.random()
            if roll < 0.1 and kept:
                row = json.loads(rng.choice(kept))
                text = row["text"] if roll < 0.05 else _near(rng, row["text"])
                line = json.dumps({**row, "id": f"copy-{n}", "text": text}) + "\n"
            out.write(line)


def _neardup(cfg: Config, tmp: Path, label: str, args: list[str], spark: bool) -> TreeRun:
    _say(f"{label} ...")
    return run_dedup(cfg, args, spark=spark, log=tmp / label, what=label)


def _ids(output: Path) -> set[str]:
    files = sorted(output.glob("part-*")) if output.is_dir() else [output]
    found = set()
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            found.add(json.loads(line)["id"])
    return found


def _columns(index: Path) -> tuple[dict[str, int], int, int]:
    """Compressed bytes per index column, rows and files (from the Parquet footers)."""
    import pyarrow.parquet as pq

    from neardup.core.engine import DocIndex

    opened = DocIndex.open(str(index))
    sizes: dict[str, int] = {}
    files = 0
    for part in opened.parts:
        for f in part.files:
            files += 1
            meta = pq.ParquetFile(index / f.path).metadata
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for c in range(group.num_columns):
                    column = group.column(c)
                    name = column.path_in_schema
                    sizes[name] = sizes.get(name, 0) + column.total_compressed_size
    return sizes, opened.rows, files


def run(cfg: Config) -> tuple[Any, Runs]:
    """Build the index, run the three Spark runs and the local check; cleans up."""
    start = at_start(SOURCES)
    tmp = Path(tempfile.mkdtemp(prefix="neardup-bench-incremental-"))
    runs = Runs()
    try:
        indexed, batch, index = tmp / "indexed.jsonl", tmp / "batch.jsonl", tmp / "idx"
        _split(cfg, _source(cfg, tmp), indexed, batch)
        build = [str(indexed), "--output", str(tmp / "built.jsonl"), "--index", str(index)]
        runs.trees["build (local)"] = _neardup(cfg, tmp, "build", build, spark=False)
        runs.columns, runs.index_rows, runs.index_files = _columns(index)
        local = [str(batch), "--output", str(tmp / "local.jsonl"), "--index", str(index)]
        runs.trees["read (local)"] = _neardup(
            cfg, tmp, "local-read", [*local, "--index-mode", "read"], spark=False
        )
        runs.survivors["read (local)"] = _ids(tmp / "local.jsonl")
        for label, extra in (
            ("no index", []),
            ("read", ["--index", str(index), "--index-mode", "read"]),
            ("append", ["--index", str(index)]),
        ):
            out = tmp / f"{label.replace(' ', '-')}.jsonl"
            runs.trees[label] = _neardup(
                cfg, tmp, label.replace(" ", "-"), [str(batch), "--output", str(out), *extra], True
            )
            runs.manifests[label] = json.loads(
                Path(f"{out}.manifest.json").read_text(encoding="utf-8")
            )
            runs.survivors[label] = _ids(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for label in ("read", "append"):
        if runs.survivors[label] != runs.survivors["read (local)"]:
            raise RuntimeError(f"spark {label} and the local engine disagree on the survivors")
    return start, runs


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def report(cfg: Config, command: str, markdown: bool) -> str:
    """Run and render the report (a RESULTS.md section with ``markdown``)."""
    start, runs = run(cfg)
    lines = [
        "## Incremental dedup on Spark",
        "",
        f"- Command, from the repository root: `{command}`",
    ]
    lines.append("")
    if markdown:
        lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in facts(start, DISTS).items()]
        lines.append("")
    lines += [
        "| run | wall s | peak RSS (tree) | written | seconds per stage |",
        "|---|---:|---:|---:|---|",
    ]
    for label, tree in runs.trees.items():
        manifest = runs.manifests.get(label, {})
        written = manifest.get("counts", {}).get("written")
        stages = ", ".join(f"{k} {v:.1f}" for k, v in manifest.get("seconds", {}).items())
        shown = "" if written is None else f"{written:,}"
        lines.append(
            f"| {label} | {tree.wall:.1f} | {_mib(tree.peak_tree_rss)} | {shown} | {stages} |"
        )
    n = max(runs.index_rows, 1)
    probed = sum(runs.columns.get(c, 0) for c in PROBED)
    confirmed = sum(runs.columns.get(c, 0) for c in CONFIRMED)
    append = runs.manifests["append"]
    record = append.get("index", {})
    shuffled = append.get("shuffle_bytes", {}).get("index", {})
    index_seconds = append["seconds"].get("index", 0.0)
    walls = {k: t.wall for k, t in runs.trees.items()}
    lines += [
        "",
        f"- index: {runs.index_rows:,} documents in {runs.index_files} file(s); new dump "
        f"{cfg.batch:,} documents (5 % exact, 5 % near copies of indexed ones)",
        f"- read per indexed document by the probe (id, digest, bands; zstd): {probed / n:.1f} "
        f"bytes ({', '.join(f'{c} {runs.columns.get(c, 0) / n:.1f}' for c in PROBED)}); "
        f"signature column {confirmed / n:.1f} bytes (read in the files holding candidates)",
        f"- index stage: {index_seconds:.1f} s ({index_seconds * 2e6 / n:.1f} core-µs per indexed "
        f"document on 2 cores), shuffle write {_mib(shuffled.get('write', 0))}, read "
        f"{_mib(shuffled.get('read', 0))}; broadcast {record.get('broadcast')}, "
        f"{record.get('candidates', 0):,} candidate pairs, "
        f"{record.get('indexed_rows_matched', 0):,} indexed documents matched",
        f"- append / no index: x{walls['append'] / walls['no index']:.2f}; read / append: "
        f"x{walls['read'] / walls['append']:.2f}",
        "- the survivors of read and append equal the local engine's read run (checked)",
    ]
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = options.parser("bench.spark.incremental", __doc__, SIZES, "print a RESULTS.md section")
    options.add_spark(parser, workers="the local build's --workers")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the report."""
    given, command = options.command_line("bench.spark.incremental", argv)
    args = _parser().parse_args(given)
    docs, batch = options.sizes(args, SIZES).values()
    cfg = Config(
        docs, batch, args.seed, args.spark_master, args.driver_memory, args.workers, args.timeout
    )
    print(report(cfg, command, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
