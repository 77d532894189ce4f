"""The store's clusters (app/service/clusters.py): after every write (register, if_new, PUT,
DELETE, restart; flush and linking with ``--index``) the store's cluster tables hold exactly
the in-memory index's clusters of two or more (root, members, size, own), singletons none; a
store made before the tables is filled once at start; the readers page as documented."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.app.config import Settings
from neardup.app.service import NewDoc, Service
from neardup.app.service.index import ServiceIndex
from neardup.app.service.store import SQLiteStore, Store
from tests.app.service.test_flush import ON_DEMAND, _compact, scenarios
from tests.app.service.test_replicas import _converged
from tests.app.service.test_served import IDS, PARAMS, WORDS, _apply, threads, write_index

__all__ = ["threads"]  # the fixture, imported for the tests below

Clusters = dict[str, tuple[list[str], int]]


def memory_clusters(index: ServiceIndex) -> Clusters:
    """Root -> (sorted members, own) of every cluster of two or more in memory."""
    return {row.root: (sorted(i for i, _ in row.members), row.own) for row in index.all_clusters()}


def store_clusters(store: Store, ids: list[str]) -> Clusters:
    """The same, read from the store through its paged readers (pages of 2, to page), with
    ``ids`` (every id the test used) checked: each in a cluster row is in that cluster."""
    found: Clusters = {}
    after: tuple[int, str] | None = None
    while page := store.clusters_page(2, after, 2, owned=False):
        for root, size in page:
            members: list[str] = []
            while more := store.cluster_members(root, members[-1] if members else None, 2):
                members += more
            assert len(members) == size, (root, members, size)
            found[root] = (members, -1)
        after = page[-1][1], page[-1][0]
    rows = store.cluster_rows(ids)
    for doc_id, (root, size) in rows.items():
        assert doc_id in found[root][0] and len(found[root][0]) == size
    assert sorted(rows) == sorted(i for m, _ in found.values() for i in m if i in set(ids))
    return found


def own_counts(store: Store) -> dict[str, int]:
    """Root -> own, of every cluster (the listed ones: own > 0)."""
    listed = dict(store.clusters_page(2, None, 10**6))
    every = dict(store.clusters_page(2, None, 10**6, owned=False))
    assert set(listed) <= set(every)
    return {root: 1 if root in listed else 0 for root in every}


def check(service: Service, ids: list[str]) -> None:
    """The store's clusters are the in-memory ones (a service whose documents leave memory
    once flushed: each cluster it holds is the store's, whole)."""
    want = memory_clusters(service.index)
    got = store_clusters(service.store, ids)
    if service.flusher is not None:
        assert {r: got.get(r, ([], 0))[0] for r in want} == {r: m for r, (m, _) in want.items()}
        return
    assert {r: m for r, (m, _) in got.items()} == {r: m for r, (m, _) in want.items()}
    owned = own_counts(service.store)
    assert owned == {r: int(own > 0) for r, (_, own) in want.items()}
    if isinstance(service.store, SQLiteStore):  # own counts and flags, exactly
        db = service.store._db
        assert dict(db.execute("SELECT root, own FROM clusters")) == {
            r: own for r, (_, own) in want.items()
        }
        flags = {i: bool(o) for i, o in db.execute("SELECT id, own FROM cluster_members")}
        assert flags == {i: own for row in service.index.all_clusters() for i, own in row.members}


def _ids(op: tuple) -> list[str]:
    if op[0] in ("register", "if_new"):
        return [i for i, _ in op[1]]
    return [op[1]] if op[0] in ("put", "delete") else []


async def _start(data: Path, **more: Any) -> Service:
    return await Service.start(Settings(workers=1, data_dir=data, **PARAMS, **more))


#: Texts that chain (each near the next): unions of clusters, and splits when one goes.
CHAINED = ["ant bee cat dog", "cat dog eel fox", "eel fox gnu ant", "ant bee cat dog eel fox",
           "cat dog eel fox gnu", "bee cat dog eel"]  # fmt: skip
texts = st.one_of(
    st.sampled_from(CHAINED),
    st.sampled_from(CHAINED),
    st.sampled_from(CHAINED),
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=5).map(" ".join),
)


@st.composite
def writes(draw: st.DrawFn) -> list[tuple]:
    """Registrations (plain and if_new) of new ids, PUTs and DELETEs of ids made so far (or
    unknown), and restarts."""
    ops: list[tuple] = []
    made = ["u0"]
    for step in range(draw(st.integers(4, 20))):
        kind = draw(st.sampled_from(["register", "register", "register", "if_new", "put", "put",
                                     "delete", "delete", "restart"]))  # fmt: skip
        if kind in ("register", "if_new"):
            chosen = [f"{step:02d}{j}" for j in range(draw(st.integers(1, 3)))]
            made += chosen
            ops.append((kind, [(i, draw(texts)) for i in chosen]))
        elif kind == "put":
            ops.append((kind, draw(st.sampled_from(made)), draw(texts)))
        elif kind == "delete":
            ops.append((kind, draw(st.sampled_from(made))))
        else:
            ops.append((kind,))
    return ops


