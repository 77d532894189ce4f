"""The permutation kernel checked value by value: one shingle per document, so every hash is
a minimum and must equal ``(a*x + b) mod P`` exactly, including next to 0 and P."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core._hashing import MERSENNE31, perm_params
from neardup.core._permute import minima

P = MERSENNE31


def exact(x, a, b):
    return ((x[:, None] * a + b) % np.uint64(P)).astype(np.uint32)


def boundary_xs(a, b):
    """For each permutation, the x whose hash is 0, 1, P-2 and P-1 (solving a*x + b = v)."""
    xs = []
    for ai, bi in zip(a.tolist(), b.tolist(), strict=True):
        inverse = pow(ai, -1, P)
        xs += [(v - bi) * inverse % P for v in (0, 1, 2, P - 3, P - 2, P - 1)]
    return np.array(xs, dtype=np.uint64)


@pytest.mark.parametrize(("num_perm", "seed"), [(128, 0), (64, 7), (256, 2**40 + 1)])
def test_every_hash_value_is_exact(num_perm, seed):
    a, b = perm_params(num_perm, seed)
    rng = np.random.default_rng(seed)
    x = np.concatenate(
        [boundary_xs(a, b), rng.integers(0, P, 40_000, dtype=np.uint64),
         np.array([0, 1, 2, P - 2, P - 1], dtype=np.uint64)]
    )  # fmt: skip
    got = minima(x, np.ones(len(x), dtype=np.int64), a, b)
    assert np.array_equal(got, exact(x, a, b))


extreme = st.sampled_from([1, 2, 3, P // 2, P // 2 + 1, P - 3, P - 2])


@given(
    st.lists(st.tuples(st.one_of(extreme, st.integers(1, P - 2)),
                       st.one_of(st.sampled_from([0, 1, P - 2, P - 3]), st.integers(0, P - 1))),
             min_size=1, max_size=40),
    st.lists(st.integers(0, P - 1), min_size=1, max_size=300),
    st.lists(st.integers(0, 5), min_size=1, max_size=60),
)  # fmt: skip
def test_minima_equal_exact_minima_for_any_parameters(params, xs, sizes):
    a = np.array([p[0] for p in params], dtype=np.uint64)
    b = np.array([p[1] for p in params], dtype=np.uint64)
    x = np.concatenate([np.array(xs, dtype=np.uint64), boundary_xs(a, b)])
    per_doc = []
    left = len(x)
    for size in sizes:
        take = min(size, left)
        per_doc.append(take)
        left -= take
    per_doc.append(left)
    per_doc = np.array(per_doc, dtype=np.int64)
    got = minima(x, per_doc, a, b)
    values = exact(x, a, b)
    expected = np.full((len(per_doc), len(a)), P, dtype=np.uint32)
    start = 0
    for d, n in enumerate(per_doc.tolist()):
        if n:
            expected[d] = values[start : start + n].min(axis=0)
        start += n
    assert np.array_equal(got, expected)
