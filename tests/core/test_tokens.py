"""The batch tokeniser (core/_tokens.py) both ways, the compiled one-pass kernel
(``neardup.core._jit.tokenise``) and the numpy reference, against the scalar reference definitions
(core/_text.py): the same words per document, joined by single spaces, so the same shingles."""

import re
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import _compiled, _signatures, _tokens
from neardup.core._text import shingles, words
from neardup.core.errors import ParameterError
from tests.strategies import any_text, texts, tricky_text


def doc_words(tokens: _tokens.Tokens) -> list[list[str]]:
    """Each document's words, decoded from the buffer."""
    buf = tokens.buf.tobytes()
    spans = [
        buf[a:b].decode("utf-8") for a, b in zip(tokens.word_start, tokens.word_end, strict=True)
    ]
    bounds = np.concatenate(([0], np.cumsum(tokens.doc_words))).tolist()
    return [spans[lo:hi] for lo, hi in pairwise(bounds)]


def doc_shingles(tokens: _tokens.Tokens, k: int) -> list[set[str]]:
    """Each document's shingles, as byte slices of the buffer (so single spaces between words
    are checked too)."""
    start, end, per_doc = _tokens.shingle_spans(tokens, k)
    buf = tokens.buf.tobytes()
    spans = [buf[a:b].decode("utf-8") for a, b in zip(start, end, strict=True)]
    bounds = np.concatenate(([0], np.cumsum(per_doc))).tolist()
    return [set(spans[lo:hi]) for lo, hi in pairwise(bounds)]


def assert_both_paths_equal_the_reference(batch: list[str], k: int = 3) -> None:
    expected_words = [words(t) for t in batch]
    expected_shingles = [shingles(t, k) for t in batch]
    for jit in (True, False):
        tokens = _tokens.Tokens(batch, jit=jit)
        assert tokens.doc_words.tolist() == [len(w) for w in expected_words], jit
        assert doc_words(tokens) == expected_words, jit
        assert doc_shingles(tokens, k) == expected_shingles, jit


@given(st.lists(any_text, max_size=8), st.integers(1, 6))
def test_both_tokenisers_equal_the_reference_on_any_unicode(jit, batch, k):
    assert_both_paths_equal_the_reference(batch, k)


@given(st.lists(st.one_of(tricky_text, texts()), max_size=8))
def test_both_tokenisers_equal_the_reference_on_tricky_unicode(jit, batch):
    assert_both_paths_equal_the_reference(batch)


