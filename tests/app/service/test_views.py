"""What a cluster page shows, against core: the chain joining a member below the threshold is a
path of confirmed pairs from the root; copies collapse by digest; rows sort borderline first."""

import asyncio
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.service import NewDoc, views
from neardup.app.service.diffs import Piece
from neardup.app.service.errors import NotFound, RateLimited
from neardup.app.service.views import (
    ContaminationView,
    _chains,
    _copies,
    cluster_rows,
    cluster_view,
    contamination_view,
    registered_text,
)
from neardup.core.engine import MinhashParams, ProtectedFormat, estimate
from neardup.core.minhash import clusters, signatures
from tests.fixtures import planted_corpus

PARAMS = MinhashParams()


def _estimate(a, b) -> float:
    return float(np.mean(a == b))


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000))
def test_every_member_below_the_threshold_has_a_chain_of_confirmed_pairs(seed):
    corpus = planted_corpus(seed, n_clusters=4, n_borderline=2, n_singletons=2)
    for group in clusters(corpus.docs):
        if len(group) < 2:
            continue
        ids = sorted(group)
        sigs = np.asarray(signatures([corpus.docs[i] for i in ids]), dtype=np.uint32)
        est = (sigs == sigs[0]).mean(axis=1)
        chains = _chains(ids, sigs, est, 0, PARAMS.bands, PARAMS.threshold)
        below = {ids[k] for k in np.flatnonzero(est < PARAMS.threshold).tolist()}
        assert set(chains) == below  # a cluster is connected by confirmed pairs: all traced
        row = {i: k for k, i in enumerate(ids)}
        for member, chain in chains.items():
            hops = [ids[0], *(hop for hop, _ in chain)]
            assert hops[-1] == member and len(set(hops)) == len(hops)
            for (a, b), (_, e) in zip(itertools.pairwise(hops), chain, strict=True):
                assert _estimate(sigs[row[a]], sigs[row[b]]) == e >= PARAMS.threshold


def test_copies_group_by_digest_under_their_smallest_id():
    members = ["a", "b", "c", "d", "e", "f"]
    digests = {"a": b"1", "b": b"2", "c": b"1", "e": b"2"}  # "d" and "f" were deleted meanwhile
    assert _copies(members, digests) == [["a", "c"], ["b", "e"], ["d"], ["f"]]


def _ones(count: int) -> np.ndarray:
    """A signature equal to the root's (all zeros) but in its first ``count`` values."""
    sig = np.zeros(128, dtype=np.uint32)
    sig[:count] = 1
    return sig


def test_a_chain_takes_the_best_confirmed_pair_first_and_only_rows_below_the_threshold():
    """ "c" and "d" (below 0.8) are confirmed with both "b" (0.84 to the root) and "z" (0.92):
    their chains go through "z", the root's best pair, though "b" comes first by id and by
    row; "lone" matches nothing and gets no chain; a row exactly at the threshold is not below
    it."""
    ids = ["r", "b", "z", "lone", "c", "d"]
    sigs = np.stack([_ones(0), _ones(20), _ones(10), np.full(128, 7, np.uint32), _ones(30),
                     _ones(32)])  # fmt: skip
    est = (sigs == sigs[0]).mean(axis=1)
    assert est.tolist() == [1.0, 0.84375, 0.921875, 0.0, 0.765625, 0.75]
    assert _chains(ids, sigs, est, 0, 16, 0.8) == {
        "c": (("z", 0.921875), ("c", 0.84375)),
        "d": (("z", 0.921875), ("d", 0.828125)),
    }
    assert _chains(ids, sigs, est, 0, 16, 0.75) == {}  # "d" is at 0.75, "c" above


# A cluster of 37 documents in 26 distinct texts (two pages of 20 rows) rooted at "a-root", 200
# distinct words: "m00".."m22" change one word each (J 191/201 with 5-word shingles; "m00" the
# fourth word, in 4 shingles: 192/200), "k00".."k10"
# are copies of "m05", "b-mid" changes three words (J 181/211) and "c-far" three more of
# "b-mid"'s (J 166/226 to the root: below the threshold, joined through "b-mid").
ROOT_WORDS = [f"w{i}" for i in range(200)]


