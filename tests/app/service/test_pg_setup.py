"""The shared store as a DBA sets it up (docs/postgres.md): a role without a privilege is
refused in one line naming the privilege and the GRANT that fixes it; a role with only table
privileges serves a store its owner made; STORE_SCHEMA keeps the tables out of ``public``; the
layout's version is recorded, older layouts migrated, newer ones refused; a wrong password,
an unknown role or database are named, and no message holds a password."""

import psycopg
import pytest
from psycopg import sql

from bench.common.server import free_port
from neardup.app.service import StoreRefused, StoreUnavailable, pgstore
from neardup.app.service.pgstore import SCHEMA_VERSION, PostgresStore
from neardup.app.service.store import StoredDoc
from neardup.core.engine import MinhashParams

PARAMS = MinhashParams().index_params()


def _db_and_role(postgres, password=None):
    """A new database owned by the superuser (the obvious CREATE DATABASE) and a new login role
    with no privilege beyond PUBLIC's; the role's URL to it, and the database's name."""
    name = postgres.database().rsplit("/", 1)[1]
    role = postgres.role(password=password)
    return postgres.url(name, role, password), name, role


def _one_line(message):
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_role_without_create_on_public_is_refused_naming_the_grant(postgres):
    url, name, role = _db_and_role(postgres)
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url)
    said = _one_line(str(refused.value))
    assert f"GRANT USAGE, CREATE ON SCHEMA public TO {role}" in said
    assert f"CREATE SCHEMA neardup AUTHORIZATION {role}" in said
    with psycopg.connect(postgres.url(name), autocommit=True) as c:
        c.execute(
            sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(sql.Identifier(role))
        )
    store = PostgresStore(url)  # the GRANT the message named is enough
    try:
        store.ensure_params(PARAMS)
    finally:
        store.close()


def test_a_missing_schema_the_role_may_not_create_is_refused_naming_create_schema(postgres):
    url, name, role = _db_and_role(postgres)
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url, "neardup")
    said = _one_line(str(refused.value))
    assert f"CREATE SCHEMA neardup AUTHORIZATION {role}" in said
    with psycopg.connect(postgres.url(name), autocommit=True) as c:
        c.execute(sql.SQL("CREATE SCHEMA neardup AUTHORIZATION {}").format(sql.Identifier(role)))
    PostgresStore(url, "neardup").close()


def test_a_role_with_only_table_privileges_serves_the_store_its_owner_made(postgres):
    url, name, role = _db_and_role(postgres)
    admin_url = postgres.url(name)
    owner = PostgresStore(admin_url, "nd")  # the owner (here the superuser) creates it once
    owner.ensure_params(PARAMS)
    owner.close()
    ident = sql.Identifier(role)
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute(sql.SQL("GRANT USAGE ON SCHEMA nd TO {}").format(ident))
        c.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA nd TO {}").format(ident))
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url, "nd")
    said = _one_line(str(refused.value))
    assert f"role {role} lacks DELETE on budgets, INSERT on budgets, UPDATE on budgets" in said
    assert "DELETE on changes, INSERT on changes" in said
    assert "USAGE on probe_id_seq" in said and "USAGE on index_deletes_seq_seq" in said
    assert "DELETE on index_deletes, INSERT on index_deletes" in said
    assert "DELETE on index_flush, INSERT on index_flush" in said
    assert f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA nd TO {role}" in said
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA nd TO {}").format(
                ident
            )
        )
        c.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA nd TO {}").format(ident))
    store = PostgresStore(url, "nd")  # no CREATE anywhere: a store of this version runs no DDL
    try:
        store.ensure_params(PARAMS)
        store.lock_writes()
        try:
            store.add_documents([StoredDoc(0, "a", b"d", b"\0" * 512, {}, "text")])
        finally:
            store.unlock_writes()
        store.probe()
        assert store.document("a").id == "a"
    finally:
        store.close()


