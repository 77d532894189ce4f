"""The Service's operations (app.service.operations), in process, the way the routes call them:
registration (if_new, re-sent, conflicts), queries, documents, replacement and deletion,
clusters and counts, protected sets and their quotas, contamination and decontamination with
the per-caller rates, recovery from the store, readiness after a full disk, and a shared
store's log applied. A real Service on SQLite in ``tmp_path`` with the real pool on threads
(``service_in``); each answer is checked against the store's rows and the index."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from neardup.app.config import Settings
from neardup.app.service import DecontRequest, NewDoc, Service, operations, views
from neardup.app.service import index as index_module
from neardup.app.service import limits as limits_module
from neardup.app.service import pool as pool_module
from neardup.app.service.errors import (
    Conflict,
    NotFound,
    OutOfReach,
    ProtectScopeNeeded,
    QuotaExceeded,
    RateLimited,
    StoreFull,
    TooLarge,
)
from neardup.app.service.store import Change, ProtectedSetRow, SQLiteStore, StoredDoc
from neardup.core.engine import (
    DecontMode,
    DecontParams,
    Doc,
    DuplicateIdError,
    ParameterError,
    ProtectedFormat,
    Thresholds,
    WorkerError,
    collision_message,
    piece_collision,
    text_digest,
)
from tests.app.service.cluster_reads import memory_roots, page

BASE = " ".join(f"word{i}" for i in range(40))
OTHER = " ".join(f"other{i} thing{i * 3}" for i in range(40))
THIRD = " ".join(f"third{i}" for i in range(40))
# 13 words of an eval item, and texts that hold them (or not).
ITEM_A = " ".join(f"alpha{i}" for i in range(20))
ITEM_B = " ".join(f"beta{i}" for i in range(20))
SET_BODY = json.dumps({"id": "a", "text": ITEM_A}) + "\n" + json.dumps({"id": "b", "text": ITEM_B})
PAD = " ".join(f"pad{i}" for i in range(300))


def _near(i: int) -> str:
    """A near copy of BASE (one more word at the end)."""
    return f"{BASE} extra{i}"


def _run(coro):
    return asyncio.run(coro)


# --- registration ---------------------------------------------------------------------------


def test_register_stores_each_document_and_answers_in_request_order(service_in):
    """Created documents: results in request order with their clusters and matches; each row
    is stored with its text, digest, signature and meta, numbered in batch order."""

    async def run():
        async with service_in() as service:
            got = await service.register(
                [NewDoc("b", _near(1), {"k": 1}), NewDoc("a", _near(2), {}),
                 NewDoc("z", OTHER, {"x": [1]})]
            )  # fmt: skip
            rows = {i: service.store.document(i) for i in ("a", "b", "z")}
            sigs = await service.signatures([_near(1)])
            return got, rows, sigs, len(service.index), service.index.root_of("a")

    got, rows, sigs, size, root = _run(run())
    assert [(r.id, r.status) for r in got] == [("b", "created"), ("a", "created"), ("z", "created")]
    assert got[0].cluster == got[1].cluster == root == "a"  # the smallest id
    assert got[2].cluster == "z"
    assert got[0].matches.count == 0 and got[1].matches.count == 1
    assert [i for i, _ in got[1].matches.best] == ["b"]
    assert got[2].matches.count == 0 and got[2].matches.best == []
    assert size == 3
    assert [rows[i].num for i in ("b", "a", "z")] == [0, 1, 2]
    assert rows["b"].text == _near(1) and rows["b"].meta == {"k": 1}
    assert rows["z"].meta == {"x": [1]}
    assert rows["b"].digest == text_digest(_near(1))
    assert rows["b"].sig == sigs[0].astype("<u4").tobytes()


def test_register_without_stored_texts_keeps_no_text(service_in):
    async def run():
        async with service_in(store_text=False) as service:
            await service.register([NewDoc("a", BASE, {"m": 2})])
            return service.store.document("a"), await service.texts(["a"])

    row, texts = _run(run())
    assert row.text is None and row.meta == {"m": 2} and texts == {}


def test_a_resent_document_is_unchanged_with_its_earlier_matches(service_in):
    """A document sent again with its text is ``unchanged``: not stored twice; its matches are
    those among the documents registered before it, new ones after it are not counted."""

    async def run():
        async with service_in() as service:
            await service.register([NewDoc("a", _near(1), {}), NewDoc("b", _near(2), {})])
            again = await service.register(
                [NewDoc("c", _near(3), {}), NewDoc("b", _near(2), {"other": "meta"}),
                 NewDoc("a", _near(1), {})]
            )  # fmt: skip
            return again, service.store.document_count(), service.store.document("b")

    again, count, row = _run(run())
    assert [(r.id, r.status) for r in again] == [
        ("c", "created"), ("b", "unchanged"), ("a", "unchanged")
    ]  # fmt: skip
    assert count == 3 and row.meta == {}
    assert again[0].matches.count == 2
    assert (again[1].matches.count, [i for i, _ in again[1].matches.best]) == (1, ["a"])
    assert again[2].matches.count == 0
    assert {r.cluster for r in again} == {"a"}


def test_a_registered_id_with_another_text_is_a_conflict_and_nothing_is_stored(service_in):
    async def run():
        async with service_in() as service:
            ids = [f"id{i:02d}" for i in range(12)]
            await service.register([NewDoc(i, f"{i} {BASE}", {}) for i in ids])
            batch = [NewDoc("new", OTHER, {})] + [NewDoc(i, f"{i} changed", {}) for i in ids]
            with pytest.raises(Conflict) as caught:
                await service.register(batch)
            found = caught.value
            return str(found), found.ids, service.store.document_count(), "new" in service.index

    message, conflicts, count, indexed = _run(run())
    listed = ", ".join(f"id{i:02d}" for i in range(10))
    assert message == f"already registered with a different text: {listed} and 2 more"
    assert conflicts == [f"id{i:02d}" for i in range(12)]  # every one, for the 409's body
    assert count == 12 and not indexed


def test_a_batch_repeating_an_id_is_refused_naming_each_repeated_id(service_in):
    async def run():
        async with service_in() as service:
            docs = [NewDoc(i, f"{i} {BASE}", {}) for i in ("y", "x", "y", "w", "x", "x")]
            with pytest.raises(DuplicateIdError) as caught:
                await service.register(docs)
            return caught.value, service.store.document_count()

    error, count = _run(run())
    assert "x" in str(error) and "y" in str(error) and "w" not in str(error)
    assert count == 0


def test_register_if_new_answers_copies_duplicate_and_stores_only_the_first(service_in):
    """``if_new``: a copy of a registered document, or of one earlier in the batch, is
    ``duplicate`` in the cluster of its best match, with its matches, and is not stored."""

    async def run():
        async with service_in() as service:
            await service.register([NewDoc("seed", _near(1), {})])
            got = await service.register(
                [NewDoc("copy", _near(2), {}), NewDoc("new", OTHER, {}),
                 NewDoc("new-copy", OTHER + " more", {}), NewDoc("seed", _near(1), {})],
                if_new=True,
            )  # fmt: skip
            stored = {i: service.store.document(i) for i in ("copy", "new", "new-copy")}
            return got, stored, len(service.index)

    got, stored, size = _run(run())
    assert [(r.id, r.status, r.cluster) for r in got] == [
        ("copy", "duplicate", "seed"), ("new", "created", "new"),
        ("new-copy", "duplicate", "new"), ("seed", "unchanged", "seed"),
    ]  # fmt: skip
    assert [i for i, _ in got[0].matches.best] == ["seed"] and got[0].matches.count == 1
    assert [i for i, _ in got[2].matches.best] == ["new"]
    assert stored["copy"] is None and stored["new-copy"] is None
    assert stored["new"] is not None and stored["new"].num == 1
    assert size == 2


def test_register_checks_the_batch_limits_first(service_in):
    async def run():
        async with service_in(max_batch=2, max_text_chars=500) as service:
            with pytest.raises(TooLarge):
                await service.register([NewDoc(str(i), BASE, {}) for i in range(3)])
            with pytest.raises(TooLarge):
                await service.register([NewDoc("long", "x" * 501, {})])
            with pytest.raises(TooLarge):
                await service.replace(NewDoc("long", "x" * 501, {}))
            with pytest.raises(TooLarge):
                await service.query(["x" * 501], None, None)
            return service.store.document_count()

    assert _run(run()) == 0


# --- queries and documents ------------------------------------------------------------------


def test_query_counts_every_match_lists_the_limit_with_their_roots(service_in):
    async def run():
        async with service_in() as service:
            await service.register(
                [NewDoc(f"c{i}", _near(i), {}) for i in range(5)] + [NewDoc("o", OTHER, {})]
            )
            some = await service.query([_near(9), THIRD], None, 2)
            every = await service.query([_near(9)], None, None)
            high = await service.query([_near(9)], 0.99, None)
            return some, every, high

    some, every, high = _run(run())
    (count, best), (none_count, none_best) = some
    assert count == 5 and len(best) == 2
    assert all(root == "c0" for _, _, root in best)
    assert (none_count, none_best) == (0, [])
    assert every[0][0] == 5 and len(every[0][1]) == 5
    assert [b[:2] for b in every[0][1][:2]] == [b[:2] for b in best]
    assert high == [(0, [])]


def test_query_of_copies_looks_each_text_up_once_and_answers_every_copy(service_in, monkeypatch):
    looked_up = []
    matches = index_module.ServiceIndex.matches

    def spy(self, sigs, threshold=None, limit=None):
        looked_up.append(len(sigs))
        return matches(self, sigs, threshold, limit)

    monkeypatch.setattr(index_module.ServiceIndex, "matches", spy)

    async def run():
        async with service_in() as service:
            await service.register([NewDoc(f"c{i}", _near(i), {}) for i in range(5)])
            return await service.query([_near(9), THIRD, _near(9), _near(9)], None, None)

    found = _run(run())
    assert looked_up == [2]  # two distinct texts
    assert found[0] == found[2] == found[3] and found[0][0] == 5 and found[1] == (0, [])


def test_read_index_reads_again_when_a_write_changed_the_index_meanwhile(service_in):
    """A read runs in a thread while writes apply on the loop: what it saw while the version
    changed is discarded (its error too) and it reads again; an error of a read that saw one
    version is the caller's."""

    async def run():
        async with service_in() as service:
            await service.register([NewDoc("a", BASE, {})])
            seen = []

            def read(index):
                seen.append(index.version)
                if len(seen) == 1:  # a write lands while the first read runs
                    index.version += 1
                    raise KeyError("half a change")
                return len(index)

            got = await service.read_index(read)

            def broken(index):
                raise KeyError("not there")

            with pytest.raises(KeyError):
                await service.read_index(broken)
            return got, seen

    got, seen = _run(run())
    assert got == 1 and len(seen) == 2 and seen[1] == seen[0] + 1


