"""Cut mode's arithmetic, case by case: the parameters' defaults and bounds, the removed spans
and kept pieces of a text, piece ids, and what a row's meta says of its matches (docs/algorithm.md
section 5; Brown et al. 2020, appendix C)."""

import json

import pytest

from neardup.core._cutting import (
    DECONT_KEY,
    PIECE_SEPARATOR,
    Cut,
    DecontMode,
    DecontParams,
    apply_mode,
    collision_message,
    cut_bounds,
    cut_spans,
    decontaminate_modes,
    drop_rule,
    match_summary,
    piece_id,
    piece_source,
)
from neardup.core._matches import Match, Protection
from neardup.core._protected import ProtectedFormat, parse_protected_set
from neardup.core.errors import ParameterError
from neardup.core.minhash import Doc


def test_the_defaults_are_gpt3s_and_drop():
    assert DecontParams() == DecontParams(DecontMode.DROP, 200, 200, 10)
    made = DecontParams("cut", 0, 0, 1)  # type: ignore[arg-type]
    assert made.mode is DecontMode.CUT and (made.window, made.min_piece, made.max_pieces) == (
        0, 0, 1)  # fmt: skip
    assert (DECONT_KEY, PIECE_SEPARATOR) == ("decontamination", "#")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"mode": "shred"}, "mode must be one of drop, cut, annotate, got 'shred'"),
        ({"mode": None}, "mode must be one of drop, cut, annotate, got None"),
        ({"window": -1}, "window must be a whole number >= 0, got -1"),
        ({"window": 1.0}, "window must be a whole number >= 0, got 1.0"),
        ({"min_piece": True}, "min_piece must be a whole number >= 0, got True"),
        ({"min_piece": -1}, "min_piece must be a whole number >= 0, got -1"),
        ({"max_pieces": 0}, "max_pieces must be a whole number >= 1, got 0"),
        ({"max_pieces": None}, "max_pieces must be a whole number >= 1, got None"),
        ({"max_pieces": False}, "max_pieces must be a whole number >= 1, got False"),
    ],
)
def test_bad_parameters_are_refused_naming_the_bound(kwargs, error):
    with pytest.raises(ParameterError) as caught:
        DecontParams(**kwargs)
    assert str(caught.value) == error


@pytest.mark.parametrize(
    ("text", "tokenizer", "bounds"),
    [
        ("foobar c2", "words", [(0, 6), (7, 9)]),
        ("", "words", []),
        ("中文 Σ", "multilingual", [(0, 1), (1, 2), (3, 4)]),
        ("中文 Σ", "words", [(0, 2), (3, 4)]),
        ("x ΑΣ.Α y", "words", [(0, 1), (2, 6), (7, 8)]),
        ("a.Σ'b c", "words", [(0, 5), (6, 7)]),
        ("Σ. .a", "words", [(0, 2), (4, 5)]),
    ],
)
def test_cut_bounds_are_the_words_and_the_runs_around_a_capital_sigma(text, tokenizer, bounds):
    assert cut_bounds(text, tokenizer) == bounds


def test_cut_bounds_default_to_the_words_tokenizer():
    assert cut_bounds("中文 Σ") == [(0, 2), (3, 4)]


P = DecontParams


