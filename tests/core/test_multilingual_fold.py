"""The compiled multilingual kernel's own folding (``core._fold.fold_table``, read by
``core._jit.segment``): multi-character and other-length folds, marks put back in canonical
order, ASCII runs. Its words must be the reference's (tests/reference.py) for every input, and
the texts real catalogs hold (ß, Thai ำ, Bengali য়, Burmese asat before dot below, Tamil ொ typed
as its two parts) must not go to ``unicodedata`` at all."""

import threading
import unicodedata
from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import _fold, _scripts, _tokens
from neardup.core._multilingual import normalize
from tests.core.test_multilingual import any_script_text
from tests.core.test_tokens import doc_words
from tests.reference import multilingual_words
from tests.strategies import tricky_char

M = "multilingual"

#: Combining marks of many canonical classes (230, 220, 1, 240, 7, 9, 107, 8, 129, 202, ...),
#: composition seconds that are starters (Hangul jamo, Bengali aa), and dropped ones.
MARKS = (
    "\u0301\u0300\u0307\u0323\u0327\u0334\u0345\u0308\u030c\u093c\u094d\u09bc\u09be\u09cd\u0e48"
    "\u0e4d\u1037\u103a\u1039\u1161\u11a8\u3099\u309a\u0f71\u0f72\u05b0\u064e\u0651\u200d"
)


@cache
def expanding() -> list[str]:
    """Every character the kernel folds to a list (``FOLD_EXPAND``)."""
    fold = _fold.fold_table()[:0x110000]
    flags = np.uint32(_fold.FOLD_SPECIAL | _fold.FOLD_EXPAND)
    return [chr(c) for c in np.flatnonzero((fold & flags) == flags).tolist()]


@cache
def composing_pairs() -> list[str]:
    """Every pair of characters the kernel composes itself (``_fold.fold_table``'s triples)."""
    fold = _fold.fold_table()
    count = int(fold[-1])
    triples = fold[len(fold) - 1 - 3 * count : -1].reshape(count, 3).tolist()
    return [chr(first) + chr(second) for first, second, _ in triples]


#: Folds of another length and other hard cases, by name: the kernel reads some itself,
#: hands the others to ``unicodedata``; the words must be the reference's either way.
FOLDS = list("ßẞﬁﬂﬃǰⅫⅻ㎏㍿ﷺＡｚ０ｶﾞﾟİŉΐǅǄǈ\u0e33\u0eb3\u09dc\u09dd\u09df\u0958\u095d\u0f43")

#: Letters whose decomposition ends in marks, and marks of lower classes that go before those
#: and may compose with the letter then (below: dot, diaeresis, ring, comma, cedilla, ...).
PRECOMPOSED = list("éÉốǰÅḉỗάῶǘ\u1e17\u0390")
BELOW = "\u0323\u0324\u0325\u0326\u0327\u0328\u032d\u032e\u0330\u0331"

folding_char = st.one_of(
    st.sampled_from(FOLDS),
    st.tuples(st.sampled_from(PRECOMPOSED), st.sampled_from(BELOW + MARKS)).map("".join),
    st.sampled_from(MARKS),
    st.builds(lambda: expanding()).flatmap(st.sampled_from),
    st.builds(lambda: composing_pairs()).flatmap(st.sampled_from),
    tricky_char,
)
folding_text = st.tuples(
    st.lists(st.one_of(folding_char, any_script_text), max_size=8).map("".join),
    st.sampled_from([None, None, "NFC", "NFD", "NFKD"]),
).map(lambda t: unicodedata.normalize(t[1], t[0]) if t[1] else t[0])


@given(st.lists(folding_text, max_size=5))
def test_the_kernels_folds_equal_the_reference(jit, batch):
    expected = [multilingual_words(t) for t in batch]
    for texts in (batch, _tokens.Utf8Texts.encode(batch)):
        tokens = _tokens.Tokens(texts, jit=True, tokenizer=M)
        assert tokens.kernels is not None
        assert doc_words(tokens) == expected


