"""The service benchmark's text report and its ``## Service`` markdown section."""

from __future__ import annotations

from bench.common.corpora import CORPORA
from bench.common.machine import facts
from bench.service.client import BATCH
from bench.service.results import Report
from bench.service.tables import detail_rows, memory_rows, ratio_lines, target_rows

__all__ = ["DISTS", "SOURCES", "markdown", "notes", "print_text"]

#: The sources measured, digested at the start of a run.
SOURCES = {"app/": ["app"], "core/": ["core"]}
#: The distributions whose versions the record lists.
DISTS = ("numpy", "datasketch", "fastapi", "starlette", "uvicorn", "pydantic", "httpx")


def print_text(report: Report) -> None:
    """The human-readable report."""
    print("\nTargets:")
    for what, target, measured, met in target_rows(report):
        print(f"  {what:<70} {target:>15}  {measured:>28}  met: {met.strip('*')}")
    if report.served is not None:
        print("\nIndex memory per document:")
        for name, docs, per_doc, how in memory_rows(report):
            print(f"  {name:<58} N={docs:>9}  {per_doc:>7} B/doc  ({how})")
        for line in ratio_lines(report):
            print(f"  {line}")
    print("\nDetails:")
    for what, value in detail_rows(report):
        print(f"  {what}:\n      {value}")


def notes(report: Report) -> list[str]:
    """How to read the tables (fixed text, with this run's sizes)."""
    c = report.config
    out = [
        "neardup's bytes/doc are the whole server process's growth: signatures (128 uint32 = "
        "512 B/doc), 16 bands of sorted digests and numbers, union-find, id list and map, the "
        "confirmed pairs, and whatever the allocator kept after recovery. datasketch's LSH keeps "
        "no signatures (it returns candidates, not estimates): confirming its candidates needs "
        "the signatures as well, at least 512 B/doc more as a uint32 matrix.",
        "Query latencies are not comparable across the two: neardup's are end to end over HTTP "
        "from a text (JSON, signature on the spawn pool, lookup, confirmation); datasketch's are "
        "`lsh.query` in process from a ready signature. The empty-store row shows neardup's "
        "fixed cost without an index.",
        f"The index is built through the store, not over HTTP ({c.docs:,} texts would take too "
        "long to generate and sign here): ingest throughput is measured separately, on "
        f"{c.ingest_docs:,} real texts ({-(-c.ingest_docs // BATCH)} batches, so a short run).",
    ]
    if report.served_exit == -15:
        out.append(
            "Server exit code -15 after SIGTERM: uvicorn re-raises the signal after its graceful "
            "shutdown, so `neardup serve` never returns 0 on SIGTERM."
        )
    return out


def markdown(report: Report) -> str:
    """The run as a ``## Service`` markdown section for bench/RESULTS.md."""
    c = report.config
    lines = ["## Service", ""]
    lines += [
        "A real `python -m neardup serve --workers 2` on 127.0.0.1 (see `bench/service/` for "
        f"the method). The {c.docs:,}-document index is written straight into the SQLite store "
        f"from real signatures of a {min(c.pool, c.docs):,}-document pool of corpus "
        f"{CORPORA[c.corpus].label} (`bench.common.corpora`), "
        "perturbed into distinct rows with 5 % planted near duplicates (texts not stored); "
        "the queries are texts of the same corpus. Ingest is over HTTP with real texts, of "
        "that corpus and of the ASCII corpus (c) for comparison.",
        "",
        "| | |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in facts(report.start, DISTS).items()]
    lines += [f"| command | `{report.command}` |", ""]
    lines += ["| target | goal | measured | met |", "|---|---|---:|---|"]
    lines += [f"| {a} | {b} | {m} | {ok} |" for a, b, m, ok in target_rows(report)]
    if report.served is not None:
        lines += ["", "| index | N | bytes/doc | measured as |", "|---|---:|---:|---|"]
        lines += [f"| {a} | {n} | {b} | {how} |" for a, n, b, how in memory_rows(report)]
        lines += [""] + [f"- {line}" for line in ratio_lines(report)]
    lines += ["", "| detail | value |", "|---|---|"]
    lines += [f"| {what} | {value} |" for what, value in detail_rows(report)]
    lines += ["", "How to read it:", ""] + [f"- {note}" for note in notes(report)]
    return "\n".join(lines)
