"""The multilingual tokenizer's normalization is Unicode 17.0.0's on every Python: the shipped
data (core/_nfkc_data.py) against ``unicodedata2`` 17.0.0, the generator against the file."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from functools import cache
from pathlib import Path

import pytest
import unicodedata2
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core import _fold, _nfkc, _nfkc_build, _nfkc_data, _scripts, _tokens
from neardup.core._multilingual import normalize, normalize_all, word_edges
from neardup.core._text import words
from tests.core.test_tokens import doc_words
from tests.reference import casefold_17, multilingual_normalize, multilingual_words

M = "multilingual"


# --- the shipped data ----------------------------------------------------------------------


def test_the_generator_writes_the_shipped_file_byte_for_byte():
    # The test extra pins unicodedata2 and regex to the releases the data was made from.
    assert unicodedata2.unidata_version == _nfkc_build.UNICODEDATA2_VERSION
    assert _nfkc_data.UNICODE_VERSION == _scripts.TABLE_VERSION == "17.0.0"
    made = _nfkc_build.text(_nfkc_build.encode(_nfkc_build.build()))
    assert made == Path(_nfkc_data.__file__).read_text(encoding="utf-8")


def test_the_generator_refuses_another_unicodedata2(monkeypatch):
    monkeypatch.setattr(unicodedata2, "unidata_version", "16.0.0")
    with pytest.raises(SystemExit, match=r"unicodedata2 17\.0\.0 is needed .*found 16\.0\.0"):
        _nfkc_build.build()


def test_the_tokenizer_never_imports_unicodedata(tmp_path):
    # Neither the running Python's unicodedata (its version is the Python's) nor the
    # generator's sources: the compiled kernel's tables and the reference path alike.
    code = (
        "import sys\n"
        "for name in ('unicodedata', 'unicodedata2', 'regex'): sys.modules[name] = None\n"
        "from neardup.core.minhash import signatures, words\n"
        "from neardup.core import _tokens\n"
        "text = 'Ｃａｆe\u0301 \U00011392\U000113c2\U000113b8 Ɤ ക്ഷ ฟ้า'\n"
        "print(ascii(words(text, 'multilingual')))\n"
        "for jit in (True, False): _tokens.Tokens([text], jit=jit, tokenizer='multilingual')\n"
        "signatures([text], tokenizer='multilingual')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    expected = ["café", "\U00011392\U000113c7", "ɤ", "ക്ഷ", "ฟ้", "า"]
    assert out.stdout.strip() == ascii(expected)


def test_every_character_normalizes_as_unicodedata2_says():
    for code in range(_nfkc.TOP):
        if 0xD800 <= code < 0xE000:
            continue
        char = chr(code)
        assert _nfkc.nfkc(char) == unicodedata2.normalize("NFKC", char), hex(code)
        assert _nfkc.nfkd(char) == unicodedata2.normalize("NFKD", char), hex(code)
        assert normalize(char) == multilingual_normalize(char), hex(code)
    assert (_nfkc.combining_classes()[:0x30000:7] > 0).sum() > 0


def test_characters_assigned_after_python_3_11_normalize_at_17():
    # Gurung Khema, Kirat Rai and Tulu-Tigalari (16.0): two-part vowel signs compose.
    assert normalize("\U00016121\U0001611f") == "\U00016126"
    assert normalize("\U00016d67\U00016d67") == "\U00016d68"
    assert normalize("\U00011382\U000113c9") == "\U00011383"
    # Case pairs of 16.0 and 17.0: Latin capital ramshorn, Cyrillic tje, Garay, Beria Erfe.
    assert normalize("\ua7cb\u1c89") == "\u0264\u1c8a"
    assert words("Ꟛ\U00010d50", M) == ["ꟛ\U00010d70"]
    assert normalize("\U00016ea0") == "\U00016ebb"


# --- against an independent reference, on the characters that changed ----------------------


def _assigned_late(char: str) -> bool:
    """Assigned in Unicode 17.0.0 but not in this Python's (14.0 on 3.11: 15.0 to 17.0)."""
    return unicodedata2.category(char) != "Cn" and unicodedata.category(char) == "Cn"


