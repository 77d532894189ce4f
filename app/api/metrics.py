"""Prometheus metrics: request counts and latencies by route, and the index's gauges."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["Metrics"]

#: The methods labelled by name (RFC 9110 and PATCH); any other is ``OTHER``, so a client
#: inventing method names cannot grow the label set (5,000 names made an 8.6 MB scrape).
METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
#: The route label of a request no route matched (its raw path is never a label).
UNMATCHED = "unmatched"


def _method_label(method: str) -> str:
    """``method`` if it is a standard one, else ``OTHER``."""
    return method if method in METHODS else "OTHER"


def _route_label(route: object) -> str:
    """The matched route's path template (``/v1/documents/{doc_id}``, without a converter such
    as ``:path``), or ``unmatched``."""
    path = getattr(route, "path_format", None)
    return path if isinstance(path, str) else UNMATCHED


class Metrics:
    """One registry per app (tests run several apps in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "neardup_requests_total", "HTTP requests", ["method", "route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "neardup_request_seconds", "HTTP request latency", ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )  # fmt: skip
        self.gauges = {
            name: Gauge(f"neardup_{name}", help_text, registry=self.registry)
            for name, help_text in [
                ("documents", "registered documents"),
                ("indexed_documents", "documents of the persistent index served (--index)"),
                ("index_version", "the version of the persistent index served (0: none)"),
                ("indexed_linked", "indexed documents linked into clusters"),
                ("unflushed", "the service's documents not yet written into the index served"),
                ("index_flushes", "flushes of the service's documents into the index since start"),
                ("index_parts", "parts of the persistent index served (0: none)"),
                ("part_compactions", "background compactions of the index's parts since start"),
                ("part_compactions_failed", "background compactions of its parts that failed"),
                ("clusters", "clusters of two or more documents"),
                ("duplicates", "documents that are not their cluster's root"),
                ("protected_sets", "protected sets"),
                ("index_bytes", "approximate memory of the in-memory index"),
                ("pool_restarts", "signature pool replacements after a dead worker"),
                ("inflight", "batches being computed or stored"),
                ("admitted", "heavy requests admitted: reading, parsing or being served"),
                ("buffered_bytes", "bytes of request bodies held"),
                ("log_position", "the shared store's log entries applied (0: no shared store)"),
                ("store_up", "1 while the store answers, 0 while it cannot be reached"),
                ("log_lag_seconds", "seconds since the shared store's log was last read"),
                ("index_compactions", "times the index dropped removed documents' slots"),
                ("log_reloads", "reloads from the live documents after the log was pruned"),
            ]
        }
        self.shed = Counter(
            "neardup_shed_total", "requests refused before their body was read", ["reason"],
            registry=self.registry,
        )  # fmt: skip

    def count_shed(self, reason: str) -> None:
        """Count one request refused for lack of capacity (``inflight`` or ``buffered_bytes``)."""
        self.shed.labels(reason).inc()

    async def middleware(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """Count and time every request by its route template (not its raw path) and method
        (standard names only)."""
        started = time.perf_counter()
        response = await call_next(request)
        route = _route_label(request.scope.get("route"))
        method = _method_label(request.method)
        self.requests.labels(method, route, str(response.status_code)).inc()
        self.latency.labels(method, route).observe(time.perf_counter() - started)
        return response

    def render(self, stats: dict[str, float]) -> Response:
        """The text exposition, with the gauges refreshed from ``stats``."""
        for name, gauge in self.gauges.items():
            gauge.set(stats.get(name) or 0)
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
