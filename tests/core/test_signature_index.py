"""SignatureIndex on hand-made signatures: classes of identical signatures, removals, a bulk
load with gaps, compaction, and the matches inside one batch (``batch_matches``)."""

import numpy as np
import pytest

from neardup.core import _banding
from neardup.core._signature_index import SignatureIndex, batch_matches
from neardup.core.minhash import MERSENNE31

# 8 entries in 4 bands of 2 rows. B agrees with A on 7 entries (three bands): estimate 7/8.
A = list(range(1, 9))
B = [*range(1, 8), 99]
C = list(range(100, 108))
EMPTY = [MERSENNE31] * 8


def sigs(*rows):
    return np.array(rows, dtype=np.uint32)


def found(index, query, threshold=0.8):
    rows, reps, est = index.matches(sigs(query), threshold)
    return sorted(zip(rows.tolist(), reps.tolist(), est.tolist(), strict=True))


def test_copies_share_a_class_until_every_member_is_removed():
    index = SignatureIndex(8, 4)
    assert index.add(sigs(A, A, B, C, EMPTY, EMPTY)).tolist() == [0, 1, 2, 3, 4, 5]
    assert [index.representative(n) for n in range(6)] == [0, 0, 2, 3, 4, 5]
    assert index.sizes(np.array([0, 2, 4, 5])).tolist() == [2, 1, 1, 1]
    assert index.members(0) == [0, 1]
    assert found(index, A) == [(0, 0, 1.0), (0, 2, 0.875)]
    assert found(index, EMPTY) == []
    index.remove(0)
    assert index.sizes(np.array([0])).tolist() == [1]
    assert index.members(0) == [1]
    assert found(index, A) == [(0, 0, 1.0), (0, 2, 0.875)]  # the class lives on in 1
    index.remove(1)
    assert index.sizes(np.array([0])).tolist() == [0]
    assert index.members(0) == []
    assert found(index, A) == [(0, 2, 0.875)]
    assert index.alive_many(np.arange(6)).tolist() == [False, False, True, True, True, True]


def test_a_bulk_load_with_gaps_groups_like_adding_and_compacts_to_the_documents_kept():
    index = SignatureIndex(8, 4)
    index.start_load(6)
    index.load(np.array([0, 2, 3, 5]), sigs(A, A, B, EMPTY))
    index.finish_load()
    assert index.count == 6
    assert index.alive_many(np.arange(6)).tolist() == [True, False, True, True, False, True]
    assert [index.representative(n) for n in (0, 2, 3, 5)] == [0, 0, 3, 5]
    assert index.members(0) == [0, 2]
    assert index.sizes(np.array([0, 3, 5])).tolist() == [2, 1, 1]
    assert found(index, A) == [(0, 0, 1.0), (0, 3, 0.875)]
    assert found(index, B, 0.9) == [(0, 3, 1.0)]

    compact = index.compacted(np.array([2, 3, 5]))
    assert compact.count == 3
    assert compact.stored().tolist() == [A, B, EMPTY]
    assert [compact.representative(n) for n in range(3)] == [0, 1, 2]
    assert found(compact, A) == [(0, 0, 1.0), (0, 1, 0.875)]
    assert found(compact, EMPTY) == []


def test_a_load_without_gaps_matches_every_loaded_document():
    index = SignatureIndex(8, 4)
    index.start_load(3)
    index.load(np.arange(3), sigs(C, B, C))
    index.finish_load()
    assert [index.representative(n) for n in range(3)] == [0, 1, 0]
    assert index.members(0) == [0, 2]
    assert found(index, A) == [(0, 1, 0.875)]
    assert found(index, C) == [(0, 0, 1.0)]


def test_batch_matches_are_later_row_earlier_row_and_estimate():
    later, earlier, est = batch_matches(sigs(A, B, C, A), 4, 0.8)
    assert list(zip(later.tolist(), earlier.tolist(), est.tolist(), strict=True)) == [
        (1, 0, 0.875), (3, 0, 1.0), (3, 1, 0.875)]  # fmt: skip
    later, earlier, est = batch_matches(sigs(A, B, C, A), 4, 0.9)
    assert (later.tolist(), earlier.tolist(), est.tolist()) == ([3], [0], [1.0])
    for one in (sigs(A), np.zeros((0, 8), dtype=np.uint32)):
        later, earlier, est = batch_matches(one, 4, 0.8)
        assert (len(later), len(earlier), len(est)) == (0, 0, 0)


def test_a_band_digest_collision_is_never_a_candidate(monkeypatch):
    # Every band of every row gets one digest: only the rows compared tell candidates apart.
    monkeypatch.setattr(_banding, "band_digest", lambda block: np.zeros(len(block), np.uint64))
    index = SignatureIndex(8, 4)
    index.add(sigs(A, C, B, A))
    assert [index.representative(n) for n in range(4)] == [0, 1, 2, 0]
    q, reps = index.candidates(sigs(A, C, EMPTY))
    assert sorted(zip(q.tolist(), reps.tolist(), strict=True)) == [(0, 0), (0, 2), (1, 1)]
    assert found(index, A) == [(0, 0, 1.0), (0, 2, 0.875)]
    assert found(index, C) == [(0, 1, 1.0)]


