"""LSH banding: the S-curve, band-indexed keys, candidates, inserts and queries."""

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.errors import ParameterError, SignatureError
from neardup.core.minhash import LSH, MERSENNE31, minhash
from tests import reference


def test_lsh_hand_values():
    lsh = LSH(bands=16, rows=8)
    assert round(lsh.threshold, 4) == 0.7071
    assert round(lsh.probability(0.8), 4) == 0.9470
    assert round(lsh.probability(0.5), 4) == 0.0607


def test_lsh_rejects_bad_bands():
    with pytest.raises(ParameterError):
        LSH(bands=0, rows=8)


def test_lsh_defaults_to_16_bands_of_8_rows_and_takes_one_band_or_one_row():
    lsh = LSH()
    assert (lsh.bands, lsh.rows, lsh.num_perm) == (16, 8, 128)
    assert LSH(bands=1, rows=4).num_perm == 4
    assert LSH(bands=4, rows=1).num_perm == 4
    with pytest.raises(ParameterError) as caught:
        LSH(bands=4, rows=0)
    assert str(caught.value) == (
        "bands and rows must both be at least 1, got bands=4, rows=0; "
        "their product is the signature length (num_perm)"
    )


def _sig(values):
    return np.array(values, dtype=np.uint32)


def test_equal_rows_in_different_bands_are_no_candidate():
    lsh = LSH(bands=2, rows=2)
    lsh.insert("x", _sig([1, 2, 3, 4]))
    lsh.insert("y", _sig([3, 4, 5, 6]))  # x's band 1 is y's band 0
    assert lsh.candidates() == []
    assert lsh.query(_sig([9, 9, 1, 2])) == []  # x's band 0 rows, in band 1
    assert lsh.query(_sig([1, 2, 9, 9])) == ["x"]


def test_rows_minus_one_equal_rows_are_no_candidate():
    lsh = LSH(bands=2, rows=4)
    lsh.insert("x", _sig([1, 2, 3, 4, 5, 6, 7, 8]))
    lsh.insert("y", _sig([1, 2, 3, 0, 5, 6, 7, 0]))
    assert lsh.candidates() == []
    lsh.insert("z", _sig([0, 0, 0, 0, 5, 6, 7, 8]))
    assert lsh.candidates() == [("x", "z")]


def test_candidates_are_sorted_unique_pairs():
    lsh = LSH(bands=2, rows=2)
    for key in ["d", "b", "c", "a"]:
        lsh.insert(key, _sig([1, 1, 2, 2]))  # all agree on both bands
    lsh.insert("e", _sig([1, 1, 9, 9]))
    assert lsh.candidates() == [
        ("a", "b"), ("a", "c"), ("a", "d"), ("a", "e"), ("b", "c"), ("b", "d"), ("b", "e"),
        ("c", "d"), ("c", "e"), ("d", "e"),
    ]  # fmt: skip


def test_bad_inserts_raise():
    lsh = LSH(bands=2, rows=2)
    lsh.insert("x", _sig([1, 2, 3, 4]))
    with pytest.raises(SignatureError, match="already"):
        lsh.insert("x", _sig([5, 6, 7, 8]))
    with pytest.raises(SignatureError, match="4 entries"):
        lsh.insert("y", _sig([1, 2, 3]))
    with pytest.raises(SignatureError):
        lsh.insert("z", np.array([1.5, 2, 3, 4]))
    with pytest.raises(SignatureError):
        lsh.insert("w", np.array([1, 2, 3, MERSENNE31 + 1], dtype=np.int64))
    assert "y" not in lsh and "z" not in lsh and len(lsh) == 1


def test_empty_signatures_are_never_indexed():
    lsh = LSH(bands=2, rows=2)
    empty = _sig([MERSENNE31] * 4)
    lsh.insert("e1", empty)
    lsh.insert("e2", empty)
    assert lsh.candidates() == []
    assert lsh.query(empty) == []
    with pytest.raises(SignatureError):
        lsh.insert("e1", empty)


def test_query_of_a_signature_not_inserted():
    lsh = LSH(bands=2, rows=2)
    lsh.insert("b", _sig([1, 2, 3, 4]))
    lsh.insert("a", _sig([0, 0, 3, 4]))
    lsh.insert("c", _sig([1, 2, 0, 0]))
    assert lsh.query(_sig([1, 2, 3, 4])) == ["a", "b", "c"]
    assert lsh.query(_sig([1, 2, 9, 9])) == ["b", "c"]
    assert lsh.query(_sig([9, 9, 9, 9])) == []


SIMILARITIES = [0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]


def _pair(rng, s, size=60):
    """Two shingle sets with Jaccard as close to s as integers allow."""
    shared = round(2 * size * s / (1 + s))
    tokens = [f"{rng.getrandbits(48):x}" for _ in range(2 * size - shared)]
    a = set(tokens[:size])
    b = set(tokens[size - shared :])
    return a, b, len(a & b) / len(a | b)


