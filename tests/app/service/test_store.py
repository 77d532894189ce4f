"""The SQLite store: protected sets keep their format in a column (older data directories are
migrated once, on open); WAL with full fsync; one open store per data directory; a damaged
file, missing parameters or other index parameters are refused; a full disk is StoreFull."""

import asyncio
import json
import os
import socket
import sqlite3
import sys
from importlib.metadata import version

import pytest

from neardup.app.config import Settings
from neardup.app.service import DamagedStore, DataDirLocked, ParameterMismatch, StoreFull, pgstore
from neardup.app.service.errors import SettingsChanged, SettingsMismatch, StoreUnavailable
from neardup.app.service.store import (
    ProtectedSetRow,
    SQLiteStore,
    StoredDoc,
    changed_settings,
    check_params,
    open_store,
)
from neardup.core.engine import MinhashParams, ProtectedFormat, parse_protected_set

JSONL = '{"id": "q1", "question": "one two three four"}\n'
TEXT = "jsonl-looking text that is plain"


def test_a_protected_sets_format_is_a_column_not_part_of_its_body(tmp_path):
    store = SQLiteStore(tmp_path)
    store.put_protected_set(ProtectedSetRow("evals", 1, 1, ProtectedFormat.JSONL, JSONL))
    store.put_protected_set(ProtectedSetRow("notes", 1, 1, ProtectedFormat.TEXT, TEXT))
    store.close()
    store = SQLiteStore(tmp_path)
    rows = {r.name: r for r in store.protected_sets()}
    store.close()
    assert (rows["evals"].format, rows["evals"].body) == (ProtectedFormat.JSONL, JSONL)
    assert (rows["notes"].format, rows["notes"].body) == (ProtectedFormat.TEXT, TEXT)
    db = sqlite3.connect(tmp_path / "neardup.sqlite3")
    assert db.execute("SELECT body FROM protected_sets WHERE name = 'notes'").fetchone() == (TEXT,)


def test_an_older_data_directory_is_migrated_once(tmp_path):
    db = sqlite3.connect(tmp_path / "neardup.sqlite3")
    db.execute(
        "CREATE TABLE protected_sets (name TEXT PRIMARY KEY, items INTEGER NOT NULL, "
        "ngrams INTEGER NOT NULL, body TEXT NOT NULL)"
    )
    db.execute("INSERT INTO protected_sets VALUES ('evals', 1, 0, ?)", ("j" + JSONL,))
    db.execute("INSERT INTO protected_sets VALUES ('notes', 1, 0, ?)", ("t" + TEXT,))
    db.commit()
    db.close()
    for _ in range(2):  # a second open must not strip another character
        store = SQLiteStore(tmp_path)
        rows = {r.name: r for r in store.protected_sets()}
        store.close()
        assert (rows["evals"].format, rows["evals"].body) == (ProtectedFormat.JSONL, JSONL)
        assert (rows["notes"].format, rows["notes"].body) == (ProtectedFormat.TEXT, TEXT)
    parsed = parse_protected_set("evals", rows["evals"].body, rows["evals"].format, n=4)
    assert parsed.items == 1
    assert parsed.hits("say one two three four") == [("q1", "one two three four")]


def test_the_connection_is_wal_with_full_fsync(tmp_path):
    store = SQLiteStore(tmp_path)
    try:
        assert store._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert store._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    finally:
        store.close()


def test_the_data_directory_is_locked_while_the_store_is_open(tmp_path):
    store = SQLiteStore(tmp_path)
    try:
        holder = json.loads((tmp_path / "neardup.lock").read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(DataDirLocked, match=rf"in use by pid {os.getpid()} on host "):
            SQLiteStore(tmp_path)
    finally:
        store.close()
    SQLiteStore(tmp_path).close()  # released on close


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"",
            "is 0 bytes: it holds no documents and no index parameters; restore it from a "
            "backup, or remove it to start an empty store$",
        ),
        (b"not a database at all " * 50, "damaged or not a neardup store: file is not a database"),
    ],
)
def test_an_empty_or_foreign_database_file_is_refused(tmp_path, content, message):
    (tmp_path / "neardup.sqlite3").write_bytes(content)
    with pytest.raises(DamagedStore, match=message):
        SQLiteStore(tmp_path)
    # The lock was released: a later open gets as far as the file again.
    with pytest.raises(DamagedStore):
        SQLiteStore(tmp_path)


def test_stored_documents_without_parameters_are_refused(tmp_path):
    params = MinhashParams().index_params()
    store = SQLiteStore(tmp_path)
    store.add_documents([StoredDoc(0, "a", b"d", b"\0" * 512, {}, "text")])
    with pytest.raises(DamagedStore) as damaged:
        store.ensure_params(params)
    assert str(damaged.value) == (
        f"{store.path} holds documents or protected sets but no index parameters (its params "
        "table is empty): refusing to guess them"
    )
    store._db.execute("INSERT INTO params VALUES ('num_perm', '128')")
    with pytest.raises(DamagedStore, match="its params table lacks BANDS, K, SEED"):
        store.ensure_params(params)
    store.close()


