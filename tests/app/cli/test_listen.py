"""The service's address is bound before anything else (issue 33.5): what each failure says."""

import socket

import pytest

from neardup.app.cli.listen import ListenError, listen


def test_listen_binds_every_address_of_the_host_and_listens():
    sockets = listen("127.0.0.1", 0)
    try:
        assert len(sockets) == 1
        port = sockets[0].getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=30):
            pass  # accepted into the backlog: the socket listens
    finally:
        for sock in sockets:
            sock.close()


def test_listen_names_a_port_in_use_and_the_setting_that_changes_it():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ListenError) as caught:
            listen("127.0.0.1", port)
    finally:
        taken.close()
    assert str(caught.value) == (
        f"cannot listen on 127.0.0.1:{port}: the port is in use (another neardup serve, or "
        "another program); choose another with --port or NEARDUP_PORT"
    )


def test_listen_names_a_host_that_is_not_this_machines():
    with pytest.raises(ListenError) as caught:
        listen("192.0.2.1", 0)  # TEST-NET-1: never a local address
    assert str(caught.value) == (
        "cannot listen on 192.0.2.1:0: 192.0.2.1 is not an address of this machine; choose "
        "another with --host or NEARDUP_HOST"
    )


def test_listen_closes_what_it_bound_when_a_later_address_fails(monkeypatch):
    made: list[socket.socket] = []
    real = socket.socket

    def tracked(*args, **kwargs):
        sock = real(*args, **kwargs)
        made.append(sock)
        return sock

    infos = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.1", 0)),
    ]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: infos)
    monkeypatch.setattr(socket, "socket", tracked)
    with pytest.raises(ListenError):
        listen("both", 0)
    assert len(made) == 2 and all(s.fileno() == -1 for s in made)
