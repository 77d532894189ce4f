"""HTTP-level protections of a real server, over raw sockets: Host names, framing, slow clients."""

import socket

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
