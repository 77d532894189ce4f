"""Words, shingles and Jaccard, with docs/algorithm.md's worked example."""

import re
import sys

import numpy as np

from neardup.core._text import WORD_RE, word_re
from neardup.core._tokens import lower_table, word_table
from neardup.core.minhash import jaccard, shingles, words


def test_words_ignore_case_and_punctuation():
    assert words("The CAT, sat... on_the mat!") == ["the", "cat", "sat", "on_the", "mat"]


def test_jaccard_worked_example():
    a = shingles("the cat sat on the mat today", k=3)
    b = shingles("the cat sat on the mat again", k=3)
    assert len(a | b) == 6 and len(a & b) == 4
    assert jaccard(a, b) == 4 / 6


def test_shingles_of_one_to_k_minus_one_words_are_one_shingle():
    for n in range(1, 5):
        text = " ".join(f"w{i}" for i in range(n))
        assert shingles(text, k=5) == {text}
    assert shingles("a b c d e", k=5) == {"a b c d e"}
    assert shingles("a b c d e f", k=5) == {"a b c d e", "b c d e f"}


def test_wordless_texts_have_no_shingles():
    for text in ["", "   ", "!?.,;", "\n\t"]:
        assert shingles(text) == set()
    assert jaccard(set(), set()) == 0.0


def test_word_table_is_pythons_unicode_w():
    # The batch kernel classifies code points with a table; it must be exactly re's \w.
    table = word_table()
    pattern = re.compile(r"\w")
    expected = np.zeros(sys.maxunicode + 1, dtype=bool)
    for cp in range(sys.maxunicode + 1):
        if not 0xD800 <= cp < 0xE000 and pattern.match(chr(cp)):
            expected[cp] = True
    assert np.array_equal(table, expected)


def test_lower_table_is_pythons_str_lower_char_by_char():
    # The batch kernel lowers non-ASCII characters by table; every character it does not
    # leave to str.lower must lower to exactly one character of the same UTF-8 length.
    lowered, special = lower_table()
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp < 0xE000:
            continue
        char = chr(cp)
        low = char.lower()
        if special[cp]:
            assert cp == 0x3A3 or len(low) != 1 or len(low.encode()) != len(char.encode())
        else:
            assert low == chr(lowered[cp]) and len(low.encode()) == len(char.encode())
        # What str.lower returns is lowered no further, and never needs str.lower again.
        assert all(c.lower() == c and not special[ord(c)] for c in low)


def test_the_default_tokenizer_is_words():
    """Called without a tokenizer, every reference function tokenises as ``words`` does."""
    text = "Größe 中文 abc_def ok"
    assert words(text) == words(text, "words") == ["größe", "中文", "abc_def", "ok"]
    assert word_re() is word_re("words") is WORD_RE
    assert shingles(text, k=2) == shingles(text, k=2, tokenizer="words")


def test_an_unknown_tokenizer_is_named_in_the_refusal():
    from neardup.core._text import TOKENIZERS, check_tokenizer
    from neardup.core.errors import ParameterError

    assert TOKENIZERS == ("words", "multilingual")
    for tokenizer in TOKENIZERS:
        check_tokenizer(tokenizer)
    for bad in ("chars", "Words", ""):
        for call in (check_tokenizer, word_re, lambda t: words("x", t)):
            try:
                call(bad)
            except ParameterError as exc:
                assert str(exc) == f"tokenizer must be one of words, multilingual, got {bad!r}"
            else:
                raise AssertionError(f"{bad!r} was taken")


def test_shingles_take_five_words_by_default_and_k_exactly():
    text = "a b c d e f"
    assert shingles(text) == {"a b c d e", "b c d e f"}
    assert shingles("a b c d") == {"a b c d"}
    assert shingles(text, 6) == {text} == shingles(text, 7)
    assert shingles(text, 1) == set(text.split())
    assert shingles("x y x y x", 2) == {"x y", "y x"}


def test_ngrams_are_every_window_of_n_words_in_order():
    from neardup.core._text import ngrams

    w = ["a", "b", "c", "d"]
    assert list(ngrams(w, 1)) == w
    assert list(ngrams(w, 2)) == ["a b", "b c", "c d"]
    assert list(ngrams(w, 4)) == ["a b c d"]
    assert list(ngrams(w, 5)) == [] == list(ngrams([], 1))


def test_jaccard_of_sets_that_share_nothing_or_everything():
    assert jaccard({"a"}, {"b"}) == 0.0
    assert jaccard({"a", "b"}, {"a", "b"}) == 1.0
    assert jaccard({"a"}, set()) == 0.0 == jaccard(set(), {"a"})
    assert jaccard({"a", "b", "c"}, {"c"}) == 1 / 3