@pytest.mark.parametrize(
    "batch",
    [
        [],
        [""],
        ["", "", ""],
        ["...", "—«»", " \n\t ", "\u00a0\u3000\u2028"],
        ["🙂", "🙂abc🙂", "abc🙂", "🙂 abc", "x👩\u200d💻y", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"],
        ["ΟΔΟΣ ΣΑΣ", "Σ", "ΑΣ.Σ ΣΑ", "ΌΣΟΣ", "σ ς Σ"],
        ["İstanbul İİİ", "I\u0307", "KELVIN \u212a \u212ak", "Ⱥⱥ Ⱦ ẞ ß", "\u2126 \u212b"],
        ["plain ascii", "Ünïcödé wörds", "İ", "ascii again", "Σ at the end Σ"],
        ["a\0b\x00c", "_under_score_", "tab\tand\nnewline\r\nend"],
    ],
)
def test_both_tokenisers_on_edge_texts(jit, batch):
    assert_both_paths_equal_the_reference(batch)


def test_a_lowered_text_longer_than_its_utf8_and_dense_words_grow_the_buffers(jit):
    # Ⱥ (2 bytes) lowers to ⱥ (3 bytes): the lowered text is 1.5x its UTF-8. "a b c ..." has
    # a word every other byte: more edges than the first guess holds.
    batch = ["x", "Ⱥ" * 5000, "a b c d e " * 3000, "İ" * 3000 + " z", "a " * 10]
    assert_both_paths_equal_the_reference(batch)
    assert_both_paths_equal_the_reference(["a b " * 5000])
    assert_both_paths_equal_the_reference(["Ⱥ " * 5000])
    # The lowered text outgrows the room left after a long text before it.
    assert_both_paths_equal_the_reference(["x" * 20000, "Ⱥ" * 5000, "a b c"])
    assert_both_paths_equal_the_reference(["x y " * 5000, "Ⱥ" * 5000])


#: Around a capital sigma: cased letters (1-, 2-, 3-byte), case-ignorable ones (apostrophe,
#: period, combining accents, a modifier letter, a cased-and-ignorable mark, a format char,
#: a 4-byte one), and neither (space, digits, punctuation, CJK, emoji).
sigma_context_char = st.sampled_from(
    list("ΣΣΣσςAaΑαЖ\u1e9eİ'.:^`\u0301\u0345ʰ\u200b\U000e0001 1_,日🙂\u2126")
)


@given(st.lists(st.lists(sigma_context_char, max_size=12).map("".join), max_size=6))
def test_capital_sigmas_lower_by_their_context_both_ways(jit, batch):
    assert_both_paths_equal_the_reference(batch)


@pytest.mark.parametrize(
    "text", ["AΣ", "AΣB", "A'Σ", "A'Σ'", "A'Σ'B", "Σ", " Σ ", "A\u0301\u0301Σ\u0301", "ʰΣ", "1Σ"]
)
def test_capital_sigma_final_or_medial(jit, text):
    tokens = _tokens.Tokens([text], jit=True)
    assert doc_words(tokens) == [words(text)]


def test_code_points_not_probed_are_neither_cased_nor_case_ignorable():
    everything = ((0, 0x110000),)
    assert all(
        np.array_equal(probed, full)
        for probed, full in zip(
            _tokens.sigma_context(), _tokens.sigma_context(everything), strict=True
        )
    )


def test_the_kernel_reads_char_table_by_the_same_bits(jit):
    from neardup.core import _jit

    assert _jit._CODE_POINT == _tokens._CODE_POINT_BITS
    assert _jit._WORD == _tokens._WORD_BIT
    assert _jit._SPECIAL == _tokens._SPECIAL_BIT
    assert _jit._CASED == _tokens._CASED_BIT
    assert _jit._IGNORABLE == _tokens._IGNORABLE_BIT
    assert (_jit.DOC, _jit.ROOM) == (0, _tokens._ROOM)
    assert (_jit.OUT, _jit.EDGE) == (_tokens._OUT, _tokens._EDGE)


def test_a_text_still_special_once_lowered_is_left_to_numpy(jit, monkeypatch):
    # No character stays special once lowered; a table that says "é" is, makes one.
    table = _tokens.kernel_table().copy()
    table[ord("é")] |= _tokens._SPECIAL_BIT
    monkeypatch.setattr(_tokens, "kernel_table", lambda: table)
    assert _tokens._compiled_tokens(["plain", "Été"], jit.tokenise) is None
    assert _tokens._compiled_tokens(["plain", "ete"], jit.tokenise) is not None


def test_unencodable_text_is_refused_both_ways(jit):
    for use_jit in (True, False):
        with pytest.raises(ParameterError, match="text 1 is not valid Unicode"):
            _tokens.Tokens(["fine", "lone \ud800 surrogate"], jit=use_jit)


def test_the_compiled_tokeniser_runs_only_once_loaded(jit, monkeypatch):
    calls = []
    real = _tokens._compiled_tokens

    def counting(texts, tokenise):
        calls.append(len(texts))
        return real(texts, tokenise)

    monkeypatch.setattr(_tokens, "_compiled_tokens", counting)
    monkeypatch.setattr(_compiled._State, "kernels", None)
    _tokens.Tokens(["not loaded"])
    _tokens.Tokens(["never"], jit=False)
    assert calls == []
    monkeypatch.setattr(_compiled._State, "kernels", jit)
    _tokens.Tokens(["loaded now"])
    assert calls == [1]


@given(st.lists(st.one_of(any_text, tricky_text), max_size=8))
def test_encoded_texts_tokenise_as_their_strs_both_ways(jit, batch):
    encoded = _tokens.Utf8Texts.encode(batch)
    assert len(encoded) == len(batch) and encoded.texts() == batch
    for use_jit in (True, False):
        given_str = _tokens.Tokens(batch, jit=use_jit)
        given_utf8 = _tokens.Tokens(encoded, jit=use_jit)
        assert doc_words(given_utf8) == doc_words(given_str), use_jit
        assert doc_shingles(given_utf8, 3) == doc_shingles(given_str, 3), use_jit
    assert np.array_equal(
        _signatures._kernel(encoded, 16, 0, 5), _signatures._kernel(batch, 16, 0, 5)
    )


def test_encoding_names_the_unencodable_text_by_its_place_in_the_call():
    with pytest.raises(ParameterError, match="text 41 is not valid Unicode"):
        _tokens.Utf8Texts.encode(["fine", "lone \ud800 surrogate"], first=40)


@given(st.lists(st.one_of(any_text, tricky_text), max_size=6))
def test_signatures_are_identical_with_either_tokeniser(jit, batch):
    compiled = _signatures._kernel(batch, 16, 0, 5, jit=True)
    assert np.array_equal(compiled, _signatures._kernel(batch, 16, 0, 5, jit=False))


def test_the_numpy_tokeniser_lowers_ascii_word_bytes_and_blanks_the_rest():
    table = _tokens._byte_translation()
    assert table == _tokens._TRANSLATION and len(table) == 256
    for code in range(128):
        char = chr(code)
        word = re.fullmatch(r"\w", char) is not None
        assert table[code] == (ord(char.lower()) if word else ord(" ")), code
    assert table[128:] == bytes(range(128, 256))  # parts of non-ASCII characters: unchanged


def test_capitals_of_two_three_and_four_bytes_are_lowered_in_place_both_ways(jit):
    # Ж (2 bytes), fullwidth Ａ, Cherokee Ꭰ and Georgian Ა (3 bytes), Deseret 𐐀 (4 bytes): each
    # lowers to a character of its own length, written over it.
    batch = ["ЖУК ＡＢＣ Ꭰ Ა 𐐀𐐁 mixed ＺＺＺ", "ａｂｃ ꭰ ა 𐐨 plain", "ÀÉÎÕÜ"]
    assert_both_paths_equal_the_reference(batch)
    assert doc_words(_tokens.Tokens(batch[:1], jit=False)) == [
        ["жук", "ａｂｃ", "ꭰ", "ა", "𐐨𐐩", "mixed", "ｚｚｚ"]]  # fmt: skip
