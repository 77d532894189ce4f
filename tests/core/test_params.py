"""MinhashParams: every parameter checked once, at construction, with a message naming it."""

import pytest

from neardup.core._banding import lsh_reach
from neardup.core.engine import INDEX_KEYS, MinhashParams, ParameterError, lsh_probability


def test_defaults_are_the_contracts():
    params = MinhashParams()
    assert params.as_dict() == {
        "num_perm": 128, "bands": 16, "threshold": 0.8, "k": 5, "seed": 0, "ngram": 13,
        "tokenizer": "words",
    }  # fmt: skip
    assert params.rows == 8
    assert round(params.lsh_threshold, 4) == 0.7071
    assert params.index_params() == {
        "num_perm": 128, "bands": 16, "k": 5, "seed": 0, "tokenizer": "words",
    }  # fmt: skip
    assert tuple(params.index_params()) == INDEX_KEYS


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_perm": 0}, "num_perm"),
        ({"num_perm": 100}, r"bands \(16\).*pick bands from 1, 2, 4, 5, 10, 20, 25, 50, 100$"),
        ({"bands": 0}, "bands"),
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"k": 0}, "k"),
        ({"k": 2.5}, "k"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**64}, "seed"),
        ({"seed": True}, r"seed must be a whole number in \[0, 2\*\*64\), got True"),
        ({"ngram": 0}, "ngram"),
        ({"num_perm": True}, "num_perm"),
        ({"tokenizer": "chars"}, "tokenizer must be one of words, multilingual, got 'chars'"),
        ({"tokenizer": None}, "tokenizer"),
    ],
)
def test_invalid_parameters_are_refused_naming_the_value(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        MinhashParams(**kwargs)


def test_params_are_frozen():
    params = MinhashParams()
    with pytest.raises(AttributeError):
        params.num_perm = 64  # type: ignore[misc]


@pytest.mark.parametrize(
    "field, meaning",
    [
        ("num_perm", "the signature length"),
        ("bands", "LSH bands"),
        ("k", "words per shingle"),
        ("ngram", "words per contamination n-gram"),
    ],
)
def test_a_count_below_one_is_refused_naming_it_and_what_it_counts(field, meaning):
    with pytest.raises(ParameterError) as caught:
        MinhashParams(**{field: 0})
    assert str(caught.value) == f"{field} ({meaning}) must be a whole number >= 1, got 0"


def test_the_query_floor_is_where_a_pair_becomes_a_candidate_half_the_time():
    assert round(MinhashParams().query_floor, 4) == 0.6736  # 16 bands of 8 rows
    assert round(MinhashParams(num_perm=8, bands=4, threshold=0.9).query_floor, 4) == 0.3989
    assert MinhashParams(threshold=0.5).query_floor == 0.5  # a lower threshold is the floor
    for bands, rows in ((16, 8), (4, 2), (32, 4)):
        assert lsh_probability(lsh_reach(bands, rows), bands, rows) == pytest.approx(0.5)
        assert lsh_probability(lsh_reach(bands, rows, 0.9), bands, rows) == pytest.approx(0.9)


def test_the_smallest_and_largest_values_are_accepted():
    low = MinhashParams(num_perm=1, bands=1, threshold=1e-9, k=1, seed=0, ngram=1)
    assert (low.rows, low.lsh_threshold) == (1, 1.0)
    high = MinhashParams(num_perm=6, bands=6, threshold=1, seed=2**64 - 1, tokenizer="multilingual")
    assert high.as_dict()["seed"] == 2**64 - 1 and high.threshold == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": -1}, "seed must be a whole number in [0, 2**64), got -1"),
        ({"seed": 2**64}, "seed must be a whole number in [0, 2**64), got 18446744073709551616"),
        ({"seed": 1.0}, "seed must be a whole number in [0, 2**64), got 1.0"),
        ({"threshold": 0.0}, "threshold must be a number in (0, 1], got 0.0"),
        ({"threshold": 1.0000001}, "threshold must be a number in (0, 1], got 1.0000001"),
        ({"threshold": "0.5"}, "threshold must be a number in (0, 1], got '0.5'"),
        ({"threshold": False}, "threshold must be a number in (0, 1], got False"),
        ({"num_perm": 2.0}, "num_perm (the signature length) must be a whole number >= 1, got 2.0"),
        ({"k": False}, "k (words per shingle) must be a whole number >= 1, got False"),
        (
            {"num_perm": 12, "bands": 8},
            "num_perm (12) must be a multiple of bands (8): each band takes num_perm / bands "
            "consecutive entries; pick bands from 1, 2, 3, 4, 6, 12",
        ),
    ],
)
def test_refusals_say_exactly_what_is_allowed(kwargs, message):
    with pytest.raises(ParameterError) as caught:
        MinhashParams(**kwargs)
    assert str(caught.value) == message


@pytest.mark.parametrize(("num_perm", "bands"), [(8, 2), (12, 3), (128, 32), (64, 64)])
def test_rows_and_the_lsh_threshold_of_other_shapes(num_perm, bands):
    params = MinhashParams(num_perm=num_perm, bands=bands)
    rows = num_perm // bands
    assert params.rows == rows
    assert params.lsh_threshold == (1.0 / bands) ** (1.0 / rows)
