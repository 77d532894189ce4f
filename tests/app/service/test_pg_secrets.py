"""A password in the store's URL is never printed: in any URL spelling (postgresql://,
postgres://, postgresql+psycopg://, a ``?password=`` parameter, encoded or not, or no URL at
all), through the settings' validation errors, the store's errors (a wrong password, a
refused privilege, an unreachable server), ``neardup serve``'s error lines and the logs."""

import contextlib
import io
import logging
from urllib.parse import quote, quote_plus

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql
from pydantic import ValidationError

from bench.common.server import free_port
from neardup.app.cli.main import main
from neardup.app.config import Settings, redact
from neardup.app.service import StoreUnavailable
from neardup.app.service.pgstore import PostgresStore

# Anything PostgreSQL takes in a password (not NUL), framed so it cannot occur by chance.
_PASSWORDS = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1
).map(lambda core: f"Qj{core}Xv")
_SPELLINGS = st.sampled_from(
    [
        "{scheme}://{user}:{encoded}@{host}/{db}",
        "{scheme}://{user}:{password}@{host}/{db}",
        "{scheme}://{user}@{host}/{db}?password={encoded}",
        "{scheme}://{user}@{host}/{db}?sslmode=disable&password={plus}",
        "{scheme}://{user}@{host}/{db}?password={password}",
        "host={host} user={user} password={password} dbname={db}",
    ]
)
_SCHEMES = st.sampled_from(
    ["postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2", "PostgreSQL", "mysql"]
)


@pytest.fixture(scope="module")
def account(postgres):
    """A role the server asks for a password, and a database where it may not create."""
    name = postgres.database().rsplit("/", 1)[1]
    return postgres, name, postgres.role(password="not-the-generated-one")


def _spell(spelling, scheme, user, password, host, db):
    return spelling.format(
        scheme=scheme,
        user=user,
        password=password,
        encoded=quote(password, safe=""),
        plus=quote_plus(password),
        host=host,
        db=db,
    )


def _everything_said(url):
    """All a user can see from starting on ``url``: the settings' error, the store's error,
    ``neardup serve``'s output and every log record."""
    said = []
    records = io.StringIO()
    handler = logging.StreamHandler(records)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        try:
            Settings(store_url=url)
        except ValidationError as exc:
            said.append(str(exc))
        try:
            PostgresStore(url).close()
        except StoreUnavailable as exc:
            said.append(str(exc))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["serve", "--workers", "1", "--port", "0", "--store-url", url])
        assert code == 2
        said += [out.getvalue(), err.getvalue()]
        assert err.getvalue().count("\n") == 1, err.getvalue()  # one line
    finally:
        root.removeHandler(handler)
    return "\n".join([*said, records.getvalue()])


def _assert_hidden(password, text):
    for spelling in {password, quote(password, safe=""), quote_plus(password)}:
        assert spelling not in text


@settings(max_examples=60, deadline=None)
@given(password=_PASSWORDS, spelling=_SPELLINGS, scheme=_SCHEMES)
def test_no_spelling_of_a_password_is_ever_printed(account, password, spelling, scheme):
    postgres, db, role = account
    away = f"127.0.0.1:{free_port()}"
    here = f"127.0.0.1:{postgres.port}"
    # a wrong password, then the right one (the role then lacks CREATE on public)
    for host in (away, here):
        _assert_hidden(
            password, _everything_said(_spell(spelling, scheme, role, password, host, db))
        )
    with psycopg.connect(postgres.admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(password))
        )
    _assert_hidden(password, _everything_said(_spell(spelling, scheme, role, password, here, db)))


@given(password=_PASSWORDS)
def test_redact_hides_every_spelling_of_the_password(password):
    url = f"postgresql://u:{quote(password, safe='')}@h/d?password={quote_plus(password)}"
    said = f"{password} {quote(password, safe='')} {quote_plus(password)}"
    _assert_hidden(password, redact(said, url))


def test_store_url_spellings_are_taken_as_postgresql_and_unencoded_passwords_refused():
    for scheme in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        url = f"{scheme}://u:p%40ss@h:5433/db?application_name=a@b"
        assert (
            Settings(store_url=url).store_url
            == "postgresql://u:p%40ss@h:5433/db?application_name=a@b"
        )
    for bad in ("postgresql://u:p@ss@h/db", "postgresql://u:p/ss@h/db", "mysql://u@h/db"):
        with pytest.raises(ValidationError) as refused:
            Settings(store_url=bad)
        assert "ss@h" not in str(refused.value) and "mysql://u" not in str(refused.value)