def test_query_below_the_bands_reach_is_out_of_reach(service_in):
    async def run():
        async with service_in() as service:
            floor = service.params.query_floor
            with pytest.raises(OutOfReach) as caught:
                await service.query([BASE], 0.1, None)
            at_floor = await service.query([BASE], floor, None)
            return floor, str(caught.value), at_floor

    floor, message, at_floor = _run(run())
    assert message.startswith(
        "threshold 0.1 is below what the bands can find: with 16 bands of 8 rows a pair of "
        "similarity 0.1 is a candidate with probability 0.00; "
    )
    assert message.endswith(f"ask for at least {floor:.4f} (GET /v1/config: query_threshold_min)")
    assert at_floor == [(0, [])]


def test_document_texts_and_digests_of_registered_documents(service_in):
    async def run():
        async with service_in() as service:
            await service.register([NewDoc("a", _near(1), {"m": 1}), NewDoc("b", _near(2), {})])
            doc = await service.document("b")
            with pytest.raises(NotFound) as caught:
                await service.document("nope")
            texts = await service.texts(["b", "nope", "a"])
            digests = await service.digests(["a", "nope"])
            return doc, str(caught.value), texts, digests

    doc, message, texts, digests = _run(run())
    assert doc == ("b", "a", {}, False)
    assert message == "no document 'nope'"
    assert texts == {"a": _near(1), "b": _near(2)}
    assert digests == {"a": text_digest(_near(1))}


# --- replace and delete ---------------------------------------------------------------------


def test_replace_an_unknown_id_registers_it(service_in):
    async def run():
        async with service_in() as service:
            await service.register([NewDoc("a", _near(1), {})])
            got = await service.replace(NewDoc("b", _near(2), {"m": 1}))
            return got, service.store.document("b"), service.index.root_of("b")

    got, row, root = _run(run())
    assert (got.id, got.status, got.cluster) == ("b", "created", "a")
    assert got.matches.count == 1 and row.num == 1 and row.meta == {"m": 1} and root == "a"


def test_replace_with_the_same_text_and_meta_is_unchanged(service_in):
    async def run():
        async with service_in() as service:
            await service.register([NewDoc("a", _near(1), {}), NewDoc("b", _near(2), {"m": 1})])
            same = await service.replace(NewDoc("b", _near(2), {"m": 1}))
            kept = await service.replace(NewDoc("b", _near(2), {}), meta_given=False)
            return same, kept, service.store.document("b")

    same, kept, row = _run(run())
    assert (same.status, same.cluster, same.matches.count) == ("unchanged", "a", 1)
    assert (kept.status, kept.matches.count) == ("unchanged", 1)
    assert row.num == 1 and row.meta == {"m": 1}


def test_replace_compares_a_long_meta_off_the_event_loop_as_equality_does(service_in, monkeypatch):
    """A stored document's meta is compared with the new one in a worker thread, a slice a call
    (``==`` over a meta of 13 M numbers held the loop 0.1 s): the same meta in another key
    order is ``unchanged``, one differing in its last number is ``replaced``."""
    compared: list[bool] = []
    real = operations.same_json

    def spy(a, b):
        compared.append(threading.current_thread() is threading.main_thread())
        return real(a, b)

    monkeypatch.setattr(operations, "same_json", spy)
    numbers = list(range(10_000))
    meta = {"n": numbers, "tags": [{"k": i} for i in range(5)], "a": 1}

    async def run():
        async with service_in() as service:
            await service.register([NewDoc("a", _near(1), meta)])
            again = {"a": 1, "tags": [{"k": i} for i in range(5)], "n": list(numbers)}
            same = await service.replace(NewDoc("a", _near(1), again))
            last = {**meta, "n": [*numbers[:-1], -1]}
            changed = await service.replace(NewDoc("a", _near(1), last))
            return same, changed, service.store.document("a")

    same, changed, row = _run(run())
    assert (same.status, changed.status) == ("unchanged", "replaced")
    assert row.meta["n"][-1] == -1
    assert compared == [False, False]  # both compared, neither on the loop's thread


def test_replace_stores_the_new_text_under_a_new_number_and_regroups(service_in):
    """A new text: the old row is gone, the new one numbered next; the old cluster is regrouped
    without it and the new one's matches are among every other document."""

    async def run():
        async with service_in() as service:
            await service.register(
                [NewDoc("a", _near(1), {}), NewDoc("b", _near(2), {"m": 1}),
                 NewDoc("o", OTHER, {})]
            )  # fmt: skip
            moved = await service.replace(NewDoc("a", OTHER + " x", {"n": 2}))
            rows = {i: service.store.document(i) for i in ("a", "b")}
            meta_only = await service.replace(NewDoc("b", _near(2), {"m": 3}))
            kept = await service.replace(NewDoc("o", OTHER + " y", {"dropped": 1}), False)
            return (moved, rows, meta_only, kept, service.store.document("b"),
                    service.store.document("o"), service.index.root_of("b"), len(service.index),
                    service.store.document_count())  # fmt: skip

    moved, rows, meta_only, kept, b_row, o_row, b_root, size, count = _run(run())
    assert (moved.id, moved.status, moved.cluster) == ("a", "replaced", "a")
    assert moved.matches.count == 1 and [i for i, _ in moved.matches.best] == ["o"]
    assert rows["a"].num == 3 and rows["a"].text == OTHER + " x" and rows["a"].meta == {"n": 2}
    assert b_root == "b"
    assert (meta_only.status, meta_only.cluster, meta_only.matches.count) == ("replaced", "b", 0)
    assert b_row.num == 4 and b_row.meta == {"m": 3}
    assert kept.status == "replaced" and o_row.meta == {} and o_row.text == OTHER + " y"
    assert size == 3 and count == 3


def test_delete_removes_the_row_and_regroups_the_cluster(service_in):
    async def run():
        async with service_in() as service:
            await service.register([NewDoc(f"c{i}", _near(i), {}) for i in range(3)])
            with pytest.raises(NotFound) as caught:
                await service.delete("nope")
            await service.delete("c0")
            return (str(caught.value), service.store.document("c0"), "c0" in service.index,
                    service.index.root_of("c2"), await service.cluster("c1"),
                    service.store.document_count())  # fmt: skip

    message, row, indexed, root, members, count = _run(run())
    assert message == "no document 'nope'"
    assert row is None and not indexed and root == "c1" and members == ["c1", "c2"]
    assert count == 2


# --- clusters and counts --------------------------------------------------------------------


def _groups():
    """Clusters of 3 ("g1"), 2 ("g2") and singletons "s0".."s3"."""
    docs = [NewDoc(f"g1-{i}", _near(i), {}) for i in range(3)]
    docs += [NewDoc(f"g2-{i}", f"{OTHER} tail{i}", {}) for i in range(2)]
    docs += [NewDoc(f"s{i}", " ".join(f"single{i}x{j}" for j in range(30)), {}) for i in range(4)]
    return docs


