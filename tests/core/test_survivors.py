"""Survivor policies: each group keeps its most preferred row; ties go to the smallest id."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.engine import (
    KeepPolicy,
    ParameterError,
    cluster_survivors,
    exact_keepers,
    exact_survivors,
    id_rank,
    value_ranks,
)


@st.composite
def groups(draw):
    n = draw(st.integers(1, 40))
    ids = draw(st.lists(st.text("abc", min_size=1, max_size=4), min_size=n, max_size=n,
                        unique=True))  # fmt: skip
    group = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    values = draw(st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=n, max_size=n))
    return ids, np.array(group, dtype=np.int64), values


@given(groups())
def test_every_policy_keeps_the_groups_best_row_ties_to_the_smallest_id(case):
    ids, group, raw = case
    rank = id_rank(ids)
    values = np.array([np.nan if v is None else v for v in raw], dtype=np.float64)
    lengths = np.array([len(i) for i in ids], dtype=np.int64)
    digests = np.stack((group.astype(np.uint64), np.zeros(len(ids), np.uint64)), axis=1)
    keys = {
        "smallest-id": lambda i: (ids[i],),
        "first": lambda i: (i,),
        "longest": lambda i: (-lengths[i], ids[i]),
        "max:v": lambda i: (values[i] != values[i], -np.nan_to_num(values[i]), ids[i]),
    }
    for spelled, key in keys.items():
        pref = KeepPolicy.parse(spelled).preference(rank, lengths, values)
        for survivors in (exact_survivors(digests, pref), cluster_survivors(group, pref)):
            for i in range(len(ids)):
                members = [j for j in range(len(ids)) if group[j] == group[i]]
                assert survivors[i] == min(members, key=key), spelled


@given(groups())
def test_smallest_id_matches_the_exact_keepers(case):
    ids, group, _ = case
    rank = id_rank(ids)
    digests = np.stack((group.astype(np.uint64), group.astype(np.uint64)), axis=1)
    kept = exact_survivors(digests, rank) == np.arange(len(ids))
    assert (kept == exact_keepers(digests, rank)).all()


@pytest.mark.parametrize("spelled", ["best", "max:", "max: ", "Longest"])
def test_unknown_policies_say_which_exist(spelled):
    with pytest.raises(ParameterError, match="smallest-id, first, longest, max:FIELD"):
        KeepPolicy.parse(spelled)


numbers = st.one_of(
    st.none(),
    st.integers(-(2**80), 2**80),
    st.integers(2**53 - 4, 2**53 + 4),
    st.floats(allow_nan=True, allow_infinity=True),
)


@given(st.lists(numbers, max_size=30))
def test_value_ranks_order_numbers_exactly_as_python_does(values):
    ranks = value_ranks(values)
    for i, a in enumerate(values):
        absent = a is None or a != a
        assert np.isnan(ranks[i]) == absent
        for j, b in enumerate(values):
            if not absent and b is not None and b == b:
                assert (ranks[i] < ranks[j]) == (a < b) and (ranks[i] == ranks[j]) == (a == b)


def test_a_policy_without_what_it_compares_says_what_it_needs():
    rank = np.arange(3, dtype=np.int64)
    with pytest.raises(ParameterError) as caught:
        KeepPolicy.parse("longest").preference(rank)
    assert str(caught.value) == "--keep longest needs the text lengths"
    with pytest.raises(ParameterError) as caught:
        KeepPolicy.parse("max:meta.score").preference(rank, np.ones(3, dtype=np.int64))
    assert str(caught.value) == "--keep max:meta.score needs the field's values"


@pytest.mark.parametrize(
    ("spelled", "kind", "field"),
    [
        ("smallest-id", "smallest-id", None),
        ("first", "first", None),
        ("longest", "longest", None),
        ("max:quality", "max", "quality"),
        ("max: meta.score ", "max", "meta.score"),
    ],
)
def test_policies_parse_and_print_as_spelled(spelled, kind, field):
    policy = KeepPolicy.parse(spelled)
    assert (policy.kind, policy.field) == (kind, field)
    assert str(policy) == spelled.replace(" ", "")


def test_the_default_policy_is_the_smallest_id_and_an_unknown_one_is_quoted():
    assert (KeepPolicy().kind, KeepPolicy().field, str(KeepPolicy())) == (
        "smallest-id", None, "smallest-id")  # fmt: skip
    with pytest.raises(ParameterError) as caught:
        KeepPolicy.parse("max:")
    assert str(caught.value) == (
        "--keep 'max:' is not a policy; use one of smallest-id, first, longest, max:FIELD"
    )


def test_each_policys_preference_exactly():
    rank = np.array([2, 0, 3, 1], dtype=np.int64)  # ids: c, a, d, b
    lengths = np.array([5, 5, 9, 1], dtype=np.int64)
    values = np.array([1.0, np.nan, 1.0, 3.0])
    prefs = {
        "smallest-id": [2, 0, 3, 1],
        "first": [0, 1, 2, 3],
        "longest": [2, 1, 0, 3],  # 9, then the 5s by id (a before c), then 1
        "max:v": [1, 3, 2, 0],  # 3.0, then the 1.0s by id (c before d), absent last
    }
    for spelled, expected in prefs.items():
        pref = KeepPolicy.parse(spelled).preference(rank, lengths, values)
        assert pref.dtype == np.int64 and pref.tolist() == expected, spelled


def test_value_ranks_are_places_among_the_distinct_values():
    ranks = value_ranks([3, None, 1.5, 3, float("nan"), -2])
    assert ranks.dtype == np.float64
    assert np.array_equal(ranks, [2.0, np.nan, 1.0, 2.0, np.nan, 0.0], equal_nan=True)


def test_survivors_of_groups_exactly():
    pref = np.array([3, 0, 2, 1, 4], dtype=np.int64)
    assert cluster_survivors(np.array([7, 7, 5, 5, 9]), pref).tolist() == [1, 1, 3, 3, 4]
    digests = np.array([[1, 2], [1, 3], [1, 2], [0, 3], [1, 3]], dtype=np.uint64)
    # Groups need both halves equal: rows 0 and 2; rows 1 and 4; row 3 alone.
    assert exact_survivors(digests, pref).tolist() == [2, 1, 2, 3, 1]
    empty = cluster_survivors(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert empty.dtype == np.int64 and empty.tolist() == []
    one = exact_survivors(np.zeros((1, 2), dtype=np.uint64), np.zeros(1, dtype=np.int64))
    assert one.tolist() == [0]
