"""Where a text meets protected sets, case by case: word spans in the original characters, the
merged spans, a Protection's caps and matches, the sample cap's share, and the n-gram index's
hashes and verdicts against their definitions (docs/algorithm.md section 5)."""

import json
from pathlib import Path

import numpy as np
import pytest

from neardup.core._decont import decontaminate, decontaminate_with
from neardup.core._matches import Match, Protection, merged_spans, sample_capped, word_spans
from neardup.core._ngrams import (
    NgramIndex,
    charged_words,
    check_n,
    contaminated,
    first_shared_ngram,
    gram_hashes,
)
from neardup.core._protected import ProtectedFormat, parse_protected_set
from neardup.core.errors import ParameterError
from neardup.core.minhash import Doc

WORDS13 = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu"


def _set(name, texts, n=2, tokenizer="words"):
    body = "\n".join(json.dumps({"id": f"{name}{k}", "t": t}) for k, t in enumerate(texts))
    return parse_protected_set(name, body, ProtectedFormat.JSONL, n, tokenizer)


@pytest.mark.parametrize(
    ("text", "tokenizer", "found"),
    [
        ("Ab, cd", "words", (["ab", "cd"], [(0, 2), (4, 6)])),
        ("", "words", ([], [])),
        ("中文 ab", "multilingual", (["中", "文", "ab"], [(0, 1), (1, 2), (3, 5)])),
        ("中文 ab", "words", (["中文", "ab"], [(0, 2), (3, 5)])),
        # U+0130 lowers to "i" and a combining dot (no word character): spans stay in the text
        ("aİb İ c", "words", (["ai", "b", "i", "c"], [(0, 2), (2, 3), (4, 5), (6, 7)])),
        ("İİ x", "words", (["i", "i", "x"], [(0, 1), (1, 2), (3, 4)])),
        ("xİ yz", "words", (["xi", "yz"], [(0, 2), (3, 5)])),
    ],
)
def test_word_spans_are_the_words_at_their_original_characters(text, tokenizer, found):
    assert word_spans(text, tokenizer) == found


def test_word_spans_default_to_the_words_tokenizer():
    assert word_spans("中文 ab") == (["中文", "ab"], [(0, 2), (3, 5)])


def _m(start, end, set_="s"):
    return Match(set_, ("i",), "g", start, end)


@pytest.mark.parametrize(
    ("spans", "merged"),
    [
        ([], []),
        ([(5, 9), (0, 3)], [(0, 3), (5, 9)]),
        ([(0, 3), (3, 5)], [(0, 5)]),
        ([(0, 3), (4, 5)], [(0, 3), (4, 5)]),
        ([(0, 10), (2, 4), (4, 12)], [(0, 12)]),
        ([(0, 10), (2, 4)], [(0, 10)]),
        ([(2, 4), (2, 4)], [(2, 4)]),
    ],
)
def test_merged_spans_join_overlapping_and_touching_windows(spans, merged):
    assert merged_spans([_m(a, b, f"s{k}") for k, (a, b) in enumerate(spans)]) == merged


@pytest.mark.parametrize("cap", [0, -1, True, 1.0, "2"])
def test_a_bad_item_cap_is_refused(cap):
    with pytest.raises(ParameterError) as caught:
        Protection([], item_cap=cap)
    assert str(caught.value) == f"item cap must be a whole number >= 1, got {cap!r}"


def test_a_protection_of_no_sets_uses_the_defaults_and_finds_nothing():
    none = Protection([])
    assert (none.n, none.tokenizer, none.sets, none.capped, none.item_cap) == (
        13, "words", [], {}, None)  # fmt: skip
    assert none.matches_many([]) == [] and none.matches_many([WORDS13]) == [[]]


def test_a_protections_caps_are_per_set():
    one = _set("a", ["x y", "x y z", "p q"])
    two = _set("b", ["x y", "p q"], tokenizer="words")
    prot = Protection([one, two], item_cap=1, capped=["p q", "never"])
    assert (prot.n, prot.tokenizer, prot.item_cap) == (2, "words", 1)
    assert prot.capped == {"a": {"x y", "p q"}, "b": {"p q"}}
    assert prot.matches("X y z") == [
        Match("b", ("b0",), "x y", 0, 3),
        Match("a", ("a1",), "y z", 2, 5),
    ]
    assert prot.matches("p q") == []
    free = Protection([one, two])
    assert free.capped == {"a": set(), "b": set()}
    assert [(m.set, m.items, m.ngram) for m in free.matches("x y")] == [
        ("a", ("a0", "a1"), "x y"), ("b", ("b0",), "x y")]  # fmt: skip
    assert Protection([one], item_cap=2).capped == {"a": set()}