def test_clusters_are_paged_by_root_with_a_cursor(service_in):
    async def run():
        async with service_in() as service:
            await service.register(_groups())
            pages = []
            after = None
            for _ in range(5):  # 3 pages, then no cursor
                groups, after = await page(service, 1, 2, after)
                pages.append(groups)
                if after is None:
                    break
            big, cursor = await page(service, 2, 1, None)
            rest, end = await page(service, 2, 5, cursor)
            last, none = await page(service, 1, 6, None)
            empty = await page(service, 1, 3, "zzz")
            return pages, (big, cursor, rest, end), (last, none), empty

    pages, (big, cursor, rest, end), (last, none), empty = _run(run())
    assert pages == [
        [["g1-0", "g1-1", "g1-2"], ["g2-0", "g2-1"]], [["s0"], ["s1"]], [["s2"], ["s3"]]
    ]  # fmt: skip
    assert (big, cursor) == ([["g1-0", "g1-1", "g1-2"]], "g1-0")
    assert (rest, end) == ([["g2-0", "g2-1"]], None)
    assert len(last) == 6 and none is None
    assert empty == ([], None)


def test_cluster_largest_clusters_and_stats(service_in):
    async def run():
        async with service_in() as service:
            await service.register([*_groups(), NewDoc("g3", _near(7), {})])
            with pytest.raises(NotFound) as caught:
                await service.cluster("g1-1")
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            return (await service.cluster("g2-0"), str(caught.value),
                    await service.largest_clusters(0, 50), await service.largest_clusters(1, 5),
                    await service.read_stats(), service.index.nbytes(),
                    service.store_state())  # fmt: skip

    members, message, largest, second, stats, nbytes, state = _run(run())
    assert members == ["g2-0", "g2-1"]
    assert message == "'g1-1' is not the root of a cluster"
    assert largest == ([("g1-0", 4), ("g2-0", 2)], {4: 1, 2: 1})
    assert second == ([("g2-0", 2)], {4: 1, 2: 1})
    assert stats == {
        # The data directory's index (created empty: version 1); nothing flushed yet.
        "documents": 10, "indexed_documents": 0, "index_version": 1, "unflushed": 10,
        "index_flushes": 0, "index_parts": 0, "part_compactions": 0,
        "part_compactions_failed": 0, "indexed_linked": 0,
        "clusters": 2, "duplicates": 4, "protected_sets": 1, "broken_protected_sets": 0,
        "index_bytes": nbytes, "pool_restarts": 0, "inflight": 0,
        "recovery_seconds": stats["recovery_seconds"], "log_position": None,
        "log_lag_seconds": 0.0, "store_up": 1, "index_compactions": 0, "log_reloads": 0,
    }  # fmt: skip
    assert 0 <= stats["recovery_seconds"] < 60 and state == "up"


def test_largest_clusters_ties_by_root(service_in):
    async def run():
        async with service_in() as service:
            docs = [NewDoc(f"z{i}", f"{THIRD} t{i}", {}) for i in range(2)]
            docs += [NewDoc(f"b{i}", f"{OTHER} t{i}", {}) for i in range(2)]
            docs += [NewDoc(f"m{i}", _near(i), {}) for i in range(3)]
            await service.register(docs)
            return await service.largest_clusters(0, 50)

    assert _run(run()) == ([("m0", 3), ("b0", 2), ("z0", 2)], {3: 1, 2: 2})


# --- protected sets -------------------------------------------------------------------------


def test_put_protected_set_stores_it_as_jsonl_and_replaces_it(service_in):
    """A JSON array is stored as JSON Lines of its items; a set put again under its name
    replaces it (in memory, in the store, in its byte count)."""

    async def run():
        async with service_in() as service:
            array = json.dumps([{"id": "a", "text": ITEM_A}, {"id": "b", "text": ITEM_B}])
            parsed = await service.put_protected_set("ev", array, ProtectedFormat.JSON)
            first = {r.name: r for r in service.store.protected_sets()}
            again = await service.put_protected_set("ev", ITEM_A, ProtectedFormat.TEXT)
            rows = service.store.protected_sets()
            return (parsed, first["ev"], again, rows, service.protected_set("ev"),
                    dict(service._set_bytes))  # fmt: skip

    parsed, first, again, rows, current, sizes = _run(run())
    assert (parsed.name, parsed.items, parsed.ngrams) == ("ev", 2, 16)
    lines = [json.dumps({"id": "a", "text": ITEM_A}), json.dumps({"id": "b", "text": ITEM_B})]
    assert first.body == "".join(f"{line}\n" for line in lines)
    assert (first.format, first.items, first.ngrams) == (ProtectedFormat.JSONL, 2, 16)
    assert (again.items, again.ngrams) == (1, 8) and current is again
    assert [(r.name, r.body, r.format) for r in rows] == [("ev", ITEM_A, ProtectedFormat.TEXT)]
    assert sizes == {"ev": len(ITEM_A)}


def test_protected_sets_over_their_count_or_bytes_are_refused(service_in):
    """MAX_PROTECTED_SETS counts the others plus this one (a replacement is not one more);
    MAX_PROTECTED_BYTES the UTF-8 bytes of the others plus this one; nothing stored past it.
    (The sets are too short to protect an n-gram: allowed, as their bytes are the point.)"""
    small = "é " * 10  # 20 characters, 30 bytes

    async def put(service, name, body):
        await service.put_protected_set(name, body, ProtectedFormat.TEXT, allow_no_ngrams=True)

    async def run():
        async with service_in(max_protected_sets=2, max_protected_bytes=100) as service:
            await put(service, "one", small)
            await put(service, "two", small)
            await put(service, "two", small + "x" * 10)
            with pytest.raises(QuotaExceeded) as count:
                await put(service, "three", small)
            await put(service, "two", "x" * 70)  # 100 bytes
            with pytest.raises(QuotaExceeded) as size:
                await put(service, "two", "x" * 71)
            await service.delete_protected_set("one")
            await put(service, "three", "x" * 30)
            return (
                str(count.value),
                str(size.value),
                sorted(service.protected),
                [(r.name, len(r.body)) for r in service.store.protected_sets()],
            )

    count, size, names, rows = _run(run())
    assert count == (
        "2 protected sets are stored, the limit is 2: delete one, or raise "
        "NEARDUP_MAX_PROTECTED_SETS"
    )
    assert size == (
        "the protected sets would hold 101 bytes, the limit is 100: delete a set, or raise "
        "NEARDUP_MAX_PROTECTED_BYTES"
    )
    assert names == ["three", "two"]
    assert sorted(rows) == [("three", 30), ("two", 70)]


def test_delete_protected_set_and_unknown_names(service_in):
    async def run():
        async with service_in() as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            with pytest.raises(NotFound) as unknown:
                await service.delete_protected_set("nope")
            with pytest.raises(NotFound) as chosen:
                service.chosen_sets(["ev", "nope"])
            await service.delete_protected_set("ev")
            with pytest.raises(NotFound):
                service.protected_set("ev")
            return (
                str(unknown.value),
                str(chosen.value),
                service.store.protected_sets(),
                dict(service._set_bytes),
            )

    unknown, chosen, rows, sizes = _run(run())
    assert unknown == "no protected set 'nope'" and chosen == unknown
    assert rows == [] and sizes == {}


def test_chosen_sets_every_set_by_name_or_each_named_once(service_in):
    async def run():
        async with service_in() as service:
            for name in ("zz", "aa", "mm"):
                await service.put_protected_set(name, ITEM_A, ProtectedFormat.TEXT)
            every = [s.name for s in service.chosen_sets(None)]
            named = [s.name for s in service.chosen_sets(["mm", "aa", "mm"])]
            return every, named, service.chosen_sets([])

    assert _run(run()) == (["aa", "mm", "zz"], ["mm", "aa"], [])


# --- contamination --------------------------------------------------------------------------


def _texts():
    return [
        f"{ITEM_B} then {ITEM_A}",  # b first in the text, both items
        PAD,  # clean
        f"x {ITEM_A} y",
    ]


def test_contamination_counts_every_item_and_lists_them_with_the_ngram(service_in):
    """With the protect scope: per text the items found, as found in the text, in set order,
    with the first shared n-gram; the list capped at MAX_MATCHES, the count not."""

    async def run():
        async with service_in(max_matches=3) as service:
            await service.put_protected_set("s2", SET_BODY, ProtectedFormat.JSONL)
            await service.put_protected_set("s1", SET_BODY, ProtectedFormat.JSONL)
            every = await service.contamination(_texts(), None, "k", protect=True)
            one = await service.contamination(_texts(), ["s2"], "k", protect=True)
            return every, one

    every, one = _run(run())
    gram_a = " ".join(ITEM_A.split()[:13])
    gram_b = " ".join(ITEM_B.split()[:13])
    assert every[0].total == 4
    assert every[0].listed == [("s1", "b", gram_b), ("s1", "a", gram_a), ("s2", "b", gram_b)]
    assert (every[1].total, every[1].listed) == (0, [])
    assert every[2].total == 2 and every[2].listed == [("s1", "a", gram_a), ("s2", "a", gram_a)]
    assert one[0].total == 2 and one[0].listed == [("s2", "b", gram_b), ("s2", "a", gram_a)]


