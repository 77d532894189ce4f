"""Spark benchmark: ``neardup dedup --engine spark --spark-master local[2]`` against
``--engine local --workers 2`` on the same corpus.

1. ``bench.batch.corpus`` writes the batch benchmark's seeded web-like corpus (non-ASCII text,
   5 % planted exact and 5 % near copies) of N documents, in its own process.
2. Each engine runs as a subprocess (``python -m neardup dedup ...``): wall time, docs/s, the
   process tree's peak RSS and PSS (``bench.batch.proctree``: for Spark the tree holds the JVM
   and its Python workers), CPU seconds, and the seconds per stage from its manifest.
3. The outputs are read back: the surviving ids and their ``minhash_cluster`` tags must be
   identical (the benchmark fails otherwise).

Run from the repository root::

    python -m bench.spark [--docs N] [--quick] [--markdown] [--driver-memory 4g]

Defaults: N = 1,000,000 (about 2 GiB of JSON Lines); ``--quick``: N = 20,000.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.batch.proctree import TreeRun, run_checked
from bench.common import options
from bench.common.machine import at_start, facts
from bench.common.options import Size
from bench.spark.engines import run_dedup

__all__ = ["Config", "main", "run"]

SIZES = {"docs": Size("corpus documents (N)", 1_000_000, 20_000)}
SOURCES = {"app/spark": ["app/spark"], "core": ["core"]}
DISTS = ["pyspark", "numpy", "pyarrow"]


@dataclass(frozen=True)
class Config:
    """What to run: corpus size and seed, local workers, Spark master and driver memory."""

    docs: int = SIZES["docs"].full
    seed: int = 0
    workers: int = 2
    master: str = "local[2]"
    driver_memory: str = "4g"
    timeout: float = 3600.0


@dataclass
class Side:
    """One engine's run."""

    label: str
    tree: TreeRun
    manifest: dict[str, Any]
    tags: dict[str, str]


def _say(message: str) -> None:
    print(f"[bench.spark] {message}", file=sys.stderr, flush=True)