def test_a_new_store_records_its_parameters_and_refuses_each_changed_one(tmp_path):
    params = MinhashParams().index_params()
    assert set(params) == {"num_perm", "bands", "k", "seed", "tokenizer"}
    store = SQLiteStore(tmp_path)
    store.ensure_params(params)
    changed = [
        ("num_perm", 64),
        ("bands", 32),
        ("k", 4),
        ("seed", 1),
        ("tokenizer", "multilingual"),
    ]
    for key, value in changed:
        with pytest.raises(ParameterMismatch) as refused:
            store.ensure_params({**params, key: value})
        hint = (
            " (a store is never extended under another tokenizer or version of it: start with "
            "the store's, or build a new store from the documents, docs/index.md)"
        )
        assert str(refused.value) == (
            f"{store.path}: {key.upper()} is {value} but the data directory was created with "
            f"{params[key]}" + (hint if key == "tokenizer" else "")
        )
    store.ensure_params(params)
    store.close()


def test_a_failed_commit_is_rolled_back_and_a_full_disk_is_store_full(tmp_path):
    store = SQLiteStore(tmp_path)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count={pages}")
    doc = StoredDoc(0, "a", b"d", b"\0" * 512, {}, "x" * 100_000)
    with pytest.raises(StoreFull, match="database or disk is full; nothing was stored"):
        store.add_documents([doc])
    with pytest.raises(StoreFull):
        store.probe()
    assert not store._db.in_transaction
    store._db.execute("PRAGMA max_page_count=4294967294")
    store.probe()
    store.add_documents([doc])
    assert store.extent() == 1
    store.close()


QUESTION = "what is the capital city of the country that lies north of the river in the story"


def test_a_set_stored_with_nan_before_it_was_refused_loads_reading_it_as_null(tmp_path, caplog):
    """Uploads with NaN or Infinity are refused now, but a store written before holds them:
    such a set failed to parse at start and was left out (it protected nothing). It loads,
    NaN as null, with a warning naming it; a set broken otherwise stays left out."""
    from neardup.app.config import Settings
    from neardup.app.service import Service

    old = (
        f'{{"id": "q1", "score": NaN, "question": "{QUESTION}"}}\n'
        '{"id": "q2", "weights": [1.5, Infinity, -Infinity], "question": "another one"}\n'
    )
    settings = Settings(data_dir=tmp_path, workers=1)
    store = SQLiteStore(tmp_path)  # as the service stored an upload before: its body as sent
    store.ensure_params(settings.params.index_params())
    store.put_protected_set(ProtectedSetRow("old", 2, 5, ProtectedFormat.JSONL, old))
    store.put_protected_set(ProtectedSetRow("bad", 1, 0, ProtectedFormat.JSONL, '{"id": \n'))
    store.close()

    async def started() -> tuple:
        service = await Service.start(settings)
        try:
            hits = await service.contamination([f"so {QUESTION}"], None, "t", protect=True)
            return sorted(service.protected), sorted(service.broken_sets), hits
        finally:
            await service.close()

    loaded, broken, [hits] = asyncio.run(started())
    assert loaded == ["old"] and broken == ["bad"]
    assert hits.total == 1 and hits.listed[0][:2] == ("old", "q1")
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warning.startswith("protected set 'old': old:1: NaN is not JSON (field 'score')")
    assert "stored before NaN and Infinity were refused: read as null" in warning
    parsed = parse_protected_set("old", old, ProtectedFormat.JSONL, nan_as_null=True)
    assert parsed.items == 2
    with pytest.raises(ValueError, match="NaN is not JSON"):
        parse_protected_set("old", old, ProtectedFormat.JSONL)


