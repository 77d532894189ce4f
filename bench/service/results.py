"""What the service benchmark measured: the baseline and served servers, and the whole run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.common.machine import Start
from bench.service.client import IngestResult, QueryResult
from bench.service.peer import PeerResult
from bench.service.synthetic_index import BuildResult

__all__ = ["BaselineResult", "Report", "ServedResult"]


@dataclass
class BaselineResult:
    """The server on an empty data directory: /proc memory, time to ready, the same queries."""

    memory: dict[str, int]
    ready_seconds: float
    query: QueryResult


@dataclass
class ServedResult:
    """The server on the built store.

    Attributes:
        ready_seconds: wall time from spawning it to the first 200 of /readyz.
        stats: /v1/stats right after ready.
        logged: (documents, seconds) of its ``recovered`` log line.
        memory_ready: /proc memory after ready and the warm-up queries.
        memory_after: /proc memory after the timed queries.
        query: the timed queries.
    """

    ready_seconds: float
    stats: dict[str, Any]
    logged: tuple[int, float] | None
    memory_ready: dict[str, int]
    memory_after: dict[str, int]
    query: QueryResult


@dataclass
class Report:
    """Everything the run measured (bytes, seconds) and how it was run."""

    config: Any
    command: str
    start: Start
    ingest: list[IngestResult] = field(default_factory=list)
    #: server VmRSS after each ingest run, by (corpus, clients)
    ingest_rss: dict[tuple[str, int], int] = field(default_factory=dict)
    pool_seconds: float = 0.0
    near_queries: int = 0
    build: BuildResult | None = None
    baseline: BaselineResult | None = None
    served: ServedResult | None = None
    served_exit: int | None = None
    peers: list[PeerResult] = field(default_factory=list)
    peak_rss: int = 0

    def neardup_bytes_per_doc(self) -> float:
        """(VmRSS on the built store - VmRSS on an empty one) / N, both after warm-up."""
        assert self.served is not None and self.baseline is not None
        delta = self.served.memory_ready["VmRSS"] - self.baseline.memory["VmRSS"]
        return float(delta / self.config.docs)

    def index_bytes_per_doc(self) -> float:
        """/v1/stats index_bytes / N."""
        assert self.served is not None
        return float(self.served.stats["index_bytes"] / self.config.docs)
