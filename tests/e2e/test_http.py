"""HTTP-level protections of a real server, over raw sockets: Host names, framing, slow clients."""

import socket
import time

import httpx
import pytest

from tests.e2e.conftest import start_server, stop_server


def exchange(url, raw, wait=5.0):
    """Send ``raw`` bytes; everything the server answers until it closes (or ``wait`` passes),
    and whether it closed the connection."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait) as conn:
        conn.sendall(raw)
        data = b""
        try:
            while chunk := conn.recv(65536):
                data += chunk
        except TimeoutError:
            return data.decode("latin-1"), False
    return data.decode("latin-1"), True


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("http"), "--workers", "1")
    yield server
    stop_server(server)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example"])
def test_a_foreign_host_name_is_refused(srv, host):
    port = srv.url.rsplit(":", 1)[1]
    answer, _ = exchange(srv.url, f"GET /v1/stats HTTP/1.1\r\nHost: {host}\r\n\r\n".encode(), 2)
    assert answer.startswith("HTTP/1.1 400")
    answer, _ = exchange(srv.url, f"GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                                  "Connection: close\r\n\r\n".encode())  # fmt: skip
    assert answer.startswith("HTTP/1.1 200")


@pytest.fixture(scope="module")
def impatient(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("impatient"), "--workers", "1",
                          "--client-timeout", "1")  # fmt: skip
    yield server
    stop_server(server)


def test_both_content_length_and_transfer_encoding_is_400_and_closed(srv):
    body = b'{"texts": ["a b c"]}'
    raw = (b"POST /v1/signatures HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
           + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")  # fmt: skip
    answer, closed = exchange(srv.url, raw)
    assert answer.startswith("HTTP/1.1 400") and "not both" in answer
    assert closed


def test_a_client_that_sends_nothing_is_disconnected(impatient):
    started = time.monotonic()
    answer, closed = exchange(impatient.url, b"", wait=10)
    assert closed and answer == "" and time.monotonic() - started < 5


def test_headers_trickled_past_the_timeout_are_cut_off(impatient):
    host, port = impatient.url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        closed = False
        for byte in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 100:
            try:
                conn.sendall(bytes([byte]))
                time.sleep(0.2)
            except OSError:
                closed = True
                break
            if time.monotonic() - started > 8:
                break
        if not closed:
            conn.settimeout(2)
            closed = conn.recv(100) == b""
    assert closed and time.monotonic() - started < 5


def test_a_body_slower_than_the_timeout_is_408(impatient):
    raw = (b"POST /v1/signatures HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: 100\r\n\r\n{")  # fmt: skip
    started = time.monotonic()
    answer, closed = exchange(impatient.url, raw, wait=10)
    assert answer.startswith("HTTP/1.1 408") and closed
    assert time.monotonic() - started < 5


def test_a_request_served_longer_than_the_timeout_is_not_cut(impatient):
    # Seconds of work for one worker: 30 M shingles of one-letter words (the compiled kernels
    # take ~0.06 us each, after tokenising 60 MB), in a body under the 64 MiB limit.
    slow = {"texts": [f"{i} " + "a " * 5_000_000 for i in range(6)]}
    with httpx.Client(base_url=impatient.url, timeout=120) as client:
        started = time.monotonic()
        assert client.post("/v1/signatures", json=slow).status_code == 200
        took = time.monotonic() - started
        assert client.get("/healthz").status_code == 200  # the same connection, kept alive
    assert took > 1.0


def test_sigterm_is_honoured_while_a_client_holds_a_request_open(tmp_path):
    """A client that sent headers and never finishes its body used to keep a SIGTERM'd server
    waiting forever; the body deadline (and the graceful-shutdown limit) end it."""
    server = start_server(tmp_path, "--workers", "1", "--client-timeout", "2")
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as stalled:
        head = b"POST /v1/signatures HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        stalled.sendall(head + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        time.sleep(0.3)
        started = time.monotonic()
        server.process.terminate()
        code = server.process.wait(timeout=40)
        took = time.monotonic() - started
    stop_server(server)  # reaps what is left of its process group, if anything
    assert code in (0, -15), code
    assert took < 10, took