# --- exact behaviour: placement, key order, memory, growth, compaction in slabs ---------------

D = [1, 2, 3, 4, 50, 60, 70, 80]  # agrees with A on two bands of four: estimate 0.5


def test_a_new_index_is_empty_and_matches_nothing():
    index = SignatureIndex(8, 4)
    assert (index.num_perm, index.bands, index.rows, index.count) == (8, 4, 2, 0)
    assert (index.buckets.bands, index.buckets.rows) == (4, 2)
    assert index.stored().shape == (0, 8)
    for rows in (sigs(A), np.zeros((0, 8), dtype=np.uint32)):
        got = index.matches(rows, 0.0)
        assert [a.tolist() for a in got] == [[], [], []]
        assert [a.dtype for a in got] == [np.int64, np.int64, np.float64]
    index.add(sigs(A))
    got = index.matches(np.zeros((0, 8), dtype=np.uint32), 0.0)
    assert [a.tolist() for a in got] == [[], [], []]
    assert [a.dtype for a in got] == [np.int64, np.int64, np.float64]


def test_matches_keep_estimates_at_or_above_the_threshold():
    index = SignatureIndex(8, 4)
    index.add(sigs(A, B, C, D))
    assert found(index, A, 0.5) == [(0, 0, 1.0), (0, 1, 0.875), (0, 3, 0.5)]
    assert found(index, A, 0.875) == [(0, 0, 1.0), (0, 1, 0.875)]
    assert found(index, A, 0.876) == [(0, 0, 1.0)]
    rows, reps, est = index.matches(sigs(C, A), 0.9)
    assert (rows.tolist(), reps.tolist(), est.tolist()) == ([0, 1], [2, 0], [1.0, 1.0])


def test_place_plans_classes_joins_and_matches_without_changing_the_index():
    index = SignatureIndex(8, 4)
    index.add(sigs(A, EMPTY))
    placed = index.place(sigs(C, B, C, EMPTY, A, EMPTY, A), 0.8)
    assert index.count == 2  # planning only
    assert placed.first.tolist() == [0, 1, 3, 4]
    assert placed.copy_of.tolist() == [0, 1, 0, 2, 3, 2, 3]
    assert placed.joins.tolist() == [-1, -1, -1, 0]  # an empty signature never joins
    assert placed.empty.tolist() == [False, False, False, True, False, True, False]
    rows, reps, est = placed.matches
    assert sorted(zip(rows.tolist(), reps.tolist(), est.tolist(), strict=True)) == [
        (1, 0, 0.875), (3, 0, 1.0)]  # fmt: skip
    by_default = index.place(sigs(B, A))  # threshold 1.0: only identical classes
    assert by_default.joins.tolist() == [-1, 0]
    assert [a.tolist() for a in by_default.matches] == [[1], [0], [1.0]]
    assert index.add(sigs(C, B, C, EMPTY, A, EMPTY, A), placed).tolist() == [2, 3, 4, 5, 6, 7, 8]
    assert [index.representative(n) for n in range(9)] == [0, 1, 2, 3, 2, 5, 0, 7, 0]
    assert index.members(0) == [0, 6, 8]
    assert index.members(2) == [2, 4]
    assert index.members(1) == [1] and index.members(5) == [5]
    assert index.sizes(np.array([0, 1, 2, 3, 5, 7])).tolist() == [3, 1, 2, 1, 1, 1]
    assert index.sizes(np.array([0])).dtype == np.int64


def test_members_follow_the_keys_given_else_the_numbers():
    keys = ["m", "z", "a", "q"]
    index = SignatureIndex(8, 4, keys)
    index.add(sigs(A, A, A, A))
    assert index.members(0) == [2, 0, 3, 1]  # a, m, q, z
    index.remove(2)
    assert index.members(0) == [0, 3, 1]
    assert index.representative(2) == 0 and index.sizes(np.array([0])).tolist() == [3]
    by_number = SignatureIndex(8, 4)
    by_number.add(sigs(B, A))
    by_number.add(sigs(A, B, A))
    assert by_number.members(1) == [1, 2, 4]
    assert by_number.members(0) == [0, 3]


def test_signatures_are_copies_of_the_rows_asked():
    index = SignatureIndex(8, 4)
    index.add(sigs(A, B, C))
    got = index.signatures([2, 0])
    assert got.tolist() == [C, A] and got.dtype == np.uint32
    got[0, 0] = 7
    assert index.signatures(np.array([2])).tolist() == [C]


def test_a_removed_singleton_has_no_members_and_no_matches():
    index = SignatureIndex(8, 4)
    index.add(sigs(A, C))
    index.remove(1)
    assert index.members(1) == [] and index.members(0) == [0]
    assert index.sizes(np.array([0, 1])).tolist() == [1, 0]
    assert found(index, C, 0.0) == []
    q, reps = index.candidates(sigs(C, A))
    assert (q.tolist(), reps.tolist()) == ([1], [0])


