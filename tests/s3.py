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

__all__ = ["S3Server", "start_s3_server"]

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