@cache
def _late_and_marks() -> list[str]:
    """The characters assigned after this Python's Unicode version that decompose, fold or
    combine (and the others' compositions' first parts), every script's marks (General_Category
    M), and the dropped characters."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    late = [c for c in chars if _assigned_late(c)]
    changing = {
        c
        for c in late
        if unicodedata2.decomposition(c) or unicodedata2.combining(c) or casefold_17(c) != c
    }
    parts = {
        chr(int(p, 16))
        for c in changing
        for p in unicodedata2.decomposition(c).split()
        if not p.startswith("<")
    }
    marks = {c for c in chars if unicodedata2.category(c).startswith("M")}
    dropped = {chr(c) for lo, hi in _scripts.DROPPED_RANGES for c in range(lo, hi + 1)}
    return sorted(changing | parts | marks | dropped | set(late[:: max(1, len(late) // 500)]))


_BASES = [*"aeAEkK ", "\u0915", "\u0bc6", "\u1100", "\u1161", "\u11a8", "\uac00", "\u05d0"]
#: Text of those characters (the pool is read off unicodedata2 at the first draw) and bases.
late_text = st.lists(
    st.one_of(st.sampled_from(_BASES), st.deferred(lambda: st.sampled_from(_late_and_marks()))),
    max_size=16,
).map("".join)


@settings(max_examples=400)
@given(late_text)
def test_normalization_equals_unicodedata2_on_new_characters_and_every_mark(text):
    # The reference: unicodedata2 17.0.0's NFKC around a case fold at 17.0, then the dropped
    # characters removed (tests/reference.py, written from docs/algorithm.md).
    assert normalize(text) == multilingual_normalize(text)
    assert _nfkc.nfkc(text) == unicodedata2.normalize("NFKC", text)


@settings(max_examples=150)
@given(st.lists(late_text, min_size=1, max_size=6))
def test_every_path_reads_new_characters_as_the_reference(jit, batch):
    expected = []
    for text in batch:
        norm = multilingual_normalize(text)
        start, end = word_edges(_nfkc_codes(norm))
        expected.append([norm[s:e] for s, e in zip(start.tolist(), end.tolist(), strict=True)])
    for use_jit in (True, False):
        assert doc_words(_tokens.Tokens(batch, jit=use_jit, tokenizer=M)) == expected


def _nfkc_codes(text: str):
    import numpy as np

    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint32)


def test_the_fold_table_knows_the_new_compositions():
    fold = _fold.fold_table()
    # The Tulu-Tigalari vowel sign AU's second part may compose with the sign before it.
    assert fold[0x113C9] & _fold.FOLD_MAYBE and fold[0x113C2] & _fold.FOLD_FIRST
    # 16.0 capitals fold in the kernel to small letters, no hand-back (Cyrillic tje, Garay).
    for capital, small in ((0x1C89, 0x1C8A), (0x10D50, 0x10D70)):
        assert fold[capital] & 0x1FFFFF == small and not fold[capital] & _fold.FOLD_SPECIAL


@settings(max_examples=300)
@given(st.lists(st.one_of(late_text, st.sampled_from(_BASES)), max_size=12).map("".join))
def test_the_numpy_fold_is_the_definition_wherever_it_answers(text):
    quick = _fold.quick_fold(text)
    assert quick is None or quick == multilingual_normalize(text)


#: Text of every script the kernel folds itself (no composition), marks out of order among it.
PLAIN = ["Straße ＡＢＣ，中文 ﬁ ㎏", "हिन्दी বাংলা தமிழ் සිංහල", "ภาษาไทย ក្នុង မြန်မာ"]
PLAIN += ["مُحَمَّد العـــربية שָׁלוֹם", "Tiếng Việt 한국어 Ελληνικά", "\ua7cb\U00016126"]
PLAIN += ["\u1019\u103a\u1037\u1039 \u0316\u0301\u0323 \u0e01\u0e49\u0e38"]


def test_the_numpy_fold_answers_for_plain_text_of_every_script():
    for text in PLAIN:
        assert _fold.quick_fold(text) == multilingual_normalize(text), text
    for text in ("e\u0301", "\u1100\u1161", "a\u0323\u0301\u0300\u0316", "İ", "k\u0301\u0316"):
        assert _fold.quick_fold(text) is None, text  # left to core._nfkc


@settings(max_examples=200)
@given(st.lists(st.one_of(late_text, st.sampled_from(PLAIN)), min_size=1, max_size=14))
def test_a_long_text_is_folded_in_numpy_around_what_needs_more(parts):
    # From 100 characters on, normalize folds in numpy up to what needs more, gives that
    # piece to core._nfkc, and goes on after it.
    text = " ".join(parts)
    assert normalize(text) == multilingual_normalize(text)
    folded, end, fail = _fold.fold_until(text)
    assert end <= fail <= len(text) and folded == multilingual_normalize(text[:end])


def test_a_page_with_one_two_part_vowel_is_folded_around_it():
    page = "தமிழ் மொழி " * 20 + "\u0bae\u0bc6\u0bbe\u0bb4\u0bbf " + "தமிழ் மொழி " * 20
    folded, end, fail = _fold.fold_until(page)
    assert fail == page.index("\u0bbe") and end == fail - 1  # at the vowel sign's first part
    assert folded == multilingual_normalize(page[:end])
    assert normalize(page) == multilingual_normalize(page)
    assert "\u0bca" in normalize(page)


def test_a_mark_after_the_ypogegrammeni_goes_before_its_iota(jit):
    # U+037A is a space and U+0345 (class 240), which folds to iota only after a mark of a
    # lower class has moved before it: the kernel hands it back rather than read " ι".
    texts = ["x \u037a\u0316", "\u1fb3\u0334 x", "ἀ" * 60 + " \u037a\u0316" + "ω" * 60]
    expected = [multilingual_words(t) for t in texts]
    assert expected[0] == ["x", "\u0316ι"]
    for use_jit in (True, False):
        assert doc_words(_tokens.Tokens(texts, jit=use_jit, tokenizer=M)) == expected


@settings(max_examples=100)
@given(st.lists(st.one_of(late_text, st.sampled_from([*PLAIN, "", "\n", "ABC", "e\u0301"]))))
def test_a_batch_is_normalized_at_once_as_each_text_alone(texts):
    assert normalize_all(texts) == [multilingual_normalize(t) for t in texts]
    assert normalize_all([*texts, "x\ud800" * 60]) == [
        *map(normalize, texts),
        _nfkc.normalize("x\ud800" * 60),
    ]
