"""The index's memory follows the live documents: removed documents' slots are compacted away,
and the compacted index answers exactly as the one it replaces (matches, earlier matches,
clusters, members, document numbers), in any history of registrations, removals and
replaces; a service under many replaces keeps ``index_bytes`` and the SQLite store bounded."""

import asyncio
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.config import Settings
from neardup.app.service import NewDoc, Service
from neardup.app.service import index as index_module
from neardup.app.service.index import ServiceIndex
from neardup.core.engine import MinhashParams
from neardup.core.minhash import clusters as core_clusters
from neardup.core.minhash import signatures
from tests.app.service.cluster_reads import every_cluster
from tests.fixtures import planted_corpus

CORPUS = planted_corpus(4, n_clusters=6, n_borderline=3, n_singletons=10)
# Exact copies too (one class whose representative gets removed) and a wordless text.
TEXTS = {**CORPUS.docs, **{f"copy-{i}": CORPUS.docs[min(CORPUS.docs)] for i in range(4)}}
TEXTS["blank"] = "?!"
IDS = sorted(TEXTS)
SIGS = dict(zip(IDS, signatures([TEXTS[i] for i in IDS]), strict=True))


def _sigs(ids):
    return np.array([SIGS[i] for i in ids], dtype=np.uint32).reshape(-1, 128)


def _answers(index: ServiceIndex) -> tuple:
    """Everything a reader can ask, by id."""
    live = sorted(i for i in IDS if i in index)
    groups = sorted((index.members(r) for r in index.roots()), key=min)
    probe = _sigs(IDS)
    return (
        live,
        [index.number(i) for i in live],
        index.next_number,
        groups,
        [index.root_of(i) for i in live],
        index.matches(probe),
        index.earlier_matches(live),
        index.clusters_by_size(2),
    )


# A history: register a batch of ids not yet in, remove one, or replace one with another's text.
STEP = st.tuples(st.sampled_from(["add", "remove", "replace"]), st.integers(0, 10**6))


@settings(max_examples=40, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=40), st.integers(0, 40))
def test_a_compacted_index_answers_as_the_one_it_replaces(history, when):
    """Run a history on two indexes, compacting one of them after step ``when`` (and again at
    the end): every answer is the same, and the compacted one holds no removed slot."""
    plain, compact = ServiceIndex(MinhashParams()), ServiceIndex(MinhashParams())
    text_of: dict[str, str] = {}  # the live documents' texts
    for step, (kind, pick) in enumerate(history):
        absent = [i for i in IDS if i not in plain]
        present = [i for i in IDS if i in plain]
        if kind == "add" and absent:
            batch = absent[pick % len(absent) :][: 1 + pick % 5]
            for index in (plain, compact):
                index.apply(index.plan(batch, _sigs(batch)))
            text_of.update((i, TEXTS[i]) for i in batch)
        elif kind in ("remove", "replace") and present:
            victim, donor = present[pick % len(present)], IDS[pick % len(IDS)]
            for index in (plain, compact):
                index.apply_removal(index.plan_removal(victim))
                if kind == "replace":  # the id comes back with another document's text
                    index.apply(index.plan([victim], _sigs([donor])))
            text_of.pop(victim)
            if kind == "replace":
                text_of[victim] = TEXTS[donor]
        if step == when:
            compact = compact.compacted()
        assert _answers(compact) == _answers(plain)
    compact = compact.compacted()
    assert _answers(compact) == _answers(plain)
    assert compact.removed == 0
    assert sorted(compact.members(r) for r in compact.roots()) == sorted(
        sorted(g) for g in core_clusters(text_of)
    )


def _replaced(updates: int, live: int = 100) -> ServiceIndex:
    """``live`` documents, then ``updates`` replaces of them (each with a new text), with the
    compaction swapped in whenever the index asks for it, as the service does."""
    index = ServiceIndex(MinhashParams())
    ids = [f"doc-{i:03d}" for i in range(live)]
    texts = [f"document {i} about topic {i % 7} and nothing else {i * 31}" for i in range(live)]
    index.apply(index.plan(ids, signatures(texts)))
    new = signatures([f"version {u} of a text {u * 17} for {u % 5}" for u in range(updates)])
    for u in range(updates):
        doc_id = ids[u % live]
        index.apply_removal(index.plan_removal(doc_id))
        index.apply(index.plan([doc_id], new[u : u + 1]))
        if index.wants_compaction():
            index = index.compacted()
    return index


