"""What the signature benchmark ran and measured, and its text and markdown reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.common.corpora import CORPORA
from bench.common.machine import Start, facts, load_average
from bench.signatures.contenders import (
    DATASKETCH,
    LABELS,
    NEARDUP,
    NEARDUP_NUMPY,
    NUM_PERM,
    RENSA,
    RENSA_BULK,
)
from bench.signatures.workers import WorkerTimes
from bench.signatures.workers import lines as worker_lines

#: The kernel's modules: their digest says which kernel was measured.
KERNEL_SOURCES = {
    "kernel (core/_tokens, _fnv, _permute, _jit, _compiled, _signatures)": [
        "core/_tokens.py",
        "core/_fnv.py",
        "core/_permute.py",
        "core/_jit.py",
        "core/_compiled.py",
        "core/_signatures.py",
    ]
}
#: The peers every ratio is quoted against, in order.
PEERS = (RENSA_BULK, RENSA, DATASKETCH)
#: The corpora the stage split and the (a)/(c) ratio are quoted for.
WEB, ASCII = "web", "ascii"


@dataclass(frozen=True)
class Config:
    """What to run.

    Attributes:
        docs: documents of each corpus in the single-process comparison.
        worker_docs: documents of corpus (a) in the workers=2 vs workers=1 comparison.
        repeats: timed repeats of every case; medians are reported.
        seed: the corpus seed.
        round_robin: interleave the cases in every repeat, instead of timing all repeats of a
            case back to back.
        corpora: the corpus keys (``bench.common.corpora.CORPORA``), in order.
    """

    docs: int
    worker_docs: int
    repeats: int
    seed: int
    round_robin: bool
    corpora: tuple[str, ...]


@dataclass(frozen=True)
class CorpusFacts:
    """What one corpus holds."""

    label: str
    docs: int
    megabytes: float
    shingles: int
    non_ascii_docs: int


#: A stage split: median seconds per stage (or None), and a note.
Split = tuple[dict[str, float] | None, str]


@dataclass
class Report:
    """Everything measured, in seconds unless a name says otherwise."""

    config: Config
    command: str
    #: CPU time over wall time of the single-process sections: ~1.0 on an idle core, lower when
    #: other processes competed for it (the timings are then inflated).
    cpu_share: float = 0.0
    start: Start = field(default_factory=lambda: Start("", ""))
    jit_loaded: bool = False
    corpora: dict[str, CorpusFacts] = field(default_factory=dict)
    medians: dict[str, dict[str, float]] = field(default_factory=dict)
    splits: dict[str, dict[str, Split]] = field(default_factory=dict)
    workers: WorkerTimes | None = None
    #: Per corpus: peak MiB of one call over the corpus, and over it repeated ``memory_times``.
    memory: dict[str, tuple[float, float]] = field(default_factory=dict)
    memory_times: int = 4
    peak_rss_mib: float = 0.0
    #: neardup on corpora (a) and (c), interleaved: median seconds per corpus key.
    web_ascii: dict[str, float] = field(default_factory=dict)


# --- facts ------------------------------------------------------------------------------------


def machine_facts(report: Report) -> dict[str, str]:
    """Date, machine, load, versions and the kernel's digest, for the record."""
    out = facts(report.start, ("numpy", "numba", "datasketch", "rensa"))
    out["compiled kernels loaded"] = "yes" if report.jit_loaded else "no (numpy kernel only)"
    out["CPU time / wall time, single-process sections"] = f"{report.cpu_share:.2f}"
    return out


# --- numbers ----------------------------------------------------------------------------------


def short(key: str) -> str:
    """``"(a)"`` for the web corpus, and so on: the letter its label starts with."""
    return CORPORA[key].label.split(" ", 1)[0]


def ratio(report: Report, key: str, case: str) -> float:
    """The case's median time over neardup's, on corpus ``key``."""
    return report.medians[key][case] / report.medians[key][NEARDUP]


def web_over_ascii(report: Report, case: str = NEARDUP) -> tuple[float, float] | None:
    """Corpus (a)'s time over corpus (c)'s, as is and per shingle; None without both."""
    if WEB not in report.medians or ASCII not in report.medians:
        return None
    time_ratio = report.medians[WEB][case] / report.medians[ASCII][case]
    shingles = report.corpora[WEB].shingles / report.corpora[ASCII].shingles
    return time_ratio, time_ratio / shingles


def interleaved_web_over_ascii(report: Report) -> tuple[float, float] | None:
    """The dedicated interleaved (a)/(c) measurement, as is and per shingle; None without it."""
    if not report.web_ascii:
        return None
    time_ratio = report.web_ascii[WEB] / report.web_ascii[ASCII]
    return time_ratio, time_ratio * report.corpora[ASCII].shingles / report.corpora[WEB].shingles


# --- output -----------------------------------------------------------------------------------


