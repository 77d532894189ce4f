"""Decontamination modes (drop, cut, annotate), the frequency cap and per-item reports, against
examples worked out by hand (Brown et al. 2020 appendix C; Llama 2's buckets)."""

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core._cutting import (
    DecontMode,
    DecontParams,
    apply_mode,
    cut_spans,
    decontaminate_modes,
    drop_rule,
)
from neardup.core._matches import Protection, sample_capped, word_spans
from neardup.core._protected import ProtectedFormat, parse_protected_set
from neardup.core._report import ContaminationReport, Thresholds
from neardup.core._text import words
from neardup.core.errors import ParameterError
from neardup.core.minhash import Doc, contaminated
from tests.strategies import texts

SHELL = "Tom found a shiny red shell by the river and carried it home to show his sister."
#: The first 13-gram of SHELL, as a document would quote it.
M = "Tom found a shiny red shell by the river and carried it home"
L = len(M)


def pad(k: int) -> str:
    """``k`` characters of no word (so no n-gram crosses it)."""
    return " " + "." * (k - 2) + " "


def protection(*items: dict, cap: int | None = None) -> Protection:
    body = "\n".join(json.dumps(i) for i in items)
    return Protection([parse_protected_set("evals", body, ProtectedFormat.JSONL)], item_cap=cap)


@pytest.fixture
def shell():
    return protection({"id": "q1", "text": SHELL})


def run(docs, prot, **params):
    return list(decontaminate_modes(docs, prot, DecontParams(**params)))


def test_two_matches_150_characters_apart_make_one_removed_span(shell):
    text = pad(500) + M + pad(150) + M + pad(500)
    [first, second] = run([Doc("d", text, {"src": "x"})], shell, mode="cut")
    # [500-200, 500+L) and [650+L-200, 650+2L+200) overlap: one span [300, 850+2L).
    assert first.meta["decontamination"]["removed"] == [[300, 850 + 2 * L]]
    assert (first.id, first.text, first.meta["decontamination"]["span"]) == (
        "d#1",
        text[:300],
        [0, 300],
    )
    assert (second.id, second.text) == ("d#2", text[850 + 2 * L :])
    assert len(second.text) == 300
    assert first.meta["src"] == "x" and first.meta["decontamination"]["source"] == "d"
    # The two windows are 150 characters apart: two spans, the piece's own (both pieces border
    # the one removed span), by offsets and item ids only.
    cut = first.meta["decontamination"]
    assert (cut["spans"], cut["span_count"], cut["match_count"]) == (
        [[500, 500 + L], [650 + L, 650 + 2 * L]],
        2,
        2,
    )
    assert cut["items"] == [{"set": "evals", "item": "q1", "matches": 2}]
    assert second.meta["decontamination"]["spans"] == cut["spans"]
    # A 50-character window leaves the 150 - 2*50 = 50 characters between them: too short.
    pieces = run([Doc("d", text)], shell, mode="cut", window=50)
    assert [p.text for p in pieces] == [text[:450], text[700 + 2 * L :]]


def test_a_piece_lists_only_the_matches_of_the_removed_spans_bordering_it(shell):
    text = M + pad(300) + M + pad(300) + M
    first, second = run([Doc("d", text)], shell, mode="cut", window=50, min_piece=50)
    # Removed [0, L+50), [L+250, 2L+350), [2L+550, end): each piece borders two of the three.
    assert first.meta["decontamination"]["removed"] == [[0, L + 50], [L + 250, 2 * L + 350]]
    assert first.meta["decontamination"]["spans"] == [[0, L], [L + 300, 2 * L + 300]]
    assert second.meta["decontamination"]["spans"] == [
        [L + 300, 2 * L + 300],
        [2 * L + 600, 3 * L + 600],
    ]
    assert [p.meta["decontamination"]["match_count"] for p in (first, second)] == [2, 2]


def test_the_rule_that_drops_a_document_whole(shell):
    eleven = pad(500) + (M + pad(700)) * 9 + M + pad(500)
    cases = [(eleven, "cut", "too many pieces"), (M, "cut", "nothing left"),
             (M, "drop", "contaminated"), (M, "annotate", None),
             (pad(500) + M + pad(500), "cut", None), ("clean text", "drop", None)]  # fmt: skip
    for text, mode, rule in cases:
        doc = Doc("d", text)
        params = DecontParams(mode)
        assert drop_rule(doc, shell.matches(text), params) == rule
        assert (apply_mode(doc, shell.matches(text), params) == []) == (rule is not None)


