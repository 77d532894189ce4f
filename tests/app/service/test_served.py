"""The service with a persistent index served read only (``Settings.index``, app/service/served.py):
its answers equal those of the in-memory service that registered the indexed documents first
(same ids and texts): matches, counts, statuses, cluster roots and clusters, through plain and
``if_new`` registrations, PUT, DELETE, queries and restarts (issue 30, part 5's property). The
indexed documents are a deduplicated corpus (no two confirm a pair), as ``neardup dedup
--index`` writes; ids of the index are read only (409), and GET answers them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.app.config import Settings
from neardup.app.service import Conflict, NewDoc, Service
from neardup.app.service import index as index_module
from neardup.app.service import pool as pool_module
from neardup.app.service.errors import IndexNotServable
from neardup.core.engine import (
    DocIndex,
    IndexMissingError,
    IndexParameterError,
    MinhashParams,
    batch_signatures,
    commit_index,
    run_info,
    text_digests,
    write_part,
)
from tests.app.service.cluster_reads import cluster_or_indexed, memory_cluster, page

PARAMS = {"num_perm": 16, "bands": 8, "threshold": 0.5, "k": 1}
WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]
IDS = [f"d{i:02d}" for i in range(24)]


def _params() -> MinhashParams:
    return Settings(**PARAMS).params


def _confirmed(a: np.ndarray, b: np.ndarray, params: MinhashParams) -> bool:
    """The pair rule, by brute force (the oracle of which indexed documents a dedup keeps)."""
    empty = 2**31 - 1
    if (a == empty).all() or (b == empty).all():
        return False
    r = params.rows
    banded = any(
        (a[i * r : (i + 1) * r] == b[i * r : (i + 1) * r]).all() for i in range(params.bands)
    )
    return banded and float((a == b).mean()) >= params.threshold


def write_index(url: str, docs: list[tuple[str, str]], parts: int = 1) -> None:
    """An index of ``docs`` (id, text) in ``parts`` parts, as the batch engines write one."""
    params = _params()
    for p in range(parts):
        chunk = docs[p::parts]
        if not chunk:
            continue
        ids, texts = [d[0] for d in chunk], [d[1] for d in chunk]
        index = DocIndex.open(url, missing_ok=True)
        part = write_part(
            index, params, ids, text_digests(texts), batch_signatures(texts, params),
            run_info("local", "test", []),
        )  # fmt: skip
        commit_index(index, params, [part])


def deduplicated(docs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The documents no earlier kept one confirms a pair with (what ``neardup dedup`` keeps)."""
    params = _params()
    sigs = batch_signatures([t for _, t in docs], params) if docs else None
    kept: list[int] = []
    for i in range(len(docs)):
        if all(not _confirmed(sigs[i], sigs[j], params) for j in kept):
            kept.append(i)
    return [docs[i] for i in kept]


@pytest.fixture
def threads(monkeypatch):
    """The signature pool on threads of the test process; compaction after every removal."""

    def spawn(workers: int, *, warm: Any = None) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(workers, thread_name_prefix="signatures")

    monkeypatch.setattr(pool_module, "spawn_pool", spawn)
    # Compacted as soon as a slot is removed: linked indexed slots move with the live ones.
    monkeypatch.setattr(
        index_module.ServiceIndex, "wants_compaction", lambda self: self.removed > 0
    )


