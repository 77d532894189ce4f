"""New rows against an index (core/_index_lookup.py), piece by piece: the key filter, the
equal-key search, band leads and their confirmation, and ``lookup_index``'s edges."""

from pathlib import Path

import numpy as np
import pytest

from neardup.core import _index_lookup
from neardup.core._index_lookup import (
    IndexLookup,
    _confirmed,
    _equal_key_pairs,
    _KeyFilter,
    _NewSide,
    _searched_pairs,
)
from neardup.core.engine import (
    DocIndex,
    IndexDamagedError,
    MinhashParams,
    SignatureError,
    batch_signatures,
    commit_index,
    run_info,
    text_digests,
    write_part,
)

PARAMS = MinhashParams(num_perm=8, bands=4, threshold=0.5, k=1)
EMPTY = 2**31 - 1  # MERSENNE31: a signature entry of a text without shingles


def _u64(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


@pytest.mark.parametrize(
    ("keys", "want", "shift", "nbytes"),
    [(0, 1 << 16, 48, 1 << 13), (1024, 1 << 16, 48, 1 << 13), (1025, 1 << 17, 47, 1 << 14),
     (3000, 192000, 46, 1 << 15), (1 << 20, 1 << 25, 39, 1 << 22)],
)  # fmt: skip
def test_key_filter_has_64_bits_a_key_within_its_bounds(keys, want, shift, nbytes) -> None:
    assert (_index_lookup._FILTER_BITS_PER_ROW, _index_lookup._FILTER_MIN_BITS,
            _index_lookup._FILTER_MAX_BITS) == (64, 1 << 16, 1 << 25)  # fmt: skip
    sieve = _KeyFilter(np.arange(keys, dtype=np.uint64) << np.uint64(40))
    assert int(sieve.shift) == shift and sieve.shift.dtype == np.uint64
    assert sieve.bits.nbytes == nbytes and want <= 8 * nbytes


def test_key_filter_passes_every_member_and_keys_of_other_top_bits_not() -> None:
    members = _u64([0, 1 << 48, 5 << 48, (1 << 64) - 1, 7 << 48 | 12345])
    sieve = _KeyFilter(members)  # 16 top bits a slot (2**16 slots)
    assert sieve.passing(members).tolist() == [0, 1, 2, 3, 4]
    probe = _u64([2 << 48, 5 << 48 | 99, 3 << 48, 7 << 48, ((1 << 16) - 2) << 48, 8 << 48, 1])
    assert sieve.passing(probe).tolist() == [1, 3, 6]
    assert sieve.passing(_u64([])).tolist() == []
    assert _KeyFilter(_u64([])).passing(members).tolist() == []


@pytest.mark.parametrize(
    ("keys", "sorted_keys", "i", "pos"),
    [
        ([5, 1, 3, 5, 9], [1, 3, 3, 5, 7], [0, 1, 2, 2, 3], [3, 0, 1, 2, 3]),
        ([2, 4], [1, 3, 5], [], []),
        ([], [1], [], []),
        ([7], [], [], []),
        ([1, 1], [1, 1, 1], [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]),
        ([9, 0, 4], [0, 0, 4, 9, 9], [0, 0, 1, 1, 2], [3, 4, 0, 1, 2]),
    ],
)
def test_searched_pairs_are_every_equal_key(keys, sorted_keys, i, pos) -> None:
    got_i, got_pos = _searched_pairs(_u64(keys), _u64(sorted_keys))
    assert (got_i.tolist(), got_pos.tolist()) == (i, pos)
    assert got_i.dtype == np.int64 and got_pos.dtype == np.int64
    sieve = _KeyFilter(_u64(sorted_keys))
    found_i, found_pos = _equal_key_pairs(_u64(keys), _u64(sorted_keys), sieve)
    assert (found_i.tolist(), found_pos.tolist()) == (i, pos)


def test_equal_key_pairs_number_keys_as_given_when_the_filter_drops_some() -> None:
    sorted_keys = _u64([3 << 48, 3 << 48 | 1])
    keys = _u64([1 << 48, 3 << 48 | 1, 2 << 48, 3 << 48])
    i, pos = _equal_key_pairs(keys, sorted_keys, _KeyFilter(sorted_keys))
    assert (i.tolist(), pos.tolist()) == ([1, 3], [1, 0])


def test_index_lookup_empty_matches_nothing() -> None:
    empty = IndexLookup.empty(3, 16)
    assert (empty.ids, empty.parts) == ([], [])
    assert empty.sigs.shape == (0, 16) and empty.sigs.dtype == np.uint32
    assert empty.exact.tolist() == [-1, -1, -1] and empty.exact.dtype == np.int64
    assert empty.pairs.shape == (0, 2) and empty.pairs.dtype == np.int64
    assert empty.estimate.shape == (0,) and empty.estimate.dtype == np.float64


def test_new_side_exact_needs_both_digest_words_equal() -> None:
    sigs = np.arange(24, dtype=np.uint32).reshape(3, 8)
    digests = np.array([[5, 1], [2, 7], [5, 2]], dtype=np.uint64)
    side = _NewSide(sigs, digests, 4)
    indexed = np.array([[5, 2], [9, 9], [2, 7], [5, 1], [2, 8]], dtype=np.uint64)
    at, new = side.exact(indexed)
    assert sorted(zip(at.tolist(), new.tolist(), strict=True)) == [(0, 2), (2, 1), (3, 0)]


def test_new_side_leads_are_band_matches_of_rows_with_shingles() -> None:
    sigs = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 9, 9, 5, 6, 9, 9], [EMPTY] * 8],
                    dtype=np.uint32)  # fmt: skip
    side = _NewSide(sigs, np.zeros((3, 2), dtype=np.uint64), 4)
    from neardup.core._banding import band_digests

    bands = band_digests(np.array([[1, 2, 0, 0, 5, 6, 7, 8], [EMPTY] * 8], np.uint32), 4)
    at, new, band = side.leads(bands)
    got = sorted(zip(at.tolist(), new.tolist(), band.tolist(), strict=True))
    # Indexed row 0 shares bands 0 and 2 with both new rows, band 3 with row 0; the empty new
    # row leads nowhere, not even to the empty indexed row.
    assert got == [(0, 0, 0), (0, 0, 2), (0, 0, 3), (0, 1, 0), (0, 1, 2)]
    assert at.dtype == new.dtype == band.dtype == np.int64


