"""The ``multilingual`` tokenizer (docs/algorithm.md section 1): the scalar reference's hand
examples, its tables against Unicode's Script and grapheme-cluster properties, equality with
``words`` on text of no unspaced script, and both batch tokenisers against the reference."""

import json
import re

import numpy as np
import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import _tokens
from neardup.core._scripts import UNSPACED_SCRIPTS, _char_class, multilingual_re, script_tables
from neardup.core._text import ngrams, shingles, words
from neardup.core.engine import (
    DecontParams,
    Doc,
    MinhashParams,
    NgramIndex,
    ParameterError,
    ProtectedFormat,
    Protection,
    batch_signatures,
    decontaminate_modes,
    parse_protected_set,
)
from neardup.core.minhash import contaminated, signatures
from tests.core.test_tokens import doc_shingles, doc_words
from tests.strategies import tricky_char

M = "multilingual"


def test_hand_examples():
    # A Latin word glued to Han characters is cut at the script boundary.
    assert words("abc中文def", M) == ["abc", "中", "文", "def"]
    # Thai vowel signs and tone marks stay with their base: one word per grapheme cluster.
    assert words("สวัสดี", M) == ["ส", "วั", "ส", "ดี"]
    assert words("สวัสดี") == ["สว", "สด"]  # the words tokenizer splits at every mark
    assert words("เป็น", M) == ["เ", "ป็", "น"]
    # Kana, with a combining voicing mark (U+3099) and a half-width one (U+FF9E).
    assert words("か\u3099ｶﾞ", M) == ["か\u3099", "ｶﾞ"]
    # The prolonged sound mark is Common, not Katakana: a \w word of its own.
    assert words("コーヒー", M) == ["コ", "ー", "ヒ", "ー"]
    # Hangul is written with spaces: \w words, as in the words tokenizer.
    assert words("한국어 문장", M) == words("한국어 문장") == ["한국어", "문장"]
    # Case and punctuation never matter; digits stay runs; CJK punctuation is not a word.
    assert words("Git 仓库「HEAD」。2024年", M) == ["git", "仓", "库", "head", "2024", "年"]
    # Khmer, Lao, Myanmar, Tibetan: a word per cluster too.
    assert words("ភាសា", M) == ["ភា", "សា"]
    assert words("ພາສາ", M) == ["ພ", "າ", "ສ", "າ"]  # າ is a letter (Lo), not a mark
    assert words("မြန်မာ", M) == regex.findall(r"\X", "မြန်မာ")
    assert words("བོད", M) == ["བོ", "ད"]


def test_a_three_sentence_chinese_paragraph_has_a_word_per_character():
    text = "文件不存在。请检查路径是否正确，然后重试。操作已取消。"
    assert len(words(text)) == 4  # the words tokenizer: a clause is one word
    han = [c for c in text if c not in "。，"]
    assert words(text, M) == han
    assert len(shingles(text, 5, M)) == len(han) - 4


def test_the_tables_follow_unicodes_script_property():
    unspaced, continuation = script_tables()
    for char in "中々ぁアㄅกກកကཀ\u102c":
        assert unspaced[ord(char)], char
    for char in "a한ЖاΣー。、0_":  # Latin, Hangul, Cyrillic, Arabic, Greek, Common
        assert not unspaced[ord(char)], char
    for char in "\u0e31\u0e48\u17b6\u102d\u3099\ufe00\u200d\u0301":
        assert continuation[ord(char)], hex(ord(char))
    # Every unspaced code point is in one of the scripts (the regex module's Script property).
    pattern = regex.compile("[" + "".join(rf"\p{{Script={s}}}" for s in UNSPACED_SCRIPTS) + "]")
    sample = [int(c) for c in unspaced.nonzero()[0][::97]]
    assert all(pattern.match(chr(c)) for c in sample)


#: Characters with no unspaced script (any continuation that is not of one is kept).
_spaced_char = st.characters(exclude_categories=["Cs"]).filter(
    lambda c: not script_tables()[0][ord(c)]
)
spaced_text = st.lists(st.one_of(_spaced_char, tricky_char), max_size=120).map("".join)


@given(spaced_text)
def test_multilingual_equals_words_on_text_of_no_unspaced_script(text):
    if any(script_tables()[0][ord(c)] for c in text.lower()):
        return  # tricky_char holds some Han and kana
    assert words(text, M) == words(text)


#: Text where the multilingual cut is easy to get wrong: unspaced scripts and their marks
#: between Latin, Cyrillic and Hangul words, digits, capital sigmas and spaces.
_MARKS = ["\u0e31", "\u0e48", "\u3099", "\ufe00", "\u200d", "\u0301", "\U000e0100", "\u17b6"]
mixed_char = st.sampled_from(
    [*"中文日本語かなカナｶﾞ々ーกขสวัดีเป็นເລາကမ္ဘာខ្មែរབོད་ㄅㄆ", *_MARKS, *"abcXYZ019_ Ж한Σİ.\n\t,"]
)
mixed_text = st.lists(st.one_of(mixed_char, tricky_char), max_size=150).map("".join)


@given(st.lists(mixed_text, max_size=8), st.integers(1, 6))
def test_both_batch_tokenisers_equal_the_reference_on_mixed_text(jit, batch, k):
    expected_words = [words(t, M) for t in batch]
    expected_shingles = [shingles(t, k, M) for t in batch]
    for use_jit in (True, False):
        tokens = _tokens.Tokens(batch, jit=use_jit, tokenizer=M)
        assert doc_words(tokens) == expected_words, use_jit
        assert doc_shingles(tokens, k) == expected_shingles, use_jit


