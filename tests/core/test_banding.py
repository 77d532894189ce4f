"""LSH banding: the incremental buckets against brute force."""

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import _banding
from neardup.core._banding import (
    BandBuckets,
    _Band,
    _pairs_in_runs,
    as_signature,
    band_digest,
    band_digests,
    candidate_pairs,
    empty_rows,
    equal_runs,
    identical_rows,
    lsh_probability,
    lsh_reach,
    lsh_threshold,
)
from neardup.core.errors import SignatureError
from neardup.core.minhash import MERSENNE31


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


# --- exact values: the S-curve, signatures, digests and runs, a table per function ----------

P = MERSENNE31


def u32(*rows):
    return np.array(rows, dtype=np.uint32)


def reference_digest(row):
    """The band digest in Python integers: per entry, xor it in, multiply by the golden-ratio
    constant modulo 2**64, xor the high bits down by 29."""
    digest = 0
    for value in row:
        digest ^= int(value)
        digest = (digest * 0x9E3779B97F4A7C15) % (1 << 64)
        digest ^= digest >> 29
    return digest


@pytest.mark.parametrize(
    ("bands", "rows", "threshold", "p08", "p05", "reach", "reach09"),
    [
        (16, 8, 0.7071067811865476, 0.9470487961682148, 0.06070190410618359, 0.673622417252908,
         0.7778619918855969),
        (4, 2, 0.5, 0.98320384, 0.68359375, 0.39887790706716947, 0.6615577637739964),
        (1, 1, 1.0, 0.8, 0.5, 0.5, 0.9),
        (2, 4, 0.8408964152537145, 0.65142784, 0.12109375, 0.7356603157342367, 0.9093432875600553),
    ],
)  # fmt: skip
def test_the_s_curve_its_threshold_and_its_reach(bands, rows, threshold, p08, p05, reach, reach09):
    assert lsh_threshold(bands, rows) == pytest.approx(threshold, rel=1e-12)
    assert lsh_probability(0.8, bands, rows) == pytest.approx(p08, rel=1e-12)
    assert lsh_probability(0.5, bands, rows) == pytest.approx(p05, rel=1e-12)
    assert lsh_reach(bands, rows) == pytest.approx(reach, rel=1e-12)  # at p = 0.5 by default
    assert lsh_reach(bands, rows, 0.9) == pytest.approx(reach09, rel=1e-12)
    for value in (lsh_threshold(bands, rows), lsh_reach(bands, rows)):
        assert type(value) is float


@pytest.mark.parametrize(
    ("sig", "length", "message"),
    [
        (np.zeros((1, 4), dtype=np.int64), 4,
         "a signature must have 4 entries (bands * rows), got shape (1, 4)"),
        (np.zeros(3, dtype=np.int64), 4,
         "a signature must have 4 entries (bands * rows), got shape (3,)"),
        (np.zeros(5, dtype=np.int64), 4,
         "a signature must have 4 entries (bands * rows), got shape (5,)"),
        (np.zeros(4, dtype=np.float64), 4, "signature entries must be integers, got dtype float64"),
        (np.zeros(4, dtype=np.bool_), 4, "signature entries must be integers, got dtype bool"),
        (np.array([0, 1, -1, 2]), 4, "signature entries must lie in [0, 2**31 - 1]"),
        (np.array([0, P + 1, 1, 2]), 4, "signature entries must lie in [0, 2**31 - 1]"),
    ],
)  # fmt: skip
def test_as_signature_names_what_is_wrong(sig, length, message):
    with pytest.raises(SignatureError) as caught:
        as_signature(sig, length)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "sig",
    [
        [0, 1, P, 7],
        np.array([P, P, P, P], dtype=np.uint64),
        np.array([0, 0, 0, 0], dtype=np.int8),
        (3, 2, 1, 0),
    ],
)
def test_as_signature_takes_integers_from_0_to_p_as_uint32(sig):
    out = as_signature(sig, 4)
    assert out.dtype == np.uint32
    assert out.tolist() == [int(v) for v in sig]