def test_every_expanding_character_in_every_context_has_the_references_words(jit):
    # Each character after a letter that composes, before each mark and before a letter.
    contexts = [f"e{{}}{m}" for m in ("", *MARKS)] + ["{}a", "a{}b{}"]
    texts = [" ".join(c.format(x, x) for c in contexts) for x in expanding()]
    assert len(texts) > 4000
    tokens = _tokens.Tokens(texts, jit=True, tokenizer=M)
    got = doc_words(tokens)
    wrong = [t for t, words in zip(texts, got, strict=True) if words != multilingual_words(t)]
    assert wrong == []


#: What real catalogs hold that NFKC changes: the kernel normalizes these itself.
KERNEL_FOLDS = [
    "Straße GRÖẞE Ⅻ ㎏ ﬁnden ＦＵＬＬ ｗｉｄｔｈ",
    "ภาษาไทย ทำ น้ำ คำ",
    "\u09ac\u09be\u0982\u09b2\u09be\u09df \u09aa\u09dc\u09c7 \u0986\u09b7\u09be\u09dd",
    "\u0958\u093f\u0932\u093e \u095b\u093f\u0902\u0926\u0917\u0940 \u095d",
    "\u1019\u103a\u1037 \u1004\u103a\u1037 \u1000\u103b\u103a\u1037",  # asat, then dot below
    # Two-part vowels typed as their parts: the kernel composes them (``_jit._composite``).
    "\u0b95\u0bc6\u0bbe\u0bb3\u0bcd\u0b95\u0bc8 \u0baa\u0bc7\u0bbe\u0ba9\u0bcd \u0bb5\u0bc6\u0bd7",
    "\u0995\u09c7\u09be\u09a8 \u09ac\u09c7\u09d7 \u0d15\u0d46\u0d3e \u0d9a\u0dd9\u0dcf",
    "\u00fc\u0304 \u1025\u102e \u304b\u3099",
    "gru\u0308n a\u0308b \u0435\u0308\u0436 a\u0308\u0316\u0334",
]


def test_folds_real_text_needs_are_read_by_the_kernel_itself(jit, monkeypatch):
    def refuse(text: str) -> str:
        raise AssertionError(f"handed to unicodedata: {text!r}")

    expected = [multilingual_words(t) for t in KERNEL_FOLDS]
    assert [t for t in KERNEL_FOLDS if normalize(t) == t] == []
    monkeypatch.setattr(_tokens, "normalize", refuse)
    assert doc_words(_tokens.Tokens(KERNEL_FOLDS, jit=True, tokenizer=M)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "\u00e9\u0323",  # é's own acute goes after the dot below, which composes with e
        "\u1ed1\u0323",  # ố, then a dot below: ộ and an acute
        "\u00df\u0323",  # ss, then a dot below that composes with the second s
        "\uff21\u0301",  # full-width A, then an acute: á
        "\u0130\u0323",  # İ: i, dot below, dot above
        "\u1019\u103a\u1037\u1039",
        "x\u0301\u0323\u0301 a\u0334\u0301",
        "q\u0316\u0301\u0323",  # the two below (220) keep their order, before the acute
        "b\u0345\u0334",  # ypogegrammeni (240) folds to iota, but goes after the overlay (1)
    ],
)
def test_marks_after_folded_and_precomposed_letters_are_ordered_as_nfkc_orders_them(jit, text):
    tokens = _tokens.Tokens([text, text.upper()], jit=True, tokenizer=M)
    assert doc_words(tokens) == [multilingual_words(text), multilingual_words(text.upper())]


@pytest.mark.parametrize(
    "texts",
    [
        ["\u0b95\u0bc6", "\u0bbe"],  # the parts in two documents: no vowel
        ["\u0b95\u0bc6\u200d\u0bbe", "\u0b95\u0bc6\ufe0f\u0bbe"],  # dropped between
        ["\u0b95\u0bc6\u0bbe\u0bbe", "\u0b95\u0bc6\u0bcd\u0bbe"],  # a second aa; a virama between
        ["\u0d9a\u0dd9\u0dcf\u0dca"],  # Sinhala o, then al-lakuna: oo (handed back)
        ["\u00fc\u0304\u0323", "\u00fc\u0304\u0316", "\u00fc\u0316\u0304", "\u00dc\u0304"],
        ["\ufb01\u0bc6\u0bbe", "\u3131\u1161", "\u1100\u1161\u11a8"],
        ["e\u0302\u0301", "e\u0301\u0302", "A\u0308", "e\u0323\u0302", "a\u0308\u0e01"],
        ["\u0e01a\u0308b", "a\u0308\u0e01b", "\u0915a\u0308\u094d\u0937", "a\u0308 b"],
        ["a\u0308\u0316\u0334", "a\u0308\u0301\u0334", "\u0435\u0308\u0316\u0334"],
    ],
)
def test_the_parts_of_a_composite_are_composed_only_where_nfkc_composes_them(jit, texts):
    tokens = _tokens.Tokens(texts, jit=True, tokenizer=M)
    assert doc_words(tokens) == [multilingual_words(text) for text in texts]