def _edit(words: list[str], positions: list[int], tag: str) -> list[str]:
    return [f"{tag}{p}" if p in positions else w for p, w in enumerate(words)]


MID = _edit(ROOT_WORDS, [20, 90, 160], "b")
CLUSTER = {
    "a-root": " ".join(ROOT_WORDS),
    "b-mid": " ".join(MID),
    "c-far": " ".join(_edit(MID, [55, 125, 190], "c")),
    **{f"m{i:02d}": " ".join(_edit(ROOT_WORDS, [7 * i + 3], "x")) for i in range(23)},
    **{f"k{i:02d}": " ".join(_edit(ROOT_WORDS, [7 * 5 + 3], "x")) for i in range(11)},
}
JACCARD = {"a-root": 1.0, "b-mid": 181 / 211, "c-far": 166 / 226, "m00": 192 / 200}
SIG = dict(zip(CLUSTER, signatures(list(CLUSTER.values())), strict=True))


async def _registered(service) -> None:
    """The root first (so it is the cluster's root), then the rest."""
    await service.register([NewDoc("a-root", CLUSTER["a-root"], {})])
    await service.register([NewDoc(i, t, {}) for i, t in CLUSTER.items() if i != "a-root"])


def _check_rows(view) -> None:
    """Each row against core: its estimate to the root, its exact Jaccard, its word diff."""
    for row in view.members:
        assert row.estimate == estimate(SIG["a-root"], SIG[row.id])
        assert row.jaccard == pytest.approx(JACCARD.get(row.id, 191 / 201), abs=1e-12)
        text = CLUSTER[row.id]
        assert "".join(p.text for p in row.diff if p.kind != "del") == (
            "" if row.id == "a-root" else text
        )
        assert row.undiffed == 0
        changed = [(p.kind, p.text) for p in row.diff if p.kind != "same"]
        if row.id.startswith("m") or row.id.startswith("k"):
            [(_, old), (_, new)] = changed
            assert (changed[0][0], changed[1][0], new[1:]) == ("del", "ins", old[1:])
    assert view.matrix == [
        [estimate(SIG[a], SIG[b]) for b in view.ids] for a in view.ids
    ]  # fmt: skip


def test_a_cluster_page_ranks_distinct_texts_borderline_first_with_chains_copies_and_diffs(
    service_in, monkeypatch
):
    """(Estimates two signatures at a time, and chains traced at exactly CHAIN_LIMIT distinct
    texts.)"""
    monkeypatch.setattr(views, "_SLAB", 2)
    monkeypatch.setattr(views, "CHAIN_LIMIT", 26)

    async def run():
        async with service_in() as service:
            await _registered(service)
            return (
                await cluster_view(service, "a-root"),
                await cluster_view(service, "a-root", page=2),
                await cluster_rows(service, "a-root"),
            )

    first, second, (groups, estimates) = asyncio.run(run())
    for view, page in ((first, 1), (second, 2)):
        assert (view.root, view.root_text, view.size, view.distinct) == (
            "a-root", CLUSTER["a-root"], 37, 26
        )  # fmt: skip
        assert (view.page, view.pages, view.threshold, view.chains, view.found) == (
            page, 2, 0.8, True, None
        )  # fmt: skip
        assert view.ids == [m.id for m in view.members]
        _check_rows(view)
    assert len(first.members) == 20 and len(second.members) == 6
    root, far = first.members[:2]
    assert (root.id, root.estimate, root.diff, root.chain) == ("a-root", 1.0, [], None)
    assert far.id == "c-far" and far.estimate < 0.8
    b_c = estimate(SIG["b-mid"], SIG["c-far"])
    assert far.chain == (("b-mid", estimate(SIG["a-root"], SIG["b-mid"])), ("c-far", b_c))
    assert all(m.chain is None for m in first.members if m.id != "c-far")
    # The root's row first, then by estimate to the root ascending, then by id.
    rows = [(m.estimate, m.id) for m in first.members[1:] + second.members]
    assert rows == sorted(rows)
    copied = [m for m in first.members + second.members if m.copy_count]
    assert [(m.id, m.copies, m.copy_count) for m in copied] == [
        ("k00", tuple(f"k{i:02d}" for i in range(1, 11)), 11)
    ]
    # Every row in the pages' order, each the sorted ids holding its text.
    assert [g[0] for g in groups] == first.ids + second.ids
    assert groups[first.ids.index("c-far")] == ["c-far"]
    assert ["k00", *copied[0].copies, "m05"] in groups
    assert estimates == [m.estimate for m in first.members + second.members]