@given(ops=writes())
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_store_clusters_follow_every_write(tmp_path_factory, threads, ops) -> None:
    data = tmp_path_factory.mktemp("clusters") / "data"
    ids = sorted({i for op in ops for i in _ids(op)} | {"u0"})

    async def run() -> None:
        service = await _start(data)
        try:
            for op in ops:
                if op[0] == "restart":
                    await service.close()
                    service = await _start(data)
                else:
                    await _apply(service, op, set())
                check(service, ids)
        finally:
            await service.close()

    asyncio.run(run())


@given(spec=scenarios())
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_store_clusters_follow_linking_and_flushes(tmp_path_factory, threads, spec) -> None:
    """With ``--index``: linked indexed documents are members (not own), after registrations,
    flushes, refreshes and restarts alike."""
    tmp = tmp_path_factory.mktemp("linked")
    write_index(str(tmp / "a"), spec["indexed"] or [("zz", "unused words here")])
    names = {i for i, _ in spec["indexed"]}
    ids = [*IDS, "zz"]

    async def run() -> None:
        service = await _start(tmp / "fa", index=str(tmp / "a"), **ON_DEMAND)
        try:
            check(service, ids)
            for op in spec["ops"]:
                if op[0] == "flush":
                    await service.flush()
                    await service.refresh_index()
                elif op[0] == "compact":  # every part merged: rows move, clusters do not
                    await _compact(service, every=True)
                    await service.refresh_index()
                elif op[0] == "restart":
                    await service.close()
                    service = await _start(tmp / "fa", index=str(tmp / "a"), **ON_DEMAND)
                elif op[0] != "query":
                    await _apply(service, op, names)
                check(service, ids)
        finally:
            await service.close()

    asyncio.run(run())


def test_store_clusters_filled_once_from_a_store_made_before_them(tmp_path, threads) -> None:
    """A store of the previous layout (no cluster tables, user_version 0) gets them filled at
    start from the recovered clusters, and records it."""
    data = tmp_path / "data"
    docs = [NewDoc(f"x{i}", t, {}) for i, t in enumerate(["ant bee cat", "ant bee cat dog",
            "eel fox", "eel fox gnu", "eel fox", "gnu"])]  # fmt: skip

    async def register() -> None:
        service = await _start(data)
        try:
            await service.register(docs)
        finally:
            await service.close()

    asyncio.run(register())
    with sqlite3.connect(data / "neardup.sqlite3") as db:  # back to the previous layout
        db.executescript("DROP TABLE clusters; DROP TABLE cluster_members; PRAGMA user_version=0")

    async def reopen() -> None:
        service = await _start(data)
        try:
            assert service.store.clusters_filled()
            want = memory_clusters(service.index)
            assert len(want) == 2
            check(service, [d.id for d in docs])
        finally:
            await service.close()

    asyncio.run(reopen())
    with sqlite3.connect(data / "neardup.sqlite3") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        db.execute("PRAGMA user_version = 2")  # a newer neardup's
    with pytest.raises(Exception, match="newer than this neardup"):
        asyncio.run(_start(data))


def test_store_clusters_page_by_size_then_root(tmp_path, threads) -> None:
    """``clusters_page`` lists the largest first, then by root, from a (size, root) cursor;
    ``cluster_members`` pages a cluster in id order; singletons have no rows."""
    texts_by_id = {"a1": "ant bee", "a2": "ant bee", "a3": "ant bee", "b1": "cat dog",
                   "b2": "cat dog", "c1": "eel fox", "c2": "eel fox", "s": "gnu"}  # fmt: skip

    async def run() -> None:
        service = await _start(tmp_path / "data")
        try:
            await service.register([NewDoc(i, t, {}) for i, t in texts_by_id.items()])
            store = service.store
            assert store.clusters_page(2, None, 10) == [("a1", 3), ("b1", 2), ("c1", 2)]
            assert store.clusters_page(2, (3, "a1"), 1) == [("b1", 2)]
            assert store.clusters_page(2, (2, "b1"), 5) == [("c1", 2)]
            assert store.clusters_page(3, None, 5) == [("a1", 3)]
            assert store.cluster_members("a1", None, 2) == ["a1", "a2"]
            assert store.cluster_members("a1", "a2", 2) == ["a3"]
            assert store.cluster_members("a2", None, 2) == []  # not a root
            assert store.cluster_rows(["a3", "s", "nope"]) == {"a3": ("a1", 3)}
        finally:
            await service.close()

    asyncio.run(run())


