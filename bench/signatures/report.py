"""What the signature benchmark ran and measured, and its text and markdown reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.common.machine import Start, facts, load_average
from bench.signatures.contenders import BATCHED, NUM_PERM

#: The kernel's modules: their digest says which kernel was measured.
KERNEL_SOURCES = {
    "kernel (core/_tokens, _fnv, _permute, _signatures)": [
        "core/_tokens.py",
        "core/_fnv.py",
        "core/_permute.py",
        "core/_signatures.py",
    ]
}


@dataclass(frozen=True)
class Config:
    """What to run.

    Attributes:
        docs: documents in the single-process comparison.
        worker_docs: documents in the workers=2 vs workers=1 comparison.
        repeats: timed repeats of every case; medians are reported.
        batch_size: documents per call in the extra, batched neardup row; 0 leaves it out.
        seed: the corpus seed.
        round_robin: interleave the cases in every repeat, instead of timing all repeats of a
            case back to back.
    """

    docs: int
    worker_docs: int
    repeats: int
    batch_size: int
    seed: int
    round_robin: bool


@dataclass
class Report:
    """Everything measured, in seconds unless a name says otherwise."""

    config: Config
    command: str
    corpus_mb: float
    shingles: int
    #: CPU time over wall time of the single-process sections: ~1.0 on an idle core, lower when
    #: other processes competed for it (the timings are then inflated).
    cpu_share: float = 0.0
    start: Start = field(default_factory=lambda: Start("", ""))
    medians: dict[str, float] = field(default_factory=dict)
    split: dict[str, float] | None = None
    split_note: str = ""
    workers: dict[str, float] = field(default_factory=dict)
    workers_identical: bool = False
    peak_rss_mib: float = 0.0
    worker_peak_rss_mib: float | None = None


# --- facts ------------------------------------------------------------------------------------


def machine_facts(report: Report) -> dict[str, str]:
    """Date, machine, load, versions and the kernel's digest, for the record."""
    out = facts(report.start, ("numpy", "datasketch", "rensa"))
    out["CPU time / wall time, single-process sections"] = f"{report.cpu_share:.2f}"
    return out


# --- output -----------------------------------------------------------------------------------


def comparison(neardup: float, peer: float, name: str) -> str:
    """``"neardup is 1.90x faster than rensa"`` (or slower), from the two median times."""
    if peer >= neardup:
        return f"neardup is {peer / neardup:.2f}x faster than {name}"
    return f"neardup is {neardup / peer:.2f}x slower than {name}"


def labels(config: Config) -> dict[str, str]:
    """What each case name stands for, for the tables."""
    return {
        "neardup": "neardup, 1 process, batch_signatures over the whole list",
        BATCHED: f"neardup, 1 process, batch_signatures in batches of {config.batch_size} docs",
        "rensa": "rensa RMinHash, Python shingles (counted)",
        "datasketch": "datasketch MinHash.bulk, SHA-1, Python shingles (counted)",
    }


def rss_summary(report: Report) -> str:
    """Peak RSS of this process and of the warm pool's largest worker, as one phrase."""
    text = f"{report.peak_rss_mib:.0f} MiB (benchmark process, all sections)"
    if report.worker_peak_rss_mib is not None:
        text += f", {report.worker_peak_rss_mib:.0f} MiB (largest warm-pool worker, VmHWM)"
    return text


def print_text(report: Report) -> None:
    """The human-readable report."""
    c = report.config
    print(f"corpus: {c.docs} docs, {report.corpus_mb:.1f} MB, {report.shingles} 5-word shingles")
    print(f"signatures: {NUM_PERM} permutations; medians of {c.repeats} repeats (seconds)")
    order = "round-robin" if c.round_robin else "each case's repeats back to back"
    print(f"  (order: {order})")
    nd = report.medians["neardup"]
    names = labels(c)
    for name, seconds in report.medians.items():
        print(f"  {seconds:7.3f} s  {c.docs / seconds:7.0f} docs/s  {names[name]}")
    print("  " + ", ".join(comparison(nd, report.medians[p], p) for p in ("rensa", "datasketch")))
    if report.split is None:
        print(f"neardup split: {report.split_note}")
    else:
        total = sum(report.split.values())
        print(f"neardup split (medians, staged pass total {total:.3f} s):")
        for stage, seconds in report.split.items():
            print(f"  {stage:<26} {seconds:7.3f} s  {100 * seconds / total:5.1f} %")
        if report.split_note:
            print(f"  note: {report.split_note}")
    print(f"workers ({c.worker_docs} docs, medians of {c.repeats}):")
    w1 = report.workers["workers=1"]
    for name, seconds in report.workers.items():
        print(f"  {name:<46} {seconds:7.3f} s  speed-up vs workers=1: {w1 / seconds:.2f}x")
    print(f"  workers=2 signatures identical to workers=1: {report.workers_identical}")
    print(f"peak RSS: {rss_summary(report)}")
    print(f"load average: {report.start.load} at start, {load_average()} at end; ", end="")
    share = report.cpu_share
    print(
        f"CPU/wall of the single-process sections {share:.2f} (~1.00 idle core; lower: contended)"
    )


def markdown(report: Report, facts: dict[str, str]) -> str:
    """The run as markdown tables, to paste into bench/RESULTS.md."""
    c = report.config
    nd = report.medians["neardup"]
    w1 = report.workers["workers=1"]
    lines = ["| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in facts.items()]
    lines += [f"| command | `{report.command}` |", ""]
    lines += [
        f"Signatures of {c.docs} docs ({report.corpus_mb:.1f} MB, {report.shingles} shingles), "
        f"{NUM_PERM} permutations, 5-word shingles, median of {c.repeats} "
        f"({'round-robin' if c.round_robin else 'repeats of each case back to back'}):",
        "",
        "| contender | median s | docs/s | time / neardup time |",
        "|---|---:|---:|---:|",
    ]
    names = labels(c)
    for name, seconds in report.medians.items():
        lines.append(
            f"| {names[name]} | {seconds:.3f} | {c.docs / seconds:.0f} | {seconds / nd:.2f}x |"
        )
    if report.split is not None:
        total = sum(report.split.values())
        lines += ["", "| neardup stage | median s | share |", "|---|---:|---:|"]
        lines += [
            f"| {stage} | {s:.3f} | {100 * s / total:.0f} % |" for stage, s in report.split.items()
        ]
    lines += [
        "",
        f"`signatures()` on {c.worker_docs} docs, median of {c.repeats}:",
        "",
        "| call | median s | speed-up vs workers=1 |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {s:.3f} | {w1 / s:.2f}x |" for name, s in report.workers.items()]
    lines += ["", f"Peak RSS: {rss_summary(report)}."]
    return "\n".join(lines)
