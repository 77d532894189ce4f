"""A contamination report, number by number: a small worked example of two sets (n = 2) pinned
whole, the Llama 2 buckets at their bounds, the caps' defaults and the parameters' errors."""

import json

import pytest

from neardup.core._matches import Match, Protection
from neardup.core._protected import ProtectedFormat, parse_protected_set
from neardup.core._report import MAX_ITEMS, SUBSETS, ContaminationReport, Thresholds
from neardup.core.errors import ParameterError
from neardup.core.minhash import Doc


def _set(name, items, n=2):
    body = "\n".join(json.dumps(i) for i in items)
    return parse_protected_set(name, body, ProtectedFormat.JSONL, n)


S1 = [{"id": "q1", "t": "a b c d f g"}, {"id": "q2", "t": "c d e"}, {"id": "q3", "t": "x y"}]
S2 = [{"id": "r1", "t": "b c"}]
DOCS = [Doc("d1", "a b"), Doc("d2", "c d e"), Doc("d3", "zzz"), Doc("d4", "B, c!")]


def _report(protection, **kwargs):
    report = ContaminationReport(protection, **kwargs)
    entries = [report.add(d, protection.matches(d.text)) for d in DOCS]
    return report, entries


def test_a_report_worked_by_hand():
    report, entries = _report(Protection([_set("s1", S1), _set("s2", S2)]))
    assert entries == [
        {"id": "d1", "items": [{"set": "s1", "item": "q1"}]},
        {"id": "d2", "items": [{"set": "s1", "item": "q1"}, {"set": "s1", "item": "q2"}]},
        None,
        {"id": "d4", "items": [{"set": "s1", "item": "q1"}, {"set": "s2", "item": "r1"}]},
    ]
    # q1: 6 words, 5 windows; "a b", "c d", "b c" found: 3/5 of its n-grams, 4/6 of its words
    q1 = {"set": "s1", "item": "q1", "documents": 3, "document_ids": ["d1", "d2", "d4"],
          "first_ngram": "a b", "ngrams": 5, "ngrams_found": 3, "share_found": 0.6,
          "coverage": 4 / 6, "subsets": ["not clean", "not dirty"]}  # fmt: skip
    q2 = {"set": "s1", "item": "q2", "documents": 1, "document_ids": ["d2"],
          "first_ngram": "c d", "ngrams": 2, "ngrams_found": 2, "share_found": 1.0,
          "coverage": 1.0, "subsets": ["not clean", "dirty"]}  # fmt: skip
    r1 = {"set": "s2", "item": "r1", "documents": 1, "document_ids": ["d4"],
          "first_ngram": "b c", "ngrams": 1, "ngrams_found": 1, "share_found": 1.0,
          "coverage": 1.0, "subsets": ["not clean", "dirty"]}  # fmt: skip
    assert report.as_dict() == {
        "tokenizer": "words",
        "windows": "words",
        "ngram": 2,
        "item_cap": None,
        "thresholds": {"clean_below": 0.2, "dirty_from": 0.8},
        "documents": 4,
        "contaminated": 3,
        "contaminated_ids": ["d1", "d2", "d4"],
        "items_matched": 3,
        "sets": [
            {"set": "s1", "items": 3, "ngrams": 7, "documents": 3, "items_matched": 2,
             # q3, matched by none, is clean and not dirty
             "subsets": {"clean": 1, "not clean": 2, "not dirty": 2, "dirty": 1},
             "capped": {"ngrams": 0, "list": []},
             "top_items": [{"item": "q1", "documents": 3, "coverage": 4 / 6},
                           {"item": "q2", "documents": 1, "coverage": 1.0}]},
            {"set": "s2", "items": 1, "ngrams": 1, "documents": 1, "items_matched": 1,
             "subsets": {"clean": 0, "not clean": 1, "not dirty": 0, "dirty": 1},
             "capped": {"ngrams": 0, "list": []},
             "top_items": [{"item": "r1", "documents": 1, "coverage": 1.0}]},
        ],
        "items": [q1, q2, r1],
    }  # fmt: skip
    assert report.items() == [q1, q2, r1]
    assert report.items(ngrams=False) == [{**i, "first_ngram": None} for i in (q1, q2, r1)]


