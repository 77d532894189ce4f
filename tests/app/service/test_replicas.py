"""Services sharing one store behave as one service: the same operations give the same clusters
on either store; on PostgreSQL, two replicas in one process follow each other's writes, race
near-duplicates that find each other one way round, and a new replica recovers the same index."""

import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from neardup.app.config import Settings
from neardup.app.service import Conflict, NewDoc, NotFound, Service
from neardup.app.service import pool as pool_module
from neardup.core.engine import ProtectedFormat
from neardup.core.minhash import clusters as core_clusters
from tests.app.service.cluster_reads import cluster_or_indexed, every_cluster, memory_page
from tests.app.service.test_served import PARAMS, write_index
from tests.fixtures import planted_corpus

CORPUS = planted_corpus(11, n_clusters=6, n_borderline=3, n_singletons=12)


def _settings(tmp_path, url=None):
    return Settings(data_dir=tmp_path / "data", workers=1, store_url=url)


def _groups(service):
    return [set(group) for group in memory_page(service.index, 1, 10**9, None)[0]]


async def _stored_groups(service):
    """``_groups`` as the tables hold them (flushed documents leave memory)."""
    return [set(group) for group in (await every_cluster(service)).values()]


def _docs(ids):
    return [NewDoc(i, CORPUS.docs[i], {"i": i}) for i in ids]