def test_index_bytes_follow_live_documents_not_updates(monkeypatch):
    """1,000 replaces of 100 documents leave the index within a small factor of the same
    100 documents after 50 replaces (without compaction it holds 10 times the slots)."""
    monkeypatch.setattr(index_module, "COMPACT_AFTER", 64)
    few, many = _replaced(50), _replaced(1_000)
    assert len(few) == len(many) == 100
    assert many.removed <= max(len(many), 64)
    assert many.nbytes() <= 1.2 * few.nbytes()
    assert many.next_number == 1_100  # the store's numbers go on; the slots do not


def _settings(tmp_path, **kw):
    return Settings(data_dir=tmp_path / "data", workers=1, **kw)


async def _updates(tmp_path, updates: int, live: int = 100) -> dict:
    """A service on SQLite: ``live`` documents, then ``updates`` PUTs replacing their texts;
    its stats, the store's row count and file size, and the same after a restart."""
    service = await Service.start(_settings(tmp_path))
    try:
        ids = [f"doc-{i:03d}" for i in range(live)]
        await service.register([NewDoc(i, f"first text of {i} and its words", {}) for i in ids])
        for u in range(updates):
            text = f"version {u} of document {u % live} with its own words {u * 7}"
            await service.replace(NewDoc(ids[u % live], text, {}))
        if service._compacting is not None:
            await service._compacting
        stats = service.stats()
        rows = service.store._db.execute("SELECT count(*) FROM documents").fetchone()[0]
        before = await every_cluster(service)
        compactions = service.compactions
    finally:
        await service.close()
    size = sum(f.stat().st_size for f in (tmp_path / "data").glob("neardup.sqlite3*"))
    service = await Service.start(_settings(tmp_path))
    try:
        after = await every_cluster(service)
        restarted = service.stats()
    finally:
        await service.close()
    return {"stats": stats, "rows": rows, "size": size, "same": before == after,
            "restarted": restarted, "compactions": compactions}  # fmt: skip


def test_a_service_under_many_replaces_stays_bounded_on_sqlite(tmp_path, monkeypatch):
    """400 PUTs of 100 live documents: index_bytes within 10 % of 20 PUTs' (without compaction
    25 % more: the bands' fixed buffers dominate so small an index), the SQLite file's rows the
    live documents and its size as small (SQLite deletes rows and reuses their pages); the
    index was compacted in the background, off the event loop, and a restart recovers the same
    clusters."""
    monkeypatch.setattr(index_module, "COMPACT_AFTER", 64)
    threads: list[str] = []
    compacted = ServiceIndex.compacted

    def recorded(self):
        threads.append(threading.current_thread().name)
        return compacted(self)

    monkeypatch.setattr(ServiceIndex, "compacted", recorded)
    few = asyncio.run(_updates(tmp_path / "few", 20))
    many = asyncio.run(_updates(tmp_path / "many", 400))
    assert few["rows"] == many["rows"] == 100
    assert many["stats"]["documents"] == 100
    assert many["compactions"] >= 1
    assert threads and threading.main_thread().name not in threads  # the loop's thread
    assert many["stats"]["index_bytes"] <= 1.1 * few["stats"]["index_bytes"]
    assert many["size"] <= 1.5 * few["size"]
    assert many["same"] and many["restarted"]["documents"] == 100
    assert many["restarted"]["index_bytes"] <= 1.1 * few["restarted"]["index_bytes"]


@pytest.mark.parametrize("removed", [0, 1])
def test_an_index_is_compacted_only_past_its_bound(removed, monkeypatch):
    monkeypatch.setattr(index_module, "COMPACT_AFTER", 2)
    index = ServiceIndex(MinhashParams())
    index.apply(index.plan(IDS[:2], _sigs(IDS[:2])))
    for doc_id in IDS[: 1 + removed]:
        index.remove(doc_id)
    assert index.removed == 1 + removed
    assert index.wants_compaction() == (removed == 1)
