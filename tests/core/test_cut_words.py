"""Cut mode cuts between words (issue 23): a cut inside a word left a piece whose first or last
word was a fragment, and "foobar c2 ... c13" cut after "foo" kept "bar c2 ... c13", itself
protected. No kept piece holds a protected n-gram, under either tokenizer."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core._cutting import (
    DecontMode,
    DecontParams,
    apply_mode,
    cut_bounds,
    drop_rule,
    piece_collision,
)
from neardup.core._matches import Protection
from neardup.core._protected import ProtectedFormat, parse_protected_set
from neardup.core.minhash import Doc

SHELL = "Tom found a shiny red shell by the river and carried it home"
TAIL = " ".join(f"c{i}" for i in range(2, 14))  # c2 ... c13


def protection(items: list[str], n: int = 13, tokenizer: str = "words") -> Protection:
    body = "\n".join(json.dumps({"id": f"q{i}", "text": t}) for i, t in enumerate(items))
    return Protection(
        [parse_protected_set("evals", body, ProtectedFormat.JSONL, n, tokenizer=tokenizer)]
    )


def test_a_window_ending_inside_foobar_cuts_after_the_whole_word():
    prot = protection([SHELL, "bar " + TAIL])
    text = SHELL + " foobar " + TAIL + " and then some more words follow here"
    params = DecontParams(DecontMode.CUT, window=4, min_piece=0)
    # The window ends after " foo": cut there, the piece would start "bar c2 ... c13".
    assert text[len(SHELL) : len(SHELL) + 4] == " foo"
    [piece] = apply_mode(Doc("d", text), prot.matches(text), params)
    assert piece.text == " " + TAIL + " and then some more words follow here"
    assert prot.matches(piece.text) == []
    assert piece.meta["decontamination"]["removed"] == [[0, len(SHELL) + 7]]


def test_a_window_starting_inside_a_word_cuts_before_it():
    prot = protection([SHELL])
    text = "introductory words " + SHELL
    pieces = apply_mode(Doc("d", text), prot.matches(text),
                        DecontParams(DecontMode.CUT, window=3, min_piece=0))  # fmt: skip
    assert [p.text for p in pieces] == ["introductory "]


def test_the_bounds_are_words_and_the_runs_around_a_capital_sigma():
    assert cut_bounds("foo-bar baz") == [(0, 3), (4, 7), (8, 11)]
    assert cut_bounds("中文 ab", "multilingual") == [(0, 1), (1, 2), (3, 5)]
    # "ΑΣ.Α": the sigma is medial ("ασ.α"); "ΑΣ." alone would lower to "ας.".
    assert cut_bounds("x ΑΣ.Α y") == [(0, 1), (2, 6), (7, 8)]


VOCAB = ["ab", "cd", "ef", "abcd", "ΑΣ", "ας", "σα", "中", "文", "สวั", "ดี"]
GLUE = [" ", " ", " ", "", ".", "'", "-", ", "]
phrases = st.lists(st.sampled_from(VOCAB), min_size=3, max_size=5).map(" ".join)


@st.composite
def planted(draw):
    """(protected items, a text): random vocabulary words with the items planted at random
    places, every join a random glue (sometimes none: words stuck to their neighbours)."""
    items = draw(st.lists(phrases, min_size=1, max_size=3))
    parts = draw(st.lists(st.one_of(st.sampled_from(VOCAB), st.sampled_from(items)), max_size=30))
    glue = draw(st.lists(st.sampled_from(GLUE), min_size=len(parts), max_size=len(parts)))
    return items, "".join(g + p for g, p in zip(glue, parts, strict=True))


@settings(max_examples=400, deadline=None)
@given(planted(), st.sampled_from(["words", "multilingual"]), st.integers(0, 12),
       st.integers(0, 6))  # fmt: skip
def test_no_kept_piece_holds_a_protected_ngram(case, tokenizer, window, min_piece):
    items, text = case
    prot = protection(items, n=3, tokenizer=tokenizer)
    matches = prot.matches(text)
    params = DecontParams(DecontMode.CUT, window=window, min_piece=min_piece, max_pieces=100)
    pieces = apply_mode(Doc("d", text), matches, params, tokenizer=tokenizer)
    assert (pieces == []) == (drop_rule(Doc("d", text), matches, params, tokenizer) is not None)
    for piece in pieces:
        if not matches:
            assert piece.text == text
            continue
        start, end = piece.meta["decontamination"]["span"]
        assert piece.text == text[start:end]
        assert prot.matches(piece.text) == [], (piece.text, text)


def test_an_id_cut_mode_could_give_a_piece_of_another_document_is_found_first_in_order():
    ids = ["a#1", "doc", "x#3", "doc#2", "a", "doc#11", "x"]
    # From a generator (read once): "a#1" is a piece of "a", named before "doc#2" of "doc".
    assert piece_collision((i for i in ids), 10) == ("a#1", "a")
    assert piece_collision(ids[1:], 10) == ("x#3", "x")
    assert piece_collision(["doc", "doc#11", "doc#02", "doc#", "#1"], 10) is None
    assert piece_collision(["doc", "doc#11"], 11) == ("doc#11", "doc")
    assert piece_collision([], 10) is None