def test_a_cluster_page_is_clamped_finds_a_member_and_is_computed_once_a_cluster(
    service_in, monkeypatch
):
    """Pages out of range are clamped; ``find`` names the page and row of a member (by its
    text's first id); the rows are computed once for all pages, for one cluster at a time;
    past CHAIN_LIMIT distinct texts no chain is traced."""
    monkeypatch.setattr(views, "CHAIN_LIMIT", 25)

    async def run():
        async with service_in() as service:
            await _registered(service)
            await service.register([NewDoc("z1", "one two three four five six", {})])
            await service.register([NewDoc("z2", "one two three four five six", {})])
            read = service.digests
            calls = []

            async def digests(ids):
                calls.append(ids)
                return await read(ids)

            service.digests = digests
            views = [
                await cluster_view(service, "a-root", page=0),
                await cluster_view(service, "a-root", page=99),
                await cluster_view(service, "a-root", find="m05"),
                await cluster_view(service, "a-root", page=2, find="c-far"),
                await cluster_view(service, "a-root", page=2, find="nope"),
            ]
            pages = [(v.page, v.found) for v in views]
            chains = [(v.chains, [m.chain for m in v.members if m.chain]) for v in views]
            once = len(calls)
            other = await cluster_view(service, "z1")
            cached = list(service.cluster_pages)
            with pytest.raises(NotFound, match="'b-mid' is not the root of a cluster"):
                await cluster_view(service, "b-mid")
            return pages, chains, once, other, cached, service.index.version

    pages, chains, once, other, cached, version = asyncio.run(run())
    assert pages == [(1, None), (2, None), (2, "k00"), (1, "c-far"), (2, None)]
    assert chains == [(False, [])] * 5
    assert once == 1
    assert (other.root, other.size, other.distinct, other.ids) == ("z1", 2, 1, ["z1"])
    assert (other.page, other.pages, other.chains) == (1, 1, True)
    assert other.members[0].copies == ("z2",) and other.matrix == [[1.0]]
    assert cached == [(version, "z1")]


def test_a_member_deleted_while_its_page_is_drawn_is_left_out_and_a_changing_cluster_is_not_found(
    service_in,
):
    """A member deleted between the page's reads: its row is drawn at estimate 0 and without
    chains (page 1: drawn again without it; page 2, which does not show it: as drawn); a root
    whose text is gone meanwhile: rows without diffs. A cluster that keeps changing (every
    read misses a member) is given up after three tries."""

    async def run():
        async with service_in() as service:
            await _registered(service)
            read, doomed = service.digests, []

            async def deleted_meanwhile(ids):
                found = await read(ids)
                if doomed:
                    await service.delete(doomed.pop())  # a DELETE between the page's reads
                return found

            service.digests = deleted_meanwhile
            doomed.append("m09")
            rows, _ = await cluster_rows(service, "a-root")
            doomed.append("m10")
            second = await cluster_view(service, "a-root", page=2)
            doomed.append("m11")
            first = await cluster_view(service, "a-root")
            texts = service.texts

            async def root_text_gone(ids):
                return {i: t for i, t in (await texts(ids)).items() if i != "a-root"}

            service.texts = root_text_gone
            service.cluster_pages.clear()
            no_root_text = await cluster_view(service, "a-root")
            tries = []

            def vanishing(ids):
                tries.append(ids)
                raise KeyError(ids[0])

            service.index.signatures_of = vanishing
            with pytest.raises(NotFound) as page:
                await cluster_view(service, "a-root")
            service.cluster_pages.clear()  # (the rows drawn last are kept until a write)
            with pytest.raises(NotFound) as read_rows:
                await cluster_rows(service, "a-root")
            return rows, second, first, no_root_text, len(tries), page.value, read_rows.value

    rows, second, first, no_root_text, tries, page, read_rows = asyncio.run(run())
    assert rows[:2] == [["a-root"], ["m09"]]
    assert (second.page, second.size, second.chains) == (2, 36, False)
    assert "m10" not in second.ids and all(m.chain is None for m in second.members)
    assert {"m09", "m10", "m11"}.isdisjoint(first.ids)
    assert (first.size, first.distinct, first.chains) == (34, 23, True)
    assert no_root_text.root_text is None and no_root_text.ids == first.ids
    assert all((m.jaccard, m.diff) == (None, []) for m in no_root_text.members)
    assert tries == 6
    assert str(page) == "the cluster of 'a-root' kept changing while its page was drawn: reload"
    assert str(read_rows) == "the cluster of 'a-root' kept changing while it was read: retry"