def test_confirmed_keeps_equal_bands_at_or_above_the_threshold_once_per_pair() -> None:
    new_sigs = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 0, 0, 0, 0, 0, 0]], dtype=np.uint32)
    cand = np.array([[1, 2, 3, 4, 9, 9, 9, 9], [9, 9, 3, 4, 5, 6, 7, 0]], dtype=np.uint32)
    # leads (indexed, new, band): band rows of 2; (1, 0, 0) is a lead whose rows differ.
    at = np.array([0, 0, 1, 1, 0, 1], dtype=np.int64)
    new = np.array([0, 0, 0, 0, 1, 1], dtype=np.int64)
    band = np.array([0, 1, 1, 0, 0, 0], dtype=np.int64)
    got = _confirmed(new_sigs, cand, at, new, band, 2, 0.5)
    assert [g.tolist() for g in got] == [[0, 1], [0, 0], [0.5, 0.625]]
    assert got[2].dtype == np.float64
    above = _confirmed(new_sigs, cand, at, new, band, 2, 0.51)
    assert [g.tolist() for g in above] == [[1], [0], [0.625]]
    assert [g.tolist() for g in _confirmed(new_sigs, cand, at, new, band, 2, 0.63)] == [[], [], []]
    none = _confirmed(new_sigs, cand, at[:0], new[:0], band[:0], 2, 0.0)
    assert [g.tolist() for g in none] == [[], [], []]


def test_a_lead_whose_band_rows_differ_is_never_confirmed() -> None:
    """A band digest collision: the pair is near (5 of 8 entries equal) but shares no band."""
    new_sigs = np.array([[1, 2, 3, 4, 5, 6, 7, 8]], dtype=np.uint32)
    cand = np.array([[0, 2, 3, 9, 5, 0, 7, 8]], dtype=np.uint32)
    one = np.array([0], dtype=np.int64)
    for band in range(3):  # bands 0-2 differ; band 3 is equal
        got = _confirmed(new_sigs, cand, one * 0, one * 0, one * 0 + band, 2, 0.5)
        assert [g.tolist() for g in got] == [[], [], []]
    got = _confirmed(new_sigs, cand, one * 0, one * 0, one * 0 + 3, 2, 0.5)
    assert [g.tolist() for g in got] == [[0], [0], [0.625]]


