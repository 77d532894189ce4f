"""The service benchmark's rows: targets, memory per document, ratios and details."""

from __future__ import annotations

from bench.common.corpora import CORPORA
from bench.common.memory import MIB
from bench.service.results import Report

__all__ = ["detail_rows", "memory_rows", "ratio_lines", "target_rows"]

#: The issue's targets.
INGEST_TARGET = 5000.0
P99_TARGET_MS = 20.0
BYTES_TARGET = 1024.0
RECOVERY_TARGET = 30.0
TARGET_DOCS = 1_000_000


def _clients(n: int) -> str:
    return "1 client" if n == 1 else f"{n} concurrent clients"


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _corpus(key: str) -> str:
    """``(a) web-like`` for ``web``: the corpus's letter and first words."""
    label = CORPORA[key].label if key in CORPORA else key
    return " ".join(label.split()[:2]).rstrip(",:")


def _at(docs: int) -> str:
    return f"{docs:,} docs" + ("" if docs == TARGET_DOCS else " (target is at 1,000,000)")


def target_rows(report: Report) -> list[tuple[str, str, str, str]]:
    """(what, target, measured, met) for each of the issue's targets."""
    rows: list[tuple[str, str, str, str]] = []
    n = report.config.docs
    for one in report.ingest:
        if one.clients != 1:
            continue
        rows.append(
            (
                f"ingest over HTTP, 1 client, batches of 1000, {one.documents:,} docs of "
                f"corpus {_corpus(one.corpus)}",
                ">= 5,000 docs/s",
                f"{one.docs_per_second:,.0f} docs/s",
                _met(one.docs_per_second >= INGEST_TARGET),
            )
        )
    if report.served is not None:
        q = report.served.query.latency
        rows.append(
            (
                f"single-text query p99, {_at(n)}",
                "<= 20 ms",
                f"{q.p99:.2f} ms (p50 {q.p50:.2f})",
                _met(q.p99 <= P99_TARGET_MS),
            )
        )
        per_doc = report.neardup_bytes_per_doc()
        rows.append(
            (
                f"index memory, RSS delta / N, {_at(n)}",
                "<= 1,024 B/doc",
                f"{per_doc:,.0f} B/doc",
                _met(per_doc <= BYTES_TARGET),
            )
        )
        rec = report.served.stats["recovery_seconds"]
        rows.append(
            (
                f"recovery (/v1/stats recovery_seconds), {_at(n)}",
                "<= 30 s",
                f"{rec:.1f} s",
                _met(rec <= RECOVERY_TARGET),
            )
        )
    return rows


def memory_rows(report: Report) -> list[tuple[str, str, str, str]]:
    """(index, documents, bytes per document, how it was measured) of neardup and the peers."""
    assert report.served is not None and report.baseline is not None
    n = report.config.docs
    rows = [
        (
            "neardup service (RSS delta)",
            f"{n:,}",
            f"{report.neardup_bytes_per_doc():,.0f}",
            "server VmRSS on the store - on an empty store, both after ready + 20 queries",
        ),
        (
            "neardup service (/v1/stats index_bytes)",
            f"{n:,}",
            f"{report.index_bytes_per_doc():,.0f}",
            "the index's own estimate",
        ),
    ]
    for p in report.peers:
        how = "VmRSS after insert - before (rows already loaded), separate process"
        if p.stopped:
            how += f"; stopped early: {p.stopped}"
        rows.append((p.label, f"{p.inserted:,}", f"{p.bytes_per_doc:,.0f}", how))
    return rows


def ratio_lines(report: Report) -> list[str]:
    """``neardup index: X bytes/doc vs datasketch ...: Y bytes/doc (Z x smaller)`` per peer."""
    ours = report.neardup_bytes_per_doc()
    lines = []
    for p in report.peers:
        theirs = p.bytes_per_doc
        word = f"{theirs / ours:.1f}x smaller" if ours <= theirs else f"{ours / theirs:.1f}x larger"
        lines.append(
            f"neardup index: {ours:,.0f} bytes/doc (N={report.config.docs:,}) vs {p.label}: "
            f"{theirs:,.0f} bytes/doc (N={p.inserted:,}) -> neardup {word}"
        )
    return lines


