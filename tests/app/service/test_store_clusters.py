"""The store's clusters (app/service/clusters.py): after every write (register, if_new, PUT,
DELETE, restart; flush, linking and flushed rows the index deletes with ``--index``) the
store's cluster tables hold exactly the in-memory index's clusters of two or more (root,
members, size, own), singletons none; a store made before the tables is filled once at start;
the readers page as documented."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.app.config import Settings
from neardup.app.service import NewDoc, NotFound, Service, pgstore
from neardup.app.service.index import ServiceIndex
from neardup.app.service.store import SQLiteStore, Store
from tests.app.service.cluster_reads import answers_as_memory, cluster_or_indexed, page
from tests.app.service.test_flush import ON_DEMAND, _compact, _drop, scenarios
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


def own_of(store: Store, root: str) -> int:
    """How many members of the cluster rooted at ``root`` are the service's own (the store's
    own flags)."""
    members = store.cluster_members(root, None, 10**6)
    return sum(1 for i in members if i in store.numbered([i]))


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


async def checked(service: Service, ids: list[str]) -> None:
    """``check``, then every cluster answer of the routes, read from the tables, is memory's
    (a service whose flushed documents leave memory: in test_flush.py's ``_compared``, against
    one holding every document)."""
    check(service, ids)
    if service.flusher is None:
        await answers_as_memory(service, ids)


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
                await checked(service, ids)
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
            await checked(service, ids)
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
                elif op[0] == "drop":  # several flushed rows deleted by the index at once
                    await _drop(service, str(tmp / "a"), op[1])
                elif op[0] != "query":
                    await _apply(service, op, names)
                await checked(service, ids)
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
        db.executescript(
            "DROP TABLE clusters; DROP TABLE cluster_members; DROP TABLE cluster_sizes; "
            "PRAGMA user_version=0"
        )

    async def reopen() -> None:
        service = await _start(data)
        try:
            assert service.store.clusters_filled()
            want = memory_clusters(service.index)
            assert len(want) == 2
            await checked(service, [d.id for d in docs])
        finally:
            await service.close()

    asyncio.run(reopen())
    with sqlite3.connect(data / "neardup.sqlite3") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        db.execute("PRAGMA user_version = 2")  # a newer neardup's
    with pytest.raises(Exception, match="newer than this neardup"):
        asyncio.run(_start(data))


def test_store_cluster_sizes_counted_once_for_a_store_made_before_them(tmp_path, threads) -> None:
    """A store whose cluster tables predate ``cluster_sizes`` (and its triggers) gets it
    counted from the clusters when opened; the triggers keep it from then on."""
    data = tmp_path / "data"
    docs = [NewDoc(f"x{i}", t, {}) for i, t in enumerate(["ant bee", "ant bee", "ant bee",
            "eel fox", "eel fox", "gnu"])]  # fmt: skip

    async def register(more: list[NewDoc]) -> dict[str, Any]:
        service = await _start(data)
        try:
            await service.register(more)
            await checked(service, [d.id for d in docs])
            return await service.read_stats()
        finally:
            await service.close()

    asyncio.run(register(docs))
    with sqlite3.connect(data / "neardup.sqlite3") as db:  # back to the layout before it
        db.executescript(
            "DROP TRIGGER clusters_sized_insert; DROP TRIGGER clusters_sized_update; "
            "DROP TRIGGER clusters_sized_delete; DROP TABLE cluster_sizes"
        )
    stats = asyncio.run(register([NewDoc("y", "gnu", {})]))
    assert (stats["clusters"], stats["duplicates"]) == (3, 4)


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
            await checked(service, [*copies, "a0"])
            await service.register([NewDoc("a0", "ant bee cat dog eel fox", {})])
            assert service.index.clusters_by_size() == {"a0": 6}
            await checked(service, [*copies, "a0"])
            await service.delete("a0")
            assert sorted(service.index.clusters_by_size().values()) == [2, 3]
            await checked(service, [*copies, "a0"])
            await service.replace(NewDoc("k2", "ant bee cat dog", {}))
            assert sorted(service.index.clusters_by_size().values()) == [4]
            await checked(service, [*copies, "a0"])
        finally:
            await service.close()

    asyncio.run(run())


def test_store_clusters_of_indexed_documents_alone_are_not_listed(tmp_path, threads) -> None:
    """Indexed documents linked by a document of the service's own stay a cluster once it is
    deleted: kept in the tables (own 0), answered by root, but listed nowhere (memory neither)
    and not counted."""
    write_index(str(tmp_path / "a"), [("x", "ant bee cat dog"), ("y", "ant bee cat dog")])

    async def run() -> None:
        service = await _start(tmp_path / "fa", index=str(tmp_path / "a"), **ON_DEMAND)
        try:
            await service.register([NewDoc("b", "ant bee cat dog", {})])
            await checked(service, ["b", "x", "y"])
            assert (await service.read_stats())["clusters"] == 1
            await service.delete("b")
            await checked(service, ["b", "x", "y"])
            assert service.store.clusters_page(2, None, 9, owned=False) == [("x", 2)]
            assert (await service.cluster_slice("x", None, 9)).members == ["x", "y"]
            assert await page(service, 1, 9, None) == ([], None)
            assert (await service.read_stats())["clusters"] == 0
        finally:
            await service.close()

    asyncio.run(run())


def test_store_clusters_an_indexed_document_left_alone(tmp_path, threads) -> None:
    """An indexed document linked by a document of the service's own that is deleted: in no
    cluster, answered by root alone (``GET /v1/clusters/{root}``); no cluster page of its own
    (its document page shows it)."""
    write_index(str(tmp_path / "a"), [("x", "ant bee cat dog")])

    async def run() -> None:
        service = await _start(tmp_path / "fa", index=str(tmp_path / "a"), **ON_DEMAND)
        try:
            await service.register([NewDoc("b", "ant bee cat dog", {})])
            await service.delete("b")
            await checked(service, ["b", "x"])
            assert await cluster_or_indexed(service, "x") == ["x"]
            with pytest.raises(NotFound):
                await service.cluster("x")
        finally:
            await service.close()

    asyncio.run(run())


def test_store_clusters_after_the_index_deletes_many_flushed_rows(tmp_path, threads) -> None:
    """An index version deleting many of the service's flushed rows: the service deletes
    them in bounded writes (``OVERRULED_BATCH``: here 2, so 5 documents take 3 store writes,
    two of one cluster in one write, three of another in two), and ends with the clusters (in
    memory and in the store) of a service that deleted them one by one."""
    url = str(tmp_path / "idx")
    write_index(url, [("zz", "unused words here")])
    docs = [NewDoc(f"x{i}", t, {}) for i, t in enumerate(CHAINED)]
    docs += [NewDoc(f"y{i}", "one two three", {}) for i in range(5)]
    dropped = ["x1", "x3", "y0", "y1", "y3"]

    async def run() -> tuple[Clusters, Clusters, list[int]]:
        service = await _start(tmp_path / "a", index=url, **ON_DEMAND)
        alone = await _start(tmp_path / "b")
        sizes: list[int] = []
        real = service.store.delete_documents

        def spy(nums: list[int], *args: Any, **kwargs: Any) -> None:
            sizes.append(len(nums))
            real(nums, *args, **kwargs)

        service.store.delete_documents = spy  # type: ignore[method-assign]
        try:
            for one in (service, alone):
                await one.register(docs)
            assert sorted(service.index.clusters_by_size().values()) == [5, 6]
            await service.flush()
            await service.refresh_index()
            assert await _drop(service, url, dropped, batch=2) == dropped
            for doc_id in dropped:
                await alone.delete(doc_id)
            check(service, [d.id for d in docs])
            check(alone, [d.id for d in docs])
            # (the flushing one's clusters are the tables': its flushed documents left memory)
            tables = store_clusters(service.store, [d.id for d in docs])
            return (
                {r: (m, own_of(service.store, r)) for r, (m, _) in tables.items()},
                (memory_clusters(alone.index)),
                sizes,
            )
        finally:
            await service.close()
            await alone.close()

    got, want, sizes = asyncio.run(run())
    assert got == want
    assert want == {"x0": (["x0", "x5"], 2), "x2": (["x2", "x4"], 2), "y2": (["y2", "y4"], 2)}
    assert sizes == [2, 2, 1]


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
                await checked(a, ids)
                await checked(b, ids)
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
                await checked(service, [d.id for d in docs])
            else:
                await service.register(docs)
        finally:
            await service.close()

    asyncio.run(run(False))
    with psycopg.connect(pg_url, autocommit=True) as c:  # back to layout 4
        c.execute("DROP TABLE clusters; DROP TABLE cluster_members; DROP TABLE cluster_sizes")
        c.execute("DELETE FROM schema_versions WHERE version >= 5")
        c.execute("DELETE FROM index_flush WHERE key = 'clusters_filled'")
    asyncio.run(run(True))
    with psycopg.connect(pg_url) as c:
        versions = [r[0] for r in c.execute("SELECT version FROM schema_versions ORDER BY 1")]
        assert versions[-1] == pgstore.SCHEMA_VERSION


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
                elif op[0] == "drop":  # deleted by the first to serve it, followed by the other
                    await _drop(one, str(tmp / "a"), op[1])
                    await _converged([a, b])
                    await (a if second else b).refresh_index()
                elif op[0] != "query":
                    await _apply(one, op, names)
                await _converged([a, b])
                await checked(a, ids)
                await checked(b, ids)
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


def test_store_clusters_written_by_a_reload_as_by_a_start(pg_url, tmp_path, threads) -> None:
    """A replica behind the kept log reloads its state, linking the indexed documents anew
    (``_link_all``): it writes their clusters as a start does, here a cluster the store lost
    (its linking write failed: the database was away), so the store's clusters are again
    every replica's in-memory clusters."""
    import psycopg

    url = str(tmp_path / "idx")
    write_index(url, [("x", "ant bee cat dog"), ("zz", "unused words here")])

    async def start(name: str, retention: float) -> Service:
        return await Service.start(
            Settings(workers=1, data_dir=tmp_path / name, store_url=pg_url, index=url,
                     log_retention_seconds=retention, **PARAMS, **ON_DEMAND)
        )  # fmt: skip

    async def run() -> None:
        leader, stale = await start("a", 0.05), await start("b", 3600)
        try:
            await leader.register([NewDoc("b1", "ant bee cat dog", {})])  # x linked
            await _converged([leader, stale])
            assert memory_clusters(stale.index) == {"b1": (["b1", "x"], 1)}
            assert stale._follower is not None
            stale._follower.cancel()  # it reads the log no more
            behind = stale.log_position
            with psycopg.connect(pg_url, autocommit=True) as c:  # the linking write lost
                c.execute("DELETE FROM cluster_members; DELETE FROM clusters")
                await leader.register([NewDoc("c1", "one two three", {})])
                await leader.register([NewDoc("c2", "five six seven", {})])
                oldest = lambda: c.execute("SELECT min(seq) FROM changes").fetchone()[0]  # noqa: E731
                deadline = time.monotonic() + 60
                while oldest() <= behind + 1:  # pruned past the stale replica's position
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)
            stale._follower = asyncio.create_task(stale._follow())
            deadline = time.monotonic() + 60
            while stale.reloads == 0:
                assert time.monotonic() < deadline, "never reloaded"
                await asyncio.sleep(0.02)
            await _converged([leader, stale])
            assert memory_clusters(stale.index) == {"b1": (["b1", "x"], 1)}
            check(stale, ["b1", "c1", "c2", "x"])
            check(leader, ["b1", "c1", "c2", "x"])
        finally:
            await leader.close()
            await stale.close()

    asyncio.run(run())