def test_contamination_without_the_protect_scope_lists_by_item_and_no_ngram(service_in):
    async def run():
        async with service_in(max_matches=1) as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            return await service.contamination(_texts(), ["ev"], "k", protect=False)

    found = _run(run())
    assert [(h.total, h.listed) for h in found] == [
        (2, [("ev", "a", None)]), (0, []), (1, [("ev", "a", None)])
    ]  # fmt: skip


def test_contamination_is_charged_in_texts_with_the_protect_scope(service_in):
    """A key with the protect scope is charged a text a text: 3 of 4 a minute, then the next
    two are refused (nothing charged), another caller has its own minute; nothing is charged
    when no set is checked."""

    async def run():
        async with service_in(contamination_texts_per_minute=4) as service:
            await service.put_protected_set("ev", ITEM_A, ProtectedFormat.TEXT)
            await service.contamination(["a", "b", "c"], [], "k", protect=True)  # no set
            await service.contamination(["a", "b", "c"], None, "k", protect=True)
            with pytest.raises(RateLimited) as short:
                await service.contamination(["a", "b"], None, "k", protect=True)
            await service.contamination(["a"], ["ev"], "k", protect=True)
            with pytest.raises(TooLarge):
                await service.contamination(["a"] * 5, None, "other", protect=True)
            await service.contamination(["a"] * 4, None, "other", protect=True)
            return short.value

    short = _run(run())
    assert re.fullmatch(
        r"this key may check 4 texts a minute for contamination and this check is 2; retry "
        r"in \d+ s \(NEARDUP_CONTAMINATION_TEXTS_PER_MINUTE\)",
        str(short),
    )


def test_contamination_is_charged_in_words_without_the_protect_scope(service_in):
    """Other keys are charged the words of each text, at least NGRAM (13) a text."""

    async def run():
        async with service_in(contamination_words_per_minute=40) as service:
            await service.put_protected_set("ev", ITEM_A, ProtectedFormat.TEXT)
            await service.contamination(["short", PAD], [], "k", protect=False)  # no set
            await service.contamination(["short", " ".join(["w"] * 20)], None, "k", protect=False)
            with pytest.raises(RateLimited) as short:  # 7 words left: "one two" is 13
                await service.contamination(["one two"], None, "k", protect=False)
            await service.contamination(["one two", "w " * 27], None, "other", protect=False)
            with pytest.raises(RateLimited):
                await service.contamination(["x"], None, "other", protect=False)
            return short.value

    short = _run(run())
    assert re.fullmatch(
        r"this key may check 40 words a minute for contamination and this check is 13; retry "
        r"in \d+ s \(NEARDUP_CONTAMINATION_WORDS_PER_MINUTE\)",
        str(short),
    )


# --- decontamination ------------------------------------------------------------------------


def _ask(mode: DecontMode, *, protect: bool = True, **kw) -> DecontRequest:
    params = DecontParams(mode, kw.pop("window", 5), kw.pop("min_piece", 3), kw.pop("pieces", 4))
    return DecontRequest(params, kw.pop("item_cap", None), Thresholds(), kw.pop("top", 10), protect)


def _decont_docs():
    return [
        Doc("clean", PAD, {"k": 1}),
        Doc("dirty", f"{PAD} {ITEM_A} {PAD}", {"k": 2}),
        Doc("all", ITEM_B, {}),
    ]


def test_decontamination_drop_keeps_the_clean_and_names_the_dropped(service_in):
    async def run():
        async with service_in() as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            return await service.decontamination(_decont_docs(), None, _ask(DecontMode.DROP), "k")

    out, dropped, report = _run(run())
    assert [(d.id, d.text, d.meta) for d in out] == [("clean", PAD, {"k": 1})]
    assert dropped == [
        {"id": "dirty", "rule": "contaminated"},
        {"id": "all", "rule": "contaminated"},
    ]
    assert report["documents"] == 3 and report["contaminated"] == 2
    assert report["contaminated_ids"] == ["dirty", "all"]


def test_decontamination_annotate_without_the_protect_scope_gives_no_offsets(service_in):
    async def run():
        async with service_in() as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            plain = await service.decontamination(
                _decont_docs(), ["ev"], _ask(DecontMode.ANNOTATE, protect=False), "k"
            )
            full = await service.decontamination(
                _decont_docs(), ["ev"], _ask(DecontMode.ANNOTATE), "k"
            )
            return plain, full

    (out, dropped, report), (full_out, _, full_report) = _run(run())
    assert [d.id for d in out] == ["clean", "dirty", "all"] and dropped == []
    assert out[0].meta == {"k": 1}
    marks = out[1].meta["decontamination"]
    assert marks["mode"] == "annotate" and marks["spans"] is None
    assert full_out[1].meta["decontamination"]["spans"] is not None
    text = json.dumps(report)
    assert " ".join(ITEM_A.split()[:13]) not in text
    assert " ".join(ITEM_A.split()[:13]) in json.dumps(full_report)


def test_decontamination_cut_needs_the_protect_scope_and_cuts_pieces(service_in):
    async def run():
        async with service_in() as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            with pytest.raises(ProtectScopeNeeded) as refused:
                await service.decontamination(
                    _decont_docs(), None, _ask(DecontMode.CUT, protect=False), "k"
                )
            cut = await service.decontamination(_decont_docs(), None, _ask(DecontMode.CUT), "k")
            return str(refused.value), cut

    refused, (out, dropped, _report) = _run(run())
    assert refused.startswith("the cut mode needs a key with the protect scope")
    assert [d.id for d in out] == ["clean", "dirty#1", "dirty#2"]
    assert all(ITEM_A.split()[5] not in d.text.split() for d in out)
    assert {d["id"] for d in dropped} == {"all"}
    assert dropped[0]["rule"] == "nothing left"


def test_decontamination_refuses_repeated_ids_and_colliding_piece_ids(service_in):
    async def run():
        async with service_in(contamination_texts_per_minute=2) as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            with pytest.raises(DuplicateIdError):
                await service.decontamination(
                    [Doc("a", PAD, {}), Doc("a", PAD, {})], None, _ask(DecontMode.DROP), "k"
                )
            with pytest.raises(ParameterError):
                await service.decontamination(
                    [Doc("d", PAD, {}), Doc("d#1", PAD, {})], None, _ask(DecontMode.CUT), "k"
                )
            with pytest.raises(RateLimited):  # the refused ones before were charged
                await service.decontamination([Doc("d", PAD, {})], None, _ask(DecontMode.DROP), "k")

    _run(run())


# --- recovery -------------------------------------------------------------------------------


def test_a_restart_recovers_the_documents_and_the_protected_sets(service_in, caplog):
    """Everything stored is back after a restart: the index (clusters, numbering), the sets
    and their sizes; recovery logs its progress (RECOVERY_CHUNK documents a read). Nothing is
    flushed (FLUSH_ROWS and FLUSH_SECONDS 0: the data directory's index read only), so the
    restart reads every document back from the store, as a start after a kill -9 reads the
    unflushed ones."""
    caplog.set_level(logging.INFO, logger="neardup")
    unflushed = {"flush_rows": 0, "flush_seconds": 0}

    async def run():
        async with service_in(**unflushed) as service:
            await service.register(_groups())
            await service.delete("s3")
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            before = (await page(service, 1, 100, None), dict(service._set_bytes))
        operations.RECOVERY_CHUNK = 3
        caplog.clear()
        try:
            async with service_in(recovery_log_seconds=0, **unflushed) as again:
                after = (await page(again, 1, 100, None), dict(again._set_bytes))
                added = await again.register([NewDoc("new", THIRD, {})])
                return (before, after, again.protected_set("ev").items, again.recovery_seconds,
                        again.store.document("new").num, added, again.index.version)  # fmt: skip
        finally:
            operations.RECOVERY_CHUNK = 50_000

    before, after, items, seconds, num, added, version = _run(run())
    assert after == before and items == 2 and seconds > 0
    assert num == 8 and added[0].status == "created" and version >= 2  # s3 (8) was the last
    messages = [r.getMessage() for r in caplog.records]
    assert "recovering: reading up to 8 documents from the store" in messages
    read = [m for m in messages if m.startswith("recovering: read ")]
    assert [m.split(" (")[0] for m in read[:3]] == [
        "recovering: read 3 of up to 8 documents", "recovering: read 6 of up to 8 documents",
        "recovering: read 8 of up to 8 documents",
    ]  # fmt: skip
    assert read[3].startswith("recovering: read 8 documents in ") and read[3].endswith(
        "clustering them"
    )
    assert any(m.startswith("recovered documents=8 protected_sets=1 seconds=") for m in messages)