def test_as_signature_of_length_zero_is_empty():
    out = as_signature(np.zeros(0, dtype=np.int64), 0)
    assert out.dtype == np.uint32 and out.shape == (0,)


@pytest.mark.parametrize(
    "block",
    [
        u32([0, 0]),
        u32([1, 2], [2, 1], [5, 6], [P, P]),
        u32([7], [8], [0]),
        u32([1, 2, 3, 4, 5, 6, 7, 8], [P, 0, P, 0, P, 0, P, 0]),
    ],
)
def test_band_digest_is_the_golden_ratio_mix_of_every_entry(block):
    assert band_digest(block).dtype == np.uint64
    assert band_digest(block).tolist() == [reference_digest(row) for row in block.tolist()]


def test_band_digests_cut_the_signature_into_bands_of_consecutive_rows():
    sigs = u32([1, 2, 3, 4, 5, 6], [1, 2, 9, 9, 5, 6], [6, 5, 4, 3, 2, 1])
    out = band_digests(sigs, 3)
    assert out.shape == (3, 3) and out.dtype == np.uint64
    assert out.tolist() == [
        [reference_digest(row[b * 2 : b * 2 + 2]) for b in range(3)] for row in sigs.tolist()
    ]
    assert band_digests(sigs, 1).tolist() == [[reference_digest(row)] for row in sigs.tolist()]
    assert band_digests(sigs, 6)[:, 5].tolist() == [reference_digest([v]) for v in (6, 6, 1)]


@pytest.mark.parametrize(
    ("block", "runs"),
    [
        (u32([5, 6], [1, 2], [5, 6], [0, 0], [1, 2]), [[0, 2], [1, 4], [3]]),
        (u32([4], [4], [4]), [[0, 1, 2]]),
        (u32([1, 2], [2, 1]), [[0], [1]]),
        (u32([3]), [[0]]),
    ],
)
def test_equal_runs_group_equal_rows_in_digest_order(block, runs):
    order, run_start = equal_runs(block)
    # no digest collision here: the order is the stable digest order
    assert order.tolist() == np.argsort(band_digest(block), kind="stable").tolist()
    bounds = [*run_start.tolist(), len(order)]
    found = [order[lo:hi].tolist() for lo, hi in pairwise(bounds)]
    assert sorted(found) == runs


def test_equal_runs_of_no_rows_are_empty():
    order, run_start = equal_runs(np.zeros((0, 2), dtype=np.uint32))
    assert (order.tolist(), run_start.tolist()) == ([], [])


def test_equal_runs_fall_back_to_a_row_sort_on_a_digest_collision(monkeypatch):
    monkeypatch.setattr(_banding, "band_digest", lambda block: np.zeros(len(block), np.uint64))
    order, run_start = equal_runs(u32([5, 6], [1, 2], [5, 6], [0, 9], [1, 2]))
    assert order.tolist() == [3, 1, 4, 0, 2]  # lexicographic, stable
    assert run_start.tolist() == [0, 1, 3]
    order, run_start = equal_runs(u32([2, 2], [2, 2]))  # equal rows: no fallback needed
    assert (order.tolist(), run_start.tolist()) == ([0, 1], [0])


@pytest.mark.parametrize(
    ("order", "run_start", "pairs"),
    [
        ([3, 1, 2, 0, 4], [0, 3, 4], [[3, 1], [1, 2], [3, 2]]),
        ([0, 1, 2, 3], [0], [[0, 1], [1, 2], [2, 3], [0, 2], [1, 3], [0, 3]]),
        ([4, 2, 7, 1], [0, 2], [[4, 2], [7, 1]]),
        ([0, 1, 2], [0, 1, 2], []),
        ([], [], []),
    ],
)
def test_pairs_in_runs_pair_every_two_members_of_each_run(order, run_start, pairs):
    out = _pairs_in_runs(np.array(order, dtype=np.int64), np.array(run_start, dtype=np.int64))
    assert out.shape == (len(pairs), 2)
    assert out.tolist() == pairs