@pytest.mark.parametrize("behind", [False, True])
def test_store_clusters_of_replicas_serving_different_versions(
    pg_url, tmp_path, threads, behind
) -> None:
    """A replica writes from the version it serves: here one still serving the version before
    ``neardup index delete`` of a linked document joins a new copy to that cluster, counting
    the deleted one (a size one too large, written over the other replica's linking write).
    Once it serves the new version too, the store's clusters are every replica's again; also
    when it had not read the other's latest write when it refreshed (``behind``: its linking
    write is made under the write lock, after that write, not dropped)."""
    from neardup.core.engine import delete_ids

    url = str(tmp_path / "idx")
    write_index(url, [("x", "ant bee cat dog"), ("zz", "unused words here")])
    ids = ["b1", "b2", "c1", "c9", "x"]

    async def start(name: str) -> Service:
        return await Service.start(
            Settings(workers=1, data_dir=tmp_path / name, store_url=pg_url, index=url,
                     **PARAMS, **ON_DEMAND)
        )  # fmt: skip

    async def run() -> None:
        a, b = await start("a"), await start("b")
        try:
            await a.register([NewDoc(i, "ant bee cat dog", {}) for i in ("b1", "c1")])
            await _converged([a, b])
            assert memory_clusters(b.index) == {"b1": (["b1", "c1", "x"], 2)}
            assert delete_ids(url, ["x"]).deleted == ("x",)
            assert await a.refresh_index()  # x out of the cluster: written
            check(a, ids)
            await b.register([NewDoc("b2", "ant bee cat dog", {})])  # b still serves x
            await _converged([a, b])
            if behind:
                assert b._follower is not None
                b._follower.cancel()
                await a.register([NewDoc("c9", "one two three", {})])
            assert await b.refresh_index()
            if behind:
                b._follower = asyncio.create_task(b._follow())
            await _converged([a, b])
            for one in (a, b):
                assert memory_clusters(one.index) == {"b1": (["b1", "b2", "c1"], 3)}
                check(one, ids)
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


