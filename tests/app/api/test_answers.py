"""app.api.answers: answers built within their request's budget, in the response models'
shape, serialised an item at a time; and the route class that makes every route use them."""

import json

import pydantic_core
import pytest
from fastapi import APIRouter
from hypothesis import given
from hypothesis import strategies as st

from neardup.app.api.answers import PER_ITEM_BYTES, Budget, dump_json, json_bytes
from neardup.app.api.bodies import StrictJSONRoute
from neardup.app.api.routes.clusters import _cluster, _cluster_answer, _page
from neardup.app.api.routes.documents import _query_results, _results
from neardup.app.api.routes.protected_sets import _contamination_answer
from neardup.app.api.schemas import (
    ContaminationResponse,
    DocumentsResponse,
    QueryResponse,
)
from neardup.app.service import Hits, Registered
from neardup.app.service.cluster_reads import ClusterSlice
from neardup.app.service.index import Found

GRAM = " ".join(["boilerplate"] * 13)


def test_a_route_that_returns_a_model_is_refused_when_the_app_is_built():
    router = APIRouter(route_class=StrictJSONRoute)

    async def built_on_the_loop() -> dict[str, str]:
        return {}

    with pytest.raises(TypeError, match="return `await answer"):
        router.get("/x")(built_on_the_loop)


@given(st.text())
def test_json_bytes_is_at_least_what_a_string_takes(value):
    assert json_bytes(value) >= len(pydantic_core.to_json(value)) + 1


def test_budget_lists_a_prefix_and_says_when_it_cut():
    budget = Budget(10)
    assert budget.prefix(["a", "bb", "ccc", "dddddd", "e"], len) == ["a", "bb", "ccc"]
    assert budget.truncated and budget.left == 4
    assert budget.prefix(["dddd"], len) == ["dddd"] and budget.left == 0


def test_contamination_sends_each_ngram_once_counts_every_hit_and_keeps_to_its_budget():
    found = [Hits(150, [("s", f"item{i}", GRAM) for i in range(100)]) for _ in range(30)]
    found.append(Hits(0, []))
    whole = _contamination_answer(["s"], found, Budget(10**9))
    model = ContaminationResponse.model_validate(whole)  # the documented shape
    assert model.ngrams == [GRAM] and not model.truncated
    assert {h.ngram for r in model.results for h in r.hits} == {0}
    assert [r.status for r in model.results] == ["contaminated"] * 30 + ["clean"]
    limit = 20_000
    cut = _contamination_answer(["s"], found, Budget(limit))
    listed = [len(r["hits"]) for r in cut["results"]]
    assert cut["truncated"] and 0 < sum(listed) < 3000
    assert [r["hit_count"] for r in cut["results"]] == [150] * 30 + [0]
    lists = json.dumps([r["hits"] for r in cut["results"]] + cut["ngrams"], separators=(",", ":"))
    assert len(lists) <= limit
    unechoed = _contamination_answer(["s"], [Hits(1, [("s", "a", None)])], Budget(100))
    assert unechoed["ngrams"] == [] and unechoed["results"][0]["hits"][0]["ngram"] is None


def test_query_and_registration_answers_list_matches_within_the_budget():
    best = [(f"id{i:03d}", 0.9, "id000") for i in range(100)]
    found = [(250, best)] * 50
    model = QueryResponse.model_validate(_query_results(found, Budget(10**9)))
    assert [len(r.matches) for r in model.results] == [100] * 50 and not model.truncated
    cut = QueryResponse.model_validate(_query_results(found, Budget(50_000)))
    assert cut.truncated and [r.match_count for r in cut.results] == [250] * 50
    assert 0 < sum(len(r.matches) for r in cut.results) < 5000
    matches = Found(99, [(m, e) for m, e, _ in best])
    done = [Registered(f"d{i}", "d0", "unchanged", matches) for i in range(3)]
    registered = DocumentsResponse.model_validate(_results(done, Budget(4000)))
    assert registered.truncated and registered.results[0].match_count == 99
    assert len(registered.results[0].matches) < 100 and registered.results[2].matches == []


def _slice(members: list[str], after: str | None = None, limit: int = 10_000) -> ClusterSlice:
    """What the store reads of the cluster of ``members`` (sorted): those after ``after``, at
    most ``limit``, and whether more follow."""
    rest = [m for m in members if after is None or m > after]
    return ClusterSlice(members[0], len(members), rest[:limit], len(rest) > limit)


