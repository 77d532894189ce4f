"""The document and query pages' views (app.service.lookups), in process: what a registered
document's page shows (its cluster, its best matches, its text and meta cut to a bound) and a
pasted text's near duplicates, as ``POST /v1/query`` finds them."""

import asyncio
import json

import pytest

from neardup.app.service import NewDoc
from neardup.app.service.errors import NotFound, OutOfReach
from neardup.app.service.lookups import MatchRow, QueryView, document_view, query_view

BASE = " ".join(f"word{i}" for i in range(30))
# 22 near copies of one text (each one more word at the end), and an unrelated text.
COPIES = {f"copy-{i:02d}": f"{BASE} extra{i}" for i in range(22)}
OTHER = " ".join(f"unrelated{i} words{i * 7}" for i in range(40))


def _docs(**meta):
    return [NewDoc(i, t, meta) for i, t in COPIES.items()] + [NewDoc("other", OTHER, meta)]


def test_a_document_page_shows_its_cluster_and_its_best_20_matches(service_in):
    """22 near copies: each page counts the 21 others, lists the best 20 of them (not itself),
    highest estimate first and then by id, each with its cluster, as a query finds them."""

    async def run():
        async with service_in() as service:
            await service.register(_docs())
            copy = await document_view(service, "copy-05")
            other = await document_view(service, "other")
            [(count, found)] = await service.query([COPIES["copy-05"]], None, None)
            return service.index.root_of("copy-05"), copy, other, count, found

    root, copy, other, count, found = asyncio.run(run())
    assert count == 22
    assert (copy.id, copy.cluster, copy.cluster_size) == ("copy-05", root, 22)
    assert copy.match_count == 21
    expected = [MatchRow(i, e, c) for i, e, c in found if i != "copy-05"][:20]
    assert copy.matches == expected and len(expected) == 20
    assert all(m.cluster == root for m in copy.matches)
    keys = [(-m.estimate, m.id) for m in copy.matches]
    assert keys == sorted(keys) and 0.8 <= copy.matches[-1].estimate < 1
    assert copy.threshold == 0.8
    assert (other.cluster, other.cluster_size, other.match_count, other.matches) == (
        "other", 1, 0, []
    )  # fmt: skip


def test_a_document_page_cuts_its_text_at_200000_and_its_meta_at_20000_characters(service_in):
    """The text's first 200,000 characters and the meta as indented JSON (not escaped) up to
    20,000, each with the characters left out: none at exactly the bound, one past it."""
    text = ("word " * 40_000)[:200_000]
    meta = {"name": "café", "pad": ""}
    meta["pad"] = "x" * (20_000 - len(json.dumps(meta, indent=2, ensure_ascii=False)))
    long_meta = {**meta, "pad": meta["pad"] + "y"}

    async def run():
        async with service_in() as service:
            await service.register(
                [NewDoc("exact", text, meta), NewDoc("over", text + "s", long_meta)]
            )
            return await document_view(service, "exact"), await document_view(service, "over")

    exact, over = asyncio.run(run())
    dumped = json.dumps(meta, indent=2, ensure_ascii=False)
    assert len(dumped) == 20_000 and '"café"' in dumped
    assert (exact.text, exact.text_cut, exact.meta, exact.meta_cut) == (text, 0, dumped, 0)
    assert (over.text, over.text_cut) == (text, 1)
    assert over.meta == json.dumps(long_meta, indent=2, ensure_ascii=False)[:20_000]
    assert over.meta_cut == 1


def test_a_document_page_without_stored_texts_shows_no_text(service_in):
    async def run():
        async with service_in(store_text=False) as service:
            await service.register([NewDoc("a", BASE, {"k": 1})])
            return await document_view(service, "a")

    view = asyncio.run(run())
    assert (view.text, view.text_cut, view.meta, view.meta_cut) == (None, 0, '{\n  "k": 1\n}', 0)


def test_an_unknown_document_or_one_deleted_while_its_page_is_drawn_is_not_found(service_in):
    async def run():
        async with service_in() as service:
            await service.register([NewDoc("gone", BASE, {})])
            with pytest.raises(NotFound, match=r"^no document 'nope'$"):
                await document_view(service, "nope")
            texts = service.texts

            async def deleted_meanwhile(doc_ids):
                found = await texts(doc_ids)
                service.index.remove("gone")  # as a DELETE between the page's reads
                return found

            service.texts = deleted_meanwhile
            with pytest.raises(NotFound, match=r"^no document 'gone'$"):
                await document_view(service, "gone")

    asyncio.run(run())


def test_a_query_lists_the_near_duplicates_up_to_max_matches_and_checks_no_empty_text(service_in):
    """Counted whole, listed up to MAX_MATCHES, at the threshold given (default THRESHOLD;
    OutOfReach below the bands' reach); an empty or blank text is not checked."""
    probe = f"{BASE} another"

    async def run():
        async with service_in(max_matches=5) as service:
            await service.register(_docs())
            views = [
                await query_view(service, probe, None),
                await query_view(service, probe, 1.0),
                await query_view(service, " \n\t", None),
                await query_view(service, "", 0.9),
            ]
            [(_, found)] = await service.query([probe], None, None)
            with pytest.raises(OutOfReach):
                await query_view(service, probe, 0.1)
            return views, found

    (default, strict, blank, empty), found = asyncio.run(run())
    assert default == QueryView(True, 0.8, 22, [MatchRow(*f) for f in found], 5)
    assert len(default.matches) == 5
    assert strict == QueryView(True, 1.0, 0, [], 5)
    assert blank == QueryView(False, 0.8, 0, [], 5)
    assert empty == QueryView(False, 0.9, 0, [], 5)
