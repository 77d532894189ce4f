"""How long ``/healthz`` is held while the service reads the largest request bodies.

``python -m bench.service.big_bodies`` starts a server, sends each body below (near
MAX_BODY_BYTES) once while another process probes ``/healthz`` every 0.1 s, and prints per body
its size, status, how long it took, and the slowest and median probe during it:

- ``meta``: ``POST /v1/documents`` of 10,000 documents, each with 1,000 numbers in ``meta``
  (49 MB; the reviewer's case of issue 32);
- ``unknown``: ``POST /v1/query`` with an unknown top-level field of 4M small arrays;
- ``unknown-nested``: the same arrays in an unknown field of one document (parsed, then 422);
- ``put-meta``: ``PUT /v1/documents/{id}`` of one document with 13 M numbers of meta;
- ``array``: ``PUT /v1/protected-sets/{name}`` of a JSON array near 64 MiB.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common.server import start_server, stop_server

_PROBE = """
import json, os, sys, time, httpx
url, stop, took = sys.argv[1], sys.argv[2], []
with httpx.Client(timeout=120) as client:
    while not os.path.exists(stop):
        at, started = time.time(), time.perf_counter()
        client.get(url + "/healthz").raise_for_status()
        took.append((at, time.perf_counter() - started))
        time.sleep(0.1)
print(json.dumps(took))
"""


def bodies() -> list[tuple[str, str, str, bytes, str]]:
    """(name, method, path, body, content type) of each case."""
    numbers = list(range(1000))
    meta = {"documents": [{"id": f"m{i}", "text": f"text {i} a b c d e", "meta": {"n": numbers}}
                          for i in range(10_000)]}  # fmt: skip
    arrays = "[" + ",".join(["[0]"] * 4_000_000) + "]"
    unknown = ('{"texts": ["a b c"], "junk": ' + arrays + "}").encode()
    nested = ('{"documents": [{"id": "x", "text": "a b", "junk": ' + arrays + "}]}").encode()
    words = " ".join(f"w{i}" for i in range(40))
    rows = [{"id": f"r{i}", "text": f"{words} {i}", "meta": {"n": numbers[:40]}}
            for i in range(160_000)]  # fmt: skip
    array = json.dumps(rows).encode()
    big_meta = json.dumps({"text": "much meta", "meta": {"n": [100] * 13_000_000}}).encode()
    return [
        ("meta", "POST", "/v1/documents", json.dumps(meta).encode(), "application/json"),
        ("unknown", "POST", "/v1/query", unknown, "application/json"),
        ("unknown-nested", "POST", "/v1/documents", nested, "application/json"),
        ("put-meta", "PUT", "/v1/documents/big", big_meta, "application/json"),
        ("array", "PUT", "/v1/protected-sets/big", array, "application/json"),
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"NEARDUP_MAX_PROTECTED_BYTES": str(256 * 2**20)}
        server = start_server(Path(tmp), "--workers", "1", env=env)
        try:
            for name, method, path, body, kind in bodies():
                stop = Path(tmp) / f"stop-{name}"
                probe = subprocess.Popen([sys.executable, "-c", _PROBE, server.url, str(stop)],
                                         stdout=subprocess.PIPE, text=True)  # fmt: skip
                time.sleep(0.5)
                started = time.perf_counter()
                got = httpx.request(method, server.url + path, content=body,
                                    headers={"content-type": kind}, timeout=600)  # fmt: skip
                took = time.perf_counter() - started
                time.sleep(0.3)
                stop.touch()
                probes = [t for _, t in json.loads(probe.communicate(timeout=120)[0])]
                print(
                    f"{name:15} {len(body) / 1e6:6.1f} MB  {got.status_code}  {took:6.2f} s  "
                    f"/healthz max {max(probes):.3f} s median {statistics.median(probes):.3f} s "
                    f"({len(probes)} probes)",
                    flush=True,
                )
        finally:
            stop_server(server)


if __name__ == "__main__":
    main()