def test_matches_at_the_very_start_and_end(shell):
    text = M + pad(600) + M
    assert len(text) == 600 + 2 * L
    [piece] = run([Doc("d", text)], shell, mode="cut")
    # Removed [0, L+200) and [L+400, end): exactly 200 characters stay, enough for a piece.
    assert piece.meta["decontamination"]["span"] == [L + 200, L + 400]
    assert piece.text == text[L + 200 : L + 400]
    assert run([Doc("d", text)], shell, mode="cut", min_piece=201) == []
    [annotated] = run([Doc("d", text)], shell, mode="annotate")
    found = annotated.meta["decontamination"]
    assert found["spans"] == [[0, L], [len(text) - L, len(text)]]
    assert annotated.text == text and annotated.id == "d"
    assert found["items"] == [{"set": "evals", "item": "q1", "matches": 2}]
    assert run([Doc("d", text)], shell) == []


@given(st.lists(st.sampled_from(["a", M, pad(30), "w x y z"]), min_size=1, max_size=8))
def test_without_offsets_nothing_made_says_where_a_match_is(parts):
    """What a caller without the protect scope is answered is built without offsets (not
    filtered afterwards): the same document and counts as with them, ``spans`` None, the cut
    mode refused; a clean document is as it came, its meta its own."""
    prot = protection({"id": "q1", "text": SHELL})
    text = " ".join(parts)
    doc = Doc("d", text, {"decontamination": {"spans": [[0, 1]]}})
    matches = prot.matches(text)
    for mode in (DecontMode.DROP, DecontMode.ANNOTATE):
        shown = apply_mode(doc, matches, DecontParams(mode))
        hidden = apply_mode(doc, matches, DecontParams(mode), offsets=False)
        if not matches or mode is DecontMode.DROP:
            assert hidden == shown
            continue
        [with_spans], [without] = shown, hidden
        found = without.meta["decontamination"]
        assert found == {**with_spans.meta["decontamination"], "spans": None}
        assert (without.id, without.text) == (doc.id, doc.text)
    if matches:
        with pytest.raises(ParameterError, match="cannot answer without offsets"):
            apply_mode(doc, matches, DecontParams(DecontMode.CUT), offsets=False)
    else:
        assert apply_mode(doc, matches, DecontParams(DecontMode.CUT), offsets=False) == [doc]


def test_a_document_split_into_11_pieces_is_dropped(shell):
    eleven = pad(500) + (M + pad(700)) * 9 + M + pad(500)
    cut = cut_spans(len(eleven), [(m.start, m.end) for m in shell.matches(eleven)], DecontParams())
    assert len(cut.removed) == 10 and cut.dropped == "too many pieces"
    assert run([Doc("d", eleven)], shell, mode="cut") == []
    assert len(run([Doc("d", eleven)], shell, mode="cut", max_pieces=11)) == 11
    ten = pad(500) + (M + pad(700)) * 8 + M + pad(500)
    pieces = run([Doc("d", ten)], shell, mode="cut")
    assert [p.id for p in pieces] == [f"d#{k}" for k in range(1, 11)]
    assert all(len(p.text) == 300 for p in pieces)


def test_clean_documents_pass_unchanged_in_every_mode(shell):
    doc = Doc("c", "so tom found a shiny red shell by the river and carried it", {"a": 1})
    for mode in DecontMode:
        assert run([doc], shell, mode=mode) == [doc]


BOILER = "Answer the following question with one word and explain nothing at all please"


def test_boilerplate_is_capped_and_listed():
    items = [
        {"id": f"q{i}", "text": f"{BOILER}. {q}"}
        for i, q in enumerate([SHELL, "the quick brown fox jumps over the lazy dog near the "
                               "old mill by the green river bank today"])
    ]  # fmt: skip
    docs = [Doc("boiler", f"Intro. {BOILER}. Then more."), Doc("leak", f"x {M} y")]
    uncapped = protection(*items)
    assert [d.id for d in run(docs, uncapped)] == []
    capped = protection(*items, cap=1)
    # The boilerplate's 13-grams are in both items: more than 1, ignored; the leak still counts.
    assert [d.id for d in run(docs, capped)] == ["boiler"]
    report = ContaminationReport(capped)
    list(decontaminate_modes(docs, capped, observe=report.add))
    out = report.as_dict()
    # BOILER is 13 words: exactly one 13-gram is in both items (the next windows differ).
    assert len(words(BOILER)) == 13
    assert out["sets"][0]["capped"] == {"ngrams": 1, "list": [" ".join(words(BOILER))]}
    assert [i["item"] for i in out["items"]] == ["q0"]
    assert report.as_dict(ngrams=False)["sets"][0]["capped"]["list"] is None