async def _converged(services, timeout=10.0):
    """Wait until every service has applied the log as far as the furthest one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len({s.stats()["log_position"] for s in services}) == 1:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not converged: {[s.stats()['log_position'] for s in services]}")


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_writes_deletions_and_restart_give_core_clusters_on_either_store(store, tmp_path, request):
    url = request.getfixturevalue("pg_url") if store == "postgres" else None
    ids = list(CORPUS.docs)
    random.Random(5).shuffle(ids)
    gone = set(ids[::7])
    texts_alive = {i: CORPUS.docs[i] for i in ids if i not in gone}
    # move a member of the largest cluster onto the text of a member of another cluster
    largest = max(core_clusters(texts_alive), key=len)
    moved = sorted(largest)[-1]
    donor = min(next(g for g in core_clusters(texts_alive) if len(g) > 1 and g != largest))
    texts = texts_alive | {moved: CORPUS.docs[donor]}

    async def run():
        service = await Service.start(_settings(tmp_path, url))
        try:
            for lo in range(0, len(ids), 9):
                await service.register(_docs(ids[lo : lo + 9]))
            again = await service.register(_docs(ids[:3]))
            assert [r.status for r in again] == ["unchanged"] * 3
            for doc_id in sorted(gone):
                await service.delete(doc_id)
            # a text replaced on purpose: the document now holds a text of another cluster
            swapped = await service.replace(NewDoc(moved, CORPUS.docs[donor], {"moved": True}))
            assert swapped.status == "replaced"
            with pytest.raises(NotFound):
                await service.delete(sorted(gone)[0])
            await service.put_protected_set(
                "evals", "one two three four five\n", ProtectedFormat.TEXT, allow_no_ngrams=True
            )
            before = await _stored_groups(service)
        finally:
            await service.close()
        service = await Service.start(_settings(tmp_path, url))
        try:
            return before, await _stored_groups(service), sorted(service.protected)
        finally:
            await service.close()

    before, after, sets = asyncio.run(run())
    expected = core_clusters(texts)
    assert before == after == expected
    assert any({moved, donor} <= group for group in expected)
    assert sets == ["evals"]


def test_two_replicas_follow_each_other_and_agree_with_core(tmp_path, pg_url):
    ids = list(CORPUS.docs)
    random.Random(8).shuffle(ids)
    rng = random.Random(9)

    async def run():
        a = await Service.start(_settings(tmp_path / "a", pg_url))
        b = await Service.start(_settings(tmp_path / "b", pg_url))
        try:
            deleted = set()
            for lo in range(0, len(ids), 5):
                replica = rng.choice([a, b])
                await replica.register(_docs(ids[lo : lo + 5]))
                if lo % 15 == 10:
                    victim = rng.choice(ids[:lo])
                    if victim not in deleted:
                        await rng.choice([a, b]).delete(victim)
                        deleted.add(victim)
            # a text replaced on one replica is replaced on the other
            moved = next(i for i in ids if i not in deleted)
            donor = next(i for i in reversed(ids) if i not in deleted and i != moved)
            await a.replace(NewDoc(moved, CORPUS.docs[donor], {}))
            texts = {i: CORPUS.docs[i] for i in ids if i not in deleted} | {
                moved: CORPUS.docs[donor]
            }
            await a.put_protected_set(
                "p", "alpha beta gamma delta\n", ProtectedFormat.TEXT, allow_no_ngrams=True
            )
            await _converged([a, b])  # b follows without writing itself
            assert sorted(b.protected) == ["p"]
            await b.delete_protected_set("p")
            await _converged([a, b])
            assert a.protected == {}
            expected = core_clusters(texts)
            assert _groups(a) == _groups(b) == expected
            assert (await b.document(moved))[0] == moved
            c = await Service.start(_settings(tmp_path / "c", pg_url))  # a new replica
            try:
                assert _groups(c) == expected
                assert c.stats()["log_position"] == a.stats()["log_position"]
            finally:
                await c.close()
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


def test_near_duplicates_sent_to_two_replicas_at_once_find_each_other_one_way_round(
    tmp_path, pg_url
):
    async def run():
        a = await Service.start(_settings(tmp_path / "a", pg_url))
        b = await Service.start(_settings(tmp_path / "b", pg_url))
        try:
            for n in range(8):
                text = " ".join(f"r{n}w{i}" for i in range(200))
                left = NewDoc(f"{n}-left", text + " left", {})
                right = NewDoc(f"{n}-right", text + " right", {})
                got = await asyncio.gather(a.register([left]), b.register([right]))
                matched = sorted([m for m, _ in r[0].matches.best] for r in got)
                # exactly one saw the other (whichever committed second): never neither
                assert matched in ([[], [f"{n}-left"]], [[], [f"{n}-right"]]), matched
                second = next(r[0] for r in got if r[0].matches.count)
                assert second.cluster == f"{n}-left"  # the smaller id roots the pair
            await _converged([a, b])
            assert _groups(a) == _groups(b) == [{f"{n}-left", f"{n}-right"} for n in range(8)]
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


def test_two_replicas_serving_one_index_answer_alike_and_refuse_its_ids(
    tmp_path, pg_url, monkeypatch
):
    """``--index`` on PostgreSQL replicas (issue 30, part 6): a registration on one that links
    an indexed document is answered the same by the other (root, cluster, matches), as by a
    new replica; both refuse PUT, DELETE and another text of an indexed id."""
    monkeypatch.setattr(pool_module, "spawn_pool", lambda n, warm=None: ThreadPoolExecutor(n))

    url = str(tmp_path / "idx")
    write_index(url, [("z", "ant bee cat dog"), ("y", "eel fox gnu"), ("x", "cat")])

    def settings(name):
        return Settings(
            data_dir=tmp_path / name, workers=1, store_url=pg_url, index=url, index_refresh=0,
            **PARAMS,
        )  # fmt: skip

    async def seen(service, text, ids=("z", "y")):
        [(count, best)] = await service.query([text], None, None)
        roots = [service.root(i) for i in ids]
        return roots, [await cluster_or_indexed(service, r) for r in roots], count, best

    async def refused(service):
        out = []
        for call in (
            service.delete("z"),
            service.replace(NewDoc("y", "other", {})),
            service.register([NewDoc("x", "other", {})]),
        ):
            with pytest.raises(Conflict) as caught:
                await call
            out.append(caught.value.ids)
        return out

    async def run():
        a = await Service.start(settings("a"))
        b = await Service.start(settings("b"))
        try:
            [made] = await a.register([NewDoc("b", "ant bee cat dog", {})])
            await b.register([NewDoc("w", "eel fox gnu", {})])
            await _converged([a, b])
            made = (made.status, made.cluster, made.matches.count, made.matches.best)
            views = [await seen(s, "ant bee cat dog") for s in (a, b)]
            linked = [s.index.linked for s in (a, b)]
            answers = [await refused(s) for s in (a, b)]
            c = await Service.start(settings("c"))  # a new replica links them at its start
            try:
                views.append(await seen(c, "ant bee cat dog"))
                linked.append(c.index.linked)
            finally:
                await c.close()
            await b.replace(NewDoc("w", "cat", {}))  # leaves y, joins x
            await _converged([a, b])
            moved = [await seen(s, "cat", ("x", "y")) for s in (a, b)]
            # An id in both: the store's q wins; deleted on one, the indexed q is linked on both.
            await a.register([NewDoc("q", "nine ten eleven twelve", {})])
            write_index(url, [("q", "ant bee cat dog")])
            assert [await s.refresh_index() for s in (a, b)] == [True, True]
            both = [(await s.cluster("b"), (await s.document("q"))[3]) for s in (a, b)]
            await a.delete("q")
            await _converged([a, b])
            both += [(await s.cluster("b"), (await s.document("q"))[3]) for s in (a, b)]
            return made, views, linked, answers, moved, both
        finally:
            await a.close()
            await b.close()

    made, views, linked, answers, moved, both = asyncio.run(run())
    assert made == ("created", "b", 1, [("z", 1.0)])
    clusters = [["b", "z"], ["w", "y"]]
    assert views == [(["b", "w"], clusters, 2, [("b", 1.0, "b"), ("z", 1.0, "b")])] * 3
    assert linked == [2, 2, 2]
    assert answers == [[["z"], ["y"], ["x"]]] * 2
    assert both == [(["b", "z"], False)] * 2 + [(["b", "q", "z"], True)] * 2
    assert moved == [(["w", "y"], [["w", "x"], ["y"]], 2, [("w", 1.0, "w"), ("x", 1.0, "w")])] * 2