def _index(tmp_path: Path, parts: list[dict[str, str]]) -> DocIndex:
    url = str(tmp_path / "idx")
    for docs in parts:
        index = DocIndex.open(url, missing_ok=True)
        ids, texts = list(docs), list(docs.values())
        sigs = batch_signatures(texts, PARAMS)
        part = write_part(index, PARAMS, ids, text_digests(texts), sigs, run_info("l", "t", []))
        commit_index(index, PARAMS, [part])
    return DocIndex.open(url)


def test_lookup_of_no_rows_or_in_no_index_is_empty_of_the_rows_shape(tmp_path: Path) -> None:
    new = DocIndex.open(str(tmp_path / "none"), missing_ok=True)
    found = new.lookup(np.zeros((3, 5), np.uint32), np.zeros((3, 2), np.uint64))
    assert found.exact.tolist() == [-1, -1, -1] and found.sigs.shape == (0, 5)
    flat = new.lookup(np.zeros(3, np.uint32), np.zeros((3, 2), np.uint64))
    assert flat.exact.tolist() == [-1, -1, -1] and flat.sigs.shape == (0, 0)
    index = _index(tmp_path, [{"a": "x y z"}])
    none = index.lookup(np.zeros((0, 8), np.uint32), np.zeros((0, 2), np.uint64))
    assert none.exact.tolist() == [] and none.sigs.shape == (0, 8) and none.ids == []


@pytest.mark.parametrize("shape", [(2, 7), (2, 9), (16,), (2, 4, 2)])
def test_lookup_of_signatures_of_another_width_is_refused(tmp_path: Path, shape) -> None:
    index = _index(tmp_path, [{"a": "x y z"}])
    sigs = np.zeros(shape, np.uint32)
    with pytest.raises(SignatureError) as caught:
        index.lookup(sigs, np.zeros((shape[0], 2), np.uint64))
    assert str(caught.value) == f"signatures have shape {shape}, the index takes 8 entries"


def test_lookup_across_parts_names_the_smallest_equal_id_and_each_part(tmp_path: Path) -> None:
    index = _index(tmp_path, [
        {"m": "a b c d", "c": "e f g h", "q": "u v w"},
        {"b": "a b c d", "z": "a b c d e", "k": "r s t"},
    ])  # fmt: skip
    new = ["a b c d", "nothing alike here", "r s t", "e f g h"]
    found = index.lookup(batch_signatures(new, PARAMS), text_digests(new))
    assert found.ids == ["b", "c", "k", "m", "z"]
    first, second = (p.name for p in index.parts)
    assert found.parts == [second, first, second, first, second]
    assert [found.ids[j] if j >= 0 else None for j in found.exact.tolist()] == ["b", None, "k", "c"]
    assert (
        found.sigs.tolist()
        == batch_signatures(
            ["a b c d", "e f g h", "r s t", "a b c d", "a b c d e"], PARAMS
        ).tolist()
    )
    pairs = [(i, found.ids[j]) for i, j in found.pairs.tolist()]
    assert pairs == sorted(pairs)
    assert {(0, "b"), (0, "m"), (2, "k"), (3, "c")} <= set(pairs)
    assert found.estimate.dtype == np.float64 and len(found.estimate) == len(pairs)
    exact_pairs = [e for (i, j), e in zip(pairs, found.estimate.tolist(), strict=True)
                   if j in ("b", "m", "k", "c")]  # fmt: skip
    assert exact_pairs == [1.0] * 4


def test_lookup_of_nothing_alike_is_empty(tmp_path: Path) -> None:
    index = _index(tmp_path, [{"a": "x y z"}])
    found = index.lookup(batch_signatures(["p q r", ""], PARAMS), text_digests(["p q r", ""]))
    assert found.ids == [] and found.exact.tolist() == [-1, -1] and found.sigs.shape == (0, 8)


def test_signatures_that_cannot_be_read_are_damage_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    index = _index(tmp_path, [{"a": "x y z"}])

    def broken(self, *args, **kwargs):
        raise OSError("bad page")

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", broken)
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", broken)
    with pytest.raises(IndexDamagedError) as caught:
        index.lookup(batch_signatures(["x y z"], PARAMS), text_digests(["x y z"]))
    name = index.parts[0].files[0].path
    assert (
        str(caught.value) == f"{index.url}: the index is damaged: {name} cannot be read (bad page)"
    )