def test_a_sample_cap_ignores_ngrams_common_in_the_corpus(shell):
    sets = shell.sets
    sample = [f"doc {i}: {M}" if i < 3 else f"doc {i}" for i in range(10)]
    assert sample_capped(sets, sample, 0.3) == set()  # 3 of 10 is not more than 30%
    assert sample_capped(sets, sample, 0.2) == {" ".join(words(M))}
    prot = Protection(sets, capped=sample_capped(sets, sample, 0.2))
    assert run([Doc("d", M)], prot) == [Doc("d", M)]
    with pytest.raises(ParameterError):
        sample_capped(sets, sample, 1.5)


def test_report_per_item_and_per_set_worked_by_hand():
    long = " ".join(f"w{i}" for i in range(40))
    prot = protection({"id": "q1", "text": SHELL}, {"id": "q2", "text": long},
                      {"id": "q3", "text": "never seen anywhere at all"})  # fmt: skip
    docs = [Doc("a", f"x {M} y"), Doc("b", f"{M}"), Doc("c", " ".join(f"w{i}" for i in range(13))),
            Doc("z", "nothing")]  # fmt: skip
    report = ContaminationReport(prot, examples=1)
    list(decontaminate_modes(docs, prot, observe=report.add))
    out = report.as_dict()
    q1, q2 = out["items"]
    # q1: 17 words, 5 windows; the first 13-gram found: 1/5 of its n-grams, 13/17 of its words.
    assert (q1["item"], q1["documents"], q1["document_ids"]) == ("q1", 2, ["a"])
    assert (q1["ngrams"], q1["ngrams_found"], q1["share_found"]) == (5, 1, 0.2)
    assert q1["coverage"] == 13 / 17 and q1["subsets"] == ["not clean", "not dirty"]
    # q2: 40 words, 28 windows, one found: 13/40 = 0.325.
    assert (q2["ngrams"], q2["ngrams_found"], q2["coverage"]) == (28, 1, 13 / 40)
    assert q2["subsets"] == ["not clean", "not dirty"]
    [s] = out["sets"]
    assert (s["items"], s["documents"], s["items_matched"]) == (3, 3, 2)
    assert s["subsets"] == {"clean": 1, "not clean": 2, "not dirty": 3, "dirty": 0}
    assert [t["item"] for t in s["top_items"]] == ["q1", "q2"]
    assert (out["documents"], out["contaminated"]) == (4, 3)
    # 13/17 = 0.76: dirty from 0.75, and with a clean bound of 0.9 only q1 is not clean.
    other = ContaminationReport(prot, Thresholds(clean_below=0.5, dirty_from=0.75))
    list(decontaminate_modes(docs, prot, observe=other.add))
    assert other.as_dict()["sets"][0]["subsets"] == {
        "clean": 2,
        "not clean": 1,
        "not dirty": 2,
        "dirty": 1,
    }


@pytest.mark.parametrize("mode", list(DecontMode))
def test_an_endless_input_streams_in_every_mode(shell, mode):
    read = 0

    def endless():
        nonlocal read
        for i in itertools.count():
            read += 1
            yield Doc(str(i), pad(300) + M + pad(300) if i % 2 else f"clean {i} " + "." * 300)

    out = list(
        itertools.islice(decontaminate_modes(endless(), shell, DecontParams(mode), batch=8), 5)
    )
    assert len(out) == 5 and read <= 16


@given(st.lists(texts(), min_size=1, max_size=4), st.sampled_from(["", "İ", "ẞ", "Σ", "ǅ"]))
def test_word_spans_are_the_words_at_their_characters(parts, odd):
    text = odd.join(parts) + odd
    found, spans = word_spans(text)
    assert found == words(text)
    for word, (start, end) in zip(found, spans, strict=True):
        # A capital sigma lowers to a final or medial sigma by its neighbours: the slice alone
        # may lower it the other way.
        [alone] = words(text[start:end])
        assert alone.replace("ς", "σ") == word.replace("ς", "σ")


@given(st.lists(st.tuples(st.integers(0, 2000), st.integers(1, 60)), max_size=12),
       st.integers(0, 300), st.integers(0, 300))  # fmt: skip