@asynccontextmanager
async def started(data: Path, **more: Any) -> AsyncIterator[Service]:
    service = await Service.start(Settings(workers=1, data_dir=data, **PARAMS, **more))
    try:
        yield service
    finally:
        await service.close()


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(" ".join)


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    """Indexed documents (deduplicated), then operations on the service: registrations (plain
    or ``if_new``, new ids and ids sent again with the same or another text), replacements and
    deletions of the service's own documents, queries (at the threshold or lower), restarts."""
    ids = draw(st.permutations(IDS))
    n_indexed = draw(st.integers(0, 10))
    indexed = deduplicated([(i, draw(texts)) for i in ids[:n_indexed]])
    ops: list[tuple] = []
    texts_ = texts  # random texts, and copies and near copies of indexed ones
    if indexed:
        copied = st.sampled_from([t for _, t in indexed])
        texts_ = st.one_of(texts, copied, copied.map(lambda t: t + " gnu"))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["register", "register", "if_new", "put", "delete", "query",
                                     "restart"]))  # fmt: skip
        if kind in ("register", "if_new"):
            chosen = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=5, unique=True))
            ops.append((kind, [(i, draw(texts_)) for i in chosen]))
        elif kind == "put":
            ops.append((kind, draw(st.sampled_from(ids)), draw(texts_)))
        elif kind == "delete":
            ops.append((kind, draw(st.sampled_from(ids))))
        elif kind == "query":
            ops.append((kind, draw(st.lists(texts_, min_size=1, max_size=3)),
                        draw(st.sampled_from([None, 0.75, 0.5]))))  # fmt: skip
        else:
            ops.append((kind,))
    # An indexed document sent again: with its text (unchanged) and with another (409).
    if indexed and draw(st.booleans()):
        doc = draw(st.sampled_from(indexed))
        ops.append(("register", [doc]))
        ops.append(("register", [(doc[0], doc[1] + " yak")]))
    return {"indexed": indexed, "ops": ops}


def _registered(results: list) -> list:
    return [(r.id, r.cluster, r.status, r.matches.count, r.matches.best) for r in results]


async def _apply(service: Service, op: tuple, indexed: set[str]) -> Any:
    """One operation's answer (an error: its type and conflicts)."""
    kind = op[0]
    try:
        if kind in ("register", "if_new"):
            docs = [NewDoc(i, t, {}) for i, t in op[1]]
            return _registered(await service.register(docs, if_new=kind == "if_new"))
        if kind == "put":
            return _registered([await service.replace(NewDoc(op[1], op[2], {}))])
        if kind == "delete":
            await service.delete(op[1])
            return "deleted"
        if kind == "query":
            return await service.query(op[1], op[2], None)
    except Conflict as exc:
        return ("conflict", exc.ids)
    except Exception as exc:  # NotFound and the like: the same on both sides
        return (type(exc).__name__,)
    raise AssertionError(kind)


async def _state(service: Service, ids: list[str]) -> Any:
    """Every document's cluster root, and the clusters of two or more, listed."""
    roots = {}
    for i in ids:
        try:
            roots[i] = (await service.document(i))[1]
        except Exception as exc:
            roots[i] = type(exc).__name__
    return roots, await page(service, 2, 1000, None)


def _skipped(op: tuple, indexed: set[str]) -> bool:
    """PUT and DELETE of an indexed id: the reference changes it, the served index refuses."""
    return op[0] in ("put", "delete") and op[1] in indexed


@given(spec=scenarios())
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_the_served_index_answers_as_the_service_that_registered_its_documents(
    tmp_path_factory, threads, spec
) -> None:
    tmp = tmp_path_factory.mktemp("served")
    url = str(tmp / "idx")
    indexed = spec["indexed"]
    names = {i for i, _ in indexed}
    write_index(url, indexed, parts=2)

    async def run() -> tuple[list, list]:
        got, want = [], []
        ref = await Service.start(Settings(workers=1, data_dir=tmp / "ref", **PARAMS))
        try:
            await ref.register([NewDoc(i, t, {}) for i, t in sorted(indexed)])
            served_settings = {"index": url} if indexed else {}
            served = await Service.start(
                Settings(workers=1, data_dir=tmp / "srv", **PARAMS, **served_settings)
            )
            try:
                for op in spec["ops"]:
                    if op[0] == "restart":
                        await served.close()
                        served = await Service.start(
                            Settings(workers=1, data_dir=tmp / "srv", **PARAMS, **served_settings)
                        )
                        continue
                    if _skipped(op, names):
                        got.append(await _apply(served, op, names))
                        want.append(("conflict", [op[1]]))
                        continue
                    got.append(await _apply(served, op, names))
                    want.append(await _apply(ref, op, names))
                got.append(await _state(served, IDS))
                want.append(await _state(ref, IDS))
            finally:
                await served.close()
        finally:
            await ref.close()
        return got, want

    got, want = _run(run())
    assert got == want