def test_a_stored_set_that_cannot_be_parsed_is_left_out_but_counted(service_in, caplog):
    """A set whose stored body no longer parses is left out (named in ``broken_sets`` with why,
    counted in stats and in the quota) and can be deleted; one stored with NaN is read as null
    with a warning and keeps protecting."""
    bad = ProtectedSetRow("bad", 1, 1, ProtectedFormat.JSONL, '{"text": "x"}\nnot json\n')
    nan = json.dumps({"id": "n", "text": ITEM_A})[:-1] + ', "score": NaN}\n'

    async def run():
        async with service_in() as service:
            service.store.put_protected_set(bad)
            service.store.put_protected_set(
                ProtectedSetRow("nan", 1, 8, ProtectedFormat.JSONL, nan)
            )
        async with service_in(max_protected_sets=3) as again:
            stats = again.stats()
            counts = (stats["broken_protected_sets"], stats["protected_sets"])
            state = (dict(again.broken_sets), sorted(again.protected), dict(again._set_bytes))
            state = (*state, *counts)
            hits = await again.contamination([ITEM_A], ["nan"], "k", protect=True)
            with pytest.raises(NotFound):
                again.protected_set("bad")
            await again.put_protected_set("other", ITEM_B, ProtectedFormat.TEXT)
            with pytest.raises(QuotaExceeded):  # the broken set counts
                await again.put_protected_set("more", ITEM_B, ProtectedFormat.TEXT)
            await again.delete_protected_set("bad")
            await again.put_protected_set("more", ITEM_B, ProtectedFormat.TEXT)
            return state, hits, again.broken_sets, [r.name for r in again.store.protected_sets()]

    state, hits, broken, names = _run(run())
    broken_then, protected, sizes, broken_count, count = state
    assert list(broken_then) == ["bad"] and broken_then["bad"].startswith("bad:2: not valid JSON")
    assert protected == ["nan"] and (broken_count, count) == (1, 1)
    assert sizes == {"bad": len(bad.body), "nan": len(nan)}
    assert hits[0].total == 1 and hits[0].listed[0][:2] == ("nan", "n")
    assert broken == {} and sorted(names) == ["more", "nan", "other"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith("protected set 'nan': ") and "read as null" in m for m in warned)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(m.startswith("protected set 'bad' cannot be parsed, left out: ") for m in errors)


def test_a_set_put_again_is_no_longer_broken(service_in):
    bad = ProtectedSetRow("bad", 1, 1, ProtectedFormat.JSONL, "not json\n")

    async def run():
        async with service_in() as service:
            service.store.put_protected_set(bad)
        async with service_in() as again:
            before = dict(again.broken_sets)
            await again.put_protected_set("bad", ITEM_A, ProtectedFormat.TEXT)
            return before, again.broken_sets, again.protected_set("bad").items

    before, after, items = _run(run())
    assert list(before) == ["bad"] and after == {} and items == 1


# --- a full disk ----------------------------------------------------------------------------


class FullStore(SQLiteStore):
    """The embedded store, its disk full while ``full`` is set: writes and probes refused."""

    full = False
    probes = 0

    def add_documents(self, docs: Sequence[StoredDoc], clusters: Any = None) -> None:
        if self.full:
            raise StoreFull("disk full; nothing was stored")
        super().add_documents(docs, clusters)

    def probe(self) -> None:
        self.probes += 1
        if self.full:
            raise StoreFull("still full")
        super().probe()


def _start(tmp_path, store_class, **settings):
    """``Service.start`` on a store of ``store_class`` (``service_in`` patches the pool)."""
    config = Settings(workers=1, data_dir=tmp_path / "data", **settings)
    return Service.start(config, store_class(config.data_dir))


def test_a_full_disk_stores_nothing_and_is_unready_until_a_write_fits(service_in, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="neardup")

    async def run():
        service = await _start(tmp_path, FullStore)
        try:
            ready = await service.unready_reason()
            service.store.full = True
            with pytest.raises(StoreFull):
                await service.register([NewDoc("a", BASE, {})])
            with pytest.raises(StoreFull):
                await service.replace(NewDoc("b", BASE, {}))
            full = (service.store_full, "a" in service.index, len(service.index))
            first = await service.unready_reason()  # probes: still full
            second = await service.unready_reason()  # within PROBE_INTERVAL: not probed
            probes = service.store.probes
            service.store.full = False
            service._probed -= operations.PROBE_INTERVAL
            back = await service.unready_reason()
            added = await service.register([NewDoc("a", BASE, {})])
            return ready, full, first, second, probes, back, service.store_full, added
        finally:
            await service.close()

    ready, full, first, second, probes, back, after, added = _run(run())
    assert ready is None
    assert full == ("disk full; nothing was stored", False, 0)
    assert (first, second, probes) == ("disk full", "disk full", 1)
    assert back is None and after is None and added[0].status == "created"
    messages = [r.getMessage() for r in caplog.records]
    assert (
        messages.count(
            "store full, not ready until a write succeeds: disk full; nothing was stored"
        )
        == 1
    )
    assert messages.count("store writable again, ready") == 1


# --- a shared store's log -------------------------------------------------------------------


class LogStore(SQLiteStore):
    """The embedded store with a shared store's log, as a replica on PostgreSQL sees it:
    ``entries`` (what other replicas logged) are handed over by ``lock_writes`` (before a
    write) or ``changes`` (to the follower), and the position is the last handed over. An
    exception queued under a method's name is raised by its next call instead."""

    def __init__(self, data_dir) -> None:
        super().__init__(data_dir)
        self.entries: list[Change] = []
        self.seq = 0
        self.raises: dict[str, list[BaseException]] = {
            "lock_writes": [],
            "changes": [],
            "prune": [],
        }
        self.pruned_rows: list[int] = []
        self.waits = 0
        self.prunes: list[tuple[float, int]] = []
        self.up = True

    def _handed(self, method: str) -> list[Change]:
        if self.raises[method]:
            raise self.raises[method].pop(0)
        out, self.entries = self.entries, []
        if out:
            self.seq = out[-1].seq
        return out

    def lock_writes(self) -> list[Change]:
        return self._handed("lock_writes")

    def changes(self) -> list[Change]:
        return self._handed("changes")

    def wait_for_changes(self, timeout: float) -> None:
        self.waits += 1
        time.sleep(0.005)

    def position(self) -> int | None:
        return self.seq

    def prune(self, retention: float, batch: int) -> int:
        self.prunes.append((retention, batch))
        if self.raises["prune"]:
            raise self.raises["prune"].pop(0)
        return self.pruned_rows.pop(0) if self.pruned_rows else 0

    def available(self) -> bool:
        return self.up