def test_cut_pieces_never_overlap_a_removed_span(raw, window, min_piece):
    length = 2500
    matches = [(s, min(length, s + w)) for s, w in raw]
    cut = cut_spans(
        length, matches, DecontParams(window=window, min_piece=min_piece, max_pieces=50)
    )
    for start, end in matches:
        assert any(lo <= max(0, start - window) and min(length, end + window) <= hi
                   for lo, hi in cut.removed)  # fmt: skip
        assert all(b <= start or a >= end for a, b in cut.pieces)
    assert all(b - a >= max(min_piece, 1) for a, b in cut.pieces)


def test_bad_parameters_are_refused(shell):
    with pytest.raises(ParameterError, match="mode"):
        DecontParams("shred")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="window"):
        DecontParams(window=-1)
    with pytest.raises(ParameterError, match="item cap"):
        Protection(shell.sets, item_cap=0)
    with pytest.raises(ParameterError, match="thresholds"):
        Thresholds(0.9, 0.5)
    with pytest.raises(ParameterError, match="top"):
        ContaminationReport(shell, top=-1)
    with pytest.raises(ParameterError, match="batch"):
        list(decontaminate_modes([], shell, batch=0))


@given(st.lists(texts(max_words=30), min_size=1, max_size=6), st.lists(texts(), max_size=8))
def test_matches_are_exactly_the_protected_windows_at_their_characters(protected, docs):
    body = "\n".join(json.dumps({"id": f"p{i}", "text": t}) for i, t in enumerate(protected))
    pset = parse_protected_set("s", body, ProtectedFormat.JSONL, n=3)
    prot = Protection([pset])
    for text, found in zip(docs, prot.matches_many(docs), strict=True):
        assert found == prot.matches(text)
        assert bool(found) == contaminated(text, set(pset.grams), 3)
        for m in found:
            assert " ".join(words(text[m.start : m.end])).replace("ς", "σ") == m.ngram.replace(
                "ς", "σ"
            )
            assert list(m.items) == pset.grams[m.ngram]


def test_a_sample_cap_counts_every_text_of_a_sample_longer_than_one_batch(shell):
    # 1,500 texts are read in two batches (1,024 and 476); the n-gram is in every fifth text:
    # 300 of them, 95 in the second batch. 300 is more than 19 %, not more than 20 %.
    def sample():
        return (f"doc {i}: {M}" if i % 5 == 0 else f"doc {i}" for i in range(1500))

    assert sample_capped(shell.sets, sample(), 0.19) == {" ".join(words(M))}
    assert sample_capped(shell.sets, sample(), 0.2) == set()


def test_a_report_names_each_items_first_shared_ngram_unless_told_not_to(shell):
    report = ContaminationReport(shell)
    docs = [Doc("a", f"x {M} y"), Doc("b", "nothing at all")]
    list(decontaminate_modes(docs, shell, observe=report.add))
    [item] = report.as_dict()["items"]
    assert (item["item"], item["first_ngram"]) == ("q1", " ".join(words(M)))
    [item] = report.as_dict(ngrams=False)["items"]
    assert (item["item"], item["first_ngram"], item["document_ids"]) == ("q1", None, ["a"])


def test_a_cut_pieces_meta_says_cut_its_source_and_place(shell):
    text = pad(500) + M + pad(500)
    first, second = run([Doc("d", text)], shell, mode="cut")
    assert first.meta["decontamination"] == {
        "mode": "cut", "source": "d", "piece": 1, "pieces": 2, "span": [0, 300],
        "removed": [[300, 700 + L]], "spans": [[500, 500 + L]], "span_count": 1,
        "match_count": 1, "items": [{"set": "evals", "item": "q1", "matches": 1}],
        "item_count": 1, "sets": ["evals"],
    }  # fmt: skip
    assert (second.meta["decontamination"]["mode"], second.meta["decontamination"]["piece"]) == (
        "cut", 2)  # fmt: skip


def test_protected_sets_of_two_ngram_lengths_or_tokenizers_are_not_combined():
    five = parse_protected_set("five", json.dumps({"text": SHELL}), ProtectedFormat.JSONL, 5)
    thai = parse_protected_set(
        "thai", json.dumps({"text": SHELL}), ProtectedFormat.JSONL, tokenizer="multilingual"
    )
    with pytest.raises(ParameterError) as caught:
        Protection([protection({"text": SHELL}).sets[0], five])
    assert str(caught.value) == "protected sets of different n-gram lengths cannot be combined"
    with pytest.raises(ParameterError) as caught:
        Protection([protection({"text": SHELL}).sets[0], thai])
    assert str(caught.value) == "protected sets of different tokenizers cannot be combined"