@given(st.lists(mixed_text, min_size=1, max_size=6))
def test_clusters_of_an_unspaced_script_are_its_grapheme_clusters(batch):
    # On runs of unspaced characters and marks, a word is what regex's \X calls a cluster.
    unspaced, continuation = script_tables()
    for text in batch:
        for run in regex.findall(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Khmer}]+", text):
            if unspaced[ord(run[0])] and all(unspaced[ord(c)] or continuation[ord(c)] for c in run):
                assert words(run, M) == regex.findall(r"\X", run.lower())


def test_the_compiled_tokeniser_grows_its_buffers_for_dense_clusters(jit):
    # "a中" makes 2 words of 4 bytes (a space each): more than the words tokenizer's first
    # guess of a byte out for a byte in.
    batch = ["a中" * 4000, "x", "ก\u0e31a" * 3000]
    expected = [words(t, M) for t in batch]
    assert doc_words(_tokens.Tokens(batch, jit=True, tokenizer=M)) == expected


def test_signatures_take_the_tokenizer_and_differ_only_where_it_matters():
    chinese = "文件不存在。请检查路径是否正确，然后重试。操作已取消。"
    latin = "the quick brown fox jumps over the lazy dog again and again"
    for text in (chinese, latin):
        params = MinhashParams(tokenizer=M)
        assert (batch_signatures([text], params) == signatures([text], tokenizer=M)).all()
    same = signatures([latin], tokenizer=M) == signatures([latin])
    assert same.all()
    assert not (signatures([chinese], tokenizer=M) == signatures([chinese])).all()


def test_a_forty_character_chinese_item_gives_28_thirteen_grams():
    item = "在计算机科学中，哈希函数是一种将任意长度的数据映射为固定长度值的函数，常用于快速查找。"
    han = [c for c in item if c not in "，。"]
    assert len(han) == 40
    grams = set(grams_of(item))
    assert len(grams) == 28
    assert not set(grams_of(item, "words"))  # fewer than 13 words: no 13-gram at all
    planted = "前面是一些无关的文字。" + item[5:30] + "后面还有更多的内容。"
    assert contaminated(planted, grams, 13, M)
    index = NgramIndex(grams, 13, M)
    assert index.contaminated_many(["无关", planted, "x" * 50]).tolist() == [False, True, False]


def grams_of(text: str, tokenizer: str = M) -> list[str]:
    return list(ngrams(words(text, tokenizer), 13))


@pytest.mark.parametrize(
    "call",
    [
        lambda: words("x", "chars"),
        lambda: signatures(["x"], tokenizer="chars"),
        lambda: NgramIndex(set(), 13, "chars"),
        lambda: _tokens.Tokens(["x"], tokenizer="chars"),
        lambda: MinhashParams(tokenizer="chars"),
    ],
)
def test_an_unknown_tokenizer_is_refused_everywhere(call):
    with pytest.raises(ParameterError, match="tokenizer must be one of words, multilingual"):
        call()


@given(st.lists(spaced_text, max_size=6))
def test_multilingual_signatures_equal_words_ones_on_text_of_no_unspaced_script(jit, batch):
    batch = [t for t in batch if not any(script_tables()[0][ord(c)] for c in t.lower())]
    assert (signatures(batch, tokenizer=M) == signatures(batch)).all()


def test_matches_and_cut_spans_are_characters_of_the_original_text():
    item = "在计算机科学中，哈希函数是一种将任意长度的数据映射为固定长度值的函数。"
    protected = parse_protected_set("evals", json.dumps({"id": "q", "q": item}) + "\n",
                                    ProtectedFormat.JSONL, 13, M)  # fmt: skip
    # "İ" lowers to two code points: spans must still be the original's characters.
    text = "İİ 前言。" * 100 + item + "后记。" * 200
    [matches] = Protection([protected]).matches_many([text])
    assert matches and all(m.items == ("q",) for m in matches)
    start, end = matches[0].start, matches[-1].end
    assert text[start:end] == item[:-1]  # the last window ends at the last character, not "。"
    pieces = list(decontaminate_modes([Doc("d", text)], Protection([protected]),
                                      DecontParams("cut")))  # fmt: skip
    assert [p.text for p in pieces] == [text[: start - 200], text[end + 200 :]]


def test_tables_built_again_in_a_process_tokenise_as_before():
    # Built once a process (cached): build them again from Unicode's properties, as a new
    # process does, and check the hand examples and the tables against the first ones.
    unspaced, continuation = script_tables()
    script_tables.cache_clear()
    multilingual_re.cache_clear()
    again = script_tables()
    assert (again[0] == unspaced).all() and (again[1] == continuation).all()
    test_hand_examples()
    assert multilingual_re().findall("中文ok สวัสดี") == ["中", "文", "ok", "ส", "วั", "ส", "ดี"]


def test_a_character_class_holds_exactly_the_tables_code_points():
    table = np.zeros(130, dtype=np.bool_)
    for start, stop in ((0, 1), (45, 46), (65, 67), (70, 73), (100, 130)):
        table[start:stop] = True
    body = _char_class(table)
    assert body == "\x00\\-A-BF-Hd-\x81"
    pattern = re.compile(f"[{body}]")
    assert [c for c in range(140) if pattern.fullmatch(chr(c))] == table.nonzero()[0].tolist()
    assert _char_class(np.zeros(5, dtype=np.bool_)) == ""