async def _until(check, what: str) -> None:
    """Wait (on the loop) until ``check()``: the follower applies entries in the background."""
    for _ in range(3000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never {what}")


async def _followed(service: Service) -> None:
    """Wait until the follower took the entries (and the errors queued) and went back to
    waiting, or stopped: what it took is applied."""
    store = service.store
    await _until(lambda: not (store.entries or store.raises["changes"]), "taken")
    start = store.waits
    await _until(lambda: store.waits > start or service._follower.done(), "followed")


async def _adds(service: Service, seq: int, docs: list[tuple[str, str]], start: int) -> Change:
    """The log entry of another replica's registration of ``docs`` as numbers from ``start``,
    its rows stored as that replica would have."""
    sigs = await service.signatures([t for _, t in docs])
    nums = list(range(start, start + len(docs)))
    rows = [StoredDoc(n, i, text_digest(t), s.astype("<u4").tobytes(), {}, t)
            for n, (i, t), s in zip(nums, docs, sigs, strict=True)]  # fmt: skip
    SQLiteStore.add_documents(service.store, rows)
    return Change(
        seq, "add", nums=nums, ids=[i for i, _ in docs], sigs=sigs.astype("<u4").tobytes()
    )


def test_the_follower_applies_other_replicas_adds_and_deletes(service_in, tmp_path):
    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            store = service.store
            store.entries = [await _adds(service, 4, [("x", _near(1)), ("y", _near(2))], 0)]
            await _followed(service)
            assert service.log_position == 4
            first = (sorted(service.index.roots()), service.index.root_of("y"), service.stats())
            store.entries = [
                Change(5, "delete", name="x", nums=[7]),  # not x's number: an older x
                Change(6, "delete", name="nobody", nums=[1]),
            ]
            await _followed(service)
            assert service.log_position == 6
            kept = "x" in service.index
            store.entries = [Change(7, "delete", name="x", nums=[0])]
            await _followed(service)
            assert service.log_position == 7
            return first, kept, "x" in service.index, service.index.root_of("y"), service.log_lag()
        finally:
            await service.close()

    (roots, root, stats), kept, after, root_after, lag = _run(run())
    assert roots == ["x"] and root == "x" and stats["log_position"] == 4
    assert stats["documents"] == 2 and stats["log_lag_seconds"] < 60
    assert kept and not after and root_after == "y" and 0 <= lag < 60


def test_a_logged_replace_is_applied_in_one_step(service_in, tmp_path):
    """A delete followed by the add of the same id (one document) is a replace: the new text
    takes the id's place; the position moves past both."""

    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            store = service.store
            store.entries = [await _adds(service, 1, [("a", _near(1)), ("b", _near(2))], 0)]
            await _followed(service)
            assert service.log_position == 1
            SQLiteStore.delete_document(store, 0)
            add = await _adds(service, 3, [("a", OTHER)], 2)
            good = ProtectedSetRow("ev", 2, 16, ProtectedFormat.JSONL, SET_BODY)
            after = Change(4, "put_set", name="ev", row=good)  # applied, not skipped
            store.entries = [Change(2, "delete", name="a", nums=[0]), add, after]
            await _followed(service)
            assert service.log_position == 4 and sorted(service.protected) == ["ev"]
            found = await service.query([OTHER], None, None)
            return (service.index.number("a"), service.index.root_of("b"), found,
                    await service.document("a"))  # fmt: skip
        finally:
            await service.close()

    num, root_b, found, doc = _run(run())
    assert num == 2 and root_b == "b"
    assert found[0][0] == 1 and found[0][1][0][0] == "a"
    assert doc == ("a", "a", {}, False)


def test_a_log_entry_that_does_not_follow_the_index_is_not_applied(
    service_in, tmp_path, caplog, monkeypatch
):
    monkeypatch.setattr(operations, "POLL_SECONDS", 0.01)  # its pause after an error

    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            store = service.store
            store.entries = [await _adds(service, 1, [("a", _near(1))], 5)]
            await _followed(service)
            return len(service.index), service.log_position
        finally:
            await service.close()

    size, position = _run(run())
    assert size == 0 and position == 0
    record = next(r for r in caplog.records if "could not apply" in r.getMessage())
    assert record.getMessage() == "could not apply the store's changes; trying again"
    assert "log entry 1 does not follow the index" in str(record.exc_info[1])


def test_logged_protected_sets_are_put_and_deleted(service_in, tmp_path):
    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            store = service.store
            good = ProtectedSetRow("ev", 2, 16, ProtectedFormat.JSONL, SET_BODY)
            store.entries = [Change(1, "put_set", name="ev", row=good),
                             Change(2, "put_set", name="gone", row=None)]  # fmt: skip
            await _followed(service)
            assert service.log_position == 2
            first = (sorted(service.protected), dict(service._set_bytes), dict(service.broken_sets))
            bad = ProtectedSetRow("ev", 1, 1, ProtectedFormat.JSONL, "nope\n")
            store.entries = [Change(3, "put_set", name="ev", row=bad)]
            await _followed(service)
            assert service.log_position == 3
            broken = (
                sorted(service.protected),
                dict(service._set_bytes),
                dict(service.broken_sets),
            )
            store.entries = [Change(4, "put_set", name="ev", row=good)]
            await _followed(service)
            assert service.log_position == 4
            mended = (sorted(service.protected), dict(service.broken_sets))
            store.entries = [Change(5, "delete_set", name="ev")]
            await _followed(service)
            assert service.log_position == 5
            return (
                first,
                broken,
                mended,
                (service.protected, service._set_bytes, service.broken_sets),
            )
        finally:
            await service.close()

    first, broken, mended, last = _run(run())
    assert first == (["ev"], {"ev": len(SET_BODY)}, {})
    assert broken[0] == [] and broken[1] == {"ev": 5} and broken[2]["ev"].startswith("ev:1: ")
    assert mended == (["ev"], {})
    assert last == ({}, {}, {})


def test_a_write_applies_the_logged_changes_first(service_in, tmp_path):
    """Before a write, the entries other replicas logged are applied (under the store's lock):
    the write's documents are numbered after theirs and see them."""

    async def run():
        service = await _start(tmp_path, LogStore, log_retention_seconds=3600)
        try:
            service._follower.cancel()  # only the write's lock hands the entries over
            store = service.store
            store.entries = [await _adds(service, 9, [("other", _near(1))], 0)]
            got = await service.register([NewDoc("mine", _near(2), {})])
            return got, store.document("mine").num, service.log_position
        finally:
            await service.close()

    got, num, position = _run(run())
    assert (got[0].status, got[0].cluster, got[0].matches.count) == ("created", "mine", 1)
    assert got[0].matches.best[0][0] == "other"
    assert num == 1 and position == 9


def test_a_replica_too_far_behind_reloads_from_the_store(service_in, tmp_path, caplog):
    """LogPruned from the store's lock: the whole state is read again from the live documents
    (as a restart would), counted in ``reloads``; the write then goes on."""
    caplog.set_level(logging.INFO, logger="neardup")

    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            service._follower.cancel()
            store = service.store
            await _adds(service, 0, [("a", _near(1)), ("b", OTHER)], 0)  # never logged to us
            store.put_protected_set(ProtectedSetRow("ev", 2, 16, ProtectedFormat.JSONL, SET_BODY))
            store.raises["lock_writes"].append(operations.LogPruned("position 3 was pruned"))
            roots = memory_roots(service.index, 1)
            await service.register([NewDoc("c", THIRD, {})])
            store.raises["lock_writes"].append(operations.LogPruned("position 3 was pruned"))
            await service.delete("c")
            return (roots, memory_roots(service.index, 1), service.reloads, service.reloading,
                    sorted(service.protected), service.stats()["log_reloads"])  # fmt: skip
        finally:
            await service.close()

    roots, after, reloads, reloading, sets, counted = _run(run())
    assert roots == [] and after == ["a", "b"]  # c, registered after the first, was deleted
    assert (reloads, reloading, sets, counted) == (2, None, ["ev"], 2)
    messages = [r.getMessage() for r in caplog.records]
    assert (
        messages.count(
            "position 3 was pruned: reloading every document from the store; not ready meanwhile"
        )
        == 2
    )
    assert any(m.startswith("reloaded documents=2 log_position=0 seconds=") for m in messages)


def test_changed_settings_stop_the_replica(service_in, tmp_path, caplog):
    """SettingsChanged from the store's lock or the follower: the write is refused, the
    replica not ready ("settings changed") and the follower applies nothing more."""

    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            store = service.store
            changed = operations.SettingsChanged("THRESHOLD changed from 0.8 to 0.9")
            store.raises["lock_writes"].append(changed)
            with pytest.raises(operations.SettingsChanged):
                await service.register([NewDoc("a", BASE, {})])
            first = (service.settings_changed, await service.unready_reason())
            service.settings_changed = None
            store.raises["changes"].append(changed)
            await _until(lambda: service._follower.done(), "stopped")
            store.entries = [await _adds(service, 3, [("x", _near(1))], 0)]
            await asyncio.sleep(0.05)
            return first, service.settings_changed, len(service.index), service.store.document("a")
        finally:
            await service.close()

    first, changed, size, row = _run(run())
    assert first == ("THRESHOLD changed from 0.8 to 0.9", "settings changed")
    assert changed == "THRESHOLD changed from 0.8 to 0.9" and size == 0 and row is None
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["THRESHOLD changed from 0.8 to 0.9"] * 2  # once each time it is seen


def test_the_follower_goes_on_when_the_store_is_away_or_an_entry_fails(
    service_in, tmp_path, monkeypatch
):
    monkeypatch.setattr(operations, "POLL_SECONDS", 0.01)  # its pause after an error

    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            store = service.store
            store.raises["changes"] += [operations.StoreUnavailable("away"), RuntimeError("bug")]
            store.entries = [await _adds(service, 2, [("x", _near(1))], 0)]
            await _followed(service)
            assert service.log_position == 2
            await _adds(service, 0, [("y", OTHER)], 1)  # never logged to us
            store.raises["changes"].append(operations.LogPruned("too far behind"))
            await _followed(service)
            return sorted(service.index.roots()), service._follower.done()
        finally:
            await service.close()

    roots, stopped = _run(run())
    assert roots == ["x", "y"] and not stopped


def test_unready_reasons_of_a_replica(service_in, tmp_path):
    async def run():
        service = await _start(tmp_path, LogStore, store_timeout=1.0)
        try:
            service._follower.cancel()
            store = service.store
            reasons = [service.log_position, service.stats()["log_position"]]
            reasons += [await service.unready_reason(), service.store_state()]
            service._synced -= 1.4  # the log read 1.4 s ago: within POLL_SECONDS + 1 s
            reasons.append(await service.unready_reason())
            service._synced -= 0.2
            reasons += [await service.unready_reason(), round(service.log_lag())]
            lag = service.stats()["log_lag_seconds"]
            reasons.append(isinstance(lag, float) and lag == round(lag, 3) and lag >= 1.6)
            store.up = False
            reasons += [await service.unready_reason(), service.store_state(),
                        service.stats()["store_up"]]  # fmt: skip
            service.reloading = "behind the log"
            reasons.append(await service.unready_reason())
            service.settings_changed = "changed"
            reasons.append(await service.unready_reason())
            service.reloading = service.settings_changed = None
            store.up = True
            return reasons
        finally:
            await service.close()

    assert _run(run()) == [
        0, 0, None, "up", None, "behind", 2, True, "store unavailable", "down", 0, "reloading",
        "settings changed",
    ]  # fmt: skip


def test_a_replica_prunes_the_store_history_in_batches(service_in, tmp_path, caplog):
    """Every quarter of the retention window (under PRUNE_SECONDS), PRUNE_BATCH rows a step
    until a step removes fewer; a store away or an error is tried again later."""

    async def run():
        service = await _start(tmp_path, LogStore, log_retention_seconds=0.04)
        try:
            store = service.store
            store.pruned_rows = [operations.PRUNE_BATCH, operations.PRUNE_BATCH, 7]
            await _until(lambda: len(store.prunes) >= 4, "pruned")  # the next round began
            pruned = service.pruned
            store.raises["prune"] += [operations.StoreUnavailable("away"), RuntimeError("bug")]
            store.pruned_rows = [3]
            calls = len(store.prunes)
            await _until(lambda: len(store.prunes) >= calls + 4, "pruned")
            return pruned, service.pruned, set(store.prunes)
        finally:
            await service.close()

    pruned, then, args = _run(run())
    assert pruned == 2 * operations.PRUNE_BATCH + 7
    assert then == pruned + 3 and args == {(0.04, operations.PRUNE_BATCH)}
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failed] == [
        "could not prune the store's history; trying again later"
    ]