def test_memory_counts_the_rows_given_out_the_copies_and_the_buckets():
    index = SignatureIndex(8, 4)
    empty = index.nbytes()
    assert empty == index.buckets.nbytes() == 4 * 4096 * 12
    index.add(sigs(A, A, B))
    rows = 3 * (8 * 4 + 1 + 4 + 4)  # signature, alive flag, class, size
    copies = 56 + 8 * 2  # class 0 holds [0, 1]
    assert index.nbytes() == rows + copies + index.buckets.nbytes()
    assert index.buckets.nbytes() == 4 * 4096 * 12  # two classes, still in the buffers
    index.add(sigs(B, A))
    assert index.nbytes() == 5 * 41 + (56 + 8 * 3) + (56 + 8 * 2) + index.buckets.nbytes()


def test_rows_are_reserved_for_at_least_1024_then_doubling():
    index = SignatureIndex(8, 4)
    assert len(index._sigs) == 0
    index.add(sigs(A))
    assert [len(a) for a in (index._sigs, index._alive, index._class, index._size)] == [1024] * 4
    index.add(np.tile(sigs(C), (1023, 1)))
    assert len(index._sigs) == 1024
    index.add(sigs(B))
    assert len(index._sigs) == 2048
    index.start_load(5000)
    assert (len(index._sigs), index.count) == (5000, 5000)
    index.start_load(10)  # never shrinks
    assert (len(index._sigs), index.count) == (5000, 5000)
    assert index.signatures([0, 1, 1024]).tolist() == [A, C, B]
    assert index.alive_many(np.array([0, 1023, 1024, 1025])).tolist() == [True, True, True, False]
    assert [index.representative(n) for n in (0, 1, 1023, 1024, 1025, 4999)] == [
        0, 1, 1, 1024, 1025, 4999]  # fmt: skip
    assert index.sizes(np.array([0, 1, 1024, 1025])).tolist() == [1, 1023, 1, 0]


@pytest.mark.parametrize("slab", [1, 2, 1 << 16])
def test_compaction_copies_the_rows_kept_a_slab_at_a_time(monkeypatch, slab):
    from neardup.core import _signature_index

    monkeypatch.setattr(_signature_index, "_COMPACT_SLAB", slab)
    index = SignatureIndex(8, 4)
    index.add(sigs(A, B, C, A, EMPTY, C))
    index.remove(1)
    compact = index.compacted(np.array([0, 2, 3, 4, 5]), keys=["e", "d", "c", "b", "a"])
    assert (compact.num_perm, compact.bands, compact.count) == (8, 4, 5)
    assert compact.stored().tolist() == [A, C, A, EMPTY, C]
    assert [compact.representative(n) for n in range(5)] == [0, 1, 0, 3, 1]
    assert compact.members(0) == [2, 0] and compact.members(1) == [4, 1]  # by the new keys
    assert compact.alive_many(np.arange(5)).all()
    assert found(compact, B, 0.8) == [(0, 0, 0.875)]
    assert [b.buffered for b in compact.buckets._bands] == [0] * 4  # merged after the load


def test_an_index_before_its_first_document_holds_no_number():
    index = SignatureIndex(8, 4)
    assert index.stored().dtype == np.uint32
    assert index.signatures([]).shape == (0, 8)
    assert index.signatures([]).dtype == np.uint32
    assert index.alive_many(np.array([], dtype=np.int64)).dtype == np.bool_
    for read in (
        lambda: index.alive_many(np.array([0])),
        lambda: index.representative(0),
        lambda: index.sizes(np.array([0])),
    ):
        with pytest.raises(IndexError):
            read()


def test_an_index_of_one_document_matches_it():
    index = SignatureIndex(8, 4)
    index.add(sigs(B))
    assert found(index, A, 0.875) == [(0, 0, 0.875)]  # at the threshold exactly: a match
    assert found(index, A, 0.9) == []


def test_batch_matches_of_two_rows_and_at_the_threshold_exactly():
    later, earlier, est = batch_matches(sigs(A, B), 4, 0.875)
    assert (later.tolist(), earlier.tolist(), est.tolist()) == ([1], [0], [0.875])
    later, earlier, est = batch_matches(sigs(A, B), 4, 0.876)
    assert (later.tolist(), earlier.tolist(), est.tolist()) == ([], [], [])


def test_a_placement_applied_after_its_representative_left_joins_the_class_it_planned():
    index = SignatureIndex(8, 4)
    index.add(sigs(A))
    placed = index.place(sigs(A))
    assert placed.joins.tolist() == [0]
    index.remove(0)  # between planning and applying: the class is kept for the planned copy
    assert index.add(sigs(A), placed).tolist() == [1]
    assert index.representative(1) == 0
    assert index.members(0) == [1]  # the removed representative is no member
    assert index.sizes(np.array([0])).tolist() == [1]
    assert found(index, A) == [(0, 0, 1.0)]