def print_text(report: Report) -> None:
    """The human-readable report."""
    c = report.config
    order = "round-robin" if c.round_robin else "each case's repeats back to back"
    print(f"signatures: {NUM_PERM} permutations, 5-word shingles; medians of {c.repeats} ({order})")
    for key, f in report.corpora.items():
        print(
            f"{f.label}: {f.docs} docs, {f.megabytes:.1f} MB UTF-8, {f.shingles} shingles, "
            f"{100 * f.non_ascii_docs / max(f.docs, 1):.0f} % of docs with non-ASCII"
        )
        for name, seconds in report.medians[key].items():
            note = "" if name == NEARDUP else f"  {ratio(report, key, name):5.2f}x neardup"
            print(f"  {seconds:7.3f} s  {f.docs / seconds:7.0f} docs/s  {LABELS[name]}{note}")
        for path, (split, split_note) in report.splits[key].items():
            if split is None:
                print(f"  split ({path}): {split_note}")
                continue
            total = sum(split.values())
            shares = ", ".join(f"{stage} {100 * s / total:.0f} %" for stage, s in split.items())
            note = f" [{split_note}]" if split_note else ""
            print(f"  split ({path}, {total:.3f} s): {shares}{note}")
    for case in (NEARDUP, NEARDUP_NUMPY):
        if (r := web_over_ascii(report, case)) is not None:
            print(f"(a)/(c) time, {case}: {r[0]:.2f}x ({r[1]:.2f}x per shingle)")
    if (r := interleaved_web_over_ascii(report)) is not None:
        print(f"(a)/(c) time, neardup, interleaved: {r[0]:.2f}x ({r[1]:.2f}x per shingle)")
    if report.workers is not None:
        print("\n".join(worker_lines(report.workers, c.worker_docs, markdown=False)))
    for key, (one, times) in report.memory.items():
        print(
            f"peak memory of one signatures() call, {short(key)}: {one:.0f} MiB; "
            f"{times:.0f} MiB over the corpus x{report.memory_times} (tracemalloc)"
        )
    print(f"load average: {report.start.load} at start, {load_average()} at end; ", end="")
    print(f"CPU/wall of the single-process sections {report.cpu_share:.2f}")


def markdown(report: Report, facts: dict[str, str]) -> str:
    """The run as markdown tables, to paste into bench/RESULTS.md."""
    c = report.config
    keys = list(report.corpora)
    heads = " | ".join(short(k) for k in keys)
    rule = "|---|" + "---:|" * len(keys)
    lines = ["| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in facts.items()]
    lines += [f"| command | `{report.command}` |", ""]
    lines += ["| corpus | docs | MB (UTF-8) | 5-word shingles | docs with non-ASCII |"]
    lines += ["|---|---:|---:|---:|---:|"]
    for f in report.corpora.values():
        lines.append(
            f"| {f.label} | {f.docs} | {f.megabytes:.1f} | {f.shingles:,} | "
            f"{100 * f.non_ascii_docs / max(f.docs, 1):.0f} % |"
        )
    order = "round-robin" if c.round_robin else "repeats of each case back to back"
    lines += [
        "",
        f"Seconds, median of {c.repeats} ({order}), {NUM_PERM} permutations, one process:",
        "",
        f"| contender | {heads} |",
        rule,
    ]
    for name in LABELS:
        cells = " | ".join(f"{report.medians[k][name]:.3f}" for k in keys)
        lines.append(f"| {LABELS[name]} | {cells} |")
    lines += ["", "Time / neardup's time (higher: neardup faster):", "", f"| contender | {heads} |"]
    lines.append(rule)
    for name in (NEARDUP_NUMPY, *PEERS):
        cells = " | ".join(f"{ratio(report, k, name):.2f}x" for k in keys)
        lines.append(f"| {LABELS[name]} | {cells} |")
    ratios = [
        f"{case} {r[0]:.2f}x ({r[1]:.2f}x per shingle)"
        for case in (NEARDUP, NEARDUP_NUMPY)
        if (r := web_over_ascii(report, case)) is not None
    ]
    if (r := interleaved_web_over_ascii(report)) is not None:
        calls = 3 * c.repeats
        ratios.append(f"neardup interleaved, {calls} calls each, {r[0]:.2f}x ({r[1]:.2f}x/shingle)")
    if ratios:
        lines += ["", f"Corpus (a) time / corpus (c) time: {'; '.join(ratios)}."]
    lines += _split_table(report, keys)
    if report.workers is not None:
        lines += ["", *worker_lines(report.workers, c.worker_docs, markdown=True)]
    if report.memory:
        lines += [
            "",
            "Peak memory of one `signatures()` call, above the memory in use before it "
            "(tracemalloc: Python objects and numpy buffers; the result included, the input not):",
            "",
            f"| corpus | {report.config.docs} docs | the same x{report.memory_times} |",
            "|---|---:|---:|",
        ]
        for key, (one, times) in report.memory.items():
            lines.append(f"| {CORPORA[key].label} | {one:.0f} MiB | {times:.0f} MiB |")
    lines += ["", f"Peak RSS of the benchmark process: {report.peak_rss_mib:.0f} MiB"]
    if report.workers is not None and report.workers.worker_peak_rss_mib is not None:
        peak = report.workers.worker_peak_rss_mib
        lines[-1] += f"; largest warm-pool worker: {peak:.0f} MiB (VmHWM)"
    lines[-1] += "."
    return "\n".join(lines)


def _split_table(report: Report, keys: list[str]) -> list[str]:
    """Stage seconds and shares, compiled and numpy, per corpus."""
    columns = [(k, path) for k in keys for path in ("compiled", "numpy")]
    columns = [(k, p) for k, p in columns if report.splits[k][p][0] is not None]
    if not columns:
        return []
    first = report.splits[columns[0][0]][columns[0][1]][0] or {}
    heads = " | ".join(f"{short(k)} {p}" for k, p in columns)
    lines = ["", "neardup's stages, median seconds (share):", "", f"| stage | {heads} |"]
    lines.append("|---|" + "---:|" * len(columns))
    for stage in first:
        cells = []
        for k, p in columns:
            split = report.splits[k][p][0] or {}
            total = sum(split.values())
            cells.append(f"{split[stage]:.3f} ({100 * split[stage] / total:.0f} %)")
        lines.append(f"| {stage} | {' | '.join(cells)} |")
    totals = " | ".join(f"{sum((report.splits[k][p][0] or {}).values()):.3f}" for k, p in columns)
    lines.append(f"| total | {totals} |")
    notes = {n for k in keys for _, n in report.splits[k].values() if n}
    lines += [f"\nNote: {n}" for n in sorted(notes)]
    return lines
