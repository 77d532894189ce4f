"""Overload is shed at the door: before a body is read, and within a bound on buffered bytes."""

import socket
import threading
import time

import httpx
import pytest

from tests.e2e.conftest import start_server, stop_server

HEADERS = "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def open_request(url, length, sent=b"", path="/v1/documents"):
    """A raw connection that sent a request's headers (Content-Length ``length``) and ``sent``
    bytes of its body, and no more."""
    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=10)
    head = HEADERS.format(path=path) + f"Content-Length: {length}\r\n\r\n"
    conn.sendall(head.encode() + sent)
    return conn


def answer(conn):
    """The status line and headers the server sent (the body unsent: it must not wait)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode("latin-1").lower()


def stats(url):
    return httpx.get(f"{url}/v1/stats").json()


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    server = start_server(
        tmp_path_factory.mktemp("tight"), "--workers", "1", "--max-inflight", "2",
        "--max-body-bytes", "1000000", "--max-buffered-bytes", "1000000",
    )  # fmt: skip
    yield server
    stop_server(server)


def test_overload_is_shed_before_the_body_is_read(tight):
    url = tight.url
    first = open_request(url, 900_000, b'{"documents": [')  # admitted, 900 kB reserved
    try:
        deadline = time.monotonic() + 10
        while stats(url)["buffered_bytes"] < 900_000 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stats(url)["admitted"] == 1 and stats(url)["buffered_bytes"] == 900_000
        # Admitted, but its declared body would pass the bytes budget: 503 before reading it.
        started = time.monotonic()
        with open_request(url, 200_000) as second:
            head = answer(second)
        assert head.startswith("http/1.1 503") and "retry-after: 1" in head
        assert "connection: close" in head
        assert time.monotonic() - started < 2
        with open_request(url, 100, b"{"):  # the second place, held while reading
            deadline = time.monotonic() + 10
            while stats(url)["admitted"] < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            started = time.monotonic()
            with open_request(url, 50_000_000, path="/v1/query") as fourth:
                head = answer(fourth)  # over MAX_INFLIGHT: 503 without reading anything
            assert head.startswith("http/1.1 503") and "retry-after: 1" in head
            assert time.monotonic() - started < 2
    finally:
        first.close()
    deadline = time.monotonic() + 10
    while stats(url)["admitted"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert stats(url)["admitted"] == 0 and stats(url)["buffered_bytes"] == 0
    metrics = httpx.get(f"{url}/metrics").text
    assert 'neardup_shed_total{reason="buffered_bytes"} 1.0' in metrics
    assert 'neardup_shed_total{reason="inflight"} 1.0' in metrics
    doc = {"documents": [{"id": "after", "text": "served again"}]}
    assert httpx.post(f"{url}/v1/documents", json=doc).status_code == 200


def test_an_oversized_batch_is_refused_quickly_without_freezing_the_service(server):
    items = ",".join(f'{{"id":"m{i}","text":"a b"}}' for i in range(2_000_000))
    body = f'{{"documents":[{items}]}}'.encode()  # 60 MB: under MAX_BODY_BYTES
    result = {}

    def send():
        started = time.monotonic()
        result["r"] = httpx.post(f"{server.url}/v1/documents", content=body, timeout=120,
                                 headers={"content-type": "application/json"})  # fmt: skip
        result["seconds"] = time.monotonic() - started

    sender = threading.Thread(target=send)
    sender.start()
    worst = 0.0
    while sender.is_alive():
        started = time.monotonic()
        assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200
        worst = max(worst, time.monotonic() - started)
        time.sleep(0.1)
    sender.join()
    assert result["r"].status_code == 413
    assert "at most 10000 items, got 2000000" in result["r"].json()["detail"]
    assert worst < 1.0 and result["seconds"] < 8
    assert stats(server.url)["documents"] == 0
