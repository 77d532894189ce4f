"""A real S3 protocol on this machine: moto's S3 server in a thread of the test process (one per
session: the ``s3_server`` fixture), spoken to by s3fs, fsspec's S3 filesystem, as ``neardup``
speaks to AWS S3, R2 or MinIO. It reaches nothing outside: the endpoint is on 127.0.0.1 and the
credentials are dummies, passed the way a user passes theirs (docs/index.md, "Object storage":
the AWS environment variables, ``AWS_ENDPOINT_URL`` for a store that is not AWS).

What ``memory://`` hides and this does not: no rename, no directories (a prefix exists while an
object is under it), listings and reads over HTTP (ranged reads of the key tables, s3fs's
cached listings), and an exclusive create only as a conditional write (``PutObject`` with
``If-None-Match: *``)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Outage", "S3Server", "start_s3_server"]

#: Dummy credentials and region: moto accepts any, and nothing here reaches AWS.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "neardup-test",
    "AWS_SECRET_ACCESS_KEY": "neardup-test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3Server:
    """A running moto S3 server: its endpoint, and how to reach it."""

    endpoint: str
    server: Any

    def env(self) -> dict[str, str]:
        """The environment that points botocore (so s3fs, so ``neardup``) at this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def filesystem(self) -> Any:
        """An s3fs filesystem of this server, apart from fsspec's instance cache (another
        client, as another process would have)."""
        import s3fs

        return s3fs.S3FileSystem(
            key=CREDENTIALS["AWS_ACCESS_KEY_ID"], secret=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            client_kwargs={"endpoint_url": self.endpoint, "region_name": "us-east-1"},
            skip_instance_cache=True,
        )  # fmt: skip

    def bucket(self) -> str:
        """A new, empty bucket (S3 names: 3 to 63 lower-case letters, digits and dashes)."""
        name = f"neardup-{uuid.uuid4().hex[:16]}"
        # As CreateBucket in us-east-1 is spelled: no location constraint (s3fs's mkdir names
        # the client's region, which S3 refuses for us-east-1).
        self.filesystem().call_s3("create_bucket", Bucket=name)
        return name

    def download(self, url: str, target: Path) -> Path:
        """The objects under ``url`` copied to the local directory ``target``."""
        fs = self.filesystem()
        root = url.removeprefix("s3://")
        for key in fs.find(root):
            local = target / key[len(root) + 1 :]
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(fs.cat_file(key))
        return target

    def stop(self) -> None:
        self.server.stop()


def start_s3_server() -> S3Server:
    """moto's ``ThreadedMotoServer`` on a free port of 127.0.0.1, its request log quiet."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return S3Server(f"http://{host}:{port}", server)


class Outage:
    """A TCP relay to an S3 server that can be cut (``down``: its listener and every relayed
    connection closed, new ones refused, as when the store is away) and restored (``up``: on the
    same port). ``endpoint`` and ``env`` as ``S3Server``'s."""

    def __init__(self, server: S3Server) -> None:
        import socket
        import threading

        host, port = server.endpoint.removeprefix("http://").rsplit(":", 1)
        self._target = (host, int(port))
        self._socket, self._threading = socket, threading
        self._guard = threading.Lock()
        self._open: set[Any] = set()
        self._listener: Any = None
        self.port = 0
        self.up()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment that points botocore at this relay."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def up(self) -> None:
        """Listen (again, on the same port) and relay."""
        listener = self._socket.create_server(("127.0.0.1", self.port))
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and close every relayed one."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._guard:
            held, self._open = self._open, set()
        for conn in held:
            with _quiet():
                conn.shutdown(self._socket.SHUT_RDWR)
            conn.close()

    def _accept(self, listener: Any) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed: down
                return
            try:
                upstream = self._socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._guard:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                self._threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: Any, sink: Any) -> None:
        with _quiet():
            while data := source.recv(65536):
                sink.sendall(data)
        with _quiet():
            sink.shutdown(self._socket.SHUT_WR)


def _quiet() -> Any:
    """Suppress the socket errors of a relay being cut."""
    from contextlib import suppress

    return suppress(OSError)