@pytest.mark.parametrize(
    ("rows", "first", "copy_of"),
    [
        ([[1, 2], [3, 4], [1, 2], [1, 2], [5, 5]], [0, 1, 4], [0, 1, 0, 0, 2]),
        ([[9], [8], [7]], [0, 1, 2], [0, 1, 2]),
        ([[P, P], [P, P]], [0], [0, 0]),
    ],
)
def test_identical_rows_first_row_and_copy_of(rows, first, copy_of):
    got_first, got_copy_of = identical_rows(np.array(rows, dtype=np.uint32))
    assert (got_first.tolist(), got_copy_of.tolist()) == (first, copy_of)


def test_identical_rows_of_no_rows():
    first, copy_of = identical_rows(np.zeros((0, 3), dtype=np.uint32))
    assert (first.tolist(), copy_of.tolist()) == ([], [])


@pytest.mark.parametrize("slab", [1, 2, 3, 1 << 16])
def test_empty_rows_slab_by_slab(monkeypatch, slab):
    monkeypatch.setattr(_banding, "_SLAB", slab)
    sigs = u32([P, P], [P, 0], [0, P], [P, P], [1, 2], [P, P], [P, P])
    assert empty_rows(sigs).tolist() == [True, False, False, True, False, True, True]
    assert empty_rows(np.zeros((0, 2), dtype=np.uint32)).tolist() == []


@pytest.mark.parametrize(
    ("bands", "among", "pairs"),
    [
        (2, None, [[0, 1], [0, 2], [0, 3], [1, 3], [2, 3], [4, 5]]),
        (1, None, [[0, 3], [4, 5]]),
        (2, [0, 1, 3], [[0, 1], [0, 3], [1, 3]]),
        (2, [4, 5, 6, 7], [[4, 5]]),
        (2, [2], []),
        (4, None, [[0, 1], [0, 2], [0, 3], [1, 3], [2, 3], [4, 5]]),
    ],
)
def test_candidate_pairs_table(bands, among, pairs):
    sigs = u32(
        [1, 2, 3, 4], [5, 6, 3, 4], [1, 2, 7, 7], [1, 2, 3, 4], [8, 8, 8, 8], [8, 8, 8, 8],
        [P, P, P, P], [P, P, P, P],
    )  # fmt: skip
    rows = None if among is None else np.array(among, dtype=np.int64)
    out = candidate_pairs(sigs, bands, among=rows)
    assert out.tolist() == pairs
    assert out.shape == (len(pairs), 2)


def test_candidate_pairs_of_no_rows_or_one_row():
    assert candidate_pairs(np.zeros((0, 4), dtype=np.uint32), 2).shape == (0, 2)
    assert candidate_pairs(u32([1, 2, 3, 4]), 2).shape == (0, 2)


# --- the incremental buckets: the append buffer, merges, lookups, memory ----------------------


def keys(*values):
    return np.array(values, dtype=np.uint64)


def nums(*values):
    return np.array(values, dtype=np.int32)


def test_a_new_band_holds_an_empty_index_and_a_buffer_of_min_buffer_entries():
    band = _Band()
    assert (len(band.keys), len(band.nums), band.buffered) == (0, 0, 0)
    assert (band.keys.dtype, band.nums.dtype) == (np.uint64, np.int32)
    assert (len(band.buf_keys), len(band.buf_nums)) == (4096, 4096)
    assert (band.buf_keys.dtype, band.buf_nums.dtype) == (np.uint64, np.int32)
    assert band.nbytes() == 4096 * 8 + 4096 * 4
    assert band._limit() == 4096


def test_the_buffer_merges_once_it_holds_min_buffer_entries():
    band = _Band()
    band.append(np.arange(4095, dtype=np.uint64), np.arange(4095, dtype=np.int32))
    assert (band.buffered, len(band.keys)) == (4095, 0)
    band.append(keys(7), nums(99))
    assert (band.buffered, len(band.keys), len(band.buf_keys)) == (0, 4096, 4096)
    assert band.keys.tolist() == sorted([*range(4095), 7])
    assert band.nbytes() == 4096 * 12 + 4096 * 12
    qi, found = band.lookup(keys(7, 5000))
    assert (qi.tolist(), found.tolist()) == ([0, 0], [7, 99])  # the earlier one first