def _tags(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        row = json.loads(line)
        out[row["id"]] = row["meta"]["minhash_cluster"]
    return out


def _run(cfg: Config, corpus: Path, tmp: Path, spark: bool) -> Side:
    """One engine's run over ``corpus`` (Spark's output is a directory of part files)."""
    name = "spark" if spark else "local"
    flag = f"--spark-master {cfg.master}" if spark else f"--workers {cfg.workers}"
    out = tmp / f"{name}.jsonl"
    _say(f"{name} engine, {flag} ...")
    args = [str(corpus), "--output", str(out)]
    tree = run_dedup(cfg, args, spark=spark, log=tmp / name[0], what=name)
    manifest = json.loads((tmp / f"{name}.jsonl.manifest.json").read_text(encoding="utf-8"))
    parts = sorted(out.glob("part-*")) if spark else [out]
    lines = [line for part in parts for line in part.read_text(encoding="utf-8").splitlines()]
    if spark:
        shutil.rmtree(out)
    else:
        out.unlink()
    return Side(f"--engine {name} {flag}", tree, manifest, _tags(lines))


def run(cfg: Config) -> tuple[Any, Side, Side, dict[str, Any]]:
    """Write the corpus, run both engines; returns (start, local, spark, planted counts)."""
    start = at_start(SOURCES)
    tmp = Path(tempfile.mkdtemp(prefix="neardup-bench-spark-"))
    try:
        corpus = tmp / "corpus.jsonl"
        _say(f"writing a {cfg.docs:,}-document corpus ...")
        argv = [sys.executable, "-m", "bench.batch.corpus", "--out", str(corpus)]
        argv += ["--docs", str(cfg.docs), "--seed", str(cfg.seed)]
        made = run_checked(argv, timeout=cfg.timeout, log=tmp / "gen", what="corpus")
        planted = json.loads(made.stdout.strip().splitlines()[-1])
        planted["bytes"] = corpus.stat().st_size
        local = _run(cfg, corpus, tmp, spark=False)
        spark = _run(cfg, corpus, tmp, spark=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return start, local, spark, planted


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def _rows(cfg: Config, local: Side, spark: Side) -> list[str]:
    out = [
        "| engine | wall s | docs/s | peak RSS (tree) | peak PSS (tree) | CPU s | written |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side in (local, spark):
        t = side.tree
        # wait4 sees neither the JVM (py4j never reaps it) nor its Python workers: no CPU s.
        cpu = f"{t.cpu_seconds:.1f}" if side is local else "n/a"
        written = side.manifest["counts"]["written"]
        out.append(
            f"| {side.label} | {t.wall:.1f} | {cfg.docs / t.wall:,.0f} | {_mib(t.peak_tree_rss)} "
            f"| {_mib(t.peak_tree_pss)} | {cpu} | {written:,} |"
        )
    return out


def _stages(cfg: Config, local: Side, spark: Side) -> list[str]:
    out = ["| engine | seconds per stage (from the manifest) |", "|---|---|"]
    for side in (local, spark):
        stages = ", ".join(f"{k} {v:.1f}" for k, v in side.manifest["seconds"].items())
        out.append(f"| {side.label} | {stages} |")
    shuffled = spark.manifest.get("shuffle_bytes", {})
    if shuffled:
        out += [
            "",
            "| Spark stage | seconds | shuffle write | bytes / document |",
            "|---|---:|---:|---:|",
        ]
        for stage, seconds in spark.manifest["seconds"].items():
            written = shuffled.get(stage, {}).get("write", 0)
            out.append(f"| {stage} | {seconds:.1f} | {_mib(written)} | {written / cfg.docs:,.0f} |")
    return out


def report(cfg: Config, command: str, markdown: bool) -> str:
    """Run and render the report (a RESULTS.md section with ``markdown``)."""
    start, local, spark, planted = run(cfg)
    identical = local.tags == spark.tags
    if not identical:
        raise RuntimeError("the engines disagree on the survivors or their tags")
    lt, st = local.tree, spark.tree
    summary = [
        f"survivors and tags identical: {identical} ({len(local.tags):,} survivors)",
        f"spark / local: wall x{st.wall / lt.wall:.2f}, "
        f"peak RSS x{st.peak_tree_rss / max(lt.peak_tree_rss, 1):.2f}",
        f"spark: {spark.manifest['counts']['edges']:,} bucket edges, "
        f"{spark.manifest['component_rounds']} large/small-star rounds, "
        f"{spark.manifest['clusters']:,} clusters (local {local.manifest['clusters']:,})",
        f"corpus: {cfg.docs:,} documents, {planted['bytes'] / 2**20:,.0f} MiB of JSON Lines, "
        f"driver memory {cfg.driver_memory}",
    ]
    lines = ["## Batch on Spark", "", f"- Command, from the repository root: `{command}`", ""]
    if markdown:
        lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in facts(start, DISTS).items()]
        lines.append("")
    lines += [*_rows(cfg, local, spark), "", *_stages(cfg, local, spark), ""]
    lines += [f"- {s}" for s in summary]
    lines += [
        "",
        "- Peak RSS (tree) sums VmRSS over the process and all descendants: for Spark the "
        "driver's Python, the JVM (driver and executors in local mode) and the Python workers.",
        "- CPU s is from wait4 (the process and the children it reaped): the Spark run's JVM "
        "and Python workers are not reaped by the process measured, so it is not given.",
    ]
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = options.parser("bench.spark", __doc__, SIZES, "print a RESULTS.md section")
    options.add_spark(parser, workers="--engine local --workers")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the report."""
    given, command = options.command_line("bench.spark", argv)
    args = _parser().parse_args(given)
    (docs,) = options.sizes(args, SIZES).values()
    cfg = Config(docs, args.seed, args.workers, args.spark_master, args.driver_memory, args.timeout)
    print(report(cfg, command, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