@pytest.mark.parametrize(
    ("length", "matches", "params", "whole", "cut"),
    [
        # the window each side, clipped to the text
        (10, [(2, 4)], P(window=1, min_piece=0), (), Cut([(1, 5)], [(0, 1), (5, 10)], None)),
        (10, [(2, 4)], P(window=2, min_piece=0), (), Cut([(0, 6)], [(6, 10)], None)),
        (10, [(2, 4)], P(window=3, min_piece=0), (), Cut([(0, 7)], [(7, 10)], None)),
        (10, [(5, 8)], P(window=2, min_piece=0), (), Cut([(3, 10)], [(0, 3)], None)),
        (10, [(5, 8)], P(window=3, min_piece=0), (), Cut([(2, 10)], [(0, 2)], None)),
        # touching spans merge, apart ones do not; matches in any order
        (20, [(5, 10), (0, 5)], P(window=0, min_piece=0), (), Cut([(0, 10)], [(10, 20)], None)),
        (20, [(6, 10), (0, 5)], P(window=0, min_piece=0), (),
         Cut([(0, 5), (6, 10)], [(5, 6), (10, 20)], None)),
        (20, [(2, 12), (4, 6)], P(window=0, min_piece=0), (),
         Cut([(2, 12)], [(0, 2), (12, 20)], None)),
        (20, [(0, 3), (5, 6), (2, 4)], P(window=0, min_piece=0), (),
         Cut([(0, 4), (5, 6)], [(4, 5), (6, 20)], None)),
        # pieces of at least min_piece characters, never an empty one
        (20, [(6, 10)], P(window=0, min_piece=6), (), Cut([(6, 10)], [(0, 6), (10, 20)], None)),
        (20, [(6, 10)], P(window=0, min_piece=7), (), Cut([(6, 10)], [(10, 20)], None)),
        (20, [(6, 10)], P(window=0, min_piece=10), (), Cut([(6, 10)], [(10, 20)], None)),
        (20, [(6, 10)], P(window=0, min_piece=11), (), Cut([(6, 10)], [], "nothing left")),
        (20, [(0, 20)], P(window=0, min_piece=0), (), Cut([(0, 20)], [], "nothing left")),
        (20, [(0, 5), (5, 20)], P(window=0, min_piece=0), (), Cut([(0, 20)], [], "nothing left")),
        # more than max_pieces pieces drop the document; exactly max_pieces do not
        (20, [(6, 10), (0, 5)], P(window=0, min_piece=0, max_pieces=1), (),
         Cut([(0, 5), (6, 10)], [], "too many pieces")),
        (20, [(6, 10), (0, 5)], P(window=0, min_piece=0, max_pieces=2), (),
         Cut([(0, 5), (6, 10)], [(5, 6), (10, 20)], None)),
        (20, [(6, 10), (0, 5)], P(window=0, min_piece=2, max_pieces=1), (),
         Cut([(0, 5), (6, 10)], [(10, 20)], None)),
        # cuts move out of the words they fall inside: a start to its word's start, an end to
        # its word's end; a cut at a word's edge stays
        (20, [(6, 10)], P(window=0, min_piece=0), [(0, 3), (4, 7), (9, 12)],
         Cut([(4, 12)], [(0, 4), (12, 20)], None)),
        (20, [(6, 10)], P(window=0, min_piece=0), [(0, 6), (10, 12)],
         Cut([(6, 10)], [(0, 6), (10, 20)], None)),
        (20, [(6, 10)], P(window=1, min_piece=0), [(0, 6), (10, 12)],
         Cut([(0, 12)], [(12, 20)], None)),
        (20, [(8, 9)], P(window=0, min_piece=0), [(0, 3), (5, 15)],
         Cut([(5, 15)], [(0, 5), (15, 20)], None)),
        (20, [(8, 9)], P(window=0, min_piece=0), [(9, 15)], Cut([(8, 9)], [(0, 8), (9, 20)], None)),
        # the defaults: 200 characters each side, pieces of 200 or more
        (1000, [(400, 450)], P(), (), Cut([(200, 650)], [(0, 200), (650, 1000)], None)),
        (1000, [(401, 450)], P(), (), Cut([(201, 650)], [(0, 201), (650, 1000)], None)),
        (849, [(399, 450)], P(), (), Cut([(199, 650)], [], "nothing left")),
        (20, [], P(window=0, min_piece=0), (), Cut([], [(0, 20)], None)),
    ],
)  # fmt: skip
def test_cut_spans_remove_each_window_and_keep_the_long_pieces(length, matches, params, whole, cut):
    assert cut_spans(length, matches, params, whole) == cut


def test_cut_spans_without_bounds_cut_at_the_characters():
    assert cut_spans(10, [(3, 4)], P(window=1, min_piece=0)) == Cut(
        [(2, 5)], [(0, 2), (5, 10)], None)  # fmt: skip


@pytest.mark.parametrize(
    ("doc_id", "max_pieces", "source"),
    [
        ("doc-7#2", 10, ("doc-7", 2)),
        ("doc-7#10", 10, ("doc-7", 10)),
        ("doc-7#11", 10, None),
        ("doc-7#11", 11, ("doc-7", 11)),
        ("doc-7#1", 1, ("doc-7", 1)),
        ("doc-7#02", 10, None),
        ("doc-7#0", 10, None),
        ("#2", 10, None),
        ("doc7", 10, None),
        ("doc-7#", 10, None),
        ("a#b#3", 10, ("a#b", 3)),
        ("a##1", 10, ("a#", 1)),
        ("a#3b", 10, None),
        ("a#\u0663", 10, None),
        ("a#\u00b2", 10, None),
        ("a#-1", 10, None),
    ],
)
def test_piece_source_is_the_one_id_a_piece_id_can_come_from(doc_id, max_pieces, source):
    assert piece_source(doc_id, max_pieces) == source
    if source is not None:
        assert piece_id(*source) == doc_id


