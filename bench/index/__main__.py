"""Persistent index benchmark: ``neardup dedup --index`` on a new dump against a rerun of all.

1. The indexed corpus: N documents of the web-like corpus (a) of ``bench.batch.corpus``, the very
   file ``bench.batch`` uses (shared through its cache, ``bench.batch.cache``).
2. The new dump: ``bench.index.batch`` writes M documents, fresh ones (with their own planted
   copies) and about 5 % exact and 5 % near copies of indexed originals.
3. Measured as subprocesses (wall time, process tree peak RSS, ``bench.batch.proctree``), one
   after the other, each ``--workers W --quiet``:

   - ``build``: ``neardup dedup CORPUS --index IDX`` (creates IDX from the survivors);
   - ``no index``: ``neardup dedup BATCH`` (the new dump alone: the baseline);
   - ``read``: ``neardup dedup BATCH --index IDX --index-mode read``;
   - ``append``: ``neardup dedup BATCH --index IDX`` (the incremental run; adds a part);
   - ``full rerun``: ``neardup dedup CORPUS BATCH`` (what users do today).

4. The ratios the issue sets targets for: append / no index (<= 1.5), full rerun / append
   (>= 5), read / append (<= 1), and the extra peak memory of the append run over the no-index
   run per indexed document (<= 200 bytes). The survivors of the batch are compared between the
   append run and the full rerun, and the planted copies of indexed documents kept are counted.

The peers (datasketch, rensa) have no persistent index: their LSH lives in one process's memory
(datasketch can keep it in a Redis or Cassandra server), so an incremental run there means
rebuilding the index from every earlier signature. Nothing of theirs is run here.

Run from the repository root::

    python -m bench.index [--docs N] [--batch M] [--repeat R] [--quick] [--markdown]

The three steps over the new dump run R times, interleaved, and the run of median wall time is
reported. Defaults (N = 1,000,000, M = 100,000, R = 3) take about 15 minutes on 2 idle cores
(plus writing the corpus once, if ``bench.batch`` has not); ``--quick`` (N = 20,000, M = 2,000,
R = 1) about a minute.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.batch.cache import cached_corpus, default_cache_dir
from bench.batch.proctree import TreeRun, run_checked
from bench.common import options
from bench.common.machine import REPO_ROOT, Start, at_start, facts
from bench.common.memory import MIB
from bench.common.options import Size

__all__ = ["Config", "Report", "main", "markdown", "run"]

SIZES = {
    "docs": Size("indexed corpus documents (N)", 1_000_000, 20_000),
    "batch": Size("documents of the new dump (M)", 100_000, 2_000),
    "repeat": Size("runs of each step over the new dump (R; the median is reported)", 3, 1),
}
#: The sources measured, digested at the start.
SOURCES = {"core/": ["core"], "app/cli/": ["app/cli"]}
#: ``bench.batch``'s datasketch prefix: the corpus file's cache name holds it (see ``_stem``).
_BATCH_PEER_DOCS = 200_000
_ID = re.compile(r'\{"id": "([^"]+)"')
_KIND = re.compile(r'"kind": "(index-exact|index-near)"')

TARGETS = {
    "append / no index, wall": "<= 1.5",
    "full rerun / append, wall": ">= 5",
    "read / append, wall": "<= 1",
    "extra peak RSS per indexed document": "<= 200 B",
}


@dataclass(frozen=True)
class Config:
    """What to run.

    Attributes:
        docs: documents of the indexed corpus (N).
        batch: documents of the new dump (M).
        repeat: runs of each step over the new dump (no index, read, append), interleaved; the
            run of median wall time is reported (the machine may be shared).
        seed: the corpora's seed.
        workers: ``neardup dedup --workers``.
        timeout: seconds before any one subprocess is killed.
        cache: where the indexed corpus is kept (None: a temporary directory, removed after).
    """

    docs: int = SIZES["docs"].full
    batch: int = SIZES["batch"].full
    repeat: int = SIZES["repeat"].full
    seed: int = 0
    workers: int = 2
    timeout: float = 3600.0
    cache: Path | None = None


@dataclass
class Measured:
    """One measured ``neardup`` run.

    Attributes:
        name: the run, for the tables.
        docs: documents in.
        tree: wall time and memory of its process tree.
        counts: its manifest's counts (dedup runs).
        stages: its manifest's seconds per stage (dedup runs).
        planted_kept: planted copies of indexed documents it kept, by kind.
        batch_kept: the ids of the new dump it kept.
        walls: the wall times of every repetition of the step (this run's among them).
    """

    name: str
    docs: int
    tree: TreeRun
    counts: dict[str, int] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)
    planted_kept: dict[str, int] = field(default_factory=dict)
    batch_kept: set[str] = field(default_factory=set)
    walls: list[float] = field(default_factory=list)


def _median_run(runs: Sequence[Measured]) -> Measured:
    """The run of median wall time (the lower middle of an even number), all walls in it."""
    ordered = sorted(runs, key=lambda m: m.tree.wall)
    chosen = ordered[(len(ordered) - 1) // 2]
    chosen.walls = [m.tree.wall for m in runs]
    return chosen


@dataclass
class Report:
    """Everything one run of ``bench.index`` measured.

    Attributes:
        command: the command line that ran the benchmark.
        start: the date, load and source digests at the start.
        corpus: ``bench.batch.corpus.PlantedCounts`` of the indexed corpus, as a dict.
        batch: ``bench.index.batch.BatchCounts`` of the new dump, as a dict.
        runs: the measured runs by key (build, no_index, read, append, full).
        index_before: ``neardup index info --json`` after the build.
        index_after: the same after the append run.
    """

    command: str
    start: Start
    corpus: dict[str, Any]
    batch: dict[str, Any]
    runs: dict[str, Measured]
    index_before: dict[str, Any]
    index_after: dict[str, Any]

    def ratio(self, a: str, b: str) -> float:
        """Wall time of run ``a`` over run ``b`` (the median runs of repeated steps)."""
        return self.runs[a].tree.wall / self.runs[b].tree.wall

    @property
    def indexed(self) -> int:
        """Documents in the index the batch runs read."""
        return int(self.index_before["rows"])

    def extra_per_doc(self, run: str, pss: bool = False) -> float:
        """Peak memory of ``run`` over the no-index run's, per indexed document (bytes)."""
        peak = "peak_tree_pss" if pss else "peak_tree_rss"
        extra = getattr(self.runs[run].tree, peak) - getattr(self.runs["no_index"].tree, peak)
        return extra / self.indexed


def _say(message: str) -> None:
    print(f"[bench.index] {message}", file=sys.stderr, flush=True)


def _python(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def _kept(out: Path) -> tuple[dict[str, int], set[str]]:
    """Planted copies of indexed documents kept in ``out``, by kind, and the kept ids of the
    new dump (``n...``)."""
    kinds: Counter[str] = Counter()
    batch: set[str] = set()
    with out.open(encoding="utf-8") as fh:
        for line in fh:
            found = _ID.match(line)
            doc = found.group(1) if found else str(json.loads(line)["id"])
            if not doc.startswith("n"):
                continue
            batch.add(doc)
            if kind := _KIND.search(line):
                kinds[kind.group(1)] += 1
    return {k: kinds[k] for k in ("index-exact", "index-near")}, batch


def _dedup(
    cfg: Config, name: str, inputs: Sequence[Path], docs: int, tmp: Path, *flags: str
) -> Measured:
    """``neardup dedup INPUTS FLAGS``, measured; its manifest and survivors read back."""
    out = tmp / f"{name}.out.jsonl"
    argv = _python("neardup", "dedup", *map(str, inputs), "--output", str(out), *flags)
    argv += ["--workers", str(cfg.workers), "--quiet"]
    _say(f"{name}: neardup dedup over {docs:,} documents {' '.join(flags)} ...")
    tree = run_checked(argv, timeout=cfg.timeout, log=tmp / name, what=name)
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    planted, batch = _kept(out)
    out.unlink()
    return Measured(name, docs, tree, manifest["counts"], manifest["seconds"], planted, batch)


def _info(idx: Path) -> dict[str, Any]:
    """``neardup index info IDX --json``."""
    done = subprocess.run(
        _python("neardup", "index", "info", str(idx), "--json"), cwd=REPO_ROOT,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"neardup index info failed ({done.returncode}): {done.stderr}")
    info: dict[str, Any] = json.loads(done.stdout)
    return info


def _stem(cfg: Config) -> str:
    """The cache name ``bench.batch`` gives the same corpus (its datasketch prefix included:
    the file does not depend on it, the name does), so both benchmarks share one file."""
    return f"batch-a-{cfg.docs}-seed{cfg.seed}-prefix{min(cfg.docs, _BATCH_PEER_DOCS)}"


def _corpus(cfg: Config, tmp: Path) -> tuple[Path, dict[str, Any]]:
    """The indexed corpus, from the cache or written now."""

    def generate(out: Path) -> dict[str, Any]:
        _say(f"writing a {cfg.docs:,}-document corpus (a) to {out} ...")
        argv = _python("bench.batch.corpus", "--out", str(out), "--docs", str(cfg.docs))
        argv += ["--seed", str(cfg.seed), "--prefix", str(min(cfg.docs, _BATCH_PEER_DOCS))]
        argv += ["--corpus", "a"]
        made = run_checked(argv, timeout=cfg.timeout, log=tmp / "gen", what="corpus")
        planted: dict[str, Any] = json.loads(made.stdout.splitlines()[-1])
        return planted

    corpus, planted = cached_corpus(cfg.cache or tmp / "cache", _stem(cfg), generate)
    if planted["cached"]:
        _say(f"using the cached corpus {corpus}")
    return corpus, planted


def run(cfg: Config, command: str) -> Report:
    """Write the corpora, run every step, read the results back; cleans up after itself."""
    start = at_start(SOURCES)
    tmp = Path(tempfile.mkdtemp(prefix="neardup-bench-index-"))
    try:
        corpus, planted = _corpus(cfg, tmp)
        batch = tmp / "batch.jsonl"
        _say(f"writing the new dump of {cfg.batch:,} documents ...")
        argv = _python("bench.index.batch", "--base", str(corpus), "--base-docs", str(cfg.docs))
        argv += ["--out", str(batch), "--docs", str(cfg.batch), "--seed", str(cfg.seed)]
        made = run_checked(argv, timeout=cfg.timeout, log=tmp / "b", what="b")
        counts: dict[str, Any] = json.loads(made.stdout.splitlines()[-1])
        built = tmp / "built"
        runs = {"build": _dedup(cfg, "build", [corpus], cfg.docs, tmp, "--index", str(built))}
        before = _info(built)
        idx = tmp / "index"  # each append adds to a fresh copy of the built index
        repeats: dict[str, list[Measured]] = {"no_index": [], "read": [], "append": []}
        steps = {
            "no_index": (),
            "read": ("--index", str(built), "--index-mode", "read"),  # adds nothing
            "append": ("--index", str(idx)),
        }
        order = list(steps)
        for k in range(cfg.repeat):  # interleaved, in a rotating order: load that drifts while
            _say(f"steps over the new dump, round {k + 1} of {cfg.repeat}")  # they run hits all
            for key in order[k % 3 :] + order[: k % 3]:
                if key == "append":
                    shutil.rmtree(idx, ignore_errors=True)
                    shutil.copytree(built, idx)
                repeats[key].append(_dedup(cfg, key, [batch], cfg.batch, tmp, *steps[key]))
        runs.update((key, _median_run(measured)) for key, measured in repeats.items())
        after = _info(idx)
        total = cfg.docs + cfg.batch
        runs["full"] = _dedup(cfg, "full", [corpus, batch], total, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Report(command, start, planted, counts, runs, before, after)


_NAMES = {
    "build": "build: `dedup CORPUS --index IDX` (creates IDX)",
    "no_index": "no index: `dedup BATCH`",
    "read": "read: `dedup BATCH --index IDX --index-mode read`",
    "append": "append: `dedup BATCH --index IDX`",
    "full": "full rerun: `dedup CORPUS BATCH`",
}


def _mib(n: float) -> str:
    return f"{n / MIB:,.0f}"


def table(report: Report) -> list[str]:
    """One row per run, then the peers' row."""
    lines = [
        "| run | docs in | wall s | CPU s | peak RSS tree MiB | peak PSS tree MiB | exact dropped "
        "| near dropped | written | planted index copies kept (exact, near) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, m in report.runs.items():
        t, c = m.tree, m.counts
        kept = (
            f"{m.planted_kept['index-exact']:,}, {m.planted_kept['index-near']:,}"
            if key != "build"
            else "-"
        )
        lines.append(
            f"| {_NAMES[key]} | {m.docs:,} | {t.wall:.1f} | {t.cpu_seconds:.1f} "
            f"| {_mib(t.peak_tree_rss)} | {_mib(t.peak_tree_pss)} | {c['exact_dropped']:,} "
            f"| {c['near_dropped']:,} | {c['written']:,} | {kept} |"
        )
    lines.append(
        "| datasketch, rensa | - | - | - | - | - | - | - | - | no persistent index: not run |"
    )
    return lines


def ratios(report: Report) -> list[tuple[str, str, str]]:
    """(what, measured, target) for each figure the issue sets a target for."""
    return [
        ("append / no index, wall", f"{report.ratio('append', 'no_index'):.2f}x",
         TARGETS["append / no index, wall"]),
        ("full rerun / append, wall", f"{report.ratio('full', 'append'):.1f}x",
         TARGETS["full rerun / append, wall"]),
        ("read / append, wall", f"{report.ratio('read', 'append'):.2f}x",
         TARGETS["read / append, wall"]),
        ("extra peak RSS per indexed document", f"{report.extra_per_doc('append'):.0f} B "
         f"(read mode {report.extra_per_doc('read'):.0f} B; PSS "
         f"{report.extra_per_doc('append', pss=True):.0f} B)",
         TARGETS["extra peak RSS per indexed document"]),
    ]  # fmt: skip


def detail_rows(report: Report) -> list[tuple[str, str]]:
    """The corpora, the index, and how the batch's survivors agree."""
    c, b = report.corpus, report.batch
    before, after = report.index_before, report.index_after
    append, full = report.runs["append"].batch_kept, report.runs["full"].batch_kept
    rows = [
        ("indexed corpus", f"{c['docs']:,} documents of corpus (a), {_mib(c['bytes'])} MiB "
         f"({c['exact']:,} exact and {c['near']:,} near copies planted)"
         + (" (from the cache)" if c.get("cached") else "")),
        ("new dump", f"{b['docs']:,} documents, {_mib(b['bytes'])} MiB: {b['index_exact']:,} "
         f"exact and {b['index_near']:,} near copies of indexed originals, {b['fresh']:,} fresh "
         f"({b['fresh_exact']:,} exact and {b['fresh_near']:,} near copies among them)"),
        ("index after the build", f"{before['rows']:,} documents, {before['parts_total']} "
         f"part(s), {before['bytes']:,} bytes ({before['bytes'] / max(before['rows'], 1):.0f} B "
         "a document)"),
        ("index after the append", f"{after['rows']:,} documents, {after['parts_total']} parts, "
         f"version {after['version']}"),
        ("batch survivors, append vs full rerun", f"both {len(append & full):,}, append only "
         f"{len(append - full):,}, full rerun only {len(full - append):,}"),
    ]  # fmt: skip
    for key, m in report.runs.items():
        stages = ", ".join(f"{k} {v:.1f}" for k, v in m.stages.items())
        rows.append((f"{key}: stage seconds", stages))
        if len(m.walls) > 1:
            rows.append((f"{key}: wall s of every round", ", ".join(f"{w:.1f}" for w in m.walls)))
    return rows


def markdown(report: Report) -> str:
    """The ``## Persistent index`` section for bench/RESULTS.md."""
    lines = ["## Persistent index (incremental dedup)", "", f"`{report.command}`", ""]
    lines += ["| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in facts(report.start, ("neardup", "pyarrow")).items()]
    lines += ["", *table(report), ""]
    lines += ["| figure | measured | target |", "|---|---:|---|"]
    lines += [f"| {what} | {value} | {target} |" for what, value, target in ratios(report)]
    lines += ["", "| detail | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in detail_rows(report)]
    lines += [
        "",
        "- wall s: the whole subprocess (interpreter start, imports, reading the index, writing "
        "the outputs and the new part). Peak RSS tree: the largest sum of VmRSS over the process "
        "and its spawn workers, polled every 50 ms (`bench.batch.proctree`); the extra memory "
        "per indexed document is (peak of the run - peak of the no-index run) / documents in "
        "the index. The steps over the new dump run R times, interleaved in a rotating order "
        "(no index, read, append; then read, append, no index; ...; every round on a fresh copy "
        "of the built index); each row is the run of median wall time.",
        "- The peers keep no index between runs: datasketch's MinHashLSH and rensa's live in "
        "the memory of one process (datasketch can put its buckets in a Redis or Cassandra "
        "server), so their incremental run is a rerun over everything (the `full rerun` row).",
    ]
    return "\n".join(lines) + "\n"


def text(report: Report) -> str:
    """The plain-text report."""
    lines = [*table(report), ""]
    lines += [f"{what}: {value} (target {target})" for what, value, target in ratios(report)]
    lines += [f"{k}: {v}" for k, v in detail_rows(report)]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = options.parser("bench.index", __doc__, SIZES, "print a RESULTS.md section")
    options.add_runs(parser, timeout=3600.0)
    options.add_cache(parser, default_cache_dir())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the report (text, or markdown with ``--markdown``)."""
    given, command = options.command_line("bench.index", argv)
    args = _parser().parse_args(given)
    docs, batch, repeat = options.sizes(args, SIZES).values()
    if docs < 1 or batch < 1 or repeat < 1:
        raise SystemExit("--docs, --batch and --repeat must be positive")
    cache = options.cache_dir(args, default_cache_dir())
    cfg = Config(docs, batch, repeat, args.seed, args.workers, args.timeout, cache)
    report = run(cfg, command)
    print(markdown(report) if args.markdown else text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