def test_the_caps_of_a_report_and_the_capped_ngrams():
    protection = Protection([_set("s1", S1), _set("s2", S2)], item_cap=1, capped=["x y", "zz"])
    report, _ = _report(protection, examples=1, top=1, max_items=2)
    out = report.as_dict()
    assert (out["item_cap"], out["contaminated_ids"], out["items_matched"]) == (1, ["d1"], 3)
    # "c d" is in two items of s1: capped, so d2 finds q2 by "d e" only
    assert [(i["item"], i["document_ids"], i["first_ngram"]) for i in out["items"]] == [
        ("q1", ["d1"], "a b"), ("q2", ["d2"], "d e")]  # fmt: skip
    assert [s["capped"] for s in out["sets"]] == [
        {"ngrams": 2, "list": ["c d"]}, {"ngrams": 0, "list": []}]  # fmt: skip
    assert [s["top_items"] for s in out["sets"]] == [
        [{"item": "q1", "documents": 2, "coverage": 0.5}],
        [{"item": "r1", "documents": 1, "coverage": 1.0}],
    ]
    hidden = report.as_dict(ngrams=False)
    assert [s["capped"] for s in hidden["sets"]] == [
        {"ngrams": 2, "list": None}, {"ngrams": 0, "list": None}]  # fmt: skip
    assert [i["first_ngram"] for i in hidden["items"]] == [None, None]
    whole, _ = _report(protection, examples=None, max_items=None)
    assert whole.as_dict()["sets"][0]["capped"]["list"] == ["c d", "x y"]
    assert len(whole.as_dict()["items"]) == 3
    assert whole.as_dict()["contaminated_ids"] == ["d1", "d2", "d4"]


def test_a_report_of_no_sets_and_the_defaults():
    report, entries = _report(Protection([]))
    assert entries == [None] * 4
    assert report.as_dict() == {
        "tokenizer": "words", "windows": "words", "ngram": 13, "item_cap": None,
        "thresholds": {"clean_below": 0.2, "dirty_from": 0.8},
        "documents": 4, "contaminated": 0, "contaminated_ids": [], "items_matched": 0,
        "sets": [], "items": [],
    }  # fmt: skip
    assert (report.examples, report.top, report.max_items) == (10, 10, MAX_ITEMS)
    assert MAX_ITEMS == 1000
    assert report.thresholds == Thresholds(0.2, 0.8)
    assert SUBSETS == ("clean", "not clean", "not dirty", "dirty")


def test_items_are_by_set_then_most_documents_then_id_and_listed_up_to_the_caps():
    s = _set("s", [{"id": f"q{k}", "t": f"w{k} v"} for k in range(5)])
    protection = Protection([_set("first", [{"id": "z", "t": "w4 v"}]), s])
    report = ContaminationReport(protection, top=2, max_items=4)
    texts = ["w3 v", "w1 v", "w3 v", "w4 v", "w0 v", "w2 v", "w2 v"]
    for k, text in enumerate(texts):
        report.add(Doc(f"d{k}", text), protection.matches(text))
    out = report.as_dict()
    assert [(i["set"], i["item"], i["documents"]) for i in out["items"]] == [
        ("first", "z", 1), ("s", "q2", 2), ("s", "q3", 2), ("s", "q0", 1)]  # fmt: skip
    assert out["items_matched"] == 6
    assert [t["item"] for t in out["sets"][1]["top_items"]] == ["q2", "q3"]
    assert out["sets"][1]["subsets"] == {"clean": 0, "not clean": 5, "not dirty": 0, "dirty": 5}


def test_an_item_the_layout_does_not_know_has_coverage_0():
    protection = Protection([_set("s", S1)])
    report = ContaminationReport(protection)
    report.add(Doc("d", "?"), [Match("s", ("q9",), "zz", 0, 1), Match("s", ("q9",), "yy", 0, 1)])
    [item] = report.items()
    assert item == {"set": "s", "item": "q9", "documents": 1, "document_ids": ["d"],
                    "first_ngram": "zz", "ngrams": 0, "ngrams_found": 0, "share_found": 0.0,
                    "coverage": 0.0, "subsets": ["clean", "not dirty"]}  # fmt: skip


