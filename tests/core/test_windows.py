"""Decontamination windows (core._windows): ``words`` keeps the contract's n consecutive words;
``multilingual`` windows weigh n English words in every script, are the same in the protected
and the corpus paths, and a quote of any protected window is flagged."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core._ngrams import NgramIndex, contaminated, window_spans
from neardup.core._text import ngrams, words
from neardup.core._tokens import Tokens
from neardup.core._windows import (
    CHARACTER_WEIGHTS,
    FLOOR_WEIGHTS,
    SCRIPT_WEIGHTS,
    WEIGHT_UNIT,
    anchor_weight,
    buffer_weights,
    is_whole,
    protected_grams,
    window_grams,
    window_version,
    windows,
    word_weights,
)
from neardup.core.engine import (
    MinhashParams,
    ProtectedFormat,
    Protection,
    parse_protected_set,
)
from tests.strategies import any_text

M = "multilingual"

#: Words of several scripts, each a whole word of the multilingual tokenizer (unspaced scripts:
#: one grapheme cluster), as they read after normalization; clusters of one to five code points
#: (Thai tone marks, Khmer and Tibetan subscripts, Burmese medials).
PIECES = {
    "latin": ["tom", "found", "a", "shell", "river", "42"],
    "cyrillic": ["дом", "река", "нашёл"],
    "arabic": ["البيت", "الولد", "مع"],
    "tamil": ["தமிழ்", "நாடு"],
    "hangul": ["한국어", "사람"],
    "han": ["中", "文", "字", "计", "算"],
    "kana": ["か", "な", "カ", "ナ"],
    "thai": ["ก", "ข", "ดี", "วั", "กุ้", "ຫຼ"],
    "khmer": ["ក", "ខ្ម", "ង", "ក្នុ"],
    "myanmar": ["က", "ခ", "မြ", "ကြို့"],
    "tibetan": ["བ", "ད", "སྐ", "བྱོ"],
}
_UNSPACED = {"han", "kana", "thai", "khmer", "myanmar", "tibetan"}


@st.composite
def multilingual_text(draw: st.DrawFn, max_runs: int = 12) -> str:
    """Runs of words of random scripts: words of a spaced script apart, clusters of an
    unspaced one written together, runs apart."""
    runs = []
    for _ in range(draw(st.integers(1, max_runs))):
        script = draw(st.sampled_from(sorted(PIECES)))
        drawn = draw(st.lists(st.sampled_from(PIECES[script]), min_size=1, max_size=30))
        runs.append(("" if script in _UNSPACED else " ").join(drawn))
    return " ".join(runs)


def _reference_windows(w: list[str], n: int) -> list[tuple[int, int]]:
    """Written from the definition with plain loops: from every word, the fewest words whose
    weights (by ``SCRIPT_WEIGHTS``; by ``CHARACTER_WEIGHTS`` times the word's code points; else
    one unit word) reach ``n`` English words."""

    def weight(word: str) -> int:
        for _, value, ranges in SCRIPT_WEIGHTS:
            if any(lo <= ord(word[0]) <= hi for lo, hi in ranges):
                return value
        for _, value, ranges in CHARACTER_WEIGHTS:
            if any(lo <= ord(word[0]) <= hi for lo, hi in ranges):
                return value * len(word)
        return WEIGHT_UNIT

    out = []
    for lo in range(len(w)):
        total = 0
        for hi in range(lo, len(w)):
            total += weight(w[hi])
            if total >= n * WEIGHT_UNIT:
                out.append((lo, hi + 1))
                break
    return out


def test_window_version_names_both_definitions():
    assert window_version("words") == "words"
    assert window_version(M) == "weighted-3"
    assert MinhashParams().window_version == "words"
    assert MinhashParams(tokenizer=M).window_version == "weighted-3"


def test_weights_follow_the_script_of_a_words_first_character():
    got = word_weights(["the", "中", "か", "한국어", "дом", "தமிழ்", "tom"]).tolist()
    assert got == [64, 38, 16, 125, 114, 141, 64]
    # every weight is at least 1: a window always ends
    assert min(value for _, value, _ in SCRIPT_WEIGHTS + CHARACTER_WEIGHTS) >= 1


def test_clusters_of_unspaced_brahmic_scripts_weigh_their_code_points():
    # Thai, Lao, Khmer, Burmese, Tibetan: 12/64 of an English word a code point
    got = word_weights(["ก", "ดี", "กุ้", "ຫຼ", "ក", "ខ្ម", "ក្នុ", "က", "မြ", "ཀ", "སྐ"]).tolist()
    assert got == [12, 24, 36, 24, 12, 36, 48, 12, 24, 12, 24]


def test_a_runs_weight_does_not_depend_on_where_clusters_break():
    """The same code points cut into other clusters (a tokenizer revision that merges a
    Khmer subscript into its cluster) weigh the same, so the window covers the same text."""
    apart, together = ["ក្", "នុ", "ង"], ["ក្នុ", "ង"]
    assert word_weights(apart).sum() == word_weights(together).sum() == 5 * 12


def test_the_batch_path_counts_code_points_not_bytes():
    """A Thai code point is three UTF-8 bytes: the buffer path counts it once."""
    texts = ["กุ้ง" * 20, "x ขคง", "中ดี"]
    tokens = Tokens(texts, tokenizer=M)
    got = buffer_weights(tokens.buf, tokens.word_start, tokens.word_end).tolist()
    assert got == word_weights([w for t in texts for w in words(t, M)]).tolist()


def test_a_window_covers_13_english_words_worth_in_every_script():
    thai = words("ก" * 70, M)
    assert windows(thai, 13, M) == [(0, 70)]  # 70 x 12 = 840 >= 13 x 64 = 832; 69 are short
    assert windows(thai[:69], 13, M) == []
    marked = words("กุ้" * 24, M)  # 24 clusters of 3 code points: 72 x 12 = 864
    assert windows(marked, 13, M) == [(0, 24)]
    assert windows(marked[:23], 13, M) == []  # 69 x 12 = 828
    han = words("中" * 22, M)
    assert windows(han, 13, M) == [(0, 22)]  # 22 x 38 = 836; 21 x 38 = 798 is short
    assert windows(han[:21], 13, M) == []
    tamil = ["தமிழ்"] * 6
    assert windows(tamil, 13, M) == [(0, 6)]  # 6 x 141 = 846
    mixed = ["中"] * 16 + ["tom", "found", "a"]  # 608 + 192 = 800, short; one more word reaches
    assert windows(mixed, 13, M) == []
    assert windows([*mixed, "shell"], 13, M) == [(0, 20)]


@given(st.lists(st.sampled_from(["a", "b", "c", "中", "ก"]), max_size=30), st.integers(1, 15))
def test_words_windows_are_the_contracts_n_grams(w: list[str], n: int):
    # ``words`` is untouched: every run of n words, whatever script the words are of
    assert windows(w, n) == [(i, i + n) for i in range(len(w) - n + 1)]
    assert window_grams(w, n) == list(ngrams(w, n))


@settings(max_examples=60, deadline=None)
@given(st.lists(any_text, min_size=1, max_size=4), st.integers(1, 6))
def test_words_mode_is_the_contract_in_every_path(texts: list[str], n: int):
    """Under ``words`` a window is n words of ``re.findall(r"\\w+", text.lower())`` (the
    contract, docs/algorithm.md), in the scalar and the batch paths alike."""
    contract = [re.findall(r"\w+", t.lower()) for t in texts]
    expected = [[" ".join(w[i : i + n]) for i in range(len(w) - n + 1)] for w in contract]
    assert [window_grams(words(t), n) for t in texts] == expected
    tokens = Tokens(texts)
    start, end, doc = window_spans(tokens, n)
    buf = tokens.buf.tobytes()
    got: list[list[str]] = [[] for _ in texts]
    for s, e, d in zip(start.tolist(), end.tolist(), doc.tolist(), strict=True):
        got[d].append(buf[s:e].decode("utf-8"))
    assert got == expected


@settings(max_examples=80, deadline=None)
@given(multilingual_text(), st.integers(1, 13))
def test_multilingual_windows_match_the_definition(text: str, n: int):
    w = words(text, M)
    assert windows(w, n, M) == _reference_windows(w, n)


@pytest.mark.parametrize("jit", [False, True])
@settings(max_examples=40, deadline=None)
@given(texts=st.lists(multilingual_text(), min_size=1, max_size=5), n=st.integers(1, 13))
def test_batch_windows_are_the_scalar_windows(jit: bool, texts: list[str], n: int):
    """The protected path (``window_grams`` of ``words``) and the corpus path (byte spans of a
    batch's buffer, numpy or compiled tokens) make the very same windows."""
    tokens = Tokens(texts, jit=jit, tokenizer=M)
    assert (tokens.kernels is not None) == jit
    start, end, doc = window_spans(tokens, n, M)
    buf = tokens.buf.tobytes()
    got = [[] for _ in texts]
    for s, e, d in zip(start.tolist(), end.tolist(), doc.tolist(), strict=True):
        got[d].append(buf[s:e].decode("utf-8"))
    assert got == [window_grams(words(t, M), n, M) for t in texts]


@settings(max_examples=60, deadline=None)
@given(
    item=multilingual_text(),
    before=multilingual_text(max_runs=3),
    after=multilingual_text(max_runs=3),
    n=st.integers(1, 13),
    pick=st.integers(0, 10**6),
)
def test_a_quote_of_any_protected_window_is_flagged(
    item: str, before: str, after: str, n: int, pick: int
):
    protected = parse_protected_set(
        "eval", json.dumps({"id": "q", "text": item}), ProtectedFormat.JSONL, n, M
    )
    found = protected_grams(words(item, M), n, M)
    if not found:
        assert protected.grams == {}
        return
    # the quote: the words of one protected window (or the whole item, when it is protected
    # whole), as they are written, between other text
    assert set(protected.grams) == set(found)
    quote = found[pick % len(found)]
    doc = f"{before} {quote} {after}"
    assert contaminated(doc, set(protected.grams), n, M)
    assert protected.index.contaminated_many([doc, before]).tolist()[0]
    # the match names the window and points at the quote in the text
    matches = Protection([protected]).matches(doc)
    at = len(before) + 1
    assert any(m.ngram == quote and (m.start, m.end) == (at, at + len(quote)) for m in matches)


def test_weighted_windows_are_not_13_tokens():
    """The bug the weights fix: 13 Thai clusters (about 3 English words) are no window."""
    thai = "กขคงจฉชซฌญฎฏฐ"
    body = json.dumps({"id": "q", "text": thai})
    protected = parse_protected_set("eval", body, ProtectedFormat.JSONL, 13, M)
    assert protected.grams == {}
    index = NgramIndex({" ".join(words(thai, M))}, 13, M)
    assert index.contaminated_many([f"x {thai} y"]).tolist() == [False]


THAI_ITEM = "กขคงจฉชซฌญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหอฮ"  # 40 consonants: 480/64, no window


def test_a_short_item_is_protected_as_a_whole():
    """40 Thai code points weigh 480/64 English words (no window of 13) and 1080/64 by
    FLOOR_WEIGHTS (at least 13): the item is its own n-gram, found whole in a document."""
    w = words(THAI_ITEM, M)
    assert windows(w, 13, M) == [] and is_whole(w, 13, M)
    assert FLOOR_WEIGHTS["Thai"] * 40 >= 13 * WEIGHT_UNIT > CHARACTER_WEIGHTS[0][1] * 40
    protected = parse_protected_set("eval", THAI_ITEM, ProtectedFormat.TEXT, 13, M)
    assert list(protected.grams) == [" ".join(w)]
    assert contaminated(f"x {THAI_ITEM} y", set(protected.grams), 13, M)
    assert protected.index.contaminated_many([f"เริ่ม {THAI_ITEM} จบ"]).tolist() == [True]
    assert protected.hits(f"เริ่ม {THAI_ITEM}") == [("1", " ".join(w))]


def test_a_whole_item_with_one_word_changed_or_cut_is_not_found():
    changed = THAI_ITEM[:20] + "ก" + THAI_ITEM[21:]  # one consonant replaced
    cut = THAI_ITEM[:-1]
    protected = parse_protected_set("eval", THAI_ITEM, ProtectedFormat.TEXT, 13, M)
    texts = [f"x {changed} y", f"x {cut} y", THAI_ITEM[:30]]
    assert [contaminated(t, set(protected.grams), 13, M) for t in texts] == [False] * 3
    assert protected.index.contaminated_many(texts).tolist() == [False] * 3


def test_an_item_under_the_floor_protects_nothing():
    # 30 x 27 = 810 < 832: under the floor; 31 x 27 = 837 reaches it
    assert not is_whole(words(THAI_ITEM[:30], M), 13, M)
    assert is_whole(words(THAI_ITEM[:31], M), 13, M)
    assert parse_protected_set("e", THAI_ITEM[:30], ProtectedFormat.TEXT, 13, M).grams == {}
    # spaced scripts weigh their window weights: a 12-word text is never protected whole
    assert not is_whole(words("one two three four five six seven eight nine ten a b", M), 13, M)
    assert not is_whole(["ก"] * 80, 13, "words")


def test_every_whole_item_has_an_anchor():
    """A text reaching the floor weighs at least ``anchor_weight(n)`` by the window weights."""
    for n in (1, 2, 5, 13, 20):
        for name, weight, _ in (*SCRIPT_WEIGHTS, *CHARACTER_WEIGHTS):
            floor = FLOOR_WEIGHTS.get(name, weight)
            assert n * WEIGHT_UNIT * weight // floor >= anchor_weight(n)
    assert anchor_weight(13) == 344


#: Runs of letters of the scripts weighed for whole items, as long as whole items are (Han 10
#: to 21 characters, Thai and Khmer 31 to 69, kana 24 to 51) and around them.
unspaced_run = st.text(
    alphabet=st.sampled_from(list("กขคงจฉ中文字かなカナកខគ")), min_size=5, max_size=70
)


@pytest.mark.parametrize("jit", [False, True])
@settings(max_examples=40, deadline=None)
@given(
    items=st.lists(st.one_of(multilingual_text(), unspaced_run), min_size=1, max_size=4),
    texts=st.lists(multilingual_text(), min_size=1, max_size=4),
    n=st.integers(1, 13),
    pick=st.integers(0, 10**6),
)
def test_batch_verdicts_with_whole_items_are_the_scalar_ones(
    jit: bool, items: list[str], texts: list[str], n: int, pick: int
):
    """Short items (whole) and windows alike: the hash path's verdicts are the reference's,
    and a document quoting one of the grams is flagged by both."""
    grams: set[str] = set()
    for item in items:
        grams.update(protected_grams(words(item, M), n, M))
    if grams:
        texts = [*texts, f"x {sorted(grams)[pick % len(grams)]} y"]
    index = NgramIndex(grams, n, M)
    tokens = Tokens(texts, jit=jit, tokenizer=M)
    assert (tokens.kernels is not None) == jit
    # the anchors' hash pass (numpy or compiled tokens) finds the texts the exact spans find
    exact = {i for i, t in enumerate(texts) if index.anchors.spans(words(t, M))}
    assert set(index.anchors.documents(tokens, n).tolist()) == exact
    want = [contaminated(t, grams, n, M) for t in texts]
    assert index.contaminated_many(texts).tolist() == want
    assert [index.contaminated(t) for t in texts] == want
    if grams:
        assert want[-1]


def test_a_protected_set_names_its_whole_items_as_weighing_finds_them():
    """A protected set hands its index the n-grams it protected whole; an index given only the
    n-grams (the Spark executors', ``protected_ngrams``') finds the same ones by weighing."""
    from neardup.core._ngrams import Anchors

    han = "评估集中的这道题目不应该出现在训练数据里"  # 20 Han characters: no window, whole
    body = "\n".join(
        json.dumps({"id": str(i), "text": t}, ensure_ascii=False)
        for i, t in enumerate([THAI_ITEM, han, THAI_ITEM * 2, "a short english text"])
    )
    protected = parse_protected_set("eval", body, ProtectedFormat.JSONL, 13, M)
    whole = {" ".join(words(THAI_ITEM, M)), " ".join(words(han, M))}
    assert protected.wholes == whole and set(protected.grams) > whole
    weighed = Anchors.of(protected.grams.keys(), 13, M)
    assert weighed.by_anchor == protected.index.anchors.by_anchor
    assert sorted(g for v in weighed.by_anchor.values() for _, g in v) == sorted(whole)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.one_of(multilingual_text(), unspaced_run), min_size=1, max_size=5))