def test_store_schema_keeps_the_tables_in_their_own_schema(postgres):
    url = postgres.database()
    mine, theirs = PostgresStore(url, "mine"), PostgresStore(url, "theirs")
    try:
        for store in (mine, theirs):
            store.ensure_params(PARAMS)
        mine.lock_writes()
        try:
            mine.add_documents([StoredDoc(0, "only-mine", b"d", b"\0" * 512, {}, "t")])
        finally:
            mine.unlock_writes()
        assert mine.document("only-mine") is not None and theirs.document("only-mine") is None
        assert theirs.changes() == [] and len(mine.changes()) == 0  # mine applied its own
    finally:
        mine.close()
        theirs.close()
    with psycopg.connect(url) as c:
        where = c.execute(
            "SELECT table_schema, count(*) FROM information_schema.tables "
            "WHERE table_name = 'documents' GROUP BY 1 ORDER BY 1"
        ).fetchall()
    assert where == [("mine", 1), ("theirs", 1)]  # nothing in public


def test_the_layout_version_is_recorded_and_a_newer_one_refused(postgres):
    url = postgres.database()
    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as c:
        assert c.execute("SELECT max(version) FROM schema_versions").fetchone() == (SCHEMA_VERSION,)
        c.execute("INSERT INTO schema_versions (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url)
    said = _one_line(str(refused.value))
    assert (
        f"layout version {SCHEMA_VERSION + 1}, newer than this neardup's ({SCHEMA_VERSION})" in said
    )


def test_a_store_made_before_versions_is_version_1_and_keeps_its_documents(postgres):
    url = postgres.database()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(pgstore._SCHEMA)  # the layout as neardup made it before recording versions
        c.execute("INSERT INTO params VALUES ('num_perm', '128')")
        c.execute("INSERT INTO changes (seq, kind, name) VALUES (1, 'put_set', 'evals')")
    store = PostgresStore(url)
    store.close()
    with psycopg.connect(url) as c:
        versions = c.execute("SELECT version FROM schema_versions ORDER BY 1").fetchall()
        assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
        assert c.execute("SELECT value FROM params").fetchall() == [("128",)]
        # version 2: a log entry written before it is dated by the migration (kept a window)
        assert c.execute("SELECT seq, at IS NOT NULL FROM changes").fetchall() == [(1, True)]


def test_an_upgrade_migrates_an_older_layout_once_in_order(postgres, monkeypatch):
    url = postgres.database()
    monkeypatch.setattr(pgstore, "SCHEMA_VERSION", 1)
    PostgresStore(url).close()  # version 1
    monkeypatch.setattr(pgstore, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(
        pgstore,
        "MIGRATIONS",
        {
            2: "ALTER TABLE documents ADD COLUMN lang TEXT",
            3: "UPDATE documents SET lang = 'en'; ALTER TABLE documents ALTER lang SET NOT NULL",
        },
    )
    PostgresStore(url).close()
    PostgresStore(url).close()  # already at 3: nothing runs again (ADD COLUMN would fail)
    with psycopg.connect(url) as c:
        versions = c.execute("SELECT version FROM schema_versions ORDER BY 1").fetchall()
        column = c.execute(
            "SELECT is_nullable FROM information_schema.columns WHERE column_name = 'lang'"
        ).fetchone()
    assert versions == [(1,), (2,), (3,)]
    assert column == ("NO",)


def test_a_store_of_layout_3_is_migrated_to_flush_keeping_its_log(postgres, monkeypatch):
    url = postgres.database()
    with monkeypatch.context() as patched:
        patched.setattr(pgstore, "SCHEMA_VERSION", 3)
        old = PostgresStore(url)
        old.ensure_params(PARAMS)
        old.lock_writes()
        old.add_documents([StoredDoc(0, "a", b"d" * 32, b"\0" * 512, {}, "text")])
        old.close()
    store = PostgresStore(
        url
    )  # layout 4 (then 5, 6, 7): the flush tables, the flush entries of the log
    try:
        assert store.document_count() == 1  # counted in the migration to 7
        store.lock_writes()
        assert store.take_flush(0) == []
        store.lock_writes()
        store.delete_document(0)  # flushed (through 0): recorded for the index
        assert [(i, n) for _, i, _, n in store.index_deletes()] == [("a", 0)]
        store.lock_writes()
        store.set_flush_state({"committed": "{}"}, clear_deletes=2**62)
        with psycopg.connect(url) as c:
            kinds = c.execute("SELECT kind FROM changes ORDER BY seq").fetchall()
            versions = c.execute("SELECT version FROM schema_versions ORDER BY 1").fetchall()
        assert kinds == [("add",), ("flush",), ("delete",), ("flushed",)]
        assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
        assert store.index_deletes() == [] and store.document_count() == 0
        assert store.flush_state() == {
            "deletes_through": "0", "batch_deletes": "0", "committed": "{}"
        }  # fmt: skip
    finally:
        store.close()


def test_a_wrong_or_missing_password_unknown_role_or_database_are_named(postgres):
    _, name, role = _db_and_role(postgres, password="right-Pa55")
    cases = {
        postgres.url(name, role, "wrong-Pa55"): "the server refused role",
        postgres.url(name, role): "asks role",
        postgres.url(name, "nobody_here"): "CREATE ROLE nobody_here LOGIN",
        postgres.url("no_such_db", role, "right-Pa55"): f"CREATE DATABASE no_such_db OWNER {role}",
    }
    for bad, expected in cases.items():
        with pytest.raises(StoreRefused) as refused:
            PostgresStore(bad)
        said = _one_line(str(refused.value))
        assert expected in said
        assert "Pa55" not in said
    away = f"postgresql://{role}:right-Pa55@127.0.0.1:{free_port()}/{name}"
    with pytest.raises(StoreUnavailable) as unavailable:
        PostgresStore(away)
    assert not isinstance(unavailable.value, StoreRefused)
    said = _one_line(str(unavailable.value))
    assert "is unavailable" in said and "Pa55" not in said


def test_an_unreadable_url_is_refused_without_quoting_it():
    with pytest.raises(StoreRefused) as refused:
        PostgresStore("postgresql://me:s3cr%zzet@127.0.0.1:1/db")
    said = _one_line(str(refused.value))
    assert "percent-encode" in said and "s3cr" not in said


def test_the_url_s_options_are_kept_and_a_search_path_there_is_refused(postgres):
    url = postgres.database()
    store = PostgresStore(f"{url}?options=-c%20work_mem%3D7MB", "nd")
    try:
        shown = store._run(
            lambda c: c.execute(
                "SELECT current_setting('work_mem'), current_setting('search_path')"
            ).fetchone()
        )
        assert shown == ("7MB", "nd")
    finally:
        store.close()
    with pytest.raises(StoreRefused, match="NEARDUP_STORE_SCHEMA"):
        PostgresStore(f"{url}?options=-csearch_path%3Dother")


def test_a_role_name_sql_must_quote_is_quoted_in_the_grant(postgres):
    name = postgres.database().rsplit("/", 1)[1]
    role = postgres.role(prefix="Ops")  # mixed case: SQL needs it quoted
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(postgres.url(name, role))
    assert f'GRANT USAGE, CREATE ON SCHEMA public TO "{role}";' in str(refused.value)


# What the server says (as PostgreSQL and libpq word it) -> the fix the refusal names.
_REFUSALS = [
    (
        'permission denied for schema "nd"',
        "role {r} may not create or use tables in schema nd (PostgreSQL 15 and later no longer "
        "let every role create in schema public): as the schema's owner or a superuser run: "
        "GRANT USAGE, CREATE ON SCHEMA nd TO {r}; or give neardup its own schema: CREATE SCHEMA "
        "neardup AUTHORIZATION {r}; and set NEARDUP_STORE_SCHEMA=neardup",
    ),
    (
        "permission denied for table documents",
        "role {r} lacks a privilege on documents: as the tables' owner run: GRANT SELECT, "
        "INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {r}; GRANT USAGE ON ALL "
        "SEQUENCES IN SCHEMA public TO {r}",
    ),
    (
        "must be owner of table changes",
        "role {r} must own changes to migrate the store: run this neardup once as the tables' "
        "owner, or ALTER TABLE ... OWNER TO {r}",
    ),
    (
        'FATAL:  permission denied for database "{d}"\nDETAIL:  User does not have CONNECT '
        "privilege.",
        "role {r} may not connect to database {d}: GRANT CONNECT ON DATABASE {d} TO {r}",
    ),
    (
        'FATAL:  password authentication failed for user "{r}"',
        "the server refused role {r}'s password: give the right one in the URL, in PGPASSWORD "
        "or in ~/.pgpass (mode 0600)",
    ),
    (
        "fe_sendauth: no password supplied",
        "the server asks role {r} for a password and none was given: put it in the URL "
        "(percent-encoded), in PGPASSWORD or in ~/.pgpass (mode 0600)",
    ),
    (
        'FATAL:  role "Ops x" does not exist',
        'role "Ops x" does not exist: CREATE ROLE "Ops x" LOGIN PASSWORD \'...\'',
    ),
    (
        'FATAL:  database "nope" does not exist',
        "database nope does not exist: CREATE DATABASE nope OWNER {r}",
    ),
    (
        'FATAL:  no pg_hba.conf entry for host "10.1.2.3", user "{r}", database "{d}", no '
        "encryption",
        "the server's pg_hba.conf has no entry for role {r}, database {d} from this host (with "
        "this sslmode): ask its administrator to add one",
    ),
]


def test_each_refusal_the_server_words_is_named_with_its_fix_in_one_line(pg_url):
    store = PostgresStore(pg_url)
    try:
        role, db = "postgres", pg_url.rsplit("/", 1)[1]
        for said, fix in _REFUSALS:
            said = said.format(r=role, d=db)
            told = store._explain(psycopg.OperationalError(said))
            assert isinstance(told, StoreRefused)
            assert str(told) == (
                f"the store at {store.where} refused: {fix.format(r=role, d=db)} "
                f"({' '.join(said.split())})"
            )
        other = store._explain(psycopg.errors.InsufficientPrivilege("permission denied for x"))
        assert str(other) == (
            f"the store at {store.where} refused: role postgres lacks a privilege (permission "
            "denied for x); docs/postgres.md lists the grants"
        )
        away = store._explain(psycopg.OperationalError("connection refused\n  here"))
        assert type(away) is StoreUnavailable
        assert str(away) == f"the store at {store.where} is unavailable: connection refused here"
    finally:
        store.close()


def test_a_database_with_another_program_s_documents_table_is_refused_in_one_line(postgres):
    url = postgres.database()
    with psycopg.connect(url, autocommit=True) as c:  # a "documents" table, not the store's
        c.execute("CREATE TABLE documents (num BIGINT PRIMARY KEY, title TEXT)")
        c.execute("CREATE TABLE changes (seq BIGINT PRIMARY KEY)")
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url)
    where = url.replace("postgres@", "")
    assert str(refused.value) == f'the store at {where} refused: column "deleted" does not exist'


def test_a_password_the_server_quotes_back_is_not_printed(postgres):
    secret = "Nd7secret"  # also the database's name: the server's refusal quotes it
    bad = f"postgresql://postgres:{secret}@127.0.0.1:{postgres.port}/{secret}"
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(bad)
    said = _one_line(str(refused.value))
    assert said == (
        f'the store at postgresql://127.0.0.1:{postgres.port}/*** refused: database "***" does '
        'not exist: CREATE DATABASE "***" OWNER postgres (connection failed: connection to server '
        f'at "127.0.0.1", port {postgres.port} failed: FATAL: database "***" does not exist)'
    )


def test_a_quote_in_a_role_s_name_is_doubled_in_the_grant(postgres):
    name = postgres.database().rsplit("/", 1)[1]
    role = postgres.role(prefix='Q"t')
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(postgres.url(name, role.replace('"', "%22")))
    quoted = '"' + role.replace('"', '""') + '"'
    assert f"GRANT USAGE, CREATE ON SCHEMA public TO {quoted};" in str(refused.value)


def test_an_empty_schema_versions_table_is_version_1_and_migrated(postgres, caplog):
    url = postgres.database()
    with psycopg.connect(url, autocommit=True) as c:  # versions' table made, none recorded
        c.execute(pgstore._SCHEMA)
        c.execute(pgstore._VERSIONS)
    with caplog.at_level("INFO", logger="neardup"):
        PostgresStore(url).close()
    assert "migrating the store to layout version 2" in caplog.messages
    with psycopg.connect(url) as c:
        versions = c.execute("SELECT version FROM schema_versions ORDER BY 1").fetchall()
        dated = c.execute("SELECT count(*) FROM changes WHERE at IS NOT NULL").fetchone()
    assert versions == [(v,) for v in range(2, SCHEMA_VERSION + 1)] and dated == (0,)


def test_each_connection_has_the_durability_timeouts_and_keepalives_it_promises(postgres):
    url = postgres.database()
    store = PostgresStore(url, "nd")
    names = [
        "synchronous_commit",
        "statement_timeout",
        "idle_in_transaction_session_timeout",
        "search_path",
        "tcp_keepalives_idle",
        "tcp_keepalives_interval",
        "tcp_keepalives_count",
    ]
    try:
        shown = store._run(lambda c: [c.execute(f"SHOW {n}").fetchone()[0] for n in names])
        client = store._run(lambda c: c.info.get_parameters())
    finally:
        store.close()
    assert dict(zip(names, shown, strict=True)) == {
        "synchronous_commit": "on",
        "statement_timeout": "30s",
        "idle_in_transaction_session_timeout": "1min",
        "search_path": "nd",
        "tcp_keepalives_idle": "10",
        "tcp_keepalives_interval": "5",
        "tcp_keepalives_count": "3",
    }
    wanted = ("connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval")
    assert {k: client.get(k) for k in (*wanted, "keepalives_count")} == {
        "connect_timeout": "3",
        "keepalives": "1",
        "keepalives_idle": "5",
        "keepalives_interval": "2",
        "keepalives_count": "3",
    }


def test_a_url_without_a_database_is_named_without_one(postgres):
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(f"postgresql://nobody_here@127.0.0.1:{postgres.port}")
    assert str(refused.value).startswith(
        f"the store at postgresql://127.0.0.1:{postgres.port}/ refused: role nobody_here does "
    )


def test_a_role_that_may_not_connect_is_refused_naming_the_url_s_database(postgres):
    url, name, role = _db_and_role(postgres)
    with psycopg.connect(postgres.url(name), autocommit=True) as c:
        c.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(sql.Identifier(name)))
    with pytest.raises(StoreRefused) as refused:
        PostgresStore(url)
    assert f"GRANT CONNECT ON DATABASE {name} TO {role} (" in _one_line(str(refused.value))


