"""``core._arrow``: the arrays ``pyarrow.array`` would build, without importing pandas, and an
index run that never imports it (pandas is installed here: the Spark extra brings it)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neardup.core._arrow import numbers, strings
from tests.indexes import env

ROOT = Path(__file__).resolve().parents[2]


@given(st.lists(st.text()))
def test_strings_are_the_array_pyarrow_builds(values):
    got = strings(values)
    got.validate(full=True)
    assert got.equals(pa.array(values, type=pa.string()))


def test_text_utf8_cannot_encode_is_pyarrows_error():
    with pytest.raises(UnicodeEncodeError):
        pa.array(["a", "\ud800"], type=pa.string())
    with pytest.raises(UnicodeEncodeError):
        strings(["a", "\ud800"])


@given(
    hnp.arrays(
        st.sampled_from([np.int16, np.int64, np.uint32, np.float64]),
        st.integers(0, 40),
        elements={"allow_nan": False},
    ),
    st.sampled_from([1, 2, 3]),
)
def test_numbers_are_the_array_pyarrow_builds(values, step):
    strided = values[::step]  # a structured array's field is strided like this
    assert numbers(strided).equals(pa.array(strided))


_RUN = """
import runpy, sys
for argv in sys.argv[1:]:
    sys.argv = ["neardup", *argv.split()]
    try:
        runpy.run_module("neardup", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        assert not exc.code, exc.code
print("pandas" in sys.modules)
"""


def test_an_index_created_appended_to_and_compacted_imports_no_pandas(tmp_path):
    text = "words of document {} here and there"
    docs = [f'{{"id": "d{i}", "text": "{text.format(i % 7)}"}}' for i in range(40)]
    (tmp_path / "a.jsonl").write_text("\n".join(docs[:30]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(docs[20:]) + "\n")  # ids already indexed too
    runs = [
        "dedup a.jsonl --output a.out.jsonl --index idx --quiet",
        "dedup b.jsonl --output b.out.jsonl --index idx --quiet",
        "index compact idx",
        "index query idx b.jsonl --output q.jsonl",
    ]
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *runs], cwd=tmp_path, env=env(), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False"
    assert (tmp_path / "q.jsonl").exists()