def test_a_cluster_page_diffs_2000_words_and_gives_no_jaccard_past_its_bound(
    service_in, monkeypatch
):
    """Texts are diffed over their first 2,000 words (the rest counted, undiffed) and the root's
    text is shown up to there; a text longer than JACCARD_CHARS gets no exact Jaccard."""
    words = [f"v{i}" for i in range(2010)]
    long_root = " ".join(words)
    member = " ".join(_edit(words, [10, 2004], "y"))
    shown = " ".join(words[:2000])

    async def run():
        async with service_in() as service:
            await service.register([NewDoc("r", long_root, {})])
            await service.register([NewDoc("s", member, {}), NewDoc("t", long_root + "!", {})])
            monkeypatch.setattr(views, "JACCARD_CHARS", len(long_root))
            return await cluster_view(service, "r")

    view = asyncio.run(run())
    assert view.root_text == shown
    root, edited, copy = view.members
    assert (root.id, root.jaccard, copy.id, copy.jaccard, edited.id) == ("r", 1.0, "t", None, "s")
    assert [(p.kind, p.text) for p in edited.diff if p.kind != "same"] == [
        ("del", "v10"), ("ins", "y10")
    ]  # fmt: skip
    assert "".join(p.text for p in edited.diff if p.kind != "del") == member[: len(shown)]
    assert edited.undiffed == len(member) - len(shown)
    assert edited.jaccard == pytest.approx(1996 / 2016, abs=1e-12)
    assert (copy.diff, copy.undiffed) == ([Piece(shown, "same")], len(long_root) + 1 - len(shown))


def test_a_cluster_page_without_stored_texts_shows_estimates_only(service_in):
    async def run():
        async with service_in(store_text=False) as service:
            await _registered(service)
            view = await cluster_view(service, "a-root")
            with pytest.raises(NotFound) as no_text:
                await registered_text(service, "a-root")
            return view, str(no_text.value)

    view, no_text = asyncio.run(run())
    assert view.root_text is None and len(view.members) == 20
    assert all((m.jaccard, m.diff) == (None, []) for m in view.members)
    assert [m.estimate for m in view.members] == [
        estimate(SIG["a-root"], SIG[i]) for i in view.ids
    ]  # fmt: skip
    assert no_text == "no stored text for document 'a-root'"


PROBE = "Intro. THE secret answer is forty two, said zebra quagga okapi giraffe; the end"
SETS = {
    "bench-a": (
        '{"id": "q1", "text": "the secret answer is forty two"}\n'
        '{"id": "q2", "text": "nothing in common with anything"}\n'
    ),
    "bench-b": "zebra quagga okapi giraffe",
}


