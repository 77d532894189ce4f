"""Services sharing one store behave as one service: the same operations give the same clusters
on either store; on PostgreSQL, two replicas in one process follow each other's writes, race
near-duplicates that find each other one way round, and a new replica recovers the same index."""

import asyncio
import random
import time

import pytest

from neardup.app.config import Settings
from neardup.app.service import NewDoc, NotFound, Service
from neardup.core.engine import ProtectedFormat
from neardup.core.minhash import clusters as core_clusters
from tests.fixtures import planted_corpus

CORPUS = planted_corpus(11, n_clusters=6, n_borderline=3, n_singletons=12)


def _settings(tmp_path, url=None):
    return Settings(data_dir=tmp_path / "data", workers=1, store_url=url)


def _groups(service):
    return [set(group) for group in service.clusters(1, 10**9, None)[0]]


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
            before = _groups(service)
        finally:
            await service.close()
        service = await Service.start(_settings(tmp_path, url))
        try:
            return before, _groups(service), sorted(service.protected)
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
