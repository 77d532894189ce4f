"""Overload benchmark: how a real server sheds load it cannot take (issue 15, item 7).

Three bounded runs against ``python -m neardup serve`` on 127.0.0.1, each on a fresh server:

1. Writes under contention: C clients (one connection each) POST batches of new documents back
   to back for D seconds; a 503 is retried after ``--backoff`` seconds. Reports successful
   batches per second, 503s and their latency, the server process's CPU seconds (its own, not
   its pool's) and the slowest ``/healthz`` probe meanwhile. The clients run in ``--procs``
   processes (one event loop each): one loop driving 128 clients is itself the bottleneck.
2. A batch of 1,000,000 tiny documents (over MAX_BATCH): time to its 413, the server's peak RSS
   (VmHWM) growth, and the slowest ``/healthz`` probe meanwhile.
3. Q concurrent big queries (``--big-mb`` each): statuses, time, and the peak RSS growth.

Run from the repository root::

    python -m bench.service.overload [--seconds 10] [--clients 8 128] [--big 24 --big-mb 59]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx

from bench.common.latency import summarize
from bench.common.memory import proc_memory
from bench.common.server import Server, start_server

_JSON = {"content-type": "application/json"}
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")


def _batch(client: int, seq: int, size: int) -> bytes:
    docs = [
        {"id": f"c{client}-{seq}-{i}", "text": " ".join(f"{w}{client}x{seq}x{i}" for w in _WORDS)}
        for i in range(size)
    ]
    return json.dumps({"documents": docs}).encode()


class _Probe:
    """``/healthz`` every 0.25 s in a thread; the slowest answer."""

    def __init__(self, url: str) -> None:
        self.url, self.worst, self._stop = url, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                client.get(f"{self.url}/healthz")
                self.worst = max(self.worst, time.perf_counter() - started)
                self._stop.wait(0.25)

    def __enter__(self) -> _Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=130)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _writer(
    url: str, client: int, deadline: float, size: int, backoff: float, out: dict[str, list[float]]
) -> None:
    async with httpx.AsyncClient(timeout=120) as http:
        seq, body = 0, _batch(client, 0, size)
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                response = await http.post(f"{url}/v1/documents", content=body, headers=_JSON)
            except httpx.TransportError:
                out["errors"].append(time.perf_counter() - started)
                await asyncio.sleep(backoff)
                continue
            elapsed = time.perf_counter() - started
            out.setdefault(str(response.status_code), []).append(elapsed)
            if response.status_code == 200:
                seq += 1
                body = _batch(client, seq, size)
            else:
                await asyncio.sleep(backoff)


def _writers(
    url: str, first: int, count: int, seconds: float, size: int, backoff: float
) -> dict[str, list[float]]:
    """Clients ``first`` .. ``first + count - 1`` on one event loop (in a worker process):
    the latencies by status."""
    out: dict[str, list[float]] = {"errors": []}

    async def main() -> None:
        deadline = time.perf_counter() + seconds
        await asyncio.gather(
            *(_writer(url, c, deadline, size, backoff, out) for c in range(first, first + count))
        )

    asyncio.run(main())
    return out


def run_writes(
    server: Server, clients: int, seconds: float, size: int, backoff: float, procs: int
) -> str:
    """Phase 1 for one client count, its clients spread over ``procs`` processes."""
    procs = max(1, min(procs, clients))
    shares = [clients // procs + (i < clients % procs) for i in range(procs)]
    firsts = [sum(shares[:i]) for i in range(procs)]
    out: dict[str, list[float]] = {"errors": []}
    cpu = _cpu_seconds(server.pid)
    with _Probe(server.url) as probe, ProcessPoolExecutor(procs) as pool:
        started = time.perf_counter()
        futures = [pool.submit(_writers, server.url, first, share, seconds, size, backoff)
                   for first, share in zip(firsts, shares, strict=True)]  # fmt: skip
        for future in futures:
            for status, latencies in future.result().items():
                out.setdefault(status, []).extend(latencies)
        wall = time.perf_counter() - started
    cpu = _cpu_seconds(server.pid) - cpu
    ok, shed = out.get("200", []), out.get("503", [])
    others = {k: len(v) for k, v in out.items() if k not in ("200", "503") and v}
    shed_ms = f"503 p50 {summarize(shed).p50:.1f} ms" if shed else "no 503"
    return (
        f"{clients:4d} clients: {len(ok) / wall:6.1f} batches/s ok ({len(ok) * size / wall:7.0f} "
        f"docs/s), {len(shed)} x 503 ({shed_ms}), other {others}, server CPU {cpu:.1f} s, "
        f"healthz worst {probe.worst * 1000:.0f} ms"
    )


def run_million(server: Server, items: int) -> str:
    """Phase 2: one over-MAX_BATCH batch of tiny documents."""
    docs = ",".join(f'{{"id":"m{i}","text":"a b"}}' for i in range(items))
    body = f'{{"documents":[{docs}]}}'.encode()
    before = proc_memory(server.pid).get("VmHWM", 0)
    with _Probe(server.url) as probe:
        started = time.perf_counter()
        response = httpx.post(f"{server.url}/v1/documents", content=body, headers=_JSON,
                              timeout=300)  # fmt: skip
        elapsed = time.perf_counter() - started
    grown = proc_memory(server.pid).get("VmHWM", 0) - before
    return (
        f"{items:,} items ({len(body) >> 20} MiB): {response.status_code} in {elapsed:.2f} s, "
        f"peak RSS +{grown >> 20} MiB, healthz worst {probe.worst * 1000:.0f} ms"
    )


def run_big_queries(server: Server, count: int, megabytes: int) -> str:
    """Phase 3: ``count`` concurrent queries of ``megabytes`` each."""
    word = "w" * 9 + " "
    text = word * (8 * 2**20 // len(word))  # 8 MiB a text: under MAX_TEXT_CHARS
    body = json.dumps({"texts": [text] * max(1, megabytes // 8)}).encode()
    before = proc_memory(server.pid).get("VmHWM", 0)
    statuses: list[int] = []

    def send() -> None:
        try:
            r = httpx.post(f"{server.url}/v1/query", content=body, headers=_JSON, timeout=600)
            statuses.append(r.status_code)
        except httpx.TransportError:
            statuses.append(0)

    started = time.perf_counter()
    threads = [threading.Thread(target=send) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=700)
    elapsed = time.perf_counter() - started
    grown = proc_memory(server.pid).get("VmHWM", 0) - before
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    return (
        f"{count} x {megabytes} MiB queries: {counts} in {elapsed:.1f} s, "
        f"peak RSS +{grown >> 20} MiB"
    )


def _fresh(tmp: Path, name: str) -> Server:
    return start_server(tmp / name, "--workers", "2", timeout=120)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the phases; print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 128])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--backoff", type=float, default=0.05)
    parser.add_argument("--procs", type=int, default=4, help="client processes")
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--big", type=int, default=24)
    parser.add_argument("--big-mb", type=int, default=59)
    parser.add_argument("--skip", nargs="*", default=[], choices=["writes", "million", "big"])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="neardup-overload-") as name:
        tmp = Path(name)
        if "writes" not in args.skip:
            for clients in args.clients:
                server = _fresh(tmp, f"w{clients}")
                try:
                    line = run_writes(
                        server, clients, args.seconds, args.batch, args.backoff, args.procs
                    )
                    print(line, flush=True)
                finally:
                    server.stop()
        if "million" not in args.skip:
            server = _fresh(tmp, "million")
            try:
                print(run_million(server, args.items), flush=True)
            finally:
                server.stop()
        if "big" not in args.skip:
            server = _fresh(tmp, "big")
            try:
                print(run_big_queries(server, args.big, args.big_mb), flush=True)
            finally:
                server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
