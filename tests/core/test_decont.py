"""Decontamination: 13-grams anywhere, any case or punctuation; protected files; streaming."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core._ngrams import NgramIndex, first_shared_ngram
from neardup.core.engine import charged_words, decontaminate_with, ngrams, words
from neardup.core.errors import CorpusError, ParameterError
from neardup.core.minhash import Doc, contaminated, decontaminate, protected_ngrams
from tests.fixtures import write_protected
from tests.strategies import any_text, texts

SHELL = "Tom found a shiny red shell by the river and carried it home to show his sister."


@pytest.fixture
def story(tmp_path):
    path = tmp_path / "story.txt"
    path.write_text(SHELL, encoding="utf-8")
    return path


@pytest.fixture
def grams(story):
    return protected_ngrams([story])


def test_spec_example_is_contaminated_in_any_case_and_punctuation(grams):
    doc = "... and then TOM FOUND A SHINY, RED shell by the river and carried it home to show ..."
    assert contaminated(doc, grams)
    assert (
        first_shared_ngram(doc, grams)
        == "tom found a shiny red shell by the river and carried it home"
    )


def test_twelve_shared_words_do_not_contaminate(grams):
    assert not contaminated("so tom found a shiny red shell by the river and carried it", grams)
    # Substring matching on raw text would find this one; word n-grams do not.
    assert not contaminated("Tom found a shiny red shellby the river and carried it home", grams)


def test_the_last_window_of_a_document_is_checked(grams):
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    text = " ".join([*words, "tom found a shiny red shell by the river and carried it home"])
    assert contaminated(text, grams)
    assert contaminated("Tom found a shiny red shell by the river and carried it home", grams)


def test_protected_jsonl_values_nested_and_plain_files(tmp_path):
    jsonl, plain = write_protected(tmp_path)
    grams = protected_ngrams([jsonl, plain])
    assert contaminated("Tom found a shiny red shell by the river and carried it home!", grams)
    # nested object value and a string inside a list
    assert contaminated(
        "in the middle of the night the old lighthouse keeper climbed the stairs one last", grams
    )
    assert contaminated(
        "the river ran quietly past the mill while the children played games in the", grams
    )
    # a plain file is one text, across its line breaks
    assert contaminated("once upon a time in a kingdom by the sea there lived a baker", grams)


def test_ids_tags_case_ids_and_scorer_args_are_not_protected(tmp_path):
    jsonl, _ = write_protected(tmp_path)
    grams = protected_ngrams([jsonl])
    for text in [
        "math-001 the quick brown fox jumps over the lazy dog again and again today",
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi",
        "one two three four five six seven eight nine ten eleven twelve thirteen",
        "q2 never protected because ids are labels and not text that a model sees",
    ]:
        assert not contaminated(text, grams), text


def test_a_bad_jsonl_line_raises_naming_its_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"q": "fine"}\n\n["an", "array"]\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:3"):
        protected_ngrams([path])
    path.write_text('{"q": "fine"}\n{"q": \n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:2"):
        protected_ngrams([path])


def test_short_protected_texts_contribute_nothing(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("only twelve words here so nothing at all is protected by this", "utf-8")
    assert protected_ngrams([path]) == set()


def test_decontaminate_drops_contaminated_docs(story):
    docs = [
        Doc("a", "clean text " * 20),
        Doc("b", "x " + SHELL.upper()),
        Doc("c", "tom found a shiny red shell by the river and carried it", {"k": 1}),
    ]
    assert [d.id for d in decontaminate(docs, [story])] == ["a", "c"]
    assert [d.id for d in decontaminate(docs, (str(story),))] == ["a", "c"]


def test_decontaminate_with_a_prepared_index_equals_decontaminate(story, grams):
    docs = [Doc("a", "clean text " * 20), Doc("b", "x " + SHELL), Doc("c", SHELL[:40])]
    expected = [d.id for d in decontaminate(docs, [story])]
    assert [d.id for d in decontaminate_with(docs, NgramIndex(grams))] == expected == ["a", "c"]


@pytest.mark.parametrize(
    "misuse, error, message",
    [
        (lambda story, grams: grams, ParameterError, "got a set of"),
        (lambda story, grams: str(story), ParameterError, "single path"),
        (lambda story, grams: story, ParameterError, "single path"),
        (lambda story, grams: [story.parent / "missing.txt"], CorpusError, "no such file"),
        (lambda story, grams: [story.parent], CorpusError, "not a regular file"),
        (lambda story, grams: sorted(grams), CorpusError, "no such file"),
        (lambda story, grams: [42], ParameterError, "must be paths"),
    ],
)
def test_decontaminate_refuses_anything_but_readable_protected_files(
    story, grams, misuse, error, message
):
    """Passing n-grams or a lone path used to return every document: contaminated ones too."""
    docs = [Doc("b", "x " + SHELL)]
    with pytest.raises(error, match=message):
        decontaminate(docs, misuse(story, grams))  # raises when called, before any document


def test_decontaminate_streams_an_endless_input(story):
    read = []

    def endless():
        for i in itertools.count():
            read.append(i)
            text = SHELL if i % 3 == 1 else f"document number {i} is clean"
            yield Doc(str(i), text)

    out = decontaminate(endless(), [story])
    first = list(itertools.islice(out, 5))
    assert [d.id for d in first] == ["0", "2", "3", "5", "6"]
    assert read == list(range(7))  # read exactly up to the fifth kept document, no further


def test_ngram_match_respects_word_boundaries(grams):
    text = "Atom found a shiny red shell by the river and carried it homework"
    assert not contaminated(text, grams)


def test_decontaminate_reads_lazily_and_fails_fast_if_it_does_not(story):
    def guarded():
        for i in range(1000):
            yield Doc(str(i), f"clean document {i}")
        raise AssertionError("decontaminate read far past what was consumed")

    assert next(decontaminate(guarded(), [story])).id == "0"


@given(
    st.lists(texts(max_words=30), min_size=1, max_size=6), st.lists(texts(max_words=30), max_size=6)
)
def test_ngram_index_verdicts_equal_contaminated(batch, protected_texts):
    n = 4  # short n-grams so random texts share some
    grams = {g for t in protected_texts for g in ngrams(words(t), n)}
    index = NgramIndex(grams, n)
    expected = [contaminated(t, grams, n) for t in batch]
    assert index.contaminated_many(batch).tolist() == expected


def test_ngram_index_on_the_spec_example(grams):
    index = NgramIndex(grams)
    docs = [
        "clean " * 30,
        "x " + SHELL.upper(),
        "tom found a shiny red shell by the river and carried it",
    ]
    assert index.contaminated_many(docs).tolist() == [False, True, False]


def test_checking_a_short_text_costs_memory_of_the_text_not_of_the_set():
    """A binary search in the sorted hashes: ``np.isin`` sorted the whole set on every call
    (0.4 s a 14-word text against a 6 MB set), which shows as memory the size of the set."""
    import tracemalloc

    grams = {f"protected gram number {i}" for i in range(300_000)}
    index = NgramIndex(grams, n=4)
    text = "a short text of fourteen words that shares nothing with the protected set at all"
    tracemalloc.start()
    try:
        assert index.contaminated_many([text]).tolist() == [False]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < index.hashes.nbytes / 4, (peak, index.hashes.nbytes)
    assert index.contaminated_many(["x protected gram number 7 y"]).tolist() == [True]


def test_a_protected_line_with_a_lone_surrogate_is_refused_naming_it(tmp_path):
    """An item id of "\\ud800" was accepted, then every report naming the item failed."""
    path = tmp_path / "evals.jsonl"
    path.write_text('{"id": "ok", "q": "fine"}\n{"id": "\\ud800", "q": "x"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"evals\.jsonl:2: .*lone surrogate"):
        protected_ngrams([path])
    path.write_text('{"id": "\\ud83d\\ude00", "q": "a paired surrogate is an emoji"}\n', "utf-8")
    assert protected_ngrams([path], n=2)


@given(
    batch=st.lists(st.one_of(texts(max_words=30), any_text), max_size=6),
    n=st.integers(1, 14),
    tokenizer=st.sampled_from(["words", "multilingual"]),
)
def test_charged_words_are_a_texts_words_and_at_least_one_ngram(batch, n, tokenizer):
    """What a contamination check is charged: the text's words, ``n`` for a shorter text (a
    verdict costs at least one whole window); never less than the n-grams it scans."""
    charged = charged_words(batch, n, tokenizer)
    assert charged.tolist() == [max(len(words(t, tokenizer)), n) for t in batch]
    scanned = [len(list(ngrams(words(t, tokenizer), n))) for t in batch]
    assert all(c >= s + n - 1 >= n for c, s in zip(charged.tolist(), scanned, strict=True) if s)


def test_charged_words_of_a_13_word_probe_are_13():
    probe = "the committee agreed that every new member should receive a printed copy of"
    assert charged_words([probe, "one", ""], 13).tolist() == [13, 13, 13]
    assert charged_words([probe + " the annual report"], 13).tolist() == [16]


def test_decontaminate_uses_13_grams_and_the_tokenizer_it_is_given(story, tmp_path):
    thirteen = "tom found a shiny red shell by the river and carried it home"
    docs = [Doc("13", f"so {thirteen} fast"), Doc("12", " ".join(thirteen.split()[:12]))]
    assert [d.id for d in decontaminate(docs, [story])] == ["12"]
    # Thai is written without spaces: to the multilingual tokenizer a grapheme cluster is a
    # word weighing 12/64 of an English word a code point, so 70 consonants are one window of
    # 13 English words, and 31 to 69 are protected as a whole (27/64 each by FLOOR_WEIGHTS).
    thai = ("กขคงจฉชซฌญฎฏฐ" * 6)[:70]
    path = tmp_path / "thai.txt"
    path.write_text(thai, encoding="utf-8")
    docs = [Doc("t", f"x {thai} y")]
    assert [d.id for d in decontaminate(docs, [path])] == ["t"]
    assert [d.id for d in decontaminate(docs, [path], tokenizer="multilingual")] == []
    index = NgramIndex(protected_ngrams([path], tokenizer="multilingual"), tokenizer="multilingual")
    assert [d.id for d in decontaminate_with(docs, index)] == []
    path.write_text(thai[:69], encoding="utf-8")  # 69 code points: short of one window
    assert protected_ngrams([path], tokenizer="multilingual") == {" ".join(thai[:69])}
    assert [d.id for d in decontaminate(docs, [path], tokenizer="multilingual")] == []
    path.write_text(thai[:30], encoding="utf-8")  # 30 code points: under the floor
    assert protected_ngrams([path], tokenizer="multilingual") == set()


def test_a_set_of_ngrams_is_refused_with_the_way_to_use_them(grams):
    with pytest.raises(ParameterError) as caught:
        decontaminate([Doc("b", SHELL)], set(grams))
    assert str(caught.value) == (
        f"expected a list of protected file paths, got a set of {len(grams)}; to check against "
        "n-grams you already have, build an NgramIndex(grams, n) and call "
        "decontaminate_with(docs, index)"
    )