def test_a_checked_text_names_and_marks_its_shared_ngrams_for_a_key_with_protect(service_in):
    """With ``echo`` (the protect scope): the items hit with their first shared n-gram and every
    word of a shared n-gram of the chosen sets marked; without it the text is shown plain and
    the n-grams are not named. A blank text and a text without sets to check give no verdict;
    past 200,000 characters a text is checked but not shown."""
    long = PROBE + " filler" * 40_000

    async def run():
        async with service_in(ngram=4) as service:
            nothing = await contamination_view(service, PROBE, None, "k", echo=True)
            await service.put_protected_set("bench-a", SETS["bench-a"], ProtectedFormat.JSONL)
            await service.put_protected_set("bench-b", SETS["bench-b"], ProtectedFormat.TEXT)
            await service.register([NewDoc("doc", PROBE, {})])
            return nothing, [
                await contamination_view(service, PROBE, None, "k", echo=True),
                await contamination_view(service, PROBE, ["bench-b"], "k", echo=True),
                await contamination_view(service, PROBE, None, "k", echo=False),
                await contamination_view(service, " \n", ["bench-a"], "k", echo=False),
                await contamination_view(service, long, None, "k", echo=True),
                await registered_text(service, "doc"),
            ]

    nothing, (both, only_b, plain, blank, cut, text) = asyncio.run(run())
    assert text == PROBE
    assert (nothing.hits, nothing.checked, nothing.empty) == ([], (), False)
    assert nothing.pieces and all(p.kind == "same" for p in nothing.pieces)
    assert "".join(p.text for p in nothing.pieces) == PROBE
    a_words = ["THE", "secret", "answer", "is", "forty", "two"]
    b_words = ["zebra", "quagga", "okapi", "giraffe"]
    assert (both.text, both.checked, both.echo, both.empty, both.not_shown) == (
        PROBE, ("bench-a", "bench-b"), True, False, 0
    )  # fmt: skip
    assert both.hits == [
        ("bench-a", "q1", "the secret answer is"),
        ("bench-b", "1", "zebra quagga okapi giraffe"),
    ]
    assert [p.text for p in both.pieces if p.kind == "hit"] == a_words + b_words
    assert "".join(p.text for p in both.pieces) == PROBE
    assert (only_b.checked, only_b.hits) == (("bench-b",), [both.hits[1]])
    assert [p.text for p in only_b.pieces if p.kind == "hit"] == b_words
    assert plain == ContaminationView(
        PROBE, [Piece(PROBE, "same")], [("bench-a", "q1", ""), ("bench-b", "1", "")], 0, False,
        ("bench-a", "bench-b"),
    )  # fmt: skip
    assert blank == ContaminationView(" \n", [], [], 0, False, ("bench-a",), empty=True)
    assert (cut.text, cut.not_shown, cut.hits) == (long, len(long) - 200_000, both.hits)
    assert "".join(p.text for p in cut.pieces) == long[:200_000]


def test_a_contamination_pages_rows_show_each_shared_ngram_once_and_cut():
    long_gram = " ".join("w" * 100 for _ in range(13))
    hits = [
        ("s", "a", "one two"),
        ("s", "b", long_gram),
        ("t", "c", "one two"),
        ("t", "d", long_gram),
    ]
    view = ContaminationView("text", [], hits, 0, True, ("s", "t"))
    assert view.rows() == [
        ("s", "a", "one two", None),
        ("s", "b", long_gram[: views.NGRAM_CHARS] + "…", None),
        ("t", "c", None, 1),
        ("t", "d", None, 2),
    ]


# 100 distinct CJK characters (one "word" for the words tokenizer; 100 for multilingual), and
# the same with its 51st character changed.
HAN = "".join(chr(0x4E00 + i) for i in range(100))
HAN_EDITED = HAN[:50] + "\u9000" + HAN[51:]


def test_a_multilingual_service_pages_and_marks_by_characters_and_rates_each_caller(service_in):
    """With the multilingual tokenizer the exact Jaccard and the marked n-grams are of
    characters; a caller's checks are counted apart from another's."""

    async def run():
        async with service_in(
            tokenizer="multilingual", ngram=3, contamination_texts_per_minute=2
        ) as service:
            await service.register([NewDoc("h1", HAN, {})])
            await service.register([NewDoc("h2", HAN_EDITED, {})])
            await service.put_protected_set("han", HAN[20:30], ProtectedFormat.TEXT)
            page = await cluster_view(service, "h1")
            checked = await contamination_view(service, HAN, None, "k", echo=True)
            await contamination_view(service, HAN, None, "k", echo=True)
            with pytest.raises(RateLimited):
                await contamination_view(service, HAN, None, "k", echo=True)
            other = await contamination_view(service, HAN, None, "other", echo=True)
            return page, checked, other

    page, checked, other = asyncio.run(run())
    assert [m.id for m in page.members] == ["h1", "h2"]
    assert page.members[1].jaccard == pytest.approx(91 / 101, abs=1e-12)  # 5 of 96 shingles
    assert "".join(p.text for p in checked.pieces if p.kind == "hit") == HAN[20:30]
    # a window of 3 English words' worth: 6 Han characters (38/64 each, weighted-3)
    assert checked.hits == other.hits == [("han", "1", " ".join(HAN[20:26]))]