def test_a_full_buffer_grows_to_what_is_needed_or_twice_its_size():
    band = _Band()
    band.append(np.arange(4096, dtype=np.uint64), np.arange(4096, dtype=np.int32), merge=False)
    assert (band.buffered, len(band.buf_keys), len(band.buf_nums)) == (4096, 4096, 4096)
    band.append(keys(1), nums(1), merge=False)  # one more: twice the size
    assert (band.buffered, len(band.buf_keys), len(band.buf_nums)) == (4097, 8192, 8192)
    band.append(np.arange(20_000, dtype=np.uint64), np.arange(20_000, dtype=np.int32), False)
    assert (band.buffered, len(band.buf_keys), len(band.buf_nums)) == (24097, 24097, 24097)
    assert band.buf_nums[:3].tolist() == [0, 1, 2] and band.buf_nums[4096] == 1
    assert band.buf_keys[4097:4100].tolist() == [0, 1, 2]
    assert len(band.keys) == 0  # merge=False never merges
    band.merge()
    # after a bulk load the buffer is given back: its size is the limit again
    assert (band.buffered, len(band.keys), band._limit()) == (0, 24097, 4096)
    assert (len(band.buf_keys), len(band.buf_nums)) == (4096, 4096)
    assert band.nbytes() == 24097 * 12 + 4096 * 12


def test_the_limit_grows_with_the_index_by_one_sixty_fourth():
    band = _Band()
    count = 64 * 5000
    band.append(np.arange(count, dtype=np.uint64), np.zeros(count, dtype=np.int32), merge=False)
    band.merge()
    assert band._limit() == 5000
    assert (len(band.buf_keys), len(band.buf_nums)) == (5000, 5000)
    band.append(np.full(4999, 3, dtype=np.uint64), np.ones(4999, dtype=np.int32))
    assert band.buffered == 4999  # above _MIN_BUFFER, below the limit: not merged yet
    band.append(keys(3), nums(2))
    assert (band.buffered, len(band.keys)) == (0, count + 5000)
    _, found = band.lookup(keys(3))
    assert found.tolist() == [0] + [1] * 4999 + [2]  # stored first, then in append order


def test_merging_an_empty_buffer_changes_nothing():
    band = _Band()
    band.merge()
    assert (len(band.keys), band.buffered, len(band.buf_keys)) == (0, 0, 4096)


def test_a_lookup_answers_from_the_index_then_from_the_buffer_in_a_fixed_order():
    band = _Band()
    band.append(keys(5, 3, 5), nums(10, 11, 12), merge=False)
    band.merge()
    band.append(keys(5, 9, 3), nums(20, 21, 22), merge=False)
    qi, found = band.lookup(keys(3, 5, 5, 8))
    # the index: per query in order, its entries in key then append order; then the buffer:
    # per buffered entry, every equal query (in query order)
    assert qi.tolist() == [0, 1, 1, 2, 2, 1, 2, 0]
    assert found.tolist() == [11, 10, 12, 10, 12, 20, 20, 22]
    assert qi.dtype == np.int64
    qi, found = band.lookup(keys(9))
    assert (qi.tolist(), found.tolist()) == ([0], [21])
    qi, found = band.lookup(keys(4))
    assert (qi.tolist(), found.tolist()) == ([], [])