def detail_rows(report: Report) -> list[tuple[str, str]]:
    """Everything else measured, as (what, value)."""
    rows: list[tuple[str, str]] = []
    for ing in report.ingest:
        rss = report.ingest_rss.get((ing.corpus, ing.clients), 0)
        rows.append(
            (
                f"ingest, {_clients(ing.clients)}, {ing.documents:,} docs of corpus "
                f"{_corpus(ing.corpus)} in {ing.batches} batches",
                f"{ing.seconds:.2f} s, {ing.docs_per_second:,.0f} docs/s; per batch "
                f"{ing.batch.short()}; created {ing.created:,}, with matches {ing.with_matches:,}; "
                f"server VmRSS after {rss / MIB:,.0f} MiB",
            )
        )
    rows += _build_rows(report) + _served_rows(report) + _peer_rows(report)
    rows.append(("peak RSS of the benchmark process", f"{report.peak_rss / MIB:,.0f} MiB"))
    return rows


def _build_rows(report: Report) -> list[tuple[str, str]]:
    b = report.build
    if b is None:
        return []
    c = report.config
    return [
        (
            f"signatures of the {min(c.pool, c.docs):,}-doc pool "
            "(neardup.core.minhash.signatures, workers=2)",
            f"{report.pool_seconds:.2f} s",
        ),
        (
            f"build {b.documents:,} docs straight into SQLite (not over HTTP)",
            f"generate rows {b.generate_seconds:.1f} s + write (SQLiteStore.add_documents, 50k per "
            f"transaction) {b.write_seconds:.1f} s = {b.generate_seconds + b.write_seconds:.1f} s; "
            f"{b.pool_rows:,} real pool rows, {b.planted:,} planted near duplicates, "
            f"{b.pairs:,} confirmed pairs; database {b.db_bytes / MIB:,.0f} MiB",
        ),
    ]


def _served_rows(report: Report) -> list[tuple[str, str]]:
    s, base = report.served, report.baseline
    if s is None or base is None:
        return []
    st, n = s.stats, report.config.docs
    logged = f"{s.logged[1]:.3f} s for {s.logged[0]:,} docs" if s.logged else "not found"
    m0, m1, m2 = base.memory, s.memory_ready, s.memory_after
    return [
        (
            "recovery",
            f"/v1/stats recovery_seconds {st['recovery_seconds']:.3f} s; log line "
            f"{logged}; wall time from spawn to /readyz 200: {s.ready_seconds:.2f} s "
            f"(empty store: {base.ready_seconds:.2f} s)",
        ),
        ("/v1/stats after recovery", ", ".join(f"{k} {v}" for k, v in st.items())),
        (
            "server VmRSS / RssAnon, empty store",
            f"{m0['VmRSS'] / MIB:,.0f} / {m0.get('RssAnon', 0) / MIB:,.0f} MiB",
        ),
        (
            "server VmRSS / RssAnon / VmHWM, built store, ready",
            f"{m1['VmRSS'] / MIB:,.0f} / "
            f"{m1.get('RssAnon', 0) / MIB:,.0f} / {m1['VmHWM'] / MIB:,.0f} MiB",
        ),
        (
            "server VmRSS / VmHWM after the timed queries",
            f"{m2['VmRSS'] / MIB:,.0f} / {m2['VmHWM'] / MIB:,.0f} MiB",
        ),
        (
            f"single-text POST /v1/query, sequential, one keep-alive client, {_at(n)}",
            f"{s.query.latency.short()}; {s.query.with_matches:,} with matches "
            f"({report.near_queries:,} near copies of pool docs among them)",
        ),
        (
            "the same queries on the EMPTY store (HTTP + JSON + signature on the pool, no index)",
            base.query.latency.short(),
        ),
        ("server exit code after SIGTERM", str(report.served_exit)),
    ]


def _peer_rows(report: Report) -> list[tuple[str, str]]:
    rows = []
    for p in report.peers:
        q = p.query
        rows.append(
            (
                f"{p.label}, b={p.bands}, r={p.rows}, {p.inserted:,} docs",
                f"insert {p.insert_seconds:.1f} s ({p.inserted / p.insert_seconds:,.0f} docs/s); "
                f"VmRSS {p.rss_before / MIB:,.0f} -> {p.rss_after / MIB:,.0f} MiB (VmHWM "
                f"{p.hwm / MIB:,.0f}); lsh.query in process, no HTTP, candidates only: p50 "
                f"{q['p50']:.3f} / p99 {q['p99']:.3f} / max {q['max']:.3f} ms; "
                f"{p.queries_with_candidates:,} with candidates"
                + (f"; STOPPED EARLY: {p.stopped}" if p.stopped else ""),
            )
        )
    return rows
