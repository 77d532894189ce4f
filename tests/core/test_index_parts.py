"""An index part's Parquet columns (core/_index_parts.py): ``binary`` values of one width in
and out, chunked per row group, sorted by id, with the parameters in the metadata."""

import json

import numpy as np
import pyarrow as pa
import pytest

from neardup.core import _index_parts
from neardup.core._banding import band_digests
from neardup.core._index_parts import PARAMS_KEY, binary_matrix, part_table


def _binary(values: list[bytes | None], kind: pa.DataType | None = None) -> pa.Array:
    return pa.array(values, type=kind or pa.binary())


def test_part_file_constants_are_the_documented_format() -> None:
    assert _index_parts.COLUMNS == ("id", "digest", "bands", "signature")
    assert PARAMS_KEY == "neardup.params"
    assert (_index_parts.ROW_GROUP, _index_parts.BATCH_ROWS) == (8192, 65536)
    assert _index_parts.PARQUET_OPTIONS == {
        "compression": {"id": "zstd", "digest": "none", "bands": "none", "signature": "none"},
        "use_dictionary": False,
        "write_statistics": ["id"],
    }


@pytest.mark.parametrize(
    ("rows", "group", "chunks"),
    [
        (0, 4, [0]),
        (0, 1, [0]),
        (1, 1, [1]),
        (1, 4, [1]),
        (4, 4, [4]),
        (5, 4, [4, 1]),
        (9, 4, [4, 4, 1]),
        (3, 1, [1, 1, 1]),
    ],
)
def test_binary_is_one_value_a_row_chunked_per_row_group(
    monkeypatch: pytest.MonkeyPatch, rows: int, group: int, chunks: list[int]
) -> None:
    monkeypatch.setattr(_index_parts, "ROW_GROUP", group)
    matrix = np.arange(rows * 3, dtype="<u4").reshape(rows, 3)
    column = _index_parts._binary(matrix)
    assert column.type == pa.binary()
    assert [len(c) for c in column.chunks] == chunks
    assert column.to_pylist() == [row.tobytes() for row in matrix]
    assert column.null_count == 0


def test_binary_of_a_vector_is_one_item_a_row_and_of_a_view_its_values() -> None:
    vector = np.array([1, 2, 3], dtype="<u8")
    assert _index_parts._binary(vector).to_pylist() == [v.tobytes() for v in vector]
    strided = np.arange(12, dtype="<u4").reshape(3, 4)[:, ::2]  # not contiguous
    assert _index_parts._binary(strided).to_pylist() == [r.tobytes() for r in strided]


def test_part_table_sorts_rows_by_code_point_and_holds_the_parameters() -> None:
    ids = ["b", "é", "a", "Z", "ab"]
    rng = np.random.default_rng(3)
    digests = rng.integers(0, 2**63, size=(5, 2), dtype=np.uint64)
    sigs = rng.integers(0, 2**31, size=(5, 8), dtype=np.uint32)
    params = {"num_perm": 8, "bands": 2, "alpha": [1, 2]}
    table = part_table(ids, digests, sigs, 2, params)
    order = [3, 2, 4, 0, 1]  # "Z" < "a" < "ab" < "b" < "é"
    assert table.column_names == ["id", "digest", "bands", "signature"]
    assert [f.type for f in table.schema] == [pa.string()] + [pa.binary()] * 3
    assert table.column("id").to_pylist() == [ids[i] for i in order]
    assert table.column("digest").to_pylist() == [digests[i].astype("<u8").tobytes() for i in order]
    bands = band_digests(sigs[order], 2).astype("<u8")
    assert table.column("bands").to_pylist() == [row.tobytes() for row in bands]
    assert table.column("signature").to_pylist() == [sigs[i].astype("<u4").tobytes() for i in order]
    meta = table.schema.metadata
    assert meta == {PARAMS_KEY.encode(): json.dumps(params, sort_keys=True).encode()}


def test_part_table_of_no_rows_has_the_columns() -> None:
    table = part_table(
        [], np.empty((0, 2), np.uint64), np.empty((0, 4), np.uint32), 2, {"bands": 2}
    )
    assert table.num_rows == 0 and table.column_names == list(_index_parts.COLUMNS)
    assert [f.type for f in table.schema] == [pa.string()] + [pa.binary()] * 3


def test_part_table_writes_little_endian_values_of_any_byte_order() -> None:
    digests = np.array([[1, 2]], dtype=">u8")
    sigs = np.array([[3, 4, 5, 6]], dtype=">u4")
    table = part_table(["a"], digests, sigs, 2, {})
    assert table.column("digest").to_pylist() == [np.array([1, 2], "<u8").tobytes()]
    assert table.column("signature").to_pylist() == [np.array([3, 4, 5, 6], "<u4").tobytes()]
    native = band_digests(np.array([[3, 4, 5, 6]], np.uint32), 2).astype("<u8").tobytes()
    assert table.column("bands").to_pylist() == [native]