def test_get_put_delete_and_clusters_of_indexed_documents(tmp_path, threads) -> None:
    url = str(tmp_path / "idx")
    write_index(url, [("a", "ant bee cat dog"), ("z", "eel fox gnu")])

    async def run() -> dict:
        async with started(tmp_path / "data", index=url) as service:
            out: dict[str, Any] = {}
            out["get"] = await service.document("z")
            [dup] = await service.register([NewDoc("n", "ant bee cat dog", {})], if_new=True)
            out["if_new"] = (dup.status, dup.cluster, dup.matches.best)
            [made] = await service.register([NewDoc("b", "ant bee cat dog", {"m": 1})])
            out["made"] = (made.status, made.cluster, made.matches.best)
            out["cluster"] = await service.cluster("a")
            out["single"] = await cluster_or_indexed(service, "z")
            for call in (service.delete("a"), service.replace(NewDoc("z", "new", {}))):
                with pytest.raises(Conflict) as caught:
                    await call
                out.setdefault("refused", []).append((caught.value.ids, str(caught.value)))
            with pytest.raises(Conflict) as caught:
                await service.register([NewDoc("a", "other text", {})])
            out["post"] = caught.value.ids
            keys = ("documents", "indexed_documents", "index_version", "indexed_linked")
            out["stats"] = {k: service.stats()[k] for k in keys}
            await service.delete("b")
            out["after"] = await page(service, 2, 10, None)
            return out

    out = _run(run())
    assert out["get"] == ("z", "z", None, True)
    assert out["if_new"] == ("duplicate", "a", [("a", 1.0)])
    assert out["made"] == ("created", "a", [("a", 1.0)])
    assert out["cluster"] == ["a", "b"] and out["single"] == ["z"]
    assert [ids for ids, _ in out["refused"]] == [["a"], ["z"]]
    assert all("reads only" in why for _, why in out["refused"])
    assert out["post"] == ["a"]
    assert out["stats"] == {"documents": 1, "indexed_documents": 2, "index_version": 1,
                            "indexed_linked": 1}  # fmt: skip
    assert out["after"] == ([], None)


def test_after_a_restart_a_document_sent_again_counts_its_linked_indexed_matches(
    tmp_path, threads
) -> None:
    """Linked again at the start, after the service's own documents: still before them."""
    url = str(tmp_path / "idx")
    write_index(url, [("z", "ant bee cat dog")])

    async def run() -> list:
        async with started(tmp_path / "data", index=url) as service:
            await service.register([NewDoc("b", "ant bee cat dog", {})])
        async with started(tmp_path / "data", index=url) as service:
            [again] = await service.register([NewDoc("b", "ant bee cat dog", {})])
            same = await service.replace(NewDoc("b", "ant bee cat dog", {}))
            return [_registered([again]), _registered([same]), await service.cluster("b")]

    assert _run(run()) == [
        [("b", "b", "unchanged", 1, [("z", 1.0)])],
        [("b", "b", "unchanged", 1, [("z", 1.0)])],
        ["b", "z"],
    ]


def test_an_index_the_service_cannot_serve_stops_the_start(tmp_path, threads) -> None:
    url = str(tmp_path / "idx")

    async def start(**more: Any) -> None:
        async with started(tmp_path / "data", **more):
            pass

    with pytest.raises(IndexMissingError):
        _run(start(index=url))
    write_index(url, [("a", "ant bee")])
    with pytest.raises(IndexParameterError, match="parameter threshold is locked"):
        _run(
            Service.start(
                Settings(
                    workers=1, data_dir=tmp_path / "d2", **{**PARAMS, "threshold": 0.6}, index=url
                )
            )
        )
    # A part of the first layout: no key table.
    import json

    log = max((Path(url) / "_index").glob("[0-9]*.json"))
    body = json.loads(log.read_text())
    for part in body["parts"]:
        (Path(url) / part.pop("keys")["path"]).unlink()
    log.write_text(json.dumps(body))
    with pytest.raises(IndexNotServable, match="neardup index compact"):
        _run(start(index=url))


