"""The batch benchmark's results: what was measured, the plain-text table and the markdown.

``docs/s`` is documents in over the wall time of the whole subprocess (interpreter start,
imports, both reads of the file, writing the survivors). Peak RSS is the process tree's largest
sum of VmRSS, polled every 50 ms (``bench.batch.proctree``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.batch.corpus import POOLS
from bench.batch.proctree import TreeRun
from bench.batch.survivors import Overlap, Survivors
from bench.common.machine import Start, facts
from bench.common.memory import MIB

__all__ = [
    "DISTS",
    "SOURCES",
    "Measured",
    "Report",
    "corpus_title",
    "markdown",
    "summary_lines",
    "text",
]

#: The sources measured (``neardup dedup`` is app/cli/ over core/), digested at the start.
SOURCES = {"core/": ["core"], "app/cli/": ["app/cli"]}
#: The distributions whose versions the record lists.
DISTS = ("neardup", "numpy", "datasketch")


@dataclass
class Measured:
    """One measured dedup run.

    Attributes:
        name: what ran, for the tables.
        docs: documents in.
        tree: wall time and memory of its process tree.
        counts: read, exact_dropped, near_dropped, written (from its manifest or its report).
        stages: seconds per stage, as the run itself reported them.
        survivors: what it kept, read back from its output.
        extra: anything else the run reported.
    """

    name: str
    docs: int
    tree: TreeRun
    counts: dict[str, int]
    stages: dict[str, float]
    survivors: Survivors
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def docs_per_s(self) -> float:
        """Documents in over the subprocess's wall time."""
        return self.docs / self.tree.wall if self.tree.wall else 0.0


@dataclass
class Report:
    """Everything one run of ``bench.batch`` measured.

    Attributes:
        command: the command line that ran the benchmark.
        start: the date, load and source digests at the start of the run.
        corpus: ``bench.batch.corpus.PlantedCounts`` as a dict.
        neardup: neardup over the whole corpus.
        neardup_prefix: neardup over the datasketch prefix (None when the prefix is everything).
        peer: the datasketch recipe over the prefix.
        overlaps: survivor id agreement, by what was compared.
    """

    command: str
    start: Start
    corpus: dict[str, Any]
    neardup: Measured
    neardup_prefix: Measured | None
    peer: Measured
    overlaps: dict[str, Overlap]

    @property
    def same_n(self) -> Measured:
        """The neardup run over the peer's documents."""
        return self.neardup_prefix or self.neardup


def _mib(n: float) -> str:
    return f"{n / MIB:,.0f}"


def _row(m: Measured) -> str:
    t, s = m.tree, m.survivors
    return (
        f"| {m.name} | {m.docs:,} | {t.wall:.1f} | {t.cpu_seconds:.1f} | {m.docs_per_s:,.0f} "
        f"| {_mib(t.peak_tree_rss)} "
        f"| {_mib(t.peak_tree_pss)} | {_mib(t.maxrss_single)} | {m.counts['exact_dropped']:,} | "
        f"{m.counts['near_dropped']:,} | {s.written:,} | {s.near:,} | {s.exact:,} |"
    )


