"""LSH banding: the incremental buckets against brute force."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neardup.core._banding import _Band


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