def test_the_batch_weights_are_the_scalar_weights(texts: list[str]):
    """``buffer_weights`` (first code point decoded in numpy, code points counted only for the
    scripts weighed per code point) gives every word ``word_weights``' weight."""
    tokens = Tokens(texts, tokenizer=M)
    got = buffer_weights(tokens.buf, tokens.word_start, tokens.word_end).tolist()
    assert got == word_weights([w for t in texts for w in words(t, M)]).tolist()


def _reference_anchors(grams: list[str], n: int) -> list[tuple[str, int, str]]:
    """(anchor, words, gram) of every gram lighter than a window, in order, weighed one at a
    time with plain loops: its first words reaching ``anchor_weight(n)``."""
    out = []
    for gram in grams:
        w = gram.split(" ")
        if sum(word_weights(w).tolist()) >= n * WEIGHT_UNIT:
            continue
        total = 0
        for i, weight in enumerate(word_weights(w).tolist()):
            total += weight
            if total >= anchor_weight(n):
                out.append((" ".join(w[: i + 1]), len(w), gram))
                break
    return out


def _as_anchors(reference: list[tuple[str, int, str]]) -> tuple[object, ...]:
    """What ``Anchors`` holds of them: by anchor, and the arrays sorted by anchor hash."""
    from neardup.core._ngrams import gram_hashes

    by_anchor: dict[str, list[tuple[int, str]]] = {}
    for anchor, size, gram in reference:
        by_anchor.setdefault(anchor, []).append((size, gram))
    hashes = gram_hashes([a for a, _, _ in reference])
    order = np.argsort(hashes, kind="stable")
    sizes = np.array([s for _, s, _ in reference], dtype=np.int64)[order]
    wholes = gram_hashes([g for _, _, g in reference])[order]
    return by_anchor, hashes[order].tolist(), sizes.tolist(), wholes.tolist()


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(st.one_of(multilingual_text(), unspaced_run), min_size=1, max_size=6),
    n=st.integers(1, 13),
)
def test_anchors_weighed_at_once_are_the_ones_weighed_one_gram_at_a_time(items: list[str], n: int):
    """``Anchors.of`` weighs every gram in one numpy pass over one buffer: the whole items,
    their anchors, sizes and hashes are the ones a gram-by-gram weighing finds, in the same
    order (bare grams: theirs; the whole items named: sorted)."""
    from neardup.core._ngrams import Anchors

    grams: list[str] = []
    wholes: set[str] = set()
    for item in items:
        found = protected_grams(words(item, M), n, M)
        grams += [g for g in found if g not in grams]
        if found and not windows(words(item, M), n, M):
            wholes.update(found)
    reference = _reference_anchors(grams, n)
    assert {g for _, _, g in reference} <= wholes
    for got, want in (
        (Anchors.of(grams, n, M), reference),
        (Anchors.of(grams, n, M, wholes), _reference_anchors(sorted(wholes), n)),
    ):
        held = got.by_anchor, got.anchor_hashes.tolist(), got.sizes.tolist()
        assert (*held, got.whole_hashes.tolist()) == _as_anchors(want)