def test_answer_settings_are_recorded_once_and_another_is_refused_naming_the_ways_out(tmp_path):
    """The answer settings a store lacks are recorded; another value of one is refused,
    naming each (both values) and the two ways out; ``set_settings`` replaces them and
    answers what was recorded before."""
    store = SQLiteStore(tmp_path)
    try:
        store.ensure_settings({"threshold": "0.8"})
        store.ensure_settings({"threshold": "0.8", "ngram": "13", "max_matches": "100"})
        with pytest.raises(SettingsMismatch) as refused:
            store.ensure_settings({"threshold": "0.6", "ngram": "13", "max_matches": "5"})
        assert str(refused.value) == (
            f"{store.path}: THRESHOLD is 0.6 but the store's replicas answer with 0.8; "
            "MAX_MATCHES is 5 but the store's replicas answer with 100: start with "
            "NEARDUP_THRESHOLD=0.8 NEARDUP_MAX_MATCHES=100, or change it for every replica "
            "with neardup store-settings --threshold 0.6 --max-matches 5 (then restart them)"
        )
        before = store.set_settings({"threshold": "0.6", "max_matches": "5"})
        assert before == {"threshold": "0.8", "ngram": "13", "max_matches": "100"}
        assert store.set_settings({}) == {"threshold": "0.6", "ngram": "13", "max_matches": "5"}
    finally:
        store.close()
    store = SQLiteStore(tmp_path)  # durable
    try:
        store.ensure_settings({"threshold": "0.6", "ngram": "13", "max_matches": "5"})
    finally:
        store.close()


def test_settings_changed_while_serving_name_each_change():
    changed_settings("here", {"threshold": "0.8", "ngram": "13"}, {"threshold": "0.8"})
    with pytest.raises(SettingsChanged) as changed:
        changed_settings("here", {"threshold": "0.6"}, {"threshold": "0.8", "ngram": "13"})
    assert str(changed.value) == (
        "the settings locked in the store at here were changed (THRESHOLD 0.8 -> 0.6; "
        "NGRAM 13 -> None): this replica answers no more until it is restarted with them"
    )


def test_a_store_made_before_the_tokenizer_parameter_holds_words(tmp_path):
    """Parameters recorded before ``tokenizer`` existed reopen with ``words`` and refuse
    ``multilingual``; a store lacking any other parameter is damaged."""
    params = MinhashParams().index_params()
    older = {k: str(v) for k, v in params.items() if k != "tokenizer"}
    check_params("old", "the data directory", older, params)
    with pytest.raises(ParameterMismatch) as other:
        check_params("old", "the data directory", older, {**params, "tokenizer": "multilingual"})
    assert str(other.value) == (
        "old: TOKENIZER is multilingual but the data directory was created with words (a store "
        "is never extended under another tokenizer or version of it: start with the store's, or "
        "build a new store from the documents, docs/index.md)"
    )
    with pytest.raises(DamagedStore) as damaged:
        check_params(
            "old", "it", {k: v for k, v in older.items() if k not in ("k", "bands")}, params
        )
    assert str(damaged.value) == "old: its params table lacks BANDS, K"


@pytest.mark.parametrize("previous", ["multilingual", "multilingual-2@17.0.0"])
def test_a_store_of_the_previous_multilingual_tokenizer_is_refused_naming_both(tmp_path, previous):
    """The lock records the tokenizer with its version; a store made by the first multilingual
    tokenizer (which recorded its plain name) or the second (which normalized with the running
    Python's unicodedata) is never opened with the third."""
    params = MinhashParams(tokenizer="multilingual").index_params()
    assert params["tokenizer"] == "multilingual-3@17.0.0"
    store = SQLiteStore(tmp_path)
    try:
        store.ensure_params({**params, "tokenizer": previous})
        with pytest.raises(ParameterMismatch) as caught:
            store.ensure_params(params)
    finally:
        store.close()
    assert str(caught.value).endswith(
        ": TOKENIZER is multilingual-3@17.0.0 but the data directory was created with "
        f"{previous} (a store is never extended under another tokenizer or version of it: "
        "start with the store's, or build a new store from the documents, docs/index.md)"
    )
    store = SQLiteStore(tmp_path / "new")
    try:
        store.ensure_params(params)
        store.ensure_params(params)  # reopened by the same version
    finally:
        store.close()


def test_reads_of_many_documents_are_chunked_and_signatures_come_in_batches(tmp_path):
    """1,001 documents (over SQLite's 500 bound values a query): every digest and text is
    read; signatures come ``batch`` rows at a time, in number order."""
    docs = [StoredDoc(n, f"d{n}", bytes([n % 256]) * 4, bytes([n % 7]) * 8, {}, f"t{n}")
            for n in range(1001)]  # fmt: skip
    store = SQLiteStore(tmp_path)
    try:
        store.add_documents(docs[::-1])
        assert store.digests([d.id for d in docs] + ["nope"]) == {d.id: d.digest for d in docs}
        assert store.texts(list(range(1002))) == {d.num: d.text for d in docs}
        batches = list(store.iter_signatures(400))
        assert [len(nums) for nums, _, _ in batches] == [400, 400, 201]
        assert [n for nums, _, _ in batches for n in nums] == list(range(1001))
        assert [i for _, ids, _ in batches for i in ids] == [d.id for d in docs]
        assert b"".join(sigs for _, _, sigs in batches) == b"".join(d.sig for d in docs)
        assert (store.extent(), store.document_count()) == (1001, 1001)
        store.delete_document(1000)
        assert (store.extent(), store.document_count()) == (1000, 1000)
    finally:
        store.close()