def test_an_unreadable_url_is_refused_with_the_whole_advice():
    with pytest.raises(StoreRefused) as refused:
        PostgresStore("postgresql://me:s3cr%zzet@127.0.0.1:1/db")
    assert str(refused.value) == (
        "the store URL cannot be read: percent-encode any @ : / ? # % or space in its user or "
        "password (or give the password in PGPASSWORD or ~/.pgpass)"
    )


def test_a_search_path_in_the_url_is_refused_with_the_whole_advice():
    with pytest.raises(StoreRefused) as refused:
        PostgresStore("postgresql://me@127.0.0.1:1/db?options=-csearch_path%3Dother")
    assert str(refused.value) == (
        "the store URL sets search_path in its options: name the store's schema with "
        "NEARDUP_STORE_SCHEMA (--store-schema) instead"
    )


def test_stores_in_two_schemas_of_one_database_do_not_wait_for_each_other(postgres):
    url = postgres.database()
    first, second = PostgresStore(url, "first"), PostgresStore(url, "second", timeout=5.0)
    try:
        first.lock_writes()  # held: a write of the other schema's store goes ahead
        second.lock_writes()
        second.add_documents([StoredDoc(0, "a", b"d", b"\0" * 512, {}, None)])
        assert second.document("a") is not None and first.document("a") is None
    finally:
        first.close()
        second.close()
