"""LSH banding: the incremental buckets against brute force."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neardup.core._banding import _Band, equal_runs, identical_rows


@given(
    st.lists(st.lists(st.integers(0, 40), max_size=300), min_size=1, max_size=6),
    st.lists(st.integers(0, 45), min_size=1, max_size=20),
)
def test_band_lookup_equals_brute_force(appends, queries):
    band = _Band()
    keys, nums = [], []
    for chunk in appends:
        k = np.array(chunk, dtype=np.uint64)
        n = np.arange(len(nums), len(nums) + len(chunk), dtype=np.int32)
        band.append(k, n)
        keys += chunk
        nums += n.tolist()
    q = np.array(queries, dtype=np.uint64)
    qi, found = band.lookup(q)
    expected = sorted(
        (i, n) for i, key in enumerate(queries) for k, n in zip(keys, nums, strict=True) if k == key
    )
    assert sorted(zip(qi.tolist(), found.tolist(), strict=True)) == expected
    band.merge()
    qi, found = band.lookup(q)
    assert sorted(zip(qi.tolist(), found.tolist(), strict=True)) == expected


def test_identical_rows_name_the_first_row_of_each_signature_among_many_copies():
    a = np.arange(8, dtype=np.uint32)
    sigs = np.array([a + 100, a] * 100 + [a + 200])
    first, copy_of = identical_rows(sigs)
    assert first.tolist() == [0, 1, 200]
    assert copy_of.tolist() == [0, 1] * 100 + [2]
    order, run_start = equal_runs(sigs)
    assert sorted(np.diff([*run_start.tolist(), len(order)]).tolist()) == [1, 100, 100]
    for lo, hi in zip(run_start.tolist(), [*run_start.tolist()[1:], len(order)], strict=True):
        assert order[lo:hi].tolist() == sorted(order[lo:hi].tolist())  # a stable order
