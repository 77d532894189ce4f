"""SignatureIndex on hand-made signatures: classes of identical signatures, removals, a bulk
load with gaps, compaction, and the matches inside one batch (``batch_matches``)."""

import numpy as np

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