def test_a_cluster_lists_its_members_in_pages_within_the_budget():
    members = [f"m{i:05d}" for i in range(30_000)]
    first = _cluster(_slice(members), None, Budget(10**9))
    assert first.size == 30_000 and first.members == members[:10_000]
    assert first.members_next == members[9_999]
    after = _cluster(_slice(members, first.members_next), first.members_next, Budget(10**9))
    assert after.members[0] == members[10_000]
    last = _cluster(_slice(members, members[-3]), members[-3], Budget(10**9))
    assert last.members == members[-2:] and last.members_next is None
    small = _cluster(_slice(members), None, Budget(800))
    assert 0 < len(small.members) < 100 and small.members_next == small.members[-1]
    # The first cluster spends the budget: the page ends after it, and the next page goes on.
    page = _page([_slice(members), _slice(["n1", "n2"])], None, Budget(50_000))
    assert page.truncated and [c.root for c in page.clusters] == ["m00000"]
    assert page.next == "m00000" and page.clusters[0].members_next is not None


def test_dump_json_gives_pydantics_bytes_an_item_at_a_time():
    found = [Hits(3, [("s", f"i{i}", GRAM) for i in range(3)]) for _ in range(200)]
    value = _contamination_answer(["s"], found, Budget(10**9))
    model = ContaminationResponse.model_validate(value)
    assert dump_json(value) == pydantic_core.to_json(value)
    assert dump_json(model) == model.model_dump_json().encode("utf-8")
    assert dump_json([1, "a", None]) == b'[1,"a",null]'


def test_paging_clusters_by_next_and_members_next_lists_every_member_whatever_the_budget():
    """Wherever a page's budget runs out, a cluster is listed with its first members and
    ``members_next``, or left to the next page: never listed with no members and no cursor
    (its members were then on no page: ``next`` went on after it)."""
    groups = [["a" * 10], ["b" * 10, "b" * 10 + "x", "b" * 10 + "y"], ["c" * 10], ["d" * 10]]
    by_root = {g[0]: g for g in groups}
    for size in range(200, 800):  # (a real budget, 1 MiB at least, holds any first cluster)
        got: dict[str, list[str]] = {}
        after: str | None = None
        for _ in range(20):
            left = [_slice(g) for g in groups if after is None or g[0] > after]
            page = _page(left, None, Budget(size))
            for out in page.clusters:
                members, cursor = list(out.members), out.members_next
                while cursor is not None:
                    more = _cluster(_slice(by_root[out.root], cursor, 10), cursor, Budget(10**6))
                    members += more.members
                    cursor = more.members_next
                got[out.root] = members
            after = page.next
            if after is None:
                break
        assert got == by_root, size


def test_a_clusters_answer_is_within_its_budget_cursors_and_all():
    """docs/api.md's bound of both cluster routes is the budget itself (``8 R + 1 MiB``): the
    page's ``next``, a ``members_next`` and the JSON around them are counted too (ids of 256
    four-byte characters, where it shows most)."""
    wide = "\U0001f600" * 250
    groups = [[f"{wide}{c}{i:05d}" for i in range(n)] for c, n in (("a", 3), ("b", 40), ("c", 2))]
    for limit in range(20_000, 60_000, 997):
        page = dump_json(_page([_slice(g) for g in groups], f"{wide}d", Budget(limit)))
        assert len(page) <= limit, limit
        one = dump_json(_cluster_answer(_slice(groups[1], groups[1][0], 40), groups[1][0],
                                        Budget(limit)))  # fmt: skip
        assert len(one) <= limit, limit


def test_a_contamination_answer_counts_its_checked_sets_against_its_budget():
    """Checked without naming sets, every stored set is named in ``checked_sets`` (100 of 128
    characters: 13 KB) though the request did not send them: one text's answer stays within
    the budget plus PER_ITEM_BYTES, docs/api.md's bound (it was 13 KB over)."""
    checked = [f"{i:03d}" + "s" * 125 for i in range(100)]
    found = [Hits(5000, [(checked[i % 100], f"item{i}", None) for i in range(5000)])]
    for limit in range(20_000, 200_000, 9_973):
        value = _contamination_answer(checked, found, Budget(limit))
        assert len(dump_json(value)) <= limit + PER_ITEM_BYTES, limit
