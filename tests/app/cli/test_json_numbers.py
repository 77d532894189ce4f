"""NaN and infinities (issue 23): a JSON Lines input holding ``NaN``, ``Infinity`` or ``-Infinity``
(Python's json reads them; JSON has no such token) is bad input naming file:line and the field;
a Parquet input's NaN or infinite float is written ``null`` to JSON Lines (counted, one warning)
and kept by Parquet. Every line a run writes parses with a strict parser."""

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.app.cli.dedup import run_dedup
from neardup.app.cli.options import DedupOptions, DedupParams
from neardup.core.engine import CorpusError
from tests.app.cli.test_cli import neardup

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _refuse(token: str) -> float:
    raise ValueError(f"{token} in an output line")


def strict(line: str) -> object:
    """``json.loads`` that refuses NaN and Infinity (and 1e999, read as infinity)."""

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{text} in an output line")
        return value

    return json.loads(line, parse_constant=_refuse, parse_float=finite)


def strict_lines(path: Path) -> list[object]:
    return [strict(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(("token", "removed"), [("NaN", False), ("-Infinity", True)])
def test_a_json_lines_nan_is_bad_input_naming_file_line_and_field(tmp_path, token, removed):
    """The line is exactly ``json.dumps`` of its row (what the splice fast path writes as read):
    refused all the same, before anything is written."""
    rows = [
        {"id": "a", "text": "one two three four"},
        {"id": "b", "text": "five six seven eight", "meta": {"score": float(token)}},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert token in (tmp_path / "in.jsonl").read_text()
    extra = ["--removed", "gone.jsonl"] if removed else []
    ran = neardup("dedup", "in.jsonl", "--output", "out.jsonl", *extra, cwd=tmp_path)
    assert ran.returncode == 2, ran.stderr
    [line] = ran.stderr.splitlines()
    assert line == (
        f"neardup dedup: error: in.jsonl:2: {token} is not JSON (field 'meta.score'): write "
        "null, a number or a string instead"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def _parquet_with_nan(path: Path) -> None:
    table = pa.table({
        "id": ["a", "b", "c"],
        "text": ["one two three four", "five six seven eight", "nine ten eleven twelve"],
        "score": [float("nan"), 1.5, float("inf")],
        "meta": [{"w": -math.inf}, {"w": 2.0}, {"w": 3.0}],
    })  # fmt: skip
    pq.write_table(table, path)


def test_a_parquet_nan_is_null_in_json_lines_counted_once_and_kept_by_parquet(tmp_path):
    _parquet_with_nan(tmp_path / "in.parquet")
    ran = neardup("dedup", "in.parquet", "--output", "out.jsonl", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    warnings = [line for line in ran.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "neardup dedup: warning: 3 NaN or infinite values written as null (JSON has no number "
        "for them; a Parquet output keeps them)"
    ]
    rows = strict_lines(tmp_path / "out.jsonl")
    assert [(r["id"], r["score"], r["meta"]["w"]) for r in rows] == [
        ("a", None, None),
        ("b", 1.5, 2.0),
        ("c", None, 3.0),
    ]
    manifest = json.loads((tmp_path / "out.jsonl.manifest.json").read_text())
    assert manifest["counts"]["nan_as_null"] == 3
    ran = neardup("dedup", "in.parquet", "--output", "out.parquet", "--quiet", cwd=tmp_path)
    assert ran.returncode == 0 and ran.stderr == ""
    kept = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert math.isnan(kept[0]["score"]) and kept[2]["score"] == math.inf
    assert kept[0]["meta"]["w"] == -math.inf
    manifest = json.loads((tmp_path / "out.parquet.manifest.json").read_text())
    assert "nan_as_null" not in manifest["counts"]


floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1e999", "-1e999", "1.5", "2E400"]),  # as JSON text: beyond a float's range
)
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)


@st.composite
def corpora(draw):
    """(rows as JSON Lines lines, or None; the same rows as Parquet columns): every row a text
    (near copies likely, so rows are dropped too) and a float, sometimes a NaN token."""
    n = draw(st.integers(1, 8))
    texts = [draw(text) for _ in range(n)]
    values = [draw(floats) for _ in range(n)]
    spaced = draw(st.booleans())  # json.dumps' spelling (spliced) or not (parsed again)
    lines = []
    for i, (t, v) in enumerate(zip(texts, values, strict=True)):
        number = v if isinstance(v, str) else json.dumps(v)  # NaN, Infinity, -Infinity, 1.5
        sep = ", " if spaced else ","
        lines.append(f'{{"id": "r{i}"{sep}"text": {json.dumps(t)}, "meta": {{"q": {number}}}}}')
    numbers = [float(v) for v in values]
    return lines, {"id": [f"r{i}" for i in range(n)], "text": texts,
                   "meta": [{"q": q} for q in numbers]}  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(corpora(), st.booleans(), st.booleans())
def test_every_line_any_run_writes_parses_strictly(tmp_path_factory, corpus, parquet, keep_all):
    tmp = tmp_path_factory.mktemp("strict")
    lines, columns = corpus
    if parquet:
        source = tmp / "in.parquet"
        pq.write_table(pa.table(columns), source)
    else:
        source = tmp / "in.jsonl"
        source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    options = DedupOptions(
        inputs=(str(source),), output=str(tmp / "out.jsonl"), removed=str(tmp / "gone.jsonl"),
        params=DedupParams(keep_duplicates=keep_all), quiet=True,
    )  # fmt: skip
    tokens = [line for line in lines if any(t in line for t in ("NaN", "Infinity"))]
    if not parquet and tokens:
        with pytest.raises(CorpusError, match="is not JSON"):
            run_dedup(options)
        assert not (tmp / "out.jsonl").exists()
        return
    manifest = run_dedup(options)
    written = strict_lines(tmp / "out.jsonl") + strict_lines(tmp / "gone.jsonl")
    assert len(written) == len(columns["id"])
    nulls = sum(not math.isfinite(m["q"]) for m in columns["meta"])
    assert manifest.counts.get("nan_as_null", 0) == nulls
