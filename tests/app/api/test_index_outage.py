"""The served index's object store away (``--index s3://...`` behind a relay that is cut:
tests/s3.py ``Outage``): every request that reads the index answers 503 with Retry-After and
one clear message, stores nothing, and /readyz says "index unavailable" (``"index": "down"``);
once the store answers again, /readyz is ready and the requests are answered as before."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.exceptions import StarletteDeprecationWarning

from neardup.app.api.errors import INDEX_AWAY
from neardup.app.config import Settings
from neardup.app.main import create_app
from neardup.app.service import StoreUnavailable
from neardup.app.service.served import storage_failed
from neardup.core.engine import IndexDamagedError
from tests.app.service.test_served import PARAMS, write_index
from tests.s3 import Outage, S3Server

with warnings.catch_warnings():  # starlette would rather drive httpx2; httpx serves here
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient


@pytest.fixture
def outage(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[Outage]:
    """A relay to the session's S3 server that the test cuts, the environment pointing s3fs at
    it (one attempt a request: botocore's retries of a refused connection take seconds), and
    fsspec's cached S3 clients dropped before and after (they keep the endpoint they were
    made with)."""
    import s3fs

    relay = Outage(s3_server)
    for name, value in relay.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield relay
    finally:
        relay.down()
        s3fs.S3FileSystem.clear_instance_cache()


def _ready(c: TestClient) -> tuple[int, dict[str, str]]:
    answer = c.get("/readyz")
    return answer.status_code, answer.json()


def _until_ready(c: TestClient) -> tuple[int, dict[str, str]]:
    """/readyz once it is 200 (the index is probed in the background), or its last answer."""
    deadline = time.monotonic() + 60
    while (found := _ready(c))[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _post_docs(c: TestClient, doc_id: str, text: str) -> tuple[int, object]:
    answer = c.post("/v1/documents", json={"documents": [{"id": doc_id, "text": text}]})
    return answer.status_code, answer.json()


def _query(c: TestClient, text: str) -> tuple[int, object]:
    answer = c.post("/v1/query", json={"texts": [text]})
    body = answer.json()
    if answer.status_code == 200:
        return 200, [(m["id"], m["cluster"]) for m in body["results"][0]["matches"]]
    return answer.status_code, (body, answer.headers.get("retry-after"))


def test_an_index_whose_object_store_is_away_answers_503_stores_nothing_and_recovers(
    s3_server: S3Server, outage: Outage, tmp_path: Path
) -> None:
    url = f"s3://{s3_server.bucket()}/idx"
    write_index(url, [("y", "eel fox gnu"), ("z", "one two three four")], parts=2)
    settings = Settings(
        data_dir=tmp_path / "data", workers=1, allowed_hosts="testserver", index=url,
        index_refresh=0, flush_rows=0, flush_seconds=0, **PARAMS,
    )  # fmt: skip
    away = ({"detail": INDEX_AWAY}, "1")
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        assert _until_ready(c) == (200, {"status": "ready", "store": "up", "index": "up"})
        assert _post_docs(c, "b", "ant bee cat dog")[0] == 200
        assert _query(c, "eel fox gnu") == (200, [("y", "y")])
        outage.down()
        # Texts and ids not asked before: nothing of the index is read from a cache.
        assert _query(c, "one two three four five") == (503, away)
        assert _post_docs(c, "c", "eel fox gnu hen") == (503, away[0])
        assert c.get("/v1/documents/z").status_code == 503
        assert c.get("/v1/documents/b").json()["cluster"] == "b"  # the store's alone: answered
        assert _ready(c) == (503, {"status": "index unavailable", "store": "up", "index": "down"})
        assert c.get("/v1/stats").json()["documents"] == 1
        outage.up()
        assert _until_ready(c) == (200, {"status": "ready", "store": "up", "index": "up"})
        assert c.get("/v1/documents/c").status_code == 404  # the 503 stored nothing
        assert _query(c, "one two three four five") == (200, [("z", "z")])
        assert _post_docs(c, "c", "eel fox gnu hen")[0] == 200
        assert _query(c, "eel fox gnu hen") == (200, [("c", "c"), ("y", "c")])


def _damaged_by(cause: BaseException) -> IndexDamagedError:
    """An IndexDamagedError raised while handling ``cause``, as core raises it (``from None``:
    the cause is its context only)."""
    try:
        try:
            raise cause
        except OSError:
            raise IndexDamagedError("s3://b/idx", "parts/p/keys-0.arrow", "is missing") from None
    except IndexDamagedError as exc:
        return exc


def test_storage_failures_are_told_from_the_index_s_own_state() -> None:
    """What the service answers 503 for (the storage failing to answer) and what it does not
    (a missing file, damage, bad input: the index's state or the request's)."""
    from botocore.exceptions import EndpointConnectionError, NoCredentialsError

    failed = [
        EndpointConnectionError(endpoint_url="http://127.0.0.1:9"),
        NoCredentialsError(),
        PermissionError(13, "Access Denied"),
        ConnectionResetError(104, "reset"),
        TimeoutError(),
        OSError(16, "Please reduce your request rate (SlowDown)"),
        _damaged_by(PermissionError(13, "Access Denied")),
    ]
    not_failed = [
        FileNotFoundError(2, "gone"),
        _damaged_by(FileNotFoundError(2, "gone")),
        IndexDamagedError("s3://b/idx", "parts/p/keys-0.arrow", "has 3 bytes, the index lists 4"),
        ValueError("bad"),
        StoreUnavailable("the database is away"),
    ]
    assert [storage_failed(e) for e in failed] == [True] * len(failed)
    assert [storage_failed(e) for e in not_failed] == [False] * len(not_failed)