def test_store_clusters_merge_two_clusters_then_split(tmp_path, threads) -> None:
    """A document bridging two clusters merges them (the smaller relabelled into the larger,
    the root the smallest id); deleting it splits them again; a PUT moves a document."""
    copies = {"m1": "ant bee cat dog", "m2": "ant bee cat dog", "m3": "ant bee cat dog",
              "k1": "cat dog eel fox", "k2": "cat dog eel fox"}  # fmt: skip

    async def run() -> None:
        service = await _start(tmp_path / "data")
        try:
            await service.register([NewDoc(i, t, {}) for i, t in copies.items()])
            assert sorted(service.index.clusters_by_size().values()) == [2, 3]
            check(service, [*copies, "a0"])
            await service.register([NewDoc("a0", "ant bee cat dog eel fox", {})])
            assert service.index.clusters_by_size() == {"a0": 6}
            check(service, [*copies, "a0"])
            await service.delete("a0")
            assert sorted(service.index.clusters_by_size().values()) == [2, 3]
            check(service, [*copies, "a0"])
            await service.replace(NewDoc("k2", "ant bee cat dog", {}))
            assert sorted(service.index.clusters_by_size().values()) == [4]
            check(service, [*copies, "a0"])
        finally:
            await service.close()

    asyncio.run(run())


# --- PostgreSQL: replicas, and the migration from layout 4 ------------------------------------

_SCHEMAS = iter(range(10**6))


@given(ops=writes(), on_b=st.lists(st.booleans(), min_size=20, max_size=20))
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_store_clusters_on_postgres_replicas(pg_url, threads, ops, on_b) -> None:
    """Two replicas of one PostgreSQL store, each write taken by either: once they converged,
    the store's clusters are each one's in-memory clusters."""
    schema = f"c{next(_SCHEMAS)}"
    ids = sorted({i for op in ops for i in _ids(op)} | {"u0"})

    async def start() -> Service:
        return await Service.start(
            Settings(workers=1, store_url=pg_url, store_schema=schema, **PARAMS)
        )

    async def run() -> None:
        a, b = await start(), await start()
        try:
            for op, second in zip(ops, on_b, strict=False):
                if op[0] == "restart":
                    await b.close()
                    b = await start()
                else:
                    await _apply(b if second else a, op, set())
                await _converged([a, b])
                check(a, ids)
                check(b, ids)
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


def test_store_clusters_filled_once_on_postgres_from_layout_4(pg_url, threads) -> None:
    """A store of layout 4 (no cluster tables) is migrated to 5 and its clusters filled at
    the first start, once."""
    import psycopg

    docs = [NewDoc(f"x{i}", t, {}) for i, t in enumerate(CHAINED)]

    async def run(check_filled: bool) -> None:
        service = await Service.start(Settings(workers=1, store_url=pg_url, **PARAMS))
        try:
            if check_filled:
                assert service.store.clusters_filled()
                assert memory_clusters(service.index)
                check(service, [d.id for d in docs])
            else:
                await service.register(docs)
        finally:
            await service.close()

    asyncio.run(run(False))
    with psycopg.connect(pg_url, autocommit=True) as c:  # back to layout 4
        c.execute("DROP TABLE clusters; DROP TABLE cluster_members")
        c.execute("DELETE FROM schema_versions WHERE version = 5")
        c.execute("DELETE FROM index_flush WHERE key = 'clusters_filled'")
    asyncio.run(run(True))
    with psycopg.connect(pg_url) as c:
        versions = [r[0] for r in c.execute("SELECT version FROM schema_versions ORDER BY 1")]
        assert versions[-1] == 5


@given(spec=scenarios(), on_b=st.lists(st.booleans(), min_size=12, max_size=12))
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_store_clusters_on_postgres_replicas_serving_an_index(
    pg_url, tmp_path_factory, threads, spec, on_b
) -> None:
    """Two replicas serving one index on one PostgreSQL store: each links the indexed documents
    its writes match (and the other follows), flushes and refreshes; the store's clusters are
    each one's in-memory clusters once they converged."""
    tmp = tmp_path_factory.mktemp("pglinked")
    write_index(str(tmp / "a"), spec["indexed"] or [("zz", "unused words here")])
    names = {i for i, _ in spec["indexed"]}
    ids = [*IDS, "zz"]
    schema = f"i{next(_SCHEMAS)}"

    async def start(name: str) -> Service:
        return await Service.start(
            Settings(workers=1, data_dir=tmp / name, store_url=pg_url, store_schema=schema,
                     index=str(tmp / "a"), **PARAMS, **ON_DEMAND)
        )  # fmt: skip

    async def run() -> None:
        a, b = await start("a"), await start("b")
        try:
            for op, second in zip(spec["ops"], on_b, strict=False):
                one = b if second else a
                if op[0] in ("flush", "compact"):
                    if op[0] == "flush":
                        await one.flush()
                    else:  # every part merged: rows move, clusters do not
                        await _compact(one, every=True)
                    await _converged([a, b])
                    await a.refresh_index()
                    await b.refresh_index()
                elif op[0] == "restart":
                    await b.close()
                    b = await start("b")
                elif op[0] != "query":
                    await _apply(one, op, names)
                await _converged([a, b])
                check(a, ids)
                check(b, ids)
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())