def test_a_replica_links_what_other_replicas_registered_and_replaced(tmp_path, threads) -> None:
    """Adds and replaces read from a shared store's log are looked up in the index too (in
    memory: the fake log's adds write no cluster rows, as the replica that wrote them would)."""
    from neardup.app.service.store import Change, SQLiteStore
    from tests.app.service.test_operations import LogStore, _adds, _followed, _start

    url = str(tmp_path / "idx")
    write_index(url, [("z", "ant bee cat dog"), ("y", "eel fox gnu")])

    async def run() -> list:
        service = await _start(tmp_path, LogStore, index=url, **PARAMS)
        try:
            store = service.store
            store.entries = [await _adds(service, 1, [("b", "ant bee cat dog"), ("c", "ant")], 0)]
            await _followed(service)
            out = [memory_cluster(service.index, "b"), service.index.linked]
            SQLiteStore.delete_document(store, 1)
            add = await _adds(service, 3, [("c", "eel fox gnu")], 2)
            store.entries = [Change(2, "delete", name="c", nums=[1]), add]
            await _followed(service)
            out += [memory_cluster(service.index, "c"), service.index.linked, service.log_position]
            return out
        finally:
            await service.close()

    assert _run(run()) == [["b", "z"], 1, ["c", "y"], 2, 3]


def test_parts_committed_after_the_start_are_served_and_linked(tmp_path, threads) -> None:
    """A new version's parts: their rows that the service's documents match are linked (as a
    start would link them), and lookups read them; the background task serves them too."""
    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])

    async def run() -> list:
        out: list[Any] = []
        async with started(tmp_path / "data", index=url, index_refresh=0) as service:
            await service.register([NewDoc("b", "ant bee cat dog", {})])
            out.append(await service.refresh_index())  # nothing new
            write_index(url, [("z", "ant bee cat dog"), ("x", "cat")])
            out.append(await service.refresh_index())
            out += [await service.cluster("b"), service.stats()["index_version"]]
            [(count, best)] = await service.query(["ant bee cat dog"], None, None)
            out.append((count, best))
        # Restarted: the same clusters, linked at the start this time.
        async with started(tmp_path / "data", index=url, index_refresh=0.05) as service:
            out.append(await service.cluster("b"))
            write_index(url, [("a", "ant bee cat dog")])
            written = DocIndex.open(url).version  # after the first service's flush at shutdown
            for _ in range(600):  # the version is swapped in once its rows are linked
                if service.stats()["index_version"] == written:
                    break
                await asyncio.sleep(0.05)
            # The tables get the links just after (the refresh's linking write): read then.
            for _ in range(600):
                if len(await cluster_or_indexed(service, "a")) > 1:
                    break
                await asyncio.sleep(0.05)
            out.append(await cluster_or_indexed(service, "a"))
        return out

    assert _run(run()) == [
        False, True, ["b", "z"], 2,
        (2, [("b", 1.0, "b"), ("z", 1.0, "b")]),
        ["b", "z"], ["a", "b", "z"],
    ]  # fmt: skip