def test_store_clusters_after_a_replica_follows_many_flushed_rows_deleted(
    pg_url, tmp_path, threads
) -> None:
    """The deletes a replica logs for flushed rows the index deleted (several writes, one log
    entry per document) are applied by another replica in one step (one regroup per cluster
    left): both end with the clusters of a service that deleted them one by one, as the
    store holds them."""
    url = str(tmp_path / "idx")
    write_index(url, [("zz", "unused words here")])
    docs = [NewDoc(f"x{i}", t, {}) for i, t in enumerate(CHAINED)]
    docs += [NewDoc(f"y{i}", "one two three", {}) for i in range(5)]
    dropped = ["x1", "x3", "y0", "y1", "y3"]
    want = {"x0": (["x0", "x5"], 2), "x2": (["x2", "x4"], 2), "y2": (["y2", "y4"], 2)}

    async def start(name: str) -> Service:
        return await Service.start(
            Settings(workers=1, data_dir=tmp_path / name, store_url=pg_url, index=url,
                     **PARAMS, **ON_DEMAND)
        )  # fmt: skip

    async def run() -> list[int]:
        a, b = await start("a"), await start("b")
        sizes: list[int] = []
        try:
            await a.register(docs)
            await a.flush()
            await a.refresh_index()
            await _converged([a, b])
            assert b._follower is not None
            b._follower.cancel()  # b reads the log again once a wrote every delete
            real = b.index.plan_removals

            def spy(ids: list[str]) -> Any:
                sizes.append(len(ids))
                return real(ids)

            b.index.plan_removals = spy  # type: ignore[method-assign]
            assert await _drop(a, url, dropped, batch=2) == dropped
            b._follower = asyncio.create_task(b._follow())
            await _converged([a, b])
            for one in (a, b):  # (their flushed documents left memory: the tables answer)
                tables = store_clusters(one.store, [d.id for d in docs])
                assert {r: (m, own_of(one.store, r)) for r, (m, _) in tables.items()} == want
                check(one, [d.id for d in docs])
            assert len(a.index) == len(b.index) == len(docs) - len(dropped)
        finally:
            await a.close()
            await b.close()
        return sizes

    # b held none of them (flushed, let go): counted and hidden, nothing planned in memory
    assert asyncio.run(run()) == []


