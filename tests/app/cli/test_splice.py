"""Pass 2's fast path (``neardup.app.cli.splice``): a spliced line is byte for byte what the general
path writes, and ``neardup dedup`` writes the same bytes with the fast path on and off for any
mix of line spellings."""

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.app.cli import dedup as dedup_module
from neardup.app.cli import main
from neardup.app.cli.splice import (
    GENERAL,
    META_ABSENT,
    META_LAST,
    META_NULL,
    SKIP,
    classify,
    tagged_line,
    with_reason_line,
)
from neardup.core.engine import CLUSTER_KEY, Record
from tests.app.cli.licenses import mit

REASON = "neardup"
# Characters that exercise every escape json.dumps writes or does not write.
ODD = ["é", "“", "”", "\u2028", "😀", "\x01", "\x7f", "/", "\\", '"', "\t", "Ω", "\u00a0"]

texts = st.text(st.sampled_from([*ODD, "a", " ", "b"]), max_size=20)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False), texts,
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(texts, inner, max_size=3)),
    max_leaves=8,
)  # fmt: skip


def record(row: dict, raw: str) -> Record:
    return Record(str(row.get("id")), str(row.get("text")), row, "in.jsonl", 1, raw)


def general_tagged(row: dict, root: str) -> str:
    """What the general path writes for a kept row (Tagger._tagged, RowWriter.write)."""
    meta = row.get("meta") or {}
    return json.dumps({**row, "meta": {**meta, CLUSTER_KEY: root}})


@settings(max_examples=300)
@given(
    st.dictionaries(texts.filter(lambda k: k not in ("meta", REASON)), values, max_size=4),
    st.one_of(st.just("absent"), st.none(), st.dictionaries(texts, values, max_size=3)),
    texts,
    st.sampled_from(["\n", ""]),
)
def test_a_spliced_line_is_what_json_dumps_writes(fields, meta, root, newline):
    row = {"id": "x", "text": "t", **fields}
    if meta != "absent":
        row["meta"] = meta
    raw = json.dumps(row) + newline
    shape = classify(record(row, raw), REASON)
    if meta == "absent":
        assert shape == META_ABSENT
    elif meta is None:
        assert shape == META_NULL
    else:
        assert shape == (SKIP if CLUSTER_KEY in meta else META_LAST)
    if shape >= META_ABSENT:
        line = tagged_line(raw, shape, root)
        assert line == general_tagged(row, root)
        reason = {"reason": "near", "duplicate_of": root, "estimate": 0.8125, "set": None}
        assert with_reason_line(line, REASON, reason) == json.dumps(
            {**json.loads(line), REASON: reason}
        )
        assert with_reason_line(raw, REASON, reason) == json.dumps({**row, REASON: reason})


@pytest.mark.parametrize(
    ("line", "shape"),
    [
        ('{"id":"a","text":"t"}', SKIP),  # compact separators
        ('{"id": "a",  "text": "t"}', SKIP),  # two spaces
        (' {"id": "a", "text": "t"}', SKIP),  # leading space
        ('{"id": "a", "text": "t"} ', SKIP),  # trailing space
        ('{"id": "b", "text": "t", "id": "a"}', SKIP),  # repeated key
        ('{"id": "a", "text": "caf\u00e9"}', SKIP),  # non-ASCII unescaped
        ('{"id": "a", "text": "caf\\u00E9"}', SKIP),  # upper-case escape
        ('{"id": "a", "text": "\\u0041"}', SKIP),  # an escape json.dumps would not write
        ('{"id": "a", "text": "a\\/b"}', SKIP),  # escaped slash
        ('{"id": "a", "text": "t", "q": 1.50}', SKIP),  # a float json.dumps writes as 1.5
        ('{"id": "a", "text": "t", "q": 1E5}', SKIP),
        ('{"id": "a", "text": "t", "meta": {}, "q": 1}', SKIP),  # meta not last
        ('{"id": "a", "text": "t", "meta": "m"}', SKIP),  # meta not an object
        ('{"id": "a", "text": "t", "meta": {"minhash_cluster": "z"}}', SKIP),
        ('{"id": "a", "text": "t", "neardup": 1}', GENERAL),  # a drop would fail: parse it
        ('{"id": "a", "text": "t"}', META_ABSENT),
        ('{"id": "a", "text": "t"}\r', META_ABSENT),  # CRLF: the text reader gives "\n"
        ('{"id": "a", "text": "t", "meta": {}}', META_LAST),
        ('{"id": "a", "text": "t", "meta": {"m": {"n": [1, 2.5]}}}', META_LAST),
        ('{"id": "a", "text": "t", "meta": null}', META_NULL),
        ('{"id": "a", "text": "caf\\u00e9 \\ud83d\\ude00", "meta": {}}', META_LAST),
    ],
)
def test_only_lines_that_are_exactly_json_dumps_of_their_row_are_spliced(line, shape):
    raw = line + "\n"
    text = raw.replace("\r\n", "\n")  # what the text reader gives (universal newlines)
    assert classify(record(json.loads(text), text), REASON) == shape


def test_a_parquet_record_is_never_spliced():
    row = {"id": "a", "text": "t"}
    assert classify(Record("a", "t", row, "in.parquet", 1, None), REASON) == GENERAL


# -- the whole command, fast path on and off ---------------------------------------------------

HOLDERS = ["1998 The Open Group", "1988 The Open Group", "2008 The pip developers"]