#: ``unspaced_run``, and shorter: at a small n a whole item is a few Han characters or kana, its
#: anchor under eight bytes.
any_run = st.text(
    alphabet=st.sampled_from(list("กขคงจฉ中文字かなカナកខគ")), min_size=1, max_size=70
)


@pytest.mark.parametrize("jit", [False, True])
@settings(max_examples=40, deadline=None)
@given(
    items=st.lists(st.one_of(multilingual_text(), any_run), min_size=1, max_size=4),
    texts=st.lists(multilingual_text(max_runs=3), min_size=1, max_size=4),
    n=st.integers(1, 13),
    pick=st.integers(0, 10**6),
)
def test_anchors_are_looked_up_at_every_word_one_begins(
    jit: bool, items: list[str], texts: list[str], n: int, pick: int
):
    """The batch path weighs and hashes anchors only at the words whose leading bytes begin
    one (``Anchors.starts``): every word where an anchor's words are, found by plain loops, is
    among them, and the documents it finds are the exact check's."""
    grams = {g for item in items for g in protected_grams(words(item, M), n, M)}
    anchors = NgramIndex(grams, n, M).anchors
    if anchors.by_anchor:  # an anchor alone (its item may not follow), and its whole item
        anchor = sorted(anchors.by_anchor)[pick % len(anchors.by_anchor)]
        texts = [*texts, f"{texts[0]} {anchor} {texts[-1]}", f"x {anchor} y"]
        texts.append(f"x {anchors.by_anchor[anchor][0][1]}")
    tokens = Tokens(texts, jit=jit, tokenizer=M)
    want: set[int] = set()
    offset = 0
    for text in texts:
        w = words(text, M)
        for lo in range(len(w)):
            for hi in range(lo + 1, min(lo + 40, len(w)) + 1):  # an anchor: under 40 words
                if " ".join(w[lo:hi]) in anchors.by_anchor:
                    want.add(offset + lo)
        offset += len(w)
    assert want <= set(anchors.starts(tokens.buf, tokens.word_start).tolist())
    exact = {i for i, t in enumerate(texts) if anchors.spans(words(t, M))}
    assert set(anchors.documents(tokens, n).tolist()) == exact
    if anchors.by_anchor:
        assert len(texts) - 1 in exact
