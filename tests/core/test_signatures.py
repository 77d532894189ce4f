"""The batch kernel equals the spec recomputed from FNV-1a and interleaved PCG32 draws."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.errors import ParameterError
from neardup.core.minhash import MERSENNE31, PCG32, minhash, shingle_hashes, shingles, signatures
from tests.pools import ReversePool
from tests.strategies import any_text, texts

P = MERSENNE31


def fnv(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) % 2**64
    return h


def spec_signature(text: str, num_perm: int = 128, seed: int = 0, k: int = 5) -> list[int]:
    """docs/algorithm.md section 2, in plain Python integers."""
    rng = PCG32(seed)
    params = []
    for _ in range(num_perm):
        a = 1 + rng.below(P - 1)
        params.append((a, rng.below(P)))
    xs = [fnv(s.encode("utf-8")) % P for s in shingles(text, k)]
    if not xs:
        return [P] * num_perm
    return [min((a * x + b) % P for x in xs) for a, b in params]


EDGE_TEXTS = [
    "The cat sat on the mat today",
    "",
    "   ",
    "?!",
    "one",
    "a b c d",
    "a b c d e",
    "Ünïcödé wörds ΑΣ façade, naïve café; 日本語 テキスト and_under score 𝔘𝔫𝔦 🙂",
    "ΣΑΣ Σ σ ς İstanbul ǅemal ß ﬃ",
    "x\ny\tz  w_ v u\x00\x01\u200bq",
    "a" * 500 + " b",
    "word " * 40,
]


def test_signatures_equal_the_spec_on_edge_texts():
    got = signatures(EDGE_TEXTS)
    assert got.shape == (len(EDGE_TEXTS), 128)
    for text, row in zip(EDGE_TEXTS, got, strict=True):
        assert row.tolist() == spec_signature(text), text


@pytest.mark.parametrize(("num_perm", "seed", "k"), [(16, 1, 1), (64, 7, 3), (32, 2**63 + 5, 9)])
def test_signatures_equal_the_spec_for_other_parameters(num_perm, seed, k):
    got = signatures(EDGE_TEXTS, num_perm=num_perm, seed=seed, k=k)
    for text, row in zip(EDGE_TEXTS, got, strict=True):
        assert row.tolist() == spec_signature(text, num_perm, seed, k), text


@given(st.lists(texts(), max_size=8))
def test_signatures_equal_the_spec_on_random_batches(batch):
    got = signatures(batch, num_perm=16)
    assert [row.tolist() for row in got] == [spec_signature(t, 16) for t in batch]


@given(any_text)
def test_signatures_equal_the_spec_on_arbitrary_unicode(text):
    assert signatures([text], num_perm=8)[0].tolist() == spec_signature(text, 8)


def test_signatures_of_a_batch_do_not_depend_on_its_neighbours():
    alone = [signatures([t])[0].tolist() for t in EDGE_TEXTS]
    assert [row.tolist() for row in signatures(EDGE_TEXTS)] == alone


def test_minhash_and_shingle_hashes_match_the_spec():
    text = EDGE_TEXTS[7]
    sh = sorted(shingles(text))
    assert shingle_hashes(sh).tolist() == [fnv(s.encode()) % P for s in sh]
    sig = minhash(shingles(text))
    assert sig.dtype == np.uint64
    assert sig.tolist() == spec_signature(text)


def test_wordless_texts_have_the_all_p_signature():
    for text in ["", "  ", "!!!"]:
        assert signatures([text])[0].tolist() == [P] * 128
    assert minhash(set()).tolist() == [P] * 128


def test_signatures_fit_uint32():
    assert signatures(["a b c"]).dtype == np.uint32


def test_workers_give_identical_signatures():
    batch = [f"text number {i} " + "shared words " * (i % 7) for i in range(23)] + EDGE_TEXTS
    one = signatures(batch, workers=1)
    three = signatures(batch, workers=3)
    assert np.array_equal(one, three)


def test_signatures_reject_bad_parameters_and_unencodable_text():
    with pytest.raises(ParameterError):
        signatures(["a"], num_perm=0)
    with pytest.raises(ParameterError):
        signatures(["a"], k=0)
    with pytest.raises(ParameterError):
        signatures(["a"], workers=0)
    with pytest.raises(ParameterError, match="text 1"):
        signatures(["fine", "lone \ud800 surrogate"])


@given(st.lists(any_text, max_size=12), st.integers(1, 3), st.integers(8, 400))
def test_pool_slabs_of_any_size_give_the_signatures_of_one_process(batch, workers, chars):
    # Slabs of a few characters (a text or two) up to all texts in one; the stand-in pool
    # finishes them backwards, so rows must be placed by slab, not by completion.
    import neardup.core._signatures

    expected = signatures(batch)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(neardup.core._signatures, "SLAB_CHARS", chars)
        got = signatures(batch, pool=ReversePool(workers))
    assert np.array_equal(got, expected)


def test_chunks_are_concatenated_in_submission_order_not_completion_order():
    texts = [f"document {i} has its own words {i * 7} and {i * 13}" for i in range(9)]
    got = signatures(texts, pool=ReversePool(3))
    assert np.array_equal(got, signatures(texts))


@pytest.mark.parametrize("num_perm", [128, 16])
def test_a_document_longer_than_a_kernel_block(num_perm):
    long_text = " ".join(f"w{i}" for i in range(9000))
    batch = ["short one", long_text, "another short text of words"]
    got = signatures(batch, num_perm=num_perm)
    assert [r.tolist() for r in got] == [spec_signature(t, num_perm) for t in batch]


def test_huge_words_take_the_closed_form_and_stay_exact():
    # A 70,000-byte word makes five shingles over 64 KiB: FNV-1a's closed form, not the byte loop.
    texts = ["a b c " + "y" * 70_000 + " d e f", "z" * 70_000, "ü" * 40_000 + " tail words here"]
    got = signatures(texts, num_perm=16)
    assert [row.tolist() for row in got] == [spec_signature(t, 16) for t in texts]