def test_piece_ids_and_the_collision_message():
    assert piece_id("doc-7", 2) == "doc-7#2"
    assert collision_message("a#1", "a") == (
        "the id 'a#1' is the id cut mode gives a piece of 'a': the output would hold two rows "
        "of one id; rename one of them"
    )


MATCHES = [
    Match("b", ("i1", "i2"), "g", 5, 9),
    Match("a", ("i2",), "g", 0, 4),
    Match("a", ("i2",), "h", 4, 6),
    Match("b", ("i1",), "x", 20, 25),
]


def test_a_match_summary_counts_everything_and_lists_the_most_matched_first():
    assert match_summary(MATCHES) == {
        "sets": ["a", "b"],
        "match_count": 4,
        "item_count": 3,
        "items": [
            {"set": "a", "item": "i2", "matches": 2},
            {"set": "b", "item": "i1", "matches": 2},
            {"set": "b", "item": "i2", "matches": 1},
        ],
        "span_count": 2,
        "spans": [[0, 9], [20, 25]],
    }
    assert match_summary(MATCHES, 1, offsets=False) == {
        "sets": ["a", "b"], "match_count": 4, "item_count": 3,
        "items": [{"set": "a", "item": "i2", "matches": 2}], "span_count": 2, "spans": None,
    }  # fmt: skip
    assert match_summary(MATCHES, 0)["spans"] == []
    assert match_summary([]) == {
        "sets": [], "match_count": 0, "item_count": 0, "items": [], "span_count": 0, "spans": []
    }  # fmt: skip


def test_a_match_summary_lists_ten_by_default():
    many = [Match("s", (f"i{k:02}",), f"g{k}", 3 * k, 3 * k + 1) for k in range(12)]
    found = match_summary(many)
    assert (found["item_count"], found["span_count"]) == (12, 12)
    assert [i["item"] for i in found["items"]] == [f"i{k:02}" for k in range(10)]
    assert found["spans"] == [[3 * k, 3 * k + 1] for k in range(10)]


WORDS13 = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu"


def _protection(n=13, tokenizer="words", texts=(WORDS13,)):
    body = "\n".join(json.dumps({"id": f"q{i}", "t": t}) for i, t in enumerate(texts))
    return Protection([parse_protected_set("e", body, ProtectedFormat.JSONL, n, tokenizer)])


def test_drop_rule_of_each_mode():
    prot = _protection(1, "multilingual", ["中文"])
    text = "a" * 30 + " 中文 " + "b" * 30
    doc, matches = Doc("d", text), prot.matches(text)
    assert [(m.start, m.end) for m in matches] == [(31, 33)]
    keep = P(DecontMode.CUT, window=0, min_piece=30)
    assert drop_rule(doc, matches, P()) == "contaminated"
    assert drop_rule(doc, [], P()) is None
    assert drop_rule(doc, matches, P(DecontMode.ANNOTATE)) is None
    assert drop_rule(doc, matches, keep, "multilingual") is None
    # by the words tokenizer (the default) "中文" is one word: the same cut holds
    assert drop_rule(doc, matches, keep) is None
    assert drop_rule(doc, matches, P(DecontMode.CUT, window=0, min_piece=32)) == "nothing left"
    assert drop_rule(doc, matches, P(DecontMode.CUT, window=0, min_piece=0, max_pieces=1)) == (
        "too many pieces")  # fmt: skip


def test_a_cut_falls_between_the_matches_tokenizers_words():
    prot = _protection(1, "multilingual", ["文字"])
    text = "x" * 10 + " 中文字 " + "y" * 10
    doc, matches = Doc("d", text), prot.matches(text)
    params = P(DecontMode.CUT, window=0, min_piece=1)
    # multilingual: 中|文|字, the cut is [12, 14); words: 中文字 is one word, cut [11, 14)
    assert [p.text for p in apply_mode(doc, matches, params, tokenizer="multilingual")] == [
        "x" * 10 + " 中", " " + "y" * 10]  # fmt: skip
    assert [p.text for p in apply_mode(doc, matches, params)] == ["x" * 10 + " ", " " + "y" * 10]


