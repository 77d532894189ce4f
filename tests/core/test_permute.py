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


@pytest.mark.parametrize(
    ("begin", "stop", "groups"),
    [
        (0, 0, []),
        (3, 3, []),
        (0, 1, [(0, 1)]),
        (0, 32, [(0, 32)]),
        (0, 33, [(0, 17), (17, 33)]),
        (5, 70, [(5, 27), (27, 49), (49, 70)]),
        (10, 74, [(10, 42), (42, 74)]),
    ],
)
def test_groups_are_equal_ranges_of_at_most_32(begin, stop, groups):
    from neardup.core._permute import _groups

    assert _groups(begin, stop) == groups


@pytest.mark.parametrize("total", [P - 2, P - 1, P, P + 1])
def test_parameters_summing_to_about_p_are_exact_at_every_boundary(total):
    # a + b = P and above are mirrored; below they are computed directly.
    b = np.array([2, 3, P // 2, total - 2], dtype=np.uint64)
    a = np.uint64(total) - b
    rng = np.random.default_rng(total)
    x = np.concatenate(
        [boundary_xs(a, b), rng.integers(0, P, 2000, dtype=np.uint64),
         np.array([0, 1, P - 1], dtype=np.uint64)]
    )  # fmt: skip
    assert np.array_equal(minima(x, np.ones(len(x), dtype=np.int64), a, b), exact(x, a, b))
    # The same shingles as three documents (and an empty one): the minima of each.
    per_doc = np.array([5, 0, len(x) - 15, 10], dtype=np.int64)
    values = exact(x, a, b)
    expected = [values[0:5].min(axis=0), [P] * 4, values[5:-10].min(axis=0), values[-10:].min(0)]
    assert minima(x, per_doc, a, b).tolist() == np.array(expected).tolist()


def test_minima_leave_numpys_buffer_size_as_it_was():
    a, b = perm_params(8, 0)
    before = np.getbufsize()
    minima(np.arange(10, dtype=np.uint64), np.array([4, 6], dtype=np.int64), a, b)
    assert np.getbufsize() == before


def test_documents_across_block_boundaries_with_empty_ones_between():
    # Blocks of 16,384 shingles: documents that end at, start at and span a boundary, and
    # empty documents at and between them.
    a, b = perm_params(40, 5)
    rng = np.random.default_rng(7)
    x = rng.integers(0, P, 40_000, dtype=np.uint64)
    sizes = [16_384, 0, 1, 0, 16_382, 1, 0, 2, 0, 3000, 0, 4229, 1, 0]
    assert sum(sizes) == len(x)
    per_doc = np.array(sizes, dtype=np.int64)
    values = exact(x, a, b)
    expected, at = [], 0
    for n in sizes:
        expected.append(values[at : at + n].min(axis=0).tolist() if n else [P] * 40)
        at += n
    got = minima(x, per_doc, a, b)
    assert got.dtype == np.uint32 and got.shape == (len(sizes), 40)
    assert got.tolist() == expected


@pytest.mark.parametrize("per_doc", [[2, 3, 2, 1, 2, 3], [3, 0, 2, 0, 0, 4, 1]])
def test_documents_of_a_few_shingles_take_the_least_value_of_each_permutation(monkeypatch, per_doc):
    # Both kinds of permutation (a + b below P, and mirrored ones) over documents of a few
    # shingles: their minima are far from P, so none is recomputed.
    from neardup.core import _permute

    recomputed = []
    real = _permute._repair_minima

    def spy(sig, suspect, *args):
        recomputed.append(int(suspect.sum()))
        real(sig, suspect, *args)

    monkeypatch.setattr(_permute, "_repair_minima", spy)
    a, b = perm_params(64, 0)
    assert 0 < int(np.count_nonzero(a.astype(np.int64) + b.astype(np.int64) >= P)) < 64
    x = np.array([P // 3, P // 2, 7_000_000, 1_234_567_891, 99, P // 5, 2**30, 5, 17, 2**29,
                  P // 7, 3 * 2**28, 12_345][: sum(per_doc)], dtype=np.uint64)  # fmt: skip
    values = exact(x, a, b)
    expected, at = [], 0
    for n in per_doc:
        expected.append(values[at : at + n].min(axis=0).tolist() if n else [P] * 64)
        at += n
    assert max(max(row) for row, n in zip(expected, per_doc, strict=True) if n) < P - 2**14
    assert minima(x, np.array(per_doc, dtype=np.int64), a, b).tolist() == expected
    assert recomputed == [0]