def test_the_index_is_compacted_once_removed_slots_are_as_many_as_live_ones(
    service_in, monkeypatch, caplog
):
    caplog.set_level(logging.INFO, logger="neardup")
    monkeypatch.setattr(index_module, "COMPACT_AFTER", 3)

    async def run():
        async with service_in() as service:
            await service.register(_groups())
            for i in ("s0", "s1", "s2"):
                await service.delete(i)
            no = service._compacting
            for i in ("s3", "g1-0", "g1-1"):
                await service.delete(i)
            await service._compacting
            return (
                no,
                service.stats()["index_compactions"],
                service.index.removed,
                (await page(service, 1, 10, None))[0],
                await service.query([_near(1)], None, None),
            )

    no, count, removed, clusters, found = _run(run())
    assert no is None and count == 1 and removed == 0
    assert clusters == [["g1-2"], ["g2-0", "g2-1"]]
    assert found[0][0] == 1 and found[0][1][0][0] == "g1-2"
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("index compacted documents=3 index_bytes=") for m in messages)


# --- the store's thread, closing ------------------------------------------------------------


class OneAtATime(LogStore):
    """Records how many calls run at once on each of the store's connections (SQLite's are
    not thread-safe by themselves): the writer's (``add_documents``) and the read thread's
    (``read_document``); and whether the listener is still waiting when the store closes."""

    def __init__(self, data_dir) -> None:
        super().__init__(data_dir)
        self.running = {"write": 0, "read": 0}
        self.most = {"write": 0, "read": 0}
        self.waiting = False
        self.closed_while_waiting: bool | None = None
        self.guard = threading.Lock()

    @contextmanager
    def _counted(self, connection: str) -> Iterator[None]:
        with self.guard:
            self.running[connection] += 1
            self.most[connection] = max(self.most[connection], self.running[connection])
        time.sleep(0.002)
        try:
            yield
        finally:
            with self.guard:
                self.running[connection] -= 1

    def add_documents(self, docs: Sequence[StoredDoc], clusters: Any = None) -> None:
        with self._counted("write"):
            super().add_documents(docs, clusters)

    def read_document(self, doc_id: str) -> StoredDoc | None:
        with self._counted("read"):
            return super().read_document(doc_id)

    def wait_for_changes(self, timeout: float) -> None:
        self.waiting = True
        time.sleep(0.05)
        self.waiting = False

    def close(self) -> None:
        if self.closed_while_waiting is None:
            self.closed_while_waiting = self.waiting
        super().close()


def test_each_store_connection_is_called_from_one_thread_at_a_time(service_in, tmp_path):
    """Concurrent reads queue for the store's read thread, concurrent writes for its write
    thread (reads and writes run side by side, each connection used by one thread at a time);
    closing waits for the follower's wait on the store to end before the store closes."""

    async def run():
        service = await _start(tmp_path, OneAtATime)
        try:
            await service.register([NewDoc("a", BASE, {"m": 1})])
            reads = [service.document("a") for _ in range(8)]
            writes = [service.register([NewDoc(f"w{i}", f"{OTHER} w{i}", {})]) for i in range(4)]
            docs = (await asyncio.gather(*reads, *writes))[:8]
            await _until(lambda: service.store.waiting, "waiting")
        finally:
            await service.close()
        return docs, service.store.most, service.store.closed_while_waiting

    docs, most, closed_while_waiting = _run(run())
    assert docs == [("a", "a", {"m": 1}, False)] * 8
    assert most == {"write": 1, "read": 1} and closed_while_waiting is False


class Forgetful(SQLiteStore):
    """A store whose rows vanish after the index saw them (another deletion's race): on both
    connections, the writer's (a replace's read) and the read thread's (a document's)."""

    forget = False

    def document(self, doc_id: str) -> StoredDoc | None:
        return None if self.forget else super().document(doc_id)

    def read_document(self, doc_id: str) -> StoredDoc | None:
        return None if self.forget else super().read_document(doc_id)


def test_a_document_gone_from_the_store_is_not_found_and_replace_registers_it(service_in, tmp_path):
    async def run():
        service = await _start(tmp_path, Forgetful)
        try:
            await service.register([NewDoc("a", BASE, {}), NewDoc("b", OTHER, {})])
            service.store.forget = True
            with pytest.raises(NotFound) as caught:
                await service.document("a")
            service.store.delete_document(1)  # b's row, gone under the index
            got = await service.replace(NewDoc("b", OTHER, {"new": 1}))
            service.store.forget = False
            return str(caught.value), got, service.store.document("b")
        finally:
            await service.close()

    message, got, row = _run(run())
    assert message == "no document 'a'"
    assert (got.id, got.status, got.cluster) == ("b", "created", "b")
    assert row.meta == {"new": 1} and row.num == 2


def test_warm_up_waits_for_the_workers_and_logs_them(service_in, caplog):
    caplog.set_level(logging.INFO, logger="neardup")

    async def run():
        async with service_in() as service:
            await service.warm_up()
            return service.pool.compiled, service._warming.done()

    compiled, done = _run(run())
    assert done
    ready = [r.getMessage() for r in caplog.records if r.getMessage().startswith("workers ready")]
    assert len(ready) == 1
    assert ready[0].startswith(f"workers ready workers=1 compiled={compiled} seconds=")
    assert float(ready[0].rsplit("=", 1)[1]) >= 0


def test_a_replica_reloaded_before_any_change_answers_from_the_new_state(service_in, tmp_path):
    """A reload swaps in an index one version on, even from an index never changed: its roots
    are the new state's."""

    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            before = memory_roots(service.index, 1)
            await _adds(service, 0, [("b", OTHER), ("a", _near(1))], 0)  # never logged to us
            service.store.raises["changes"].append(operations.LogPruned("too far behind"))
            await _followed(service)
            return before, memory_roots(service.index, 1), service.reloads
        finally:
            await service.close()

    assert _run(run()) == ([], ["a", "b"], 1)


def test_a_restart_lists_as_many_matches_as_max_matches_says(service_in):
    async def run():
        async with service_in(max_matches=2) as service:
            await service.register([NewDoc(f"c{i}", _near(i), {}) for i in range(4)])
        async with service_in(max_matches=2) as again:
            return await again.query([_near(9)], None, None)

    [(count, best)] = _run(run())
    assert count == 4 and len(best) == 2


def test_the_index_is_compacted_again_after_more_removals(service_in, monkeypatch):
    monkeypatch.setattr(index_module, "COMPACT_AFTER", 2)

    async def run():
        async with service_in() as service:
            await service.register(_groups())
            counts = []
            for batch in (("s0", "s1", "s2", "s3", "g2-0"), ("g2-1", "g1-0", "g1-1")):
                for i in batch:
                    await service.delete(i)
                await service._compacting
                counts.append(service.compactions)
            return counts, (await page(service, 1, 10, None))[0]

    assert _run(run()) == ([1, 2], [["g1-2"]])


def test_decontamination_ignores_ngrams_shared_by_more_items_than_the_cap(service_in):
    """``item_cap``: an n-gram in more than that many items of its set is no match (a text
    holding only such n-grams is clean); without a cap it is."""
    body = "\n".join(json.dumps({"id": i, "text": f"{ITEM_A} {i}"}) for i in ("p", "q"))
    doc = Doc("d", f"{PAD} {ITEM_A} {PAD}", {})

    async def run():
        async with service_in() as service:
            await service.put_protected_set("ev", body, ProtectedFormat.JSONL)
            capped = await service.decontamination(
                [doc], None, _ask(DecontMode.DROP, item_cap=1), "k"
            )
            every = await service.decontamination([doc], None, _ask(DecontMode.DROP), "k")
            return capped, every

    (out, dropped, report), (out_all, dropped_all, report_all) = _run(run())
    assert [d.id for d in out] == ["d"] and dropped == []
    assert (report["item_cap"], report["contaminated"]) == (1, 0)
    assert out_all == [] and dropped_all == [{"id": "d", "rule": "contaminated"}]
    assert (report_all["item_cap"], report_all["contaminated"]) == (None, 1)