def test_a_refresh_reads_new_parts_while_writes_go_on(tmp_path, threads, monkeypatch) -> None:
    """The new parts' rows are read and matched off the write lock: a registration and a
    deletion made meanwhile complete, and are accounted for when the rows are linked (the
    new document's indexed twin is linked; the deleted one's twin is not)."""
    import threading

    url = str(tmp_path / "idx")
    write_index(url, [("y", "eel fox gnu")])
    paused, release = threading.Event(), threading.Event()
    batches = DocIndex.signature_batches

    def pausing(self, parts):  # every batch read and matched, then a pause
        yield from batches(self, parts)
        paused.set()
        release.wait(120)

    monkeypatch.setattr(DocIndex, "signature_batches", pausing)

    async def run() -> list:
        async with started(tmp_path / "data", index=url, index_refresh=0) as service:
            await service.register(
                [NewDoc("b", "ant bee cat dog", {}), NewDoc("e", "one two three four", {})]
            )
            write_index(
                url,
                [("z", "ant bee cat dog"), ("u", "one two three four"),
                 ("v", "five six seven eight")],
            )  # fmt: skip
            refresh = asyncio.create_task(service.refresh_index())
            try:
                while not paused.is_set():
                    await asyncio.sleep(0.01)
                await asyncio.wait_for(
                    service.register([NewDoc("c", "five six seven eight", {})]), 60
                )
                await asyncio.wait_for(service.delete("e"), 60)
            finally:
                release.set()
                done = await refresh
            return [done, await service.cluster("b"), await service.cluster("c"), service.root("u"),
                    service.index.linked, service.stats()["index_version"]]  # fmt: skip

    assert _run(run()) == [True, ["b", "z"], ["c", "v"], "u", 2, 2]


def test_an_id_in_the_store_and_the_index_is_the_stores_until_deleted(tmp_path, threads) -> None:
    """The store's document of an id wins: the indexed row of that id is not matched, linked
    or answered; once the store's is deleted, the indexed one is served as a start serves it
    (linked to the documents here that match it)."""
    url = str(tmp_path / "idx")

    async def run() -> list:
        out: list[Any] = []
        async with started(tmp_path / "data") as service:  # registered before the index
            await service.register(
                [NewDoc("x", "ant bee cat dog", {"m": 1}), NewDoc("w", "one two three four", {})]
            )
        write_index(url, [("x", "one two three four"), ("y", "ant bee cat dog")])
        async with started(tmp_path / "data", index=url) as service:
            out.append(await service.document("x"))
            out.append(await service.query(["one two three four", "ant bee cat dog"], None, None))
            out += [await service.cluster("w"), await service.cluster("x")]
            with pytest.raises(Conflict):
                await service.register([NewDoc("x", "one two three four", {})])
            await service.delete("x")
            out.append(await service.document("x"))
            out.append(await service.query(["one two three four"], None, None))
            out += [await service.cluster("w"), service.root("y")]
        async with started(tmp_path / "data", index=url) as service:
            out += [await service.cluster("w"), service.root("y")]
        return out

    assert _run(run()) == [
        ("x", "x", {"m": 1}, False),
        [(1, [("w", 1.0, "w")]), (2, [("x", 1.0, "x"), ("y", 1.0, "x")])],
        ["w"], ["x", "y"],
        ("x", "w", None, True),
        [(2, [("w", 1.0, "w"), ("x", 1.0, "w")])],
        ["w", "x"], "y",
        ["w", "x"], "y",
    ]  # fmt: skip


def test_a_replica_storing_a_linked_indexed_id_unlinks_it(tmp_path, threads) -> None:
    """Another replica (serving an older version of the index) stored an id this one had
    linked from the index: the store's document wins, the indexed one leaves its cluster (in
    memory: the fake log's adds write no cluster rows, as the replica that wrote them would)."""
    from tests.app.service.test_operations import LogStore, _adds, _followed, _start

    url = str(tmp_path / "idx")
    write_index(url, [("z", "ant bee cat dog")])

    async def run() -> list:
        service = await _start(tmp_path, LogStore, index=url, **PARAMS)
        try:
            await service.register([NewDoc("b", "ant bee cat dog", {})])
            out: list[Any] = [memory_cluster(service.index, "b"), service.index.linked]
            store = service.store
            store.entries = [await _adds(service, 5, [("z", "one two three four")], 1)]
            await _followed(service)
            out += [
                memory_cluster(service.index, "b"),
                service.index.linked,
                await service.document("z"),
            ]
            out.append(await service.query(["ant bee cat dog"], None, None))
            return out
        finally:
            await service.close()

    assert _run(run()) == [
        ["b", "z"], 1, ["b"], 0, ("z", "z", {}, False), [(1, [("b", 1.0, "b")])],
    ]  # fmt: skip