def test_band_buckets_skip_empty_rows_and_lead_with_query_number_and_band():
    buckets = BandBuckets(2, 2)
    assert (buckets.bands, buckets.rows, len(buckets._bands)) == (2, 2, 2)
    assert buckets.nbytes() == 2 * (4096 * 12)
    buckets.add(u32([1, 2, 3, 4], [P, P, P, P], [1, 2, 9, 9]), np.array([10, 11, 12]))
    assert [b.buffered for b in buckets._bands] == [2, 2]  # the empty row is skipped
    assert buckets._bands[0].buf_nums[:2].tolist() == [10, 12]
    q, found, bands = buckets.leads(u32([P, P, P, P], [7, 7, 3, 4], [1, 2, 3, 4]))
    assert (q.dtype, found.dtype, bands.dtype) == (np.int64, np.int64, np.int64)
    assert list(zip(q.tolist(), found.tolist(), bands.tolist(), strict=True)) == [
        (2, 10, 0), (2, 12, 0), (1, 10, 1), (2, 10, 1)]  # fmt: skip
    buckets.merge()
    assert [(b.buffered, len(b.keys)) for b in buckets._bands] == [(0, 2), (0, 2)]
    q, found, bands = buckets.leads(u32([1, 2, 3, 4]))
    assert sorted(zip(q.tolist(), found.tolist(), bands.tolist(), strict=True)) == [
        (0, 10, 0), (0, 10, 1), (0, 12, 0)]  # fmt: skip
    assert buckets.nbytes() == sum(b.nbytes() for b in buckets._bands) == 2 * (2 * 12 + 4096 * 12)


def test_band_buckets_of_empty_rows_only_store_and_lead_to_nothing():
    buckets = BandBuckets(2, 2)
    buckets.add(u32([P, P, P, P]), np.array([0]))
    assert [b.buffered for b in buckets._bands] == [0, 0]
    for query in (u32([P, P, P, P]), np.zeros((0, 4), dtype=np.uint32)):
        q, found, bands = buckets.leads(query)
        assert (q.tolist(), found.tolist(), bands.tolist()) == ([], [], [])
        assert (q.dtype, found.dtype, bands.dtype) == (np.int64, np.int64, np.int64)
    q, found, bands = buckets.leads(u32([1, 2, 3, 4]))
    assert (len(q), len(found), len(bands)) == (0, 0, 0)


def test_band_buckets_merge_on_their_own_unless_told_not_to():
    buckets = BandBuckets(1, 1)
    sigs = np.arange(4096, dtype=np.uint32)[:, None]
    buckets.add(sigs, np.arange(4096), merge=False)
    assert (buckets._bands[0].buffered, len(buckets._bands[0].keys)) == (4096, 0)
    buckets = BandBuckets(1, 1)
    buckets.add(sigs, np.arange(4096))
    assert (buckets._bands[0].buffered, len(buckets._bands[0].keys)) == (0, 4096)
    assert buckets._bands[0].nums.dtype == np.int32


@pytest.mark.parametrize(
    ("first", "then", "grown", "kept"),
    [
        (4096, 1, 8192, 8192),  # doubled: twice the limit exactly, kept for the appends to come
        (10_000, 0, 10_000, 4096),  # grown to what one bulk append needed: given back
        (4096, 0, 4096, 4096),
    ],
)
def test_a_merge_gives_a_buffer_of_more_than_twice_the_limit_back(first, then, grown, kept):
    band = _Band()
    for count in (first, then):
        band.append(np.arange(count, dtype=np.uint64), np.zeros(count, np.int32), merge=False)
    assert len(band.buf_keys) == grown
    band.merge()
    assert (len(band.buf_keys), len(band.buf_nums)) == (kept, kept)
    assert (band.buf_keys.dtype, band.buf_nums.dtype) == (np.uint64, np.int32)
    big = np.uint64(2**64 - 5)  # a digest no float holds: the buffer must keep uint64
    band.append(np.array([big], dtype=np.uint64), nums(7))
    qi, found = band.lookup(np.array([big, big - np.uint64(1)], dtype=np.uint64))
    assert (qi.tolist(), found.tolist()) == ([0], [7])
    band.merge()
    qi, found = band.lookup(np.array([big - np.uint64(1), big], dtype=np.uint64))
    assert (qi.tolist(), found.tolist()) == ([1], [7])