def table(report: Report) -> list[str]:
    """The main table, one row per run."""
    lines = [
        "| run | docs | wall s | CPU s | docs/s | peak RSS tree MiB | peak PSS tree MiB | max 1 "
        "process MiB | exact dropped | near dropped | written | planted near kept | planted exact "
        "kept |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    runs = [report.neardup, report.neardup_prefix, report.peer]
    return lines + [_row(m) for m in runs if m is not None]


def summary_lines(report: Report) -> list[str]:
    """The ratios and the memory against the corpus size."""
    c, nd, peer, same = report.corpus, report.neardup, report.peer, report.same_n
    full = c["docs"] / peer.docs_per_s if peer.docs_per_s else 0.0
    out = [
        f"neardup dedup: {nd.docs_per_s:,.0f} docs/s, peak RSS {_mib(nd.tree.peak_tree_rss)} MiB "
        f"(N={nd.docs:,}); datasketch: {peer.docs_per_s:,.0f} docs/s, peak RSS "
        f"{_mib(peer.tree.peak_tree_rss)} MiB (first {peer.docs:,}); neardup is "
        f"{nd.docs_per_s / peer.docs_per_s:.1f}x faster",
        f"same documents ({peer.docs:,}): neardup {same.docs_per_s:,.0f} docs/s, "
        f"{_mib(same.tree.peak_tree_rss)} MiB vs datasketch {peer.docs_per_s:,.0f} docs/s, "
        f"{_mib(peer.tree.peak_tree_rss)} MiB: neardup {same.docs_per_s / peer.docs_per_s:.1f}x "
        f"faster; peak RSS neardup / datasketch "
        f"{same.tree.peak_tree_rss / peer.tree.peak_tree_rss:.2f}x (PSS "
        f"{same.tree.peak_tree_pss / peer.tree.peak_tree_pss:.2f}x)",
        f"corpus {_mib(c['bytes'])} MiB; neardup's peak RSS (tree) is "
        f"{100 * nd.tree.peak_tree_rss / c['bytes']:.0f} % of it (PSS "
        f"{100 * nd.tree.peak_tree_pss / c['bytes']:.0f} %, main process alone "
        f"{100 * nd.tree.maxrss_single / c['bytes']:.0f} %)",
    ]
    if peer.docs < c["docs"]:
        out.append(
            f"datasketch at N={c['docs']:,}: extrapolated {full:,.0f} s at its prefix rate "
            f"(not run: over the time budget)"
        )
    return out


def corpus_rows(report: Report) -> list[tuple[str, str]]:
    """What the corpus holds."""
    c = report.corpus
    return [
        ("documents", f"{c['docs']:,} ({_mib(c['bytes'])} MiB JSON Lines, {c['bytes']:,} bytes)"),
        ("originals (a correct dedup keeps exactly these)", f"{c['originals']:,}"),
        ("planted exact copies", f"{c['exact']:,}"),
        (
            "planted near copies",
            f"{c['near']:,} (true Jaccard of a sample of {min(c['near'], 300)}: mean "
            f"{c['near_jaccard_mean']:.3f}, min {c['near_jaccard_min']:.3f})",
        ),
        (
            f"first {c['prefix']:,} (the datasketch input)",
            f"{c['prefix_originals']:,} originals, {c['prefix_exact']:,} exact, "
            f"{c['prefix_near']:,} near",
        ),
        (
            "generated from",
            f"{c['pool_docs']:,} {POOLS[c.get('corpus', 'c')][1]} texts cut into "
            f"{c['pool_sentences']:,} sentences, spliced; {c['seconds']:.1f} s"
            + (" (an earlier run; read from the cache)" if c.get("cached") else ""),
        ),
    ]


def corpus_title(report: Report) -> str:
    """Which corpus a report is on, as its section says."""
    key = report.corpus.get("corpus", "c")
    return {"c": "Corpus (c): ASCII", "a": "Corpus (a): web-like text"}[key]


def detail_rows(report: Report) -> list[tuple[str, str]]:
    """Stage times, memory readings and survivor agreement."""
    rows: list[tuple[str, str]] = []
    for m in (report.neardup, report.neardup_prefix, report.peer):
        if m is None:
            continue
        stages = ", ".join(f"{k} {v:.1f}" for k, v in m.stages.items())
        t = m.tree
        rows.append((f"{m.name}: stage seconds", stages))
        rows.append(
            (
                f"{m.name}: memory",
                f"peak tree VmRSS {_mib(t.peak_tree_rss)} MiB ({t.peak_tree_processes} processes; "
                f"Pss {_mib(t.peak_tree_pss)} MiB; "
                f"up to {t.max_processes} alive), main VmHWM {_mib(t.main_hwm)} MiB, wait4 "
                f"ru_maxrss {_mib(t.maxrss_single)} MiB, {t.polls} polls",
            )
        )
    extra = report.peer.extra
    rows.append(
        (
            "datasketch LSH and candidates",
            f"b={extra['bands']}, r={extra['rows']}; {extra['candidate_pairs']:,} candidate pairs, "
            f"{extra['unconfirmed_pairs']:,} with MinHash.jaccard < 0.8 (merged anyway); "
            f"written {extra['written_if_confirmed']:,} had they been confirmed (untimed)",
        )
    )
    for what, o in report.overlaps.items():
        rows.append((what, f"both {o.both:,}, only first {o.only_a:,}, only second {o.only_b:,}"))
    return rows


def text(report: Report) -> str:
    """The plain-text report."""
    lines = [
        f"Batch dedup benchmark, {corpus_title(report)}, N={report.corpus['docs']:,} "
        f"(started {report.start.date})",
        "",
    ]
    lines += [*table(report), "", *summary_lines(report), ""]
    lines += [f"{k}: {v}" for k, v in corpus_rows(report) + detail_rows(report)]
    return "\n".join(lines)


def markdown(reports: list[Report], notes: list[str]) -> str:
    """The ``## Batch dedup`` section for bench/RESULTS.md: one subsection per corpus."""
    lines = ["## Batch dedup", "", f"- Command, from the repository root: `{reports[0].command}`"]
    for report in reports:
        lines += ["", f"### {corpus_title(report)}", ""]
        record = facts(report.start, DISTS)
        lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in record.items()]
        lines += ["", *table(report), ""] + [f"- {s}" for s in summary_lines(report)]
        lines += ["", "| corpus | |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in corpus_rows(report)]
        lines += ["", "| detail | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in detail_rows(report)]
    lines += ["", "How to read it:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
