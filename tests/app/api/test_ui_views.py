"""The data behind the /ui pages: word diffs, n-gram highlights, histogram and S-curve."""

import pytest

from neardup.app.api.ui.charts import s_curve, size_histogram
from neardup.app.service.diffs import Piece, highlight_ngrams, word_diff
from neardup.core.engine import lsh_probability


def _render(pieces):
    return "".join(
        f"[+{p.text}]" if p.kind == "ins" else f"[-{p.text}]" if p.kind == "del" else p.text
        for p in pieces
    )


def test_word_diff_marks_insertions_and_deletions_ignoring_case_and_punctuation():
    pieces = word_diff("The cat sat on the mat today.", "the CAT, sat on a mat, today! now")
    assert _render(pieces) == "the CAT, sat on[-the] [+a] mat, today! [+now]"


def test_word_diff_of_identical_texts_is_all_kept():
    text = "Same words, same order."
    assert all(p.kind == "same" for p in word_diff(text, text))
    assert "".join(p.text for p in word_diff(text, text)) == text


def test_highlight_marks_every_word_of_a_shared_ngram():
    grams = {"found a shiny red"}
    pieces = highlight_ngrams("Tom FOUND a shiny, red shell.", grams, 4)
    assert [p.text for p in pieces if p.kind == "hit"] == ["FOUND", "a", "shiny", "red"]
    assert "".join(p.text for p in pieces) == "Tom FOUND a shiny, red shell."


def test_histogram_buckets_cluster_sizes():
    bars = size_histogram({2: 2, 3: 1, 7: 1, 150: 1})
    counts = {b.label: b.count for b in bars}
    assert counts == {"2": 2, "3": 1, "4": 0, "5": 0, "6-10": 1, "11-20": 0, "21-50": 0,
                      "51-100": 0, "101+": 1}  # fmt: skip
    assert max(b.height for b in bars) == pytest.approx(120.0)


def test_s_curve_of_the_default_configuration():
    curve = s_curve(128, 16, 0.8)
    assert round(curve.lsh_threshold, 4) == 0.7071
    assert [s for s, _ in curve.table] == [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    assert dict(curve.table)[0.8] == pytest.approx(lsh_probability(0.8, 16, 8))
    assert (16, 8, pytest.approx(0.7071, abs=1e-4)) in [(b, r, t) for b, r, t in curve.choices]
    assert [b for b, _, _ in curve.choices] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert len(curve.points.split()) == 201


def test_highlight_marks_the_characters_of_a_multilingual_ngram():
    grams = {"哈 希 函 数"}
    text = "在计算机科学中，哈希函数是一种函数。"
    # 3 English words' worth is a window of 6 Han characters: 4 are a whole item (weighted-3)
    pieces = highlight_ngrams(text, grams, 3, "multilingual")
    assert "".join(p.text for p in pieces if p.kind == "hit") == "哈希函数"
    assert "".join(p.text for p in pieces) == text
    assert not [p for p in highlight_ngrams(text, grams, 4) if p.kind == "hit"]


def test_word_diff_shows_deleted_words_and_keeps_the_text_around_them():
    assert word_diff("One two three four five", " (one) Four five.") == [
        Piece(" (", "same"), Piece("one", "same"), Piece("two three", "del"),
        Piece(") ", "same"), Piece("Four five", "same"), Piece(".", "same"),
    ]  # fmt: skip


def test_word_diff_of_long_repetitive_texts_is_the_smallest():
    """300 words of three repeated ones, one changed: one word out, one in (difflib's
    "popular" heuristic, which would treat the repeated words as junk, is off)."""
    words = [f"w{i % 3}" for i in range(300)]
    changed = [*words[:150], "zz", *words[151:]]
    pieces = word_diff(" ".join(words), " ".join(changed))
    assert [(p.kind, p.text) for p in pieces if p.kind != "same"] == [("del", "w0"), ("ins", "zz")]


def test_highlight_pieces_cover_the_text_exactly_with_no_empty_piece():
    assert highlight_ngrams(" Tom FOUND a shiny, red shell.", {"found a shiny red"}, 4) == [
        Piece(" ", "same"), Piece("Tom", "same"), Piece(" ", "same"), Piece("FOUND", "hit"),
        Piece(" ", "same"), Piece("a", "hit"), Piece(" ", "same"), Piece("shiny", "hit"),
        Piece(", ", "same"), Piece("red", "hit"), Piece(" ", "same"), Piece("shell", "same"),
        Piece(".", "same"),
    ]  # fmt: skip
    pieces = highlight_ngrams("科学中，哈希函数", {"哈 希 函 数"}, 3, "multilingual")
    assert pieces == [
        Piece("科", "same"), Piece("学", "same"), Piece("中", "same"), Piece("，", "same"),
        Piece("哈", "hit"), Piece("希", "hit"), Piece("函", "hit"), Piece("数", "hit"),
    ]  # fmt: skip
