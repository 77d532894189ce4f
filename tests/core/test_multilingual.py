"""The ``multilingual`` tokenizer, revision 3 (docs/algorithm.md section 1): hand examples,
the shipped table against Unicode's properties at the pinned version, every path (scalar,
numpy, compiled) against an independent reference written from UAX #29 (tests/reference.py)
on text drawn from every script's whole alphabet, and ``\\X`` on unspaced runs."""

import json
import unicodedata
from functools import cache

import numpy as np
import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import _fold, _multilingual, _scripts, _tokens
from neardup.core._matches import word_spans
from neardup.core._multilingual import normalize, word_edges
from neardup.core._text import shingles, words
from neardup.core._unicode_build import REGEX_VERSION, UNICODE_VERSION, build
from neardup.core._windows import window_grams
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
from tests.reference import grapheme_clusters, multilingual_words
from tests.strategies import tricky_char

M = "multilingual"


def test_hand_examples():
    # A Latin word glued to Han characters is cut at the script boundary.
    assert words("abc中文def", M) == ["abc", "中", "文", "def"]
    # Thai vowel signs and tone marks stay with their base: one word per grapheme cluster.
    assert words("สวัสดี", M) == ["ส", "วั", "ส", "ดี"]
    assert words("เป็น", M) == ["เ", "ป็", "น"]
    # Kana with a combining voicing mark and a half-width one: NFKC makes both "が".
    assert words("か\u3099ｶﾞ", M) == ["が", "ガ"]
    assert words("コーヒー", M) == ["コ", "ー", "ヒ", "ー"]  # ー is Common: a word of its own
    assert words("한국어 문장", M) == words("한국어 문장") == ["한국어", "문장"]
    assert words("Git 仓库「HEAD」。2024年", M) == ["git", "仓", "库", "head", "2024", "年"]
    # Khmer coeng and Myanmar virama join consonants (UAX #29 GB9c at Unicode 17).
    assert words("ក្នុង", M) == ["ក្នុ", "ង"]
    assert words("ភាសា", M) == ["ភា", "សា"]
    assert words("ພາສາ", M) == ["ພ", "າ", "ສ", "າ"]  # າ is a letter (Lo), not a mark
    assert words("မြန်မာ", M) == regex.findall(r"\X", "မြန်မာ")
    assert words("བོད", M) == ["བོ", "ད"]
    # Whole orthographic words with their vowel signs and virama in scripts with spaces.
    assert words("हिन्दी भाषा", M) == ["हिन्दी", "भाषा"]
    assert words("हिन्दी") == ["ह", "न", "द"]  # the words tokenizer loses the marks
    assert words("বাংলা தமிழ் සිංහල", M) == ["বাংলা", "தமிழ்", "සිංහල"]
    assert words("विरोध विरोधी विरोधों", M) == ["विरोध", "विरोधी", "विरोधों"]


def test_normalization_makes_one_text_of_every_spelling():
    for text in ("Tiếng Việt", "한국어", "Ελληνικά", "がぎぐ", "ǅemal"):
        forms = {tuple(words(unicodedata.normalize(f, text), M)) for f in ("NFC", "NFD", "NFKC")}
        assert len(forms) == 1, text
    assert words("ＡＢＣ１２３ ｶﾀｶﾅ", M) == ["abc123", "カ", "タ", "カ", "ナ"]
    assert words("Straße STRASSE ΣΊΣΥΦΟΣ σίσυφος", M) == ["strasse", "strasse"] + ["σίσυφοσ"] * 2


def test_invisible_characters_and_points_are_no_word_material():
    assert words("中\ufe0f中\u200d中", M) == ["中"] * 3
    assert words("かな\u200cテ\u200cスト", M) == ["か", "な", "テ", "ス", "ト"]
    assert words("ab\u00adcd e\u200d\u0301", M) == ["abcd", "é"]
    # Arabic harakat, shadda, sukun, tatweel and Hebrew niqqud fold away.
    assert words("مُحَمَّدٌ كَتَبَ", M) == words("محمد كتب", M) == ["محمد", "كتب"]
    assert words("العـــربية", M) == ["العربية"]
    assert words("שָׁלוֹם עוֹלָם", M) == words("שלום עולם", M) == ["שלום", "עולם"]


# --- the shipped table --------------------------------------------------------------------