def test_lsh_s_curve_fits_the_probability():
    rng = random.Random(99)
    bands, rows, trials = 16, 8, 120
    chi2 = 0.0
    rates = []
    for s in SIMILARITIES:
        hits = 0
        for _ in range(trials):
            a, b, j = _pair(rng, s)
            lsh = LSH(bands, rows)
            lsh.insert("a", minhash(a))
            hits += "a" in lsh.query(minhash(b))
        p = LSH(bands, rows).probability(j)
        rates.append(hits / trials)
        if 0 < p < 1:
            chi2 += (hits - trials * p) ** 2 / (trials * p * (1 - p))
        else:
            assert hits == trials * p
    # 13 cells; the 0.999 quantile of chi-square with 13 degrees of freedom is 34.53.
    assert chi2 < 34.53, (chi2, rates)
    midpoint = float(np.interp(0.5, rates, SIMILARITIES))
    assert abs(midpoint - (1 / bands) ** (1 / rows)) < 0.05, (midpoint, rates)


def test_query_returns_many_keys_sorted():
    lsh = LSH(bands=2, rows=2)
    keys = [f"k{i:02d}" for i in range(30)]
    for key in reversed(keys):
        lsh.insert(key, _sig([1, 2, 3, 4]))
    assert lsh.query(_sig([1, 2, 0, 0])) == keys


@given(
    st.lists(
        st.lists(st.integers(0, 3), min_size=8, max_size=8).map(
            lambda row: [MERSENNE31 if v == 3 else v for v in row]
        ),
        max_size=20,
    ),
    st.lists(st.integers(0, 3), min_size=8, max_size=8),
)
def test_lsh_face_equals_the_brute_force_reference(rows, probe):
    """The contract's LSH runs on the engine's banding; a plain pairwise check says the same."""
    sigs = np.array(rows, dtype=np.uint32).reshape(-1, 8)
    probe_sig = np.array([MERSENNE31 if v == 3 else v for v in probe], dtype=np.uint32)
    lsh = LSH(bands=4, rows=2)
    keys = [f"{i:03d}" for i in range(len(sigs))]
    for key, sig in zip(keys, sigs, strict=True):
        lsh.insert(key, sig)
    expected = [(keys[a], keys[b]) for a, b in reference.candidates(sigs, 4)]
    assert lsh.candidates() == expected
    assert lsh.query(probe_sig) == [keys[i] for i in reference.query(sigs, probe_sig, 4)]


@pytest.mark.parametrize(("bands", "rows"), [(0, 1), (1, 0), (-1, 4), (0, 0)])
def test_lsh_needs_one_band_and_one_row_at_least(bands, rows):
    with pytest.raises(ParameterError) as caught:
        LSH(bands=bands, rows=rows)
    assert str(caught.value) == (
        f"bands and rows must both be at least 1, got bands={bands}, rows={rows}; "
        "their product is the signature length (num_perm)"
    )


def test_lsh_of_one_band_of_one_row_and_its_curve():
    lsh = LSH(bands=1, rows=1)
    assert (lsh.bands, lsh.rows, lsh.num_perm, lsh.threshold) == (1, 1, 1, 1.0)
    assert LSH(4, 2).threshold == 0.5 and LSH(4, 2).probability(0.5) == 0.68359375
    lsh.insert("a", _sig([7]))
    lsh.insert("b", _sig([7]))
    assert lsh.candidates() == [("a", "b")] and lsh.query(_sig([7])) == ["a", "b"]


def test_lsh_counts_every_key_and_names_a_repeated_one():
    lsh = LSH(bands=2, rows=2)
    lsh.insert("x", _sig([1, 2, 3, 4]))
    lsh.insert("e", _sig([MERSENNE31] * 4))
    lsh.insert("y", _sig([1, 2, 3, 4]))  # a copy: one class in the index, two keys out
    assert len(lsh) == 3 and "e" in lsh and "x" in lsh and "z" not in lsh
    with pytest.raises(SignatureError) as caught:
        lsh.insert("e", _sig([5, 6, 7, 8]))
    assert str(caught.value) == "key 'e' is already inserted"
    with pytest.raises(SignatureError) as caught:
        lsh.insert("z", _sig([1, 2, 3]))
    assert str(caught.value) == "a signature must have 4 entries (bands * rows), got shape (3,)"
    assert len(lsh) == 3
    assert lsh.query(_sig([1, 2, 9, 9])) == ["x", "y"]
    assert lsh.candidates() == [("x", "y")]
    lsh.insert("a", _sig([0, 0, 3, 4]))
    assert lsh.candidates() == [("a", "x"), ("a", "y"), ("x", "y")]
