"""Test-suite settings: a deterministic Hypothesis profile so CI runs the same examples; a
throwaway PostgreSQL server for the tests of the shared store; an S3 server (moto) for the
index on object storage; the JVMs the Spark tests start compile with the client compiler only."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from bench.common.postgres import SHARED, PostgresServer
from tests.s3 import S3Server, start_s3_server

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")

#: Every JVM ``spark-submit`` starts in the tests (the Spark session's, and those of the
#: ``neardup --engine spark`` processes, which inherit the environment): tiny jobs whose JVM
#: spends about a third of its CPU time in the C2 compiler (measured: C1 only and the serial
#: collector cut a Spark test's JVM CPU time by about a quarter). The results do not depend on
#: it; set SPARK_SUBMIT_OPTS (even empty) to run them otherwise.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the session (as the ``postgres`` account when root);
    the running one ``NEARDUP_TEST_POSTGRES`` names if set (``python -m tests.mutation
    --with-postgres`` starts one for all its mutants), each test still on databases of its own."""
    shared = os.environ.get(SHARED)
    server = PostgresServer.attach(shared) if shared else PostgresServer(fsync=False).start()
    yield server
    server.destroy()


@pytest.fixture
def pg_url(postgres: PostgresServer) -> str:
    """The URL of a new, empty database on the session's PostgreSQL server."""
    return postgres.database()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on 127.0.0.1, one for the session (tests/s3.py)."""
    server = start_s3_server()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """``s3://BUCKET``: a new bucket on the session's S3 server, the environment (this process's,
    and so a ``neardup`` subprocess's) pointing s3fs at it as a user points it at a store."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return f"s3://{s3_server.bucket()}"