def test_coverage_counts_each_word_once_and_the_last_words_too():
    # 3-grams of 7 words; "c d e" and "e f g" found: words c..g (5 of 7), "e" counted once
    protection = Protection([_set("s", [{"id": "q", "t": "a b c d e f g"}], n=3)])
    report = ContaminationReport(protection)
    report.add(Doc("d", "c d e f g"), protection.matches("c d e . e f g"))
    [item] = report.items()
    assert (item["ngrams"], item["ngrams_found"], item["coverage"]) == (5, 2, 5 / 7)


@pytest.mark.parametrize(
    ("clean_below", "dirty_from", "coverage", "subsets"),
    [
        (0.2, 0.8, 0.0, ["clean", "not dirty"]),
        (0.2, 0.8, 0.19, ["clean", "not dirty"]),
        (0.2, 0.8, 0.2, ["not clean", "not dirty"]),
        (0.2, 0.8, 0.79, ["not clean", "not dirty"]),
        (0.2, 0.8, 0.8, ["not clean", "dirty"]),
        (0.2, 0.8, 1.0, ["not clean", "dirty"]),
        (0.0, 0.0, 0.0, ["not clean", "dirty"]),
        (1.0, 1.0, 0.99, ["clean", "not dirty"]),
        (1.0, 1.0, 1.0, ["not clean", "dirty"]),
        (0.5, 0.5, 0.5, ["not clean", "dirty"]),
    ],
)
def test_the_llama2_buckets_at_their_bounds(clean_below, dirty_from, coverage, subsets):
    assert Thresholds(clean_below, dirty_from).subsets(coverage) == subsets


@pytest.mark.parametrize(("clean_below", "dirty_from"), [(-0.1, 0.5), (0.6, 0.5), (0.5, 1.5)])
def test_thresholds_out_of_order_are_refused(clean_below, dirty_from):
    with pytest.raises(ParameterError) as caught:
        Thresholds(clean_below, dirty_from)
    assert str(caught.value) == (
        "thresholds must satisfy 0 <= clean_below <= dirty_from <= 1, got "
        f"{clean_below!r} and {dirty_from!r}"
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"examples": -1}, "examples must be a whole number >= 0, got -1"),
        ({"examples": True}, "examples must be a whole number >= 0, got True"),
        ({"examples": 1.0}, "examples must be a whole number >= 0, got 1.0"),
        ({"top": -1}, "top must be a whole number >= 0, got -1"),
        ({"top": False}, "top must be a whole number >= 0, got False"),
        ({"max_items": -2}, "max_items must be a whole number >= 0, got -2"),
        ({"max_items": "3"}, "max_items must be a whole number >= 0, got '3'"),
    ],
)
def test_bad_report_caps_are_refused(kwargs, error):
    with pytest.raises(ParameterError) as caught:
        ContaminationReport(Protection([]), **kwargs)
    assert str(caught.value) == error


def test_zero_caps_list_nothing_and_count_everything():
    report, _ = _report(Protection([_set("s1", S1)]), examples=0, top=0, max_items=0)
    out = report.as_dict()
    assert (out["contaminated"], out["contaminated_ids"], out["items"]) == (3, [], [])
    assert out["items_matched"] == 2
    assert out["sets"][0]["top_items"] == [] and out["sets"][0]["items_matched"] == 2


def test_coverage_and_share_of_an_item_of_several_texts():
    # q: "a b c" (3 words, 2 windows) and "x y" (2 words, 1 window); "a b" found: 2 of 5 words
    protection = Protection([_set("s", [{"id": "q", "one": "a b c", "two": "x y"}])])
    report = ContaminationReport(protection)
    report.add(Doc("d", "a b"), protection.matches("a b"))
    [item] = report.items()
    assert (item["ngrams"], item["ngrams_found"], item["coverage"]) == (3, 1, 2 / 5)
    assert item["share_found"] == 1 / 3