def test_a_flushing_start_reads_the_held_documents_clusters_not_every_linked_member(
    tmp_path, threads, monkeypatch
) -> None:
    """At start with ``--index`` and flushing, the clusters of linked indexed documents are
    synced for those memory holds, read by their clusters (O(memory)): the store's every
    linked member is not read (``linked_members``: O(the clusters' members))."""
    write_index(str(tmp_path / "a"), [("i1", "ant bee cat dog"), ("i2", "eel fox gnu ant")])
    ids = ["d00", "d01", "i1", "i2"]

    async def run() -> None:
        service = await _start(tmp_path / "fa", index=str(tmp_path / "a"), **ON_DEMAND)
        try:
            await service.register([NewDoc("d00", "ant bee cat dog", {})])
            await service.flush()  # d00 and i1 leave memory once it is served
            await service.refresh_index()
            await service.register([NewDoc("d01", "eel fox gnu ant", {})])
            await checked(service, ids)
        finally:
            await service.close()

        def refused(self: SQLiteStore) -> list[str]:
            raise AssertionError("every linked member read at start")

        monkeypatch.setattr(SQLiteStore, "linked_members", refused)
        service = await _start(tmp_path / "fa", index=str(tmp_path / "a"), **ON_DEMAND)
        try:
            assert service.flusher is not None
            await checked(service, ids)
            assert service.store.cluster_rows(["i1", "i2"]) == {"i1": ("d00", 2), "i2": ("d01", 2)}
        finally:
            await service.close()

    asyncio.run(run())