def test_the_shipped_table_is_the_generators_output_at_the_pinned_version():
    # The test extra pins regex to the release the table was generated from.
    assert regex.__version__ == REGEX_VERSION and UNICODE_VERSION == _scripts.TABLE_VERSION
    assert (build() == _scripts.char_classes()).all()


def test_the_tokenizer_never_imports_regex(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['regex'] = None\n"
        "from neardup.core.minhash import signatures, words\n"
        "print(words('ក្នុង हिन्दी', 'multilingual'))\n"
        "signatures(['ក្នុង'], tokenizer='multilingual')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['ក្នុ', 'ង', 'हिन्दी']"


# --- every script's whole alphabet --------------------------------------------------------

#: The scripts drawn from: every unspaced one, and the spaced ones the issue measured.
SCRIPTS = (
    *_scripts.UNSPACED_SCRIPTS,
    *("Devanagari", "Bengali", "Tamil", "Sinhala", "Arabic", "Hebrew", "Hangul", "Greek"),
    *("Latin", "Cyrillic", "Gujarati", "Malayalam", "Telugu", "Oriya", "Balinese"),
)
#: What may sit between any script's characters: joiners, variation selectors, combining
#: marks of no script, spaces, punctuation.
_SHARED = [*"\u200c\u200d\ufe0f\ufe00\U000e0100\u0301\u0308\u034f\u00ad\u2060 ,.\n-_", "\u3000"]


@cache
def alphabet(script: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """Every assigned code point of ``script`` (Unicode's Script property), and its letters,
    its marks (with the shared ones) and its viramas and conjunct linkers (subscripts follow
    these): drawn as syllables so that conjuncts and stacked marks are drawn often."""
    chars = "".join(chr(c) for c in range(0x30000) if not 0xD800 <= c < 0xE000)
    every = regex.findall(rf"\p{{Script={script}}}", chars)
    letters = [c for c in every if regex.match(r"\p{L}", c)] or every
    marks = [c for c in every if regex.match(r"\p{M}", c)] + _SHARED[:9]
    linkers = [c for c in every if regex.match(r"[\p{ccc=9}\p{InCB=Linker}]", c)] or marks
    return [*every, *_SHARED], letters, marks, linkers


def script_text(script: str, size: int = 12) -> st.SearchStrategy[str]:
    """Text of ``script``: syllables (a letter, then marks and virama-letter pairs) and any
    character of its alphabet."""
    every, letters, marks, linkers = alphabet(script)
    joined = st.tuples(st.sampled_from(linkers), st.sampled_from(letters)).map("".join)
    syllable = st.tuples(
        st.sampled_from(letters),
        st.lists(st.one_of(st.sampled_from(marks), joined), max_size=4).map("".join),
    ).map("".join)
    return st.lists(st.one_of(syllable, st.sampled_from(every)), max_size=size).map("".join)


any_script_text = st.sampled_from(SCRIPTS).flatmap(script_text)
mixed_text = st.lists(st.one_of(any_script_text, tricky_char.map(str)), max_size=6).map("".join)


@given(mixed_text)
def test_words_equal_the_reference_on_every_scripts_alphabet(text):
    assert words(text, M) == multilingual_words(text)


@given(st.lists(mixed_text, max_size=6), st.integers(1, 6))
def test_the_compiled_and_numpy_tokenisers_equal_the_reference(jit, batch, k):
    expected_words = [multilingual_words(t) for t in batch]
    expected_shingles = [shingles(t, k, M) for t in batch]
    for use_jit in (True, False):
        for texts in (batch, _tokens.Utf8Texts.encode(batch)):
            tokens = _tokens.Tokens(texts, jit=use_jit, tokenizer=M)
            assert (tokens.kernels is not None) is use_jit
            assert doc_words(tokens) == expected_words, use_jit
            assert doc_shingles(tokens, k) == expected_shingles, use_jit


#: Lines of Unicode's GraphemeBreakTest-17.0.0.txt on word characters (the GB9c cases):
#: ``÷`` a boundary, ``×`` none.
CONFORMANCE = """\
÷ 0915 ÷ 0924 ÷
÷ 0915 × 094D × 0924 ÷
÷ 0915 × 094D × 094D × 0924 ÷
÷ 0915 × 094D × 0924 × 094D × 092F ÷
÷ 0915 × 094D ÷ 0061 ÷
÷ 0061 × 094D ÷ 0924 ÷
÷ 0AB8 × 0AFB × 0ACD × 0AB8 × 0AFB ÷
÷ 1019 × 1039 × 1018 ÷ 102C × 1037 ÷
÷ 1004 × 103A × 1039 × 1011 × 1039 × 1011 ÷
÷ 1B12 × 1B01 ÷ 1B32 × 1B44 × 1B2F ÷ 1B32 × 1B44 × 1B22 × 1B44 × 1B2C ÷ 1B32 × 1B44 × 1B22 × 1B38 ÷
÷ 179F × 17D2 × 178F × 17D2 × 179A × 17B8 ÷
÷ 1B26 ÷ 1B17 × 1B44 × 1B13 ÷
÷ 1B27 ÷ 1B13 × 1B44 × 1B0B ÷ 1B0B × 1B04 ÷
÷ 1795 × 17D2 × 17AF ÷ 1798 ÷
÷ 17A0 × 17D2 × 17AB ÷ 1791 × 17D0 ÷ 1799 ÷
"""


def clusters(text: str) -> list[str]:
    """``text`` (word characters only) cut where UAX #29 does, read off ``word_edges``: with
    every character made of an unspaced script, every cluster is a word."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    table = _scripts.char_classes().copy()
    table[codes] |= _scripts.UNSPACED_BIT
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_multilingual, "char_classes", lambda: table)
        start, end = word_edges(codes)
    return [text[a:b] for a, b in zip(start, end, strict=True)]


@pytest.mark.parametrize("line", CONFORMANCE.splitlines())
def test_clusters_follow_unicodes_conformance_data(line):
    parts = line.strip("÷ ").split(" ÷ ")
    expected = ["".join(chr(int(c, 16)) for c in part.split(" × ")) for part in parts]
    assert clusters("".join(expected)) == expected
    assert grapheme_clusters("".join(expected)) == expected


def _regex_deviation(run: str, at: int) -> bool:
    """Whether regex's \\X keeps ``run[at]`` with what precedes although UAX #29's GB9c does
    not: a Consonant after Linker and Extend characters (InCB) with a Linker among them, but no
    Consonant before them (GraphemeBreakTest's ``÷ 0061 × 094D ÷ 0924 ÷``, which regex
    2026.12.2 keeps whole)."""
    incb = [_scripts.char_classes()[ord(c)] >> _scripts.INCB_SHIFT & 3 for c in run[: at + 1]]
    if incb[at] != _scripts.CONSONANT:
        return False
    j = at - 1
    while j >= 0 and incb[j] in (_scripts.LINKER, _scripts.INCB_EXTEND):
        j -= 1
    return _scripts.LINKER in incb[j + 1 : at] and (j < 0 or incb[j] != _scripts.CONSONANT)


@given(st.sampled_from(_scripts.UNSPACED_SCRIPTS).flatmap(lambda s: script_text(s, 30)))
def test_a_run_of_an_unspaced_script_is_cut_into_its_grapheme_clusters(text):
    # Every run of word material whose clusters all start unspaced: its words are \X's,
    # except where regex departs from UAX #29 (``_regex_deviation``).
    norm = normalize(text)
    unspaced = regex.compile("[" + "".join(rf"\p{{{s}}}" for s in _scripts.UNSPACED_SCRIPTS) + "]")
    for run in regex.finditer(r"[\p{L}\p{M}\p{N}_]+", norm):
        if not all(unspaced.match(c) for c in regex.findall(r"\X", run.group())):
            continue
        codes = np.frombuffer(run.group().encode("utf-32-le"), dtype="<u4")
        start, _ = word_edges(codes)
        ours = set(start.tolist())
        theirs = {m.start() for m in regex.finditer(r"\X", run.group())}
        assert ours >= theirs
        assert all(_regex_deviation(run.group(), at) for at in ours - theirs)


def test_the_khmer_and_burmese_examples_of_the_issue_are_grapheme_clusters():
    for text in ("ក្នុង", "ខ្ម", "ខ្មែរ", "ស្ត្រី", "မြန်မာ", "သ္မီး", "སྐད", "ཀྲུང"):
        assert words(text, M) == regex.findall(r"\X", text), text


@given(mixed_text, st.data())
def test_invisible_joiners_anywhere_never_change_the_words(text, data):
    at = data.draw(st.lists(st.integers(0, len(text)), max_size=4))
    marked = text
    for i in sorted(at, reverse=True):
        marked = (
            marked[:i] + data.draw(st.sampled_from(["\u200d", "\u200c", "\ufe0f"])) + marked[i:]
        )
    assert words(marked, M) == words(text, M)


@given(mixed_text)
def test_normalization_forms_of_a_text_have_its_words(text):
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        assert words(unicodedata.normalize(form, text), M) == words(text, M)


@given(mixed_text)
def test_word_spans_point_into_the_original_text(text):
    found, spans = word_spans(text, M)
    assert found == words(text, M)
    assert spans == sorted(spans) and all(0 <= a < b <= len(text) for a, b in spans)
    for word, (a, b) in zip(found, spans, strict=True):
        assert word in normalize(text[a:b])


def test_word_spans_of_wide_and_decomposed_text_are_its_own_characters():
    text = "Ｃａｆé ﬁ ㍿ e\u200d\u0301 مُحَمَّد"
    found, spans = word_spans(text, M)
    assert found == ["café", "fi", "株", "式", "会", "社", "é", "محمد"]
    assert [text[a:b] for a, b in spans] == ["Ｃａｆé", "ﬁ", *["㍿"] * 4, "e\u200d\u0301", "مُحَمَّد"]


# --- the tokenizer in use --------------------------------------------------------------


def test_a_three_sentence_chinese_paragraph_has_a_word_per_character():
    text = "文件不存在。请检查路径是否正确，然后重试。操作已取消。"
    assert len(words(text)) == 4  # the words tokenizer: a clause is one word
    han = [c for c in text if c not in "。，"]
    assert words(text, M) == han
    assert len(shingles(text, 5, M)) == len(han) - 4


def test_signatures_take_the_tokenizer():
    chinese = "文件不存在。请检查路径是否正确，然后重试。操作已取消。"
    latin = "the quick brown fox jumps over the lazy dog again and again"
    for text in (chinese, latin):
        params = MinhashParams(tokenizer=M)
        assert (batch_signatures([text], params) == signatures([text], tokenizer=M)).all()
    assert (signatures([latin], tokenizer=M) == signatures([latin])).all()
    assert not (signatures([chinese], tokenizer=M) == signatures([chinese])).all()


def test_a_forty_character_chinese_item_gives_19_windows_of_22_characters():
    # A Han character weighs 38/64 of an English word: 22 of them are 13 English words.
    item = "在计算机科学中，哈希函数是一种将任意长度的数据映射为固定长度值的函数，常用于快速查找。"
    han = [c for c in item if c not in "，。"]
    grams = set(window_grams(words(item, M), 13, M))
    assert len(han) == 40 and len(grams) == 19
    assert {len(g.split()) for g in grams} == {22}
    planted = "前面是一些无关的文字。" + item[5:30] + "后面还有更多的内容。"
    assert contaminated(planted, grams, 13, M)
    index = NgramIndex(grams, 13, M)
    assert index.contaminated_many(["无关", planted, "x" * 50]).tolist() == [False, True, False]


def test_copies_differing_only_in_points_and_tatweel_are_found():
    item = "ذهب الولد إلى المدرسة في الصباح الباكر وعاد إلى البيت بعد الظهر مع أصدقائه"
    pointed = "ذَهَبَ الوَلَدُ إِلَى المَدْرَسَةِ فِي الصَّبَاحِ البَاكِرِ وَعَادَ إِلَى البَيْتِ بَعْدَ الظُّهْرِ مَعَ أَصْدِقَائِهِ"
    assert words(pointed, M) == words(item, M)
    grams = set(window_grams(words(item, M), 13, M))
    assert grams and contaminated("مقدمة " + pointed.replace("ل", "لـ"), grams, 13, M)


@pytest.mark.parametrize(
    "call",
    [
        lambda: words("x", "chars"),
        lambda: signatures(["x"], tokenizer="chars"),
        lambda: NgramIndex(set(), 13, "chars"),
        lambda: _tokens.Tokens(["x"], tokenizer="chars"),
        lambda: MinhashParams(tokenizer="chars"),
        lambda: word_spans("x", "chars"),
    ],
)
def test_an_unknown_tokenizer_is_refused_everywhere(call):
    with pytest.raises(ParameterError, match="tokenizer must be one of words, multilingual"):
        call()


def test_matches_and_cut_spans_are_characters_of_the_original_text():
    item = "在计算机科学中，哈希函数是一种将任意长度的数据映射为固定长度值的函数。"
    protected = parse_protected_set("evals", json.dumps({"id": "q", "q": item}) + "\n",
                                    ProtectedFormat.JSONL, 13, M)  # fmt: skip
    # "İ" case-folds to two code points and full-width text to ASCII: spans are the original's.
    text = "İİ ＡＢＣ 前言。" * 100 + item + "后记。" * 200
    [matches] = Protection([protected]).matches_many([text])
    assert matches and all(m.items == ("q",) for m in matches)
    start, end = matches[0].start, matches[-1].end
    assert text[start:end] == item[:-1]  # the last window ends at the last character, not "。"
    pieces = list(decontaminate_modes([Doc("d", text)], Protection([protected]),
                                      DecontParams("cut")))  # fmt: skip
    assert [p.text for p in pieces] == [text[: start - 200], text[end + 200 :]]


def test_a_text_with_a_lone_surrogate_is_refused_on_every_path(jit):
    for use_jit in (True, False):
        with pytest.raises(ParameterError, match="text 1 is not valid Unicode"):
            _tokens.Tokens(["ok", "a\ud800"], jit=use_jit, tokenizer=M)


def test_the_numpy_path_never_reads_a_text_character_by_character(monkeypatch):
    # One normalize call a text, and the words of the whole batch in one word_edges call.
    calls = []
    real = _multilingual.word_edges
    monkeypatch.setattr(_multilingual, "word_edges", lambda c: calls.append(len(c)) or real(c))
    batch = ["中文 हिन्दी", "ok", "ក្នុង"]
    _tokens.Tokens(batch, jit=False, tokenizer=M)
    assert calls == [len("\n".join(normalize(t) for t in batch))]


#: Texts the compiled kernel must hand to ``unicodedata``: decomposed and compatibility forms,
#: marks out of canonical order, jamo that compose, dropped characters between a letter and
#: its mark, case folds of another length.
NORMALIZING = [
    unicodedata.normalize("NFD", "Tiếng Việt 한국어 Ελληνικά が"),
    "a\u0301\u0323 a\u0323\u0301",
    "\u1100\u1161\u11a8 \uac00\u11a8",
    "e\u200d\u0301 a\u0592\u0301 ক\u09c7\u09be",
    "Straße İstanbul ﬁ ＡＢＣ ｶﾞ ㍿",
    "\u0627\u0653 \u0627\u0640\u0653",  # alef and maddah compose before the maddah drops
]
#: Dropped characters the kernel skips itself, full-width punctuation it reads as separators.
SKIPPED = ["مُحَمَّد كَتَبَ العـــربية שָׁלוֹם 中\ufe0f ab\u00adcd", "中文，（注意）…"]


def test_texts_that_need_unicodedata_are_normalized_on_every_path(jit):
    texts = NORMALIZING + SKIPPED
    expected = [multilingual_words(t) for t in texts]
    for use_jit in (True, False):
        assert doc_words(_tokens.Tokens(texts, jit=use_jit, tokenizer=M)) == expected


def test_the_kernel_normalizes_only_the_texts_that_need_it(jit, monkeypatch):
    # Text NFKC leaves alone (case aside) is folded by the kernel itself; only the texts of
    # NORMALIZING go to unicodedata, one call each.
    calls = []
    monkeypatch.setattr(_tokens, "normalize", lambda t: calls.append(t) or normalize(t))
    plain = ["Grösse ΣΑΣ Москва हिन्दी বাংলা தமிழ் 中文 ក្នុង", "café ñandú", "한국어 문장", *SKIPPED]
    tokens = _tokens.Tokens(plain + NORMALIZING, jit=True, tokenizer=M)
    assert calls == NORMALIZING
    assert doc_words(tokens) == [multilingual_words(t) for t in plain + NORMALIZING]


def test_the_fold_table_folds_as_normalize_does():
    fold = _fold.fold_table()
    special = _fold.FOLD_SPECIAL
    for char in "AÉΣςЖ":
        assert not fold[ord(char)] & special
        assert chr(fold[ord(char)] & 0x1FFFFF) == normalize(char), char
    for char in "ßİﬁＡǅ\u0340\u0653\ud800":
        assert fold[ord(char)] & special, hex(ord(char))
    for char in "\u200d\u0640\u0651\u05b8\ufe0f":  # dropped, skipped by the kernel
        assert fold[ord(char)] & 0x3FFFFF == _fold.FOLD_SKIP, hex(ord(char))
    assert not fold[ord("，")] & special and chr(fold[ord("，")] & 0x1FFFFF) == "，"
    assert fold[0x301] & _fold.FOLD_MAYBE and fold[ord("e")] & _fold.FOLD_FIRST
