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
