"""The HTTP side of the service benchmark: batches of documents and single-text queries.

Request bodies are JSON-encoded before any timing starts, so the clients' work in the timed
loops is sending bytes and reading the answers. Every loop is bounded by the number of bodies,
and every request by a timeout.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from bench.common.corpus import doc_id
from bench.common.latency import Latency, summarize

__all__ = [
    "BATCH",
    "IngestResult",
    "QueryResult",
    "document_bodies",
    "get_stats",
    "post",
    "post_batches",
    "query_bodies",
    "time_queries",
]

#: Documents per ``POST /v1/documents`` of the ingest runs.
BATCH = 1000
_JSON = {"content-type": "application/json"}
_REQUEST_TIMEOUT = 300.0


@dataclass
class IngestResult:
    """One ingest run.

    Attributes:
        clients: concurrent clients.
        documents: documents sent (and registered).
        batches: requests.
        seconds: wall time from the first request to the last answer.
        batch: latency summary of the requests.
        created: results with status ``created``.
        with_matches: results with at least one match.
        corpus: the corpus the texts came from (a key of ``bench.common.corpora.CORPORA``).
    """

    clients: int
    documents: int
    batches: int
    seconds: float
    batch: Latency
    created: int
    with_matches: int
    corpus: str = ""

    @property
    def docs_per_second(self) -> float:
        """Documents over wall time."""
        return self.documents / self.seconds


@dataclass
class QueryResult:
    """Sequential single-text queries: their latencies and how many found a match."""

    latency: Latency
    with_matches: int


def document_bodies(
    texts: Sequence[str], batch: int, ids: Sequence[str] | None = None
) -> list[bytes]:
    """``POST /v1/documents`` bodies of ``batch`` documents, no meta.

    Args:
        texts: the documents' texts.
        batch: documents per body.
        ids: their ids; None for ``doc_id(i)`` of each text's position.
    """
    bodies = []
    for lo in range(0, len(texts), batch):
        hi = min(lo + batch, len(texts))
        docs = [{"id": ids[i] if ids else doc_id(i), "text": texts[i]} for i in range(lo, hi)]
        bodies.append(json.dumps({"documents": docs}).encode())
    return bodies


def query_bodies(texts: Sequence[str]) -> list[bytes]:
    """One ``POST /v1/query`` body per text: ``{"texts": [text], "limit": 10}``."""
    return [json.dumps({"texts": [t], "limit": 10}).encode() for t in texts]


def _check(response: httpx.Response, what: str) -> Any:
    if response.status_code != 200:
        raise RuntimeError(f"{what}: HTTP {response.status_code}: {response.text[:500]}")
    return response.json()


def post(client: httpx.Client, path: str, body: bytes, what: str = "") -> Any:
    """POST a JSON ``body``; its decoded answer.

    Raises:
        RuntimeError: the answer was not 200 (``what``, or the path, names the request).
    """
    return _check(client.post(path, content=body, headers=_JSON), what or path)


def _client_loop(
    url: str, bodies: Sequence[bytes], start: threading.Barrier, out: dict[str, Any]
) -> None:
    """Send ``bodies`` one after the other on one keep-alive client; record per batch."""
    times: list[float] = []
    created = with_matches = documents = 0
    try:
        with httpx.Client(base_url=url, timeout=_REQUEST_TIMEOUT) as client:
            client.get("/readyz")  # open the keep-alive connection before the clock starts
            start.wait()
            for body in bodies:
                t0 = time.perf_counter()
                results = post(client, "/v1/documents", body, "POST")
                times.append(time.perf_counter() - t0)
                documents += len(results["results"])
                created += sum(r["status"] == "created" for r in results["results"])
                with_matches += sum(bool(r["matches"]) for r in results["results"])
    except BaseException as exc:
        out["error"] = exc
        start.abort()
    out.update(times=times, created=created, with_matches=with_matches, documents=documents)


def post_batches(url: str, bodies: Sequence[bytes], clients: int) -> IngestResult:
    """Register every body over ``clients`` concurrent keep-alive clients (round-robin split).

    Args:
        url: the server's base URL.
        bodies: ``document_bodies`` output.
        clients: concurrent clients; client c sends bodies c, c + clients, ...

    Returns:
        The wall time and the per-request latencies.

    Raises:
        RuntimeError: a request failed.
    """
    start = threading.Barrier(clients + 1)
    outs: list[dict[str, Any]] = [{} for _ in range(clients)]
    threads = [
        threading.Thread(target=_client_loop, args=(url, bodies[c::clients], start, outs[c]))
        for c in range(clients)
    ]
    for t in threads:
        t.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        start.wait(timeout=_REQUEST_TIMEOUT)
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    errors = [o["error"] for o in outs if "error" in o]
    if errors:
        raise RuntimeError(f"ingest failed: {errors[0]!r}") from errors[0]
    return IngestResult(
        clients=clients,
        documents=sum(o["documents"] for o in outs),
        batches=len(bodies),
        seconds=seconds,
        batch=summarize([s for o in outs for s in o["times"]]),
        created=sum(o["created"] for o in outs),
        with_matches=sum(o["with_matches"] for o in outs),
    )


def time_queries(url: str, bodies: Sequence[bytes], warm_up: int = 0) -> QueryResult:
    """Send the query bodies one after the other on one keep-alive client and time each.

    Args:
        url: the server's base URL.
        bodies: ``query_bodies`` output.
        warm_up: bodies sent first, untimed (the first ones of ``bodies``, again).

    Returns:
        The latency summary and how many queries had at least one match.
    """
    times: list[float] = []
    with_matches = 0
    with httpx.Client(base_url=url, timeout=_REQUEST_TIMEOUT) as client:
        for body in bodies[:warm_up]:
            post(client, "/v1/query", body, "query warm-up")
        for body in bodies:
            t0 = time.perf_counter()
            response = client.post("/v1/query", content=body, headers=_JSON)
            times.append(time.perf_counter() - t0)  # the answer is decoded after the clock
            with_matches += bool(_check(response, "query")["results"][0]["matches"])
    return QueryResult(summarize(times), with_matches)


def get_stats(url: str) -> dict[str, Any]:
    """``GET /v1/stats``."""
    with httpx.Client(base_url=url, timeout=60.0) as client:
        stats: dict[str, Any] = _check(client.get("/v1/stats"), "stats")
        return stats