@pytest.mark.parametrize(
    ("text", "composite"),
    [
        ("\u0b95\u0bc6\u0bbe", "\u0bca"),  # Tamil o
        ("\u00fc\u0304", "\u01d6"),
        ("\u304b\u3099", "\u304c"),
        ("a\u0308", "\u00e4"),  # a longer composite
        ("\u304b\uff9e", None),  # the second read from an expansion: not in the text
        ("\u00dc\u0304", None),  # the first read folded
        ("\u0b95\u0bc6\u200d\u0bbe", None),  # something between
        ("\u0bbe", None),
    ],
)
def test_the_kernel_composes_two_characters_only_where_the_text_holds_both(jit, text, composite):
    from neardup.core import _jit

    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    second = {"\uff9e": 0x3099}.get(text[-1], ord(text[-1]))
    made, width = _jit._composite(data, len(data), np.uint32(second), _fold.fold_table())
    assert made == (ord(composite) if composite else 0)
    assert width == (len(text[-2].encode("utf-8")) if composite else 0)


def test_a_text_that_expands_many_times_over_is_read_whole(jit):
    # Each ﷺ (3 bytes) is 18 characters (33 bytes): more than the room a byte in is given, so
    # the kernel stops for room in the middle of a text, and must be given more each time
    # (given what a byte in needs, it would stop there again for ever: run in a thread).
    texts = ["a", "ﷺ" * 2000, "㍿" * 3000 + " end", "b"]
    out: list[_tokens.Tokens] = []
    worker = threading.Thread(
        target=lambda: out.append(_tokens.Tokens(texts, jit=True, tokenizer=M)), daemon=True
    )
    worker.start()
    worker.join(timeout=300)  # well under a second when it works
    assert out, "the compiled tokeniser never finished"
    assert doc_words(out[0]) == [multilingual_words(t) for t in texts]


def one_of_each_class() -> list[str]:
    """A character of each value of ``char_classes``' low eight bits (Grapheme_Cluster_Break,
    Indic_Conjunct_Break, word, unspaced: what the kernel's moves read) among the characters
    it reads itself (neither dropped nor special), the smallest non-ASCII one where there is
    one; and the ASCII ones that end a word or continue it."""
    classes = _scripts.char_classes()[:0x30000]
    fold = _fold.fold_table()[:0x30000]
    read = ((classes & _scripts.DROP_BIT) == 0) & ((fold & np.uint32(_fold.FOLD_SPECIAL)) == 0)
    read[0xD800:0xE000] = False
    read[:0x80] = False
    low = classes & 0xFF
    firsts = {int(low[c]): chr(c) for c in np.flatnonzero(read)[::-1].tolist()}
    return sorted(firsts.values()) + list(" ,\n-a_1")


def test_every_three_classes_in_a_row_have_the_references_words(jit):
    # The kernel's state between characters and the next one's classes make its moves
    # (``core._jit._TRANSITIONS``): every value of the state after two characters, with every
    # next one, Indic conjuncts (Consonant, Linker, Consonant), Prepend, Hangul jamo and ASCII
    # separators and letters after an unspaced cluster among them.
    chars = one_of_each_class()
    assert len(chars) > 25
    texts = [a + b + c for a in chars for b in chars for c in chars]
    got = doc_words(_tokens.Tokens(texts, jit=True, tokenizer=M))
    wrong = [t for t, words in zip(texts, got, strict=True) if words != multilingual_words(t)]
    assert wrong == []
