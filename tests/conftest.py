"""Test-suite settings: a deterministic Hypothesis profile so CI runs the same examples; a
throwaway PostgreSQL server for the tests of the shared store."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from bench.common.postgres import SHARED, PostgresServer

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


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
