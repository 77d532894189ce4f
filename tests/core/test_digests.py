"""Exact dedup's digests, checked against hashlib, and its keepers on digests that collide in
one half only."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.engine import DuplicateIdError, exact_keepers, id_rank, text_digest, text_digests


@given(st.lists(st.text(max_size=30), max_size=8))
def test_text_digests_are_the_first_128_bits_of_sha256_as_two_little_endian_words(texts):
    rows = text_digests(texts)
    assert rows.dtype == np.uint64 and rows.shape == (len(texts), 2)
    for text, row in zip(texts, rows, strict=True):
        sha = hashlib.sha256(text.encode("utf-8")).digest()
        assert text_digest(text) == sha
        assert [int(row[0]), int(row[1])] == [
            int.from_bytes(sha[:8], "little"), int.from_bytes(sha[8:16], "little"),
        ]  # fmt: skip


def test_exact_keepers_keep_the_smallest_rank_of_each_group_of_equal_rows():
    # Rows 0 and 2 are equal; row 1 shares their second half only and sorts between them by it.
    digests = np.array([[0, 5], [1, 5], [0, 5], [2, 7]], dtype=np.uint64)
    rank = np.array([3, 1, 0, 2], dtype=np.int64)
    keep = exact_keepers(digests, rank)
    assert keep.dtype == np.bool_
    assert keep.tolist() == [False, True, True, True]


def test_id_rank_is_each_rows_place_in_id_order_and_refuses_repeated_ids():
    assert id_rank(["b", "c", "a"]).tolist() == [1, 2, 0]
    empty = id_rank([])
    assert empty.dtype == np.int64 and empty.shape == (0,)
    with pytest.raises(DuplicateIdError) as caught:
        id_rank(["x", "a", "b", "a", "x"])
    assert caught.value.doc_ids == ("a", "x")


def test_repeated_ids_are_named_up_to_twenty_in_order_and_the_rest_counted():
    with pytest.raises(DuplicateIdError) as caught:
        id_rank(["b", "a", "b"])
    assert str(caught.value) == "document id 'b' appear(s) more than once"
    ids = [f"d{i:02d}" for i in range(22)]
    with pytest.raises(DuplicateIdError) as caught:
        id_rank(ids + ids[::-1])
    shown = ", ".join(repr(i) for i in ids[:20])
    assert str(caught.value) == f"document ids {shown} and 2 more appear(s) more than once"
    assert caught.value.doc_ids == tuple(ids)


def test_text_digests_of_no_texts_and_of_equal_texts():
    none = text_digests([])
    assert none.dtype == np.uint64 and none.shape == (0, 2)
    rows = text_digests(["a", "b", "a"])
    assert rows[0].tolist() == rows[2].tolist() != rows[1].tolist()


@pytest.mark.parametrize(
    ("digests", "rank", "keep"),
    [
        ([], [], []),
        ([[1, 1]], [0], [True]),
        ([[1, 1], [1, 1], [1, 1]], [2, 0, 1], [False, True, False]),
        ([[1, 2], [2, 1], [1, 2], [2, 1]], [0, 3, 1, 2], [True, False, False, True]),
        ([[9, 9], [0, 0], [9, 9], [0, 1]], [1, 2, 0, 3], [False, True, True, True]),
    ],
)
def test_exact_keepers_by_table(digests, rank, keep):
    got = exact_keepers(
        np.array(digests, dtype=np.uint64).reshape(-1, 2), np.array(rank, dtype=np.int64)
    )
    assert got.dtype == np.bool_
    assert got.tolist() == keep


def test_id_rank_orders_ids_as_python_compares_strings():
    ids = ["b", "a10", "a2", "B", "é", ""]
    assert id_rank(ids).tolist() == [sorted(ids).index(i) for i in ids]
    with pytest.raises(DuplicateIdError) as caught:
        id_rank(["z", "z"])
    assert caught.value.doc_ids == ("z",)