WIDE = [b"\x01\x00\x00\x00\x02\x00\x00\x00", b"\x03\x00\x00\x00\x04\x00\x00\x00"]


@pytest.mark.parametrize(
    "kind", [pa.binary(), pa.large_binary(), pa.binary(8)], ids=["binary", "large", "fixed"]
)
def test_binary_matrix_reads_each_binary_kind_and_slices(kind: pa.DataType) -> None:
    column = _binary([*WIDE, b"\x05\x00\x00\x00\x06\x00\x00\x00"], kind)
    out = binary_matrix(column, 8, "<u4")
    assert out is not None and out.dtype == np.dtype("<u4") and out.shape == (3, 2)
    assert out.tolist() == [[1, 2], [3, 4], [5, 6]]
    sliced = binary_matrix(column.slice(1, 2), 8, "<u4")
    assert sliced is not None and sliced.tolist() == [[3, 4], [5, 6]]
    one = binary_matrix(column.slice(2, 1), 8, "<u8")
    assert one is not None and one.tolist() == [[6 << 32 | 5]]
    assert binary_matrix(column.slice(1, 0), 8, "<u4").shape == (0, 2)


def test_binary_matrix_joins_the_chunks_of_a_chunked_column() -> None:
    column = pa.chunked_array([_binary(WIDE), _binary([]), _binary(WIDE[:1])])
    out = binary_matrix(column, 8, "<u4")
    assert out is not None and out.tolist() == [[1, 2], [3, 4], [1, 2]]
    single = pa.chunked_array([_binary([]), _binary(WIDE)])
    assert binary_matrix(single, 8, "<u4").tolist() == [[1, 2], [3, 4]]
    empty = pa.chunked_array([], type=pa.binary())
    got = binary_matrix(empty, 8, "<u4")
    assert got.shape == (0, 2) and got.dtype == np.dtype("<u4")
    assert binary_matrix(_binary([]), 16, "<u8").shape == (0, 2)


@pytest.mark.parametrize(
    "column",
    [
        _binary([WIDE[0], None]),
        _binary([None]),
        _binary([WIDE[0], WIDE[1][:7]]),
        _binary([WIDE[0] + b"x", WIDE[1][:7]]),  # the same bytes in all, not the same widths
        _binary([WIDE[0][:4], WIDE[1][:4]]),
        _binary([WIDE[0], WIDE[1][:7]], pa.large_binary()),
        pa.array(["abcdefgh"], type=pa.string()),
        pa.array([WIDE[0][:4]], type=pa.binary(4)),
        pa.array([WIDE[0] + WIDE[0]], type=pa.binary(16)),
        pa.chunked_array([_binary(WIDE), _binary([WIDE[0][:7]])]),
    ],
    ids=["null", "only-null", "short", "ragged", "narrow", "large", "string", "fixed-4", "fixed-16",
         "chunk"],
)  # fmt: skip
def test_binary_matrix_is_none_for_a_null_or_another_width(column) -> None:
    assert binary_matrix(column, 8, "<u4") is None


def test_binary_matrix_copies_values_not_aligned_for_their_type() -> None:
    data = b"\xff" + WIDE[0] + WIDE[1]  # the values start at byte 1
    offsets = np.array([1, 9, 17], dtype=np.int32)
    column = pa.Array.from_buffers(
        pa.binary(), 2, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)]
    )
    out = binary_matrix(column, 8, "<u4")
    assert out is not None and out.tolist() == [[1, 2], [3, 4]]
    assert out.flags.aligned
    aligned = binary_matrix(_binary(WIDE), 8, "<u4")
    assert aligned is not None and not aligned.flags.owndata  # a view of Arrow's buffer


def test_binary_matrix_of_a_slice_reads_only_its_own_values() -> None:
    column = _binary([*WIDE, b"\x05\x00\x00\x00\x06\x00\x00\x00", b"short"])
    first = binary_matrix(column.slice(0, 2), 8, "<u4")
    assert first is not None and first.tolist() == [[1, 2], [3, 4]]
    middle = binary_matrix(column.slice(1, 1), 8, "<u4")
    assert middle is not None and middle.tolist() == [[3, 4]]
    assert binary_matrix(column.slice(2, 1), 8, "<u4").tolist() == [[5, 6]]
    assert binary_matrix(column.slice(2, 2), 8, "<u4") is None


def test_binary_matrix_of_no_rows_needs_no_offsets() -> None:
    """Arrow allows an empty offsets buffer for an array of no values."""
    bare = pa.Array.from_buffers(pa.binary(), 0, [None, pa.py_buffer(b""), pa.py_buffer(b"")])
    got = binary_matrix(bare, 8, "<u4")
    assert got is not None and got.shape == (0, 2)