def spell(row: dict, style: str) -> str:
    """One line for ``row`` in a given spelling (all parse to ``row`` but "dupkey")."""
    if style == "compact":
        return json.dumps(row, separators=(",", ":"))
    if style == "unicode":
        return json.dumps(row, ensure_ascii=False)
    if style == "spaced":
        return json.dumps(row).replace('": ', '" :  ').replace("{", "{ ")
    if style == "slash":
        return json.dumps(row).replace("/", "\\/")  # "/" only ever occurs inside strings
    if style == "upper":
        line = json.dumps(row)
        if "\\\\" in line:
            return line
        return re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m[1].upper(), line)
    if style == "dupkey":  # a first "text" overridden by the real one
        return '{"text": "overridden", ' + json.dumps(row)[1:]
    if style == "float":
        return json.dumps({**row, "score": 0.5}).replace('"score": 0.5', '"score": 0.50')
    return json.dumps(row)


@st.composite
def corpora(draw):
    n = draw(st.integers(1, 10))
    pool = [mit(h) for h in HOLDERS] + ["a short note", "café “quoted” 😀 \\ / \x7f done"]
    nested = draw(st.booleans())
    rows, lines = [], []
    for i in range(n):
        text = draw(st.sampled_from(pool)) + draw(st.sampled_from(["", " é", "\u2028x"]))
        doc_id = draw(st.sampled_from([f"d{i}", i, f"é/{i}"]))
        row = {"doc": {"id": doc_id}} if nested else {"id": doc_id}
        row["text"] = text
        if draw(st.booleans()):
            row["q"] = draw(st.one_of(st.integers(0, 3), st.none(), st.just("x")))
        meta = draw(st.sampled_from(["absent", None, {}, {"src": "s/1"}, {"a": {"b": [1]}},
                                     {CLUSTER_KEY: "old"}, "not an object", [1]]))  # fmt: skip
        if meta != "absent":
            row["meta"] = meta
            if draw(st.booleans()):  # meta first instead of last
                row = {"meta": row.pop("meta"), **row}
        if draw(st.integers(0, 30)) == 0:
            row[REASON] = "mine"
        style = draw(st.sampled_from(["plain"] * 6 + ["compact", "unicode", "spaced", "slash",
                                                      "upper", "dupkey", "float"]))  # fmt: skip
        end = draw(st.sampled_from(["\n"] * 4 + ["\r\n", "  \n", "\n\n"]))
        lines.append(spell(row, style) + end)
        rows.append(row)
    if draw(st.booleans()):
        lines[-1] = lines[-1].rstrip("\r\n")  # no newline at the end of the file
    flags = ["--id-field", "doc.id"] if nested else []
    flags += draw(st.sampled_from([[], ["--keep-duplicates"], ["--removed", "r.jsonl"],
                                   ["--keep", "first", "--removed", "r.jsonl"],
                                   ["--dry-run"]]))  # fmt: skip
    return "".join(lines), flags


def run(tmp: Path, body: str, flags: list[str], fast: bool, monkeypatch) -> dict[str, bytes]:
    """Exit code and the bytes of every file written, with the fast path on or off."""
    for f in tmp.iterdir():
        f.unlink()
    (tmp / "in.jsonl").write_bytes(body.encode())
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(dedup_module, "_splicing", lambda options: False)
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            code = main(["dedup", "in.jsonl", "--output", "o.jsonl", "--workers", "1",
                         "--quiet", *flags])  # fmt: skip
        finally:
            os.chdir(cwd)
    out = {p.name: p.read_bytes() for p in sorted(tmp.iterdir()) if p.name != "in.jsonl"}
    manifest = out.pop("o.jsonl.manifest.json", None)
    if manifest is not None:
        m = json.loads(manifest)
        out["counts"] = json.dumps(m["counts"]).encode()
    return {"code": str(code).encode(), **out}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=corpora())
def test_dedup_writes_the_same_bytes_with_and_without_the_fast_path(
    case, tmp_path, monkeypatch, capsys
):
    body, flags = case
    general = run(tmp_path, body, flags, False, monkeypatch)
    assert run(tmp_path, body, flags, True, monkeypatch) == general
    capsys.readouterr()


def canonical_corpus(tmp: Path) -> list[dict]:
    rows = [{"id": f"d{i}", "text": mit(h) + " café “q”", "meta": {"n": i}}
            for i, h in enumerate(HOLDERS * 2)]  # fmt: skip
    rows[0].pop("meta")
    (tmp / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_canonical_lines_are_spliced_and_dropped_ones_never_parsed(tmp_path, monkeypatch):
    canonical_corpus(tmp_path)
    spliced, parsed = [], []
    real_tagged, real_parse = dedup_module.tagged_line, dedup_module.RecordReader.parse
    monkeypatch.setattr(
        dedup_module, "tagged_line", lambda *a: spliced.append(a) or real_tagged(*a)
    )
    monkeypatch.setattr(
        dedup_module.RecordReader,
        "parse",
        lambda s, item: parsed.append(item) or real_parse(s, item),
    )
    monkeypatch.chdir(tmp_path)
    assert main(["dedup", "in.jsonl", "--output", "o.jsonl", "--workers", "1", "--quiet"]) == 0
    kept = (tmp_path / "o.jsonl").read_text().splitlines()
    assert 1 <= len(kept) < 6  # the copies of each licence went
    assert len(spliced) == len(kept) and parsed == []


def test_a_line_changed_between_the_passes_is_exit_2_and_nothing_is_written(
    tmp_path, monkeypatch, capsys
):
    rows = canonical_corpus(tmp_path)
    real_decide = dedup_module.decide

    def decide_then_edit(*args, **kwargs):  # between the passes: same ids, one text changed
        rows[0]["text"] += " changed"
        (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return real_decide(*args, **kwargs)

    monkeypatch.setattr(dedup_module, "decide", decide_then_edit)
    monkeypatch.chdir(tmp_path)
    assert main(["dedup", "in.jsonl", "--output", "o.jsonl", "--workers", "1", "--quiet"]) == 2
    assert "the inputs changed during the run" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