def test_matches_many_scan_what_any_sets_filter_flags():
    one, two = _set("a", ["x y"]), _set("b", ["p q"], tokenizer="words")
    prot = Protection([one, two])
    texts = ["x y", "nothing", "so p q", "", "中文 x y"]
    assert prot.matches_many(texts) == [prot.matches(t) for t in texts]
    assert [len(m) for m in prot.matches_many(texts)] == [1, 0, 1, 0, 1]
    cjk = Protection([_set("c", ["文字"], n=1, tokenizer="multilingual")])
    assert (cjk.n, cjk.tokenizer) == (1, "multilingual")
    assert cjk.matches_many(["中文字"]) == [[Match("c", ("c0",), "文 字", 1, 3)]]


def test_sample_capped_counts_texts_not_matches_and_refuses_a_bad_share():
    sets = [_set("a", ["x y", "p q"])]
    sample = ["x y x y", "x y", "p q", "none", "none"]
    assert sample_capped(sets, sample, 0.0) == {"x y", "p q"}
    assert sample_capped(sets, sample, 0.2) == {"x y"}
    assert sample_capped(sets, sample, 0.4) == set()
    assert sample_capped(sets, iter(sample), 1.0) == set()
    assert sample_capped(sets, [], 0.0) == set()
    for share in (-0.1, 1.5):
        with pytest.raises(ParameterError) as caught:
            sample_capped(sets, sample, share)
        assert str(caught.value) == f"sample share must be between 0 and 1, got {share!r}"


def test_sample_capped_reads_a_batch_of_exactly_1024_texts():
    sets = [_set("a", ["x y"])]
    sample = ["x y"] * 3 + ["none"] * 1021
    assert sample_capped(sets, sample, 3 / 1024 - 1e-9) == {"x y"}
    assert sample_capped(sets, sample, 3 / 1024) == set()
    assert sample_capped(sets, [*sample, "x y"], 3 / 1024) == {"x y"}


@pytest.mark.parametrize("n", [0, -1, True, 1.0, None])
def test_check_n_refuses_what_is_not_a_whole_number_of_words(n):
    with pytest.raises(ParameterError) as caught:
        check_n(n)
    assert str(caught.value) == f"n (words per n-gram) must be a whole number >= 1, got {n!r}"


def test_charged_words_by_default_and_empty():
    empty = charged_words([])
    assert (empty.tolist(), empty.dtype) == ([], np.int64)
    out = charged_words(["a b", WORDS13 + " x"])
    assert (out.tolist(), out.dtype) == ([13, 14], np.int64)
    assert charged_words(["a b c"], 1).tolist() == [3]
    assert charged_words(["请检查"], 2, "multilingual").tolist() == [3]
    assert charged_words(["请检查"], 2).tolist() == [2]
    with pytest.raises(ParameterError, match="tokenizer"):
        charged_words(["a"], 2, "bytes")
    with pytest.raises(ParameterError, match="got 0"):
        charged_words(["a"], 0)


def _fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) % 2**64
    return h


def test_gram_hashes_are_fnv1a_64_of_the_utf8_bytes():
    grams = ["a b", "é", "", "请 检"]
    assert gram_hashes(grams).tolist() == [_fnv1a64(g.encode()) for g in grams]
    assert gram_hashes([]).tolist() == []


def test_first_shared_ngram_and_contaminated_by_their_defaults():
    grams = {WORDS13, "b c"}
    assert first_shared_ngram(f"x {WORDS13.upper()}!", grams) == WORDS13
    assert first_shared_ngram("a b c d", grams, 2) == "b c"
    assert first_shared_ngram("a b", grams, 2) is None
    assert contaminated("x " + WORDS13, grams) and not contaminated("a b c", grams)
    # two Han characters weigh 76/64 English words: one window of 1; at 2 a whole item (its
    # anchor weighs 2 x 64 x 12 // 29 = 52), at 3 lighter than its anchor (79): never found
    assert first_shared_ngram("中文", {"中 文"}, 1, "multilingual") == "中 文"
    assert first_shared_ngram("x 中文 y", {"中 文"}, 2, "multilingual") == "中 文"
    assert first_shared_ngram("中文", {"中 文"}, 3, "multilingual") is None
    assert first_shared_ngram("中文", {"中 文"}, 2) is None
    assert contaminated("中文", {"中 文"}, 1, "multilingual")
    assert not contaminated("中文", {"中 文"}, 2)


