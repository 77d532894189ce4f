"""The embedded store's document count, kept by triggers (``document_count``): a start reads
it instead of counting every row, so it must stay the table's count through every write."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.service.store import SQLiteStore, StoredDoc


def _doc(num: int, doc_id: str) -> StoredDoc:
    return StoredDoc(num, doc_id, b"d%d" % num, b"s%d" % num, {}, f"text {num}")


def _counted(path: Path) -> int:
    db = sqlite3.connect(path / "neardup.sqlite3")
    try:
        return int(db.execute("SELECT count(*) FROM documents").fetchone()[0])
    finally:
        db.close()


# add n new documents / delete the k-th live one / replace the k-th / delete several / reopen
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 5)),
        st.tuples(st.just("delete"), st.integers(0, 50)),
        st.tuples(st.just("replace"), st.integers(0, 50)),
        st.tuples(st.just("delete_many"), st.integers(1, 4)),
        st.tuples(st.just("reopen"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(_OPS)
def test_the_count_kept_is_the_tables_count_after_every_write(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        store = SQLiteStore(path)
        live: list[tuple[int, str]] = []  # (num, id) in number order
        made = 0
        try:
            for op, k in ops:
                if op == "add":
                    new = [(made + j, f"id{made + j}") for j in range(k)]
                    store.add_documents([_doc(n, i) for n, i in new])
                    live += new
                    made += k
                elif op == "delete" and live:
                    store.delete_document(live.pop(k % len(live))[0])
                elif op == "replace" and live:
                    old, doc_id = live.pop(k % len(live))
                    store.replace_document(old, _doc(made, doc_id))
                    live.append((made, doc_id))
                    made += 1
                elif op == "delete_many" and live:
                    gone, live = live[:k], live[k:]
                    store.delete_documents([n for n, _ in gone])
                elif op == "reopen":
                    store.close()
                    store = SQLiteStore(path)
                assert store.document_count() == len(live) == _counted(path)
                if live:  # a range counted from the table
                    assert store.document_count(live[0][0]) == len(live) - 1
        finally:
            store.close()


def test_a_store_made_before_the_count_is_counted_once_at_open(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    store.add_documents([_doc(n, f"id{n}") for n in range(7)])
    store.close()
    db = sqlite3.connect(tmp_path / "neardup.sqlite3")
    db.executescript(
        "DROP TRIGGER documents_counted_insert; DROP TRIGGER documents_counted_delete; "
        "DROP TABLE document_count;"
    )
    db.close()
    store = SQLiteStore(tmp_path)  # counted here, then kept
    try:
        assert store.document_count() == 7
        store.delete_document(3)
        store.add_documents([_doc(7, "id7"), _doc(8, "id8")])
        assert store.document_count() == 8 == _counted(tmp_path)
    finally:
        store.close()
    store = SQLiteStore(tmp_path)  # not counted again (nor added to)
    try:
        assert store.document_count() == 8
    finally:
        store.close()