def test_a_store_of_protected_sets_only_without_parameters_is_refused(tmp_path):
    store = SQLiteStore(tmp_path / "new" / "data")  # its parents are made too
    try:
        store.put_protected_set(ProtectedSetRow("evals", 1, 1, ProtectedFormat.TEXT, TEXT))
        with pytest.raises(DamagedStore, match="holds documents or protected sets but no index"):
            store.ensure_params(MinhashParams().index_params())
    finally:
        store.close()


def test_a_replaced_document_takes_a_new_number_and_the_embedded_store_has_no_log(tmp_path):
    store = SQLiteStore(tmp_path)
    try:
        assert (store.extent(), store.document_count()) == (0, 0)
        store.add_documents([StoredDoc(0, "a", b"d0", b"s0", {"v": 1}, "old"),
                             StoredDoc(1, "b", b"d1", b"s1", {}, "other")])  # fmt: skip
        store.replace_document(0, StoredDoc(2, "a", b"d2", b"s2", {"v": 2}, "new"))
        assert store.document("a") == StoredDoc(2, "a", b"d2", b"s2", {"v": 2}, "new")
        assert store.texts([0, 1, 2]) == {1: "other", 2: "new"}
        assert (store.extent(), store.document_count()) == (3, 2)
        assert (store.lock_writes(), store.changes(), store.position()) == ([], [], None)
        assert (store.prune(0.0, 10), store.available()) == (0, True)
    finally:
        store.close()


def test_an_error_that_is_not_sqlite_s_rolls_back_and_is_raised_as_it_is(tmp_path):
    store = SQLiteStore(tmp_path)
    try:
        unstorable = StoredDoc(1, "b", b"d", b"s", {"set": {1}}, "t")
        with pytest.raises(TypeError, match=r"^Object of type set is not JSON serializable$"):
            store.add_documents([StoredDoc(0, "a", b"d", b"s", {}, "t"), unstorable])
        assert not store._db.in_transaction and store.document_count() == 0
    finally:
        store.close()


class _FailingDb:
    """A connection whose first statement fails with ``error``."""

    def __init__(self, error: sqlite3.Error) -> None:
        self.error = error
        self.closed = False

    def execute(self, *args):
        raise self.error

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(
    ("code", "full"),
    [(sqlite3.SQLITE_FULL, True), (sqlite3.SQLITE_IOERR | (3 << 8), True),
     (sqlite3.SQLITE_READONLY, False)],
)  # fmt: skip
def test_a_full_or_failing_disk_while_opening_is_store_full_and_other_errors_are_raised(
    tmp_path, monkeypatch, code, full
):
    """(SQLITE_IOERR_WRITE is an extended code of SQLITE_IOERR.) The connection is closed and
    the data directory's lock released either way."""
    error = sqlite3.OperationalError("no room")
    error.sqlite_errorcode = code
    db = _FailingDb(error)
    monkeypatch.setattr(sqlite3, "connect", lambda *args, **kwargs: db)
    path = tmp_path / "neardup.sqlite3"
    with pytest.raises(StoreFull if full else sqlite3.OperationalError) as failed:
        SQLiteStore(tmp_path)
    assert str(failed.value) == (f"{path}: no room" if full else "no room") and db.closed
    monkeypatch.undo()
    SQLiteStore(tmp_path).close()


def test_open_store_opens_the_shared_store_at_store_url_or_says_what_to_install(
    tmp_path, monkeypatch
):
    """STORE_URL names PostgreSQL (its schema and timeout passed on); without the postgres
    extra the error says how to install it; without STORE_URL the data directory's SQLite."""
    url = "postgresql://u:p@localhost:5432/db"
    settings = Settings(data_dir=tmp_path, store_url=url, store_schema="s1", store_timeout=7.5)
    opened = []
    monkeypatch.setattr(pgstore, "PostgresStore", lambda *args: opened.append(args) or args)
    assert open_store(settings) == (url, "s1", 7.5) and opened == [(url, "s1", 7.5)]
    monkeypatch.setitem(sys.modules, "neardup.app.service.pgstore", None)  # not importable
    with pytest.raises(StoreUnavailable) as missing:
        open_store(settings)
    assert str(missing.value).startswith(
        "STORE_URL needs the postgres extra (psycopg): pip install -e '.[postgres]' in a clone "
        f"of neardup, or pip install 'neardup-{version('neardup')}-py3-none-any.whl[postgres]' "
        "from its wheel (import of neardup.app.service.pgstore halted"
    )
    store = open_store(Settings(data_dir=tmp_path))
    try:
        assert isinstance(store, SQLiteStore) and store.path == tmp_path / "neardup.sqlite3"
    finally:
        store.close()