def test_apply_mode_caps_a_rows_lists_at_ten_by_default():
    texts = [" ".join(f"w{k}x{j}" for j in range(2)) for k in range(12)]
    prot = _protection(2, texts=texts)
    text = " . ".join(texts)
    doc, matches = Doc("d", text, {"src": "web"}), prot.matches(text)
    [annotated] = apply_mode(doc, matches, P(DecontMode.ANNOTATE))
    meta = annotated.meta[DECONT_KEY]
    assert (meta["mode"], meta["item_count"], len(meta["items"]), len(meta["spans"])) == (
        "annotate", 12, 10, 10)  # fmt: skip
    assert annotated.meta["src"] == "web" and (annotated.id, annotated.text) == ("d", text)
    [capped] = apply_mode(doc, matches, P(DecontMode.ANNOTATE), cap=3, offsets=False)
    assert (len(capped.meta[DECONT_KEY]["items"]), capped.meta[DECONT_KEY]["spans"]) == (3, None)
    assert apply_mode(doc, matches, P()) == []
    assert apply_mode(doc, [], P(DecontMode.CUT)) == [doc]


def test_cut_pieces_are_docs_of_their_own_with_their_matches():
    prot = _protection(2, texts=["a b", "c d"])
    text = "x1 a b x2 x3 c d x4"
    doc, matches = Doc("d", text, {"src": "web"}), prot.matches(text)
    params = P(DecontMode.CUT, window=0, min_piece=0)
    with pytest.raises(ParameterError) as caught:
        apply_mode(doc, matches, params, offsets=False)
    assert str(caught.value) == (
        "the cut mode tells where protected text is (a piece's edges are a match's): it cannot "
        "answer without offsets"
    )
    pieces = apply_mode(doc, matches, params, cap=1)
    assert [(p.id, p.text) for p in pieces] == [("d#1", "x1 "), ("d#2", " x2 x3 "), ("d#3", " x4")]
    metas = [p.meta[DECONT_KEY] for p in pieces]
    assert [m["removed"] for m in metas] == [[[3, 6]], [[3, 6], [13, 16]], [[13, 16]]]
    assert [m["items"] for m in metas] == [
        [{"set": "e", "item": "q0", "matches": 1}],
        [{"set": "e", "item": "q0", "matches": 1}],
        [{"set": "e", "item": "q1", "matches": 1}],
    ]
    assert [(m["item_count"], m["spans"]) for m in metas] == [
        (1, [[3, 6]]), (2, [[3, 6]]), (1, [[13, 16]])]  # fmt: skip
    assert all(p.meta["src"] == "web" for p in pieces)
    assert [(m["piece"], m["pieces"], m["source"], m["span"]) for m in metas] == [
        (1, 3, "d", [0, 3]), (2, 3, "d", [6, 13]), (3, 3, "d", [16, 19])]  # fmt: skip


def test_decontaminate_modes_default_to_drop_and_read_batch_by_batch():
    prot = _protection()
    docs = [Doc(f"d{k}", WORDS13 if k % 3 == 0 else f"clean {k}") for k in range(7)]
    seen = []
    out = decontaminate_modes(iter(docs), prot, observe=lambda d, m: seen.append((d.id, len(m))))
    assert [d.id for d in out] == ["d1", "d2", "d4", "d5"]
    assert seen == [(d.id, int(d.text == WORDS13)) for d in docs]
    for batch in (1, 2, 7, 8):
        out = decontaminate_modes(docs, prot, P(DecontMode.ANNOTATE), batch=batch)
        assert [DECONT_KEY in d.meta for d in out] == [k % 3 == 0 for k in range(7)]


def test_decontaminate_modes_cut_by_the_protections_tokenizer():
    prot = _protection(1, "multilingual", ["文字"])
    text = "x" * 10 + " 中文字 " + "y" * 10
    params = P(DecontMode.CUT, window=0, min_piece=1)
    out = list(decontaminate_modes([Doc("d", text)], prot, params))
    assert [p.text for p in out] == ["x" * 10 + " 中", " " + "y" * 10]


@pytest.mark.parametrize("batch", [0, -1, True, 1.5, None])
def test_a_bad_batch_is_refused(batch):
    with pytest.raises(ParameterError) as caught:
        list(decontaminate_modes([], _protection(), batch=batch))  # type: ignore[arg-type]
    assert str(caught.value) == f"batch must be a whole number >= 1, got {batch!r}"


def test_decontaminate_modes_read_256_documents_ahead_by_default():
    read = []

    def docs():
        for k in range(600):
            read.append(k)
            yield Doc(f"d{k}", "clean")

    out = decontaminate_modes(docs(), _protection())
    assert next(out).id == "d0" and len(read) == 256
    assert [d.id for d in out][-1] == "d599" and len(read) == 600
    read.clear()
    out = decontaminate_modes(docs(), _protection(), batch=3)
    assert next(out).id == "d0" and len(read) == 3