def test_an_ngram_index_holds_its_grams_sorted_hashes_and_defaults():
    index = NgramIndex({WORDS13})
    assert (index.n, index.tokenizer, index.grams) == (13, "words", {WORDS13})
    assert index.contaminated_many(["x " + WORDS13, WORDS13[:-3]]).tolist() == [True, False]
    grams = {"b c", "a b", "c d"}
    index = NgramIndex(grams, 2, "multilingual")
    assert index.hashes.tolist() == sorted(gram_hashes(sorted(grams)).tolist())
    assert index.tokenizer == "multilingual"
    with pytest.raises(ParameterError, match="tokenizer"):
        NgramIndex(grams, 2, "bytes")
    with pytest.raises(ParameterError, match="got 0"):
        NgramIndex(grams, 0)


def test_contains_is_a_search_in_the_sorted_hashes():
    grams = ["a b", "c d", "e f"]
    index = NgramIndex(set(grams), 2)
    hashes = gram_hashes(grams)
    probe = np.array([*hashes, 0, 2**64 - 1, *(hashes + 1)], dtype=np.uint64)
    assert index.contains(probe).tolist() == [True] * 3 + [False] * 5
    assert NgramIndex(set(), 2).contains(hashes).tolist() == [False] * 3
    assert NgramIndex({"a b"}, 2).contains(np.array([], dtype=np.uint64)).tolist() == []


def test_contaminated_many_matches_contaminated_text_by_text():
    grams = {"中 文 字", "b c"}
    texts = ["b c", "a b", "中文字", "", "b", "x b c y", "中文"]
    for tokenizer in ("words", "multilingual"):
        index = NgramIndex(grams, 2, tokenizer)
        got = index.contaminated_many(texts).tolist()
        assert got == [contaminated(t, grams, 2, tokenizer) for t in texts]
    assert NgramIndex(grams, 2, "multilingual").contaminated_many(texts).tolist() == [
        True, False, True, False, False, True, False]  # fmt: skip
    assert NgramIndex(grams, 2).contaminated_many([]).tolist() == []
    assert NgramIndex(set(), 2).contaminated_many(["b c"]).tolist() == [False]
    # a text of fewer than n words is one "shingle" of its words, never an n-gram
    assert NgramIndex({"b c"}, 3).contaminated_many(["b c"]).tolist() == [False]


def test_decontaminate_reads_13_gram_words_by_default(tmp_path: Path):
    path = tmp_path / "p.txt"
    path.write_text(WORDS13 + "\n请检查", encoding="utf-8")
    docs = [Doc("a", WORDS13), Doc("b", WORDS13[:-3]), Doc("c", "检查"), Doc("d", "请检")]
    assert [d.id for d in decontaminate(docs, [path])] == ["b", "c", "d"]
    assert [d.id for d in decontaminate(docs, [path], 2)] == ["c", "d"]
    assert [d.id for d in decontaminate(docs, [path], 2, "multilingual")] == ["c", "d"]
    assert [d.id for d in decontaminate(docs, [path], 1, "multilingual")] == []
    assert [d.id for d in decontaminate(docs, [path], n=1)] == ["c", "d"]
    with pytest.raises(ParameterError, match="got 0"):
        decontaminate(docs, [path], 0)
    index = NgramIndex({"检 查"}, 1, "multilingual")
    assert [d.id for d in decontaminate_with(docs, index)] == ["a", "b", "d"]


def test_only_the_texts_a_hash_flags_are_checked_word_by_word(monkeypatch):
    import neardup.core._ngrams as ngrams_module

    checked = []

    exact = ngrams_module.NgramIndex.contaminated

    def spy(self, text):
        checked.append(text)
        return exact(self, text)

    monkeypatch.setattr(ngrams_module.NgramIndex, "contaminated", spy)
    index = NgramIndex({"b c"}, 2)
    texts = ["a b", "B, c!", "x y z", "b", ""]
    assert index.contaminated_many(texts).tolist() == [False, True, False, False, False]
    assert checked == ["B, c!"]
    empty = NgramIndex(set(), 2).contains(gram_hashes(["b c"]))
    assert (empty.dtype, empty.tolist()) == (np.bool_, [False])