def test_the_cut_mode_refusal_and_a_piece_id_collision_say_why(service_in):
    async def run():
        async with service_in() as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            with pytest.raises(ProtectScopeNeeded) as refused:
                await service.decontamination(
                    [Doc("d", PAD, {})], None, _ask(DecontMode.CUT, protect=False), "k"
                )
            with pytest.raises(ParameterError) as collision:
                await service.decontamination(
                    [Doc("d", PAD, {}), Doc("d#1", PAD, {})], None, _ask(DecontMode.CUT), "k"
                )
            return str(refused.value), str(collision.value)

    refused, collision = _run(run())
    assert refused == (
        "the cut mode needs a key with the protect scope: a cut piece's edges are where "
        "protected text starts and ends; without it use drop or annotate (verdicts and "
        "counts, no offsets)"
    )
    assert collision == collision_message(*piece_collision(["d", "d#1"], 4))


def test_a_set_stored_with_nan_is_read_with_a_warning_naming_the_fault(service_in, caplog):
    body = json.dumps({"id": "n", "text": ITEM_A})[:-1] + ', "score": NaN}\n'

    async def run():
        async with service_in() as service:
            service.store.put_protected_set(
                ProtectedSetRow("nan", 1, 8, ProtectedFormat.JSONL, body)
            )
        async with service_in() as again:
            return again.protected_set("nan").items

    assert _run(run()) == 1
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "protected set 'nan': nan:1: NaN is not JSON (field 'score'): write null, a number or a "
        "string instead; it was stored before NaN and Infinity were refused: read as null "
        "(upload it again to store it without them)"
    ]


def test_a_logged_replace_never_shows_the_id_missing(service_in, tmp_path):
    """While the follower applies a logged replace, a reader running between its steps always
    finds the id (the delete and the add are one step on the index)."""

    async def run():
        service = await _start(tmp_path, LogStore)
        missing = False
        try:
            store = service.store
            store.entries = [await _adds(service, 1, [("a", _near(1)), ("b", OTHER)], 0)]
            await _followed(service)
            SQLiteStore.delete_document(store, 0)
            add = await _adds(service, 3, [("a", THIRD)], 2)
            store.entries = [Change(2, "delete", name="a", nums=[0]), add]
            for _ in range(1_000_000):  # the reader runs whenever the follower awaits
                missing = missing or "a" not in service.index
                if service.log_position == 3 or service._follower.done():
                    break
                await asyncio.sleep(0)
            return missing, service.index.number("a"), service.log_position
        finally:
            await service.close()

    assert _run(run()) == (False, 2, 3)


def test_a_logged_delete_of_a_broken_set_forgets_it(service_in, tmp_path):
    async def run():
        service = await _start(tmp_path, LogStore)
        try:
            bad = ProtectedSetRow("ev", 1, 1, ProtectedFormat.JSONL, "nope\n")
            service.store.entries = [Change(1, "put_set", name="ev", row=bad)]
            await _followed(service)
            broken = list(service.broken_sets)
            service.store.entries = [Change(2, "delete_set", name="ev")]
            await _followed(service)
            return broken, service.broken_sets, service._set_bytes, service.stats()
        finally:
            await service.close()

    broken, after, sizes, stats = _run(run())
    assert broken == ["ev"] and after == {} and sizes == {}
    assert stats["broken_protected_sets"] == 0


def test_a_compaction_that_fails_leaves_the_index_in_use(service_in, monkeypatch, caplog):
    monkeypatch.setattr(index_module, "COMPACT_AFTER", 2)

    def fails(self):
        raise MemoryError("no room for a copy")

    monkeypatch.setattr(index_module.ServiceIndex, "compacted", fails)

    async def run():
        async with service_in() as service:
            await service.register(_groups())
            for i in ("s0", "s1", "s2", "s3", "g2-0"):
                await service.delete(i)
            await service._compacting
            return service.compactions, service.index.removed, (await page(service, 1, 10, None))[0]

    count, removed, clusters = _run(run())
    assert count == 0 and removed == 5
    assert clusters == [["g1-0", "g1-1", "g1-2"], ["g2-1"]]
    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    # Each write after a failure tries again: how many tried depends on when the background
    # task ran (the flusher's wake-ups move it), every one logged, none other.
    assert failed and set(failed) == {"could not compact the index; it keeps its removed slots"}


def test_a_decontamination_counts_each_cut_piece_in_its_working_memory(service_in):
    """The batch bound counts a cut's answer as up to ``max_pieces`` pieces a text (each with
    up to DECONT_META_BYTES of meta), any other mode's as one."""
    docs = [Doc("d", PAD, {})]
    base = limits_module._WORK_BYTES_PER_CHAR * len(PAD) + limits_module._WORK_BYTES_PER_TEXT
    one = base + operations.DECONT_META_BYTES

    async def run():
        async with service_in(max_batch_memory=one) as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            dropped = await service.decontamination(docs, None, _ask(DecontMode.DROP), "k")
            with pytest.raises(TooLarge):
                await service.decontamination(docs, None, _ask(DecontMode.CUT), "k")
        async with service_in(max_batch_memory=base + 4 * operations.DECONT_META_BYTES) as service:
            cut = await service.decontamination(docs, None, _ask(DecontMode.CUT), "k")
            with pytest.raises(TooLarge):
                await service.decontamination(docs, None, _ask(DecontMode.CUT, pieces=5), "k")
        return dropped[0], cut[0]

    dropped, cut = _run(run())
    assert [d.id for d in dropped] == ["d"] and [d.id for d in cut] == ["d"]


def test_a_decontamination_is_charged_to_its_caller(service_in):
    async def run():
        async with service_in(contamination_texts_per_minute=2) as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            docs = [Doc("x", PAD, {}), Doc("y", PAD, {})]
            await service.decontamination(docs, None, _ask(DecontMode.DROP), "k")
            await service.decontamination(docs, None, _ask(DecontMode.DROP), "j")
            with pytest.raises(RateLimited):
                await service.decontamination(docs[:1], None, _ask(DecontMode.DROP), "k")

    _run(run())


def test_protected_sets_are_read_with_the_services_tokenizer(service_in):
    """Under the multilingual tokenizer each CJK character is a word of 38/64 English words:
    16 characters are no window of 13 English words' worth (22 are), but at least 10 make a
    text protected whole (``weighted-3``), found whole in a document (as one unspaced "word"
    under ``words`` it would not be)."""
    item = (
        "\u6c49\u5b57\u6587\u672c\u7684\u4e00\u4e2a\u4f8b\u5b50\u5185\u5bb9\u6d4b\u8bd5\u6570\u636e"
        "\u5e93"
    )

    async def run():
        async with service_in(tokenizer="multilingual") as service:
            parsed = await service.put_protected_set("zh", item, ProtectedFormat.TEXT)
            found = await service.contamination([f"x {item} y"], None, "k", protect=True)
            return parsed.ngrams, found[0].total

    assert _run(run()) == (1, 1)  # 16 characters: one n-gram, the whole item


def test_a_warm_up_that_failed_is_reported_and_does_not_fail_close(service_in, monkeypatch):
    def broken(tokenizer: str = "words") -> bool:
        raise RuntimeError("no kernels")

    monkeypatch.setattr(pool_module, "warm_worker", broken)

    async def run():
        async with service_in() as service:
            with pytest.raises(WorkerError):
                await service.warm_up()
        return service.store.close()  # closed already: idempotent

    assert _run(run()) is None


def test_a_decontamination_report_buckets_by_the_thresholds_asked(service_in):
    doc = Doc("d", f"{PAD} {ITEM_A} {PAD}", {})

    async def run():
        async with service_in() as service:
            await service.put_protected_set("ev", SET_BODY, ProtectedFormat.JSONL)
            ask = DecontRequest(DecontParams(DecontMode.DROP), None, Thresholds(0.1, 0.5), 3, True)
            return await service.decontamination([doc], None, ask, "k")

    _, _, report = _run(run())
    assert report["thresholds"] == {"clean_below": 0.1, "dirty_from": 0.5}


def test_a_cluster_page_is_drawn_from_a_fresh_service(service_in):
    """The service starts with an empty cache of cluster pages (app.service.views)."""

    async def run():
        async with service_in() as service:
            await service.register([NewDoc(f"c{i}", _near(i), {}) for i in range(3)])
            groups, estimates = await views.cluster_rows(service, "c0")
            return groups, estimates, list(service.cluster_pages)

    groups, estimates, keys = _run(run())
    assert sorted(groups) == [["c0"], ["c1"], ["c2"]] and estimates[0] == 1.0
    assert len(keys) == 1 and keys[0][1] == "c0"
