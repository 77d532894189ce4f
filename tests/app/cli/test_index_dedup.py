"""``neardup dedup --index``: dump after dump against a persistent index, held to the oracle
(tests/index_oracle.py) round after round, and the checks that stop a run before it writes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.app.cli import main
from neardup.core.engine import DocIndex, MinhashParams, batch_signatures, text_digests
from tests.index_oracle import New, Outcome, oracle
from tests.indexes import index_table, version_files

ROOT = Path(__file__).resolve().parents[3]
PARAMS = MinhashParams(num_perm=32, bands=8, threshold=0.5, k=2)
FLAGS = ["--num-perm", "32", "--bands", "8", "--threshold", "0.5", "--k", "2", "--workers", "1",
         "--quiet"]  # fmt: skip
WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen", "ibis"]
POLICIES = ["smallest-id", "first", "longest", "max:q"]


def _write_rows(path: Path, rows: list[New]) -> None:
    path.write_text(
        "".join(json.dumps({"id": r.id, "text": r.text, "q": r.q}) + "\n" for r in rows)
    )


def _read(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines()]


def _run(tmp: Path, name: str, rows: list[New], *extra: str, fmt: str = "jsonl") -> int:
    _write_rows(tmp / f"{name}.jsonl", rows)
    args = ["dedup", str(tmp / f"{name}.jsonl"), "--output", str(tmp / f"{name}.out.{fmt}"),
            "--removed", str(tmp / f"{name}.removed.{fmt}"), "--index", str(tmp / "idx"),
            *FLAGS, *extra]  # fmt: skip
    return main(args)


@st.composite
def dumps(draw):
    """1 to 5 rounds of rows whose texts copy, edit and extend each other across rounds."""
    rounds = draw(st.integers(1, 5))
    sizes = [draw(st.integers(0, 7)) for _ in range(rounds)]
    ids = draw(
        st.lists(st.from_regex(r"[a-e]{1,3}", fullmatch=True), min_size=sum(sizes),
                 max_size=sum(sizes), unique=True)
    )  # fmt: skip
    texts: list[str] = []
    out = []
    for size in sizes:
        rows = []
        for _ in range(size):
            kinds = ["fresh", "copy", "edit", "edit", "edit", "empty"] if texts else ["fresh"]
            how = draw(st.sampled_from(kinds))
            if how == "fresh":
                text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=7)))
            elif how == "empty":
                text = draw(st.sampled_from(["", "!!", " "]))
            else:
                text = draw(st.sampled_from(texts))
                if how == "edit":
                    words = [*text.split(), draw(st.sampled_from(WORDS))]
                    words[draw(st.integers(0, len(words) - 1))] = draw(st.sampled_from(WORDS))
                    text = " ".join(words)
            texts.append(text)
            q = draw(st.one_of(st.none(), st.integers(0, 3)))
            rows.append(New(ids.pop(), text, q))
        if rows and all(r.q is None for r in rows):
            rows[0] = New(rows[0].id, rows[0].text, 0)  # --keep max:q needs one row with q
        mode = draw(st.sampled_from(["append", "append", "read"]))
        out.append((rows, mode, draw(st.sampled_from(POLICIES)), draw(st.booleans()),
                    draw(st.sampled_from(["jsonl", "parquet"]))))  # fmt: skip
    return out


def _check_round(tmp: Path, name: str, rows, outcome: dict[str, Outcome], parts, keep_all, fmt):
    """Output and --removed of one round against the oracle's outcomes."""
    written = _read(tmp / f"{name}.out.{fmt}")
    removed = _read(tmp / f"{name}.removed.{fmt}")
    kept = [r.id for r in rows if outcome[r.id].reason == "kept"]
    if keep_all:
        assert [w["id"] for w in written] == [r.id for r in rows]
        assert removed == []
        tagged = [w for w in written if w.get("neardup") is not None]
    else:
        assert [w["id"] for w in written] == kept  # input order
        tagged = removed
        assert sorted(w["id"] for w in removed) == sorted(set(outcome) - set(kept))
    for w in written:
        assert w["meta"]["minhash_cluster"] == outcome[w["id"]].cluster
    assert sorted(w["id"] for w in tagged) == sorted(set(outcome) - set(kept))
    for w in tagged:
        want = outcome[w["id"]]
        why = w["neardup"]
        # Issue 33.12: duplicate_of leads to a document that is kept: a survivor of this
        # round, or an indexed one (its part named), never a row dropped too.
        assert why["duplicate_of"] in kept or why["duplicate_of"] in parts
        assert (why["reason"], why["duplicate_of"]) == (want.reason, want.duplicate_of)
        assert why["estimate"] == pytest.approx(want.estimate, abs=1e-12)
        assert why["index_part"] == (parts[want.duplicate_of] if want.indexed else None)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=dumps())
def test_index_rounds_equal_the_oracle(tmp_path_factory, rounds):
    tmp = tmp_path_factory.mktemp("rounds")
    indexed: dict[str, str] = {}  # the oracle's index: id -> text
    parts: dict[str, str] = {}  # indexed id -> its part's name
    for k, (rows, mode, keep, keep_all, fmt) in enumerate(rounds):
        name = f"r{k}"
        extra = ["--index-mode", mode, "--keep", keep, *(["--keep-duplicates"] * keep_all)]
        code = _run(tmp, name, rows, *extra, fmt=fmt)
        if mode == "read" and not indexed:
            assert code == 2 and not (tmp / f"{name}.out.{fmt}").exists()  # no index yet
            continue
        assert code == 0
        outcome = oracle(rows, indexed, PARAMS, keep)
        before = set(parts)
        _check_round(tmp, name, rows, outcome, parts, keep_all, fmt)
        manifest = json.loads((tmp / f"{name}.out.{fmt}.manifest.json").read_text())["index"]
        survivors = [r for r in rows if outcome[r.id].reason == "kept"]
        if mode == "append" and survivors:
            assert manifest["rows_added"] == len(survivors)
            for r in survivors:
                indexed[r.id] = r.text
                parts[r.id] = manifest["part"]
        else:
            assert manifest["version_written"] is None and manifest["part"] is None
        assert set(parts) - before == {r.id for r in survivors} if mode == "append" else True
    if not indexed:
        assert not (tmp / "idx/_index").exists() or not os.listdir(tmp / "idx/_index")
        return
    index = DocIndex.open(str(tmp / "idx"))
    table = pq.read_table(index.file_urls())
    got = table.column("id").to_pylist()
    assert sorted(got) == sorted(indexed)  # the index is the union of the survivors
    sigs = batch_signatures([indexed[i] for i in got], PARAMS)
    assert [bytes(s) for s in table.column("signature").to_pylist()] == [
        s.astype("<u4").tobytes() for s in sigs
    ]
    digests = text_digests([indexed[i] for i in got])
    assert [bytes(d) for d in table.column("digest").to_pylist()] == [
        d.astype("<u8").tobytes() for d in digests
    ]
    assert {p.name: p.rows for p in index.parts} == {
        p: list(parts.values()).count(p) for p in set(parts.values())
    }


# --- worked cases: what each semantic rule means on real texts ------------------------------

LONG = "one two three four five six seven eight nine ten eleven twelve"


def _edges(a: str, b: str) -> bool:
    """Whether the oracle links two texts (the precondition of a worked case)."""
    return oracle([New("x", a)], {"y": b}, PARAMS)["x"].reason != "kept"


def test_index_bridge_between_two_indexed_documents_is_dropped_and_both_stay(tmp_path):
    words = [f"w{i}" for i in range(15)]
    left, right, bridge = " ".join(words[:10]), " ".join(words[6:]), " ".join(words)
    assert not _edges(left, right) and _edges(bridge, left) and _edges(bridge, right)
    assert _run(tmp_path, "a", [New("i1", left)]) == 0
    assert _run(tmp_path, "b", [New("i2", right)]) == 0  # not near i1: both indexed
    assert _run(tmp_path, "c", [New("n1", bridge)]) == 0
    (row,) = _read(tmp_path / "c.removed.jsonl")
    assert row["neardup"]["reason"] == "near" and row["neardup"]["duplicate_of"] == "i1"
    assert sorted(DocIndex.open(str(tmp_path / "idx")).id_parts(["i1", "i2", "n1"])) == [
        "i1", "i2",
    ]  # fmt: skip


def test_index_chain_across_the_boundary_drops_the_far_end(tmp_path):
    """n2 is not near the indexed i1, only near n1 which is: n2 goes too, naming i1."""
    a = LONG
    b = LONG + " x1 x2"
    c = LONG + " x1 x2 x3 x4 x5 x6"
    assert _edges(b, a) and _edges(c, b) and not _edges(c, a)
    assert _run(tmp_path, "a", [New("i1", a)]) == 0
    assert _run(tmp_path, "b", [New("n1", b), New("n2", c)]) == 0
    removed = {r["id"]: r["neardup"] for r in _read(tmp_path / "b.removed.jsonl")}
    assert {k: (v["reason"], v["duplicate_of"]) for k, v in removed.items()} == {
        "n1": ("near", "i1"), "n2": ("near", "i1"),
    }  # fmt: skip
    # The estimate to i1 itself (a pair that is no candidate: no band in common).
    sig_a, sig_c = batch_signatures([a, c], PARAMS)
    assert removed["n2"]["estimate"] == float((sig_a == sig_c).mean())
    assert _read(tmp_path / "b.out.jsonl") == []


def test_index_exact_copies_and_wordless_texts(tmp_path):
    assert _run(tmp_path, "a", [New("i1", LONG), New("i2", ""), New("i3", "!!")]) == 0
    rows = [New("n1", LONG), New("n2", ""), New("n3", "!!"), New("n4", " "), New("n5", " ")]
    assert _run(tmp_path, "b", rows, "--keep", "first") == 0
    removed = {r["id"]: r["neardup"] for r in _read(tmp_path / "b.removed.jsonl")}
    assert {k: (v["reason"], v["duplicate_of"], v["index_part"] is not None)
            for k, v in removed.items()} == {
        "n1": ("exact", "i1", True), "n2": ("exact", "i2", True), "n3": ("exact", "i3", True),
        "n5": ("exact", "n4", False),
    }  # fmt: skip
    assert [r["id"] for r in _read(tmp_path / "b.out.jsonl")] == ["n4"]


def test_index_read_mode_adds_nothing(tmp_path):
    assert _run(tmp_path, "a", [New("i1", LONG)]) == 0
    before = sorted(os.listdir(tmp_path / "idx/_index")), sorted(os.listdir(tmp_path / "idx/parts"))
    assert _run(tmp_path, "b", [New("n1", "something else"), New("n2", LONG)], "--index-mode",
                "read") == 0  # fmt: skip
    assert [r["id"] for r in _read(tmp_path / "b.out.jsonl")] == ["n1"]
    after = sorted(os.listdir(tmp_path / "idx/_index")), sorted(os.listdir(tmp_path / "idx/parts"))
    assert after == before


def test_index_contaminated_survivors_are_not_added(tmp_path):
    (tmp_path / "bench.txt").write_text(LONG + "\n")
    rows = [New("n1", "prefix " + LONG), New("n2", "nothing to see here at all")]
    assert _run(tmp_path, "a", rows, "--protected", str(tmp_path / "bench.txt"), "--ngram",
                "5") == 0  # fmt: skip
    assert DocIndex.open(str(tmp_path / "idx")).id_parts(["n1", "n2"]) == {
        "n2": DocIndex.open(str(tmp_path / "idx")).parts[0].name
    }


def _nothing_written(tmp: Path, name: str, versions: list[str]) -> None:
    assert not (tmp / f"{name}.out.jsonl").exists()
    assert not (tmp / f"{name}.removed.jsonl").exists()
    assert not (tmp / f"{name}.out.jsonl.manifest.json").exists()
    assert [p.name for p in version_files(tmp / "idx")] == versions


@pytest.mark.parametrize(
    ("flag", "value", "name"),
    [("--num-perm", "64", "num_perm"), ("--bands", "4", "bands"), ("--threshold", "0.6",
     "threshold"), ("--k", "3", "k"), ("--seed", "7", "seed"),
     ("--tokenizer", "multilingual", "tokenizer")],
)  # fmt: skip
def test_index_parameter_mismatch_is_exit_2_naming_it(tmp_path, capsys, flag, value, name):
    assert _run(tmp_path, "a", [New("i1", LONG)]) == 0
    capsys.readouterr()
    for mode in ("append", "read"):
        assert _run(tmp_path, "b", [New("n1", LONG)], flag, value, "--index-mode", mode) == 2
        err = capsys.readouterr().err
        assert f"parameter {name} is locked to the index" in err
        _nothing_written(tmp_path, "b", ["00000001.json"])


def _removed(tmp: Path, name: str) -> dict[str, dict]:
    return {r["id"]: r["neardup"] for r in _read(tmp / f"{name}.removed.jsonl")}


def _index_texts(tmp: Path) -> dict[str, bytes]:
    """id -> digest of every indexed document (deleted rows left out)."""
    table = index_table(tmp / "idx")
    assert len(set(table.column("id").to_pylist())) == table.num_rows  # each id once
    return dict(zip(table.column("id").to_pylist(), table.column("digest").to_pylist(),
                    strict=True))  # fmt: skip


def _digest(text: str) -> bytes:
    return text_digests([text])[0].astype("<u8").tobytes()


EDITED = LONG + " x1 x2"  # near LONG
OTHER = "entirely different words about gardens and rivers in spring"


@pytest.mark.parametrize("policy", ["keep-both", "keep-indexed", "replace"])
@pytest.mark.parametrize("mode", ["append", "read"])
def test_index_recrawled_ids_are_decided_against_their_indexed_document(tmp_path, policy, mode):
    """Issue 33.1: a re-crawled id with the same or a near text is dropped as a duplicate of
    the indexed document of its id; a changed one goes as --recrawled says (default keep-both);
    read mode decides the same and adds nothing."""
    greek = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    assert _edges(greek + " x1 x2", greek) and not _edges(OTHER, LONG)
    assert not _edges(greek, LONG) and not _edges(OTHER, greek)
    assert _run(tmp_path, "a", [New("u1", LONG), New("u2", greek), New("u3", OTHER)]) == 0
    part = DocIndex.open(str(tmp_path / "idx")).parts[0].name
    rows = [New("u1", LONG), New("u2", greek + " x1 x2"), New("u3", "a fresh text"),
            New("u4", "brand new page")]  # fmt: skip
    extra = [] if policy == "keep-both" else ["--recrawled", policy]  # keep-both: the default
    assert _run(tmp_path, "b", rows, "--index-mode", mode, *extra) == 0
    removed = _removed(tmp_path, "b")
    assert (removed["u1"]["reason"], removed["u1"]["duplicate_of"]) == ("exact", "u1")
    assert (removed["u2"]["reason"], removed["u2"]["duplicate_of"]) == ("near", "u2")
    assert removed["u1"]["index_part"] == removed["u2"]["index_part"] == part
    sig = batch_signatures([greek + " x1 x2", greek], PARAMS)
    assert removed["u2"]["estimate"] == float((sig[0] == sig[1]).mean())
    written = [r["id"] for r in _read(tmp_path / "b.out.jsonl")]
    derived = "u3#rev-" + _digest("a fresh text").hex()[:12]
    manifest = json.loads((tmp_path / "b.out.jsonl.manifest.json").read_text())
    assert manifest["index"]["recrawled"] == {
        "policy": policy, "same": 1, "near": 1, "changed": 1,
        "renamed": int(policy == "keep-both"), "replaced": int(policy == "replace"),
    }  # fmt: skip
    if policy == "keep-both":
        assert written == [derived, "u4"] and "u3" not in removed
    elif policy == "keep-indexed":
        assert written == ["u4"]
        assert (removed["u3"]["reason"], removed["u3"]["duplicate_of"]) == ("recrawled", "u3")
        assert removed["u3"]["index_part"] == part and removed["u3"]["estimate"] < 0.5
        assert manifest["counts"]["recrawled_dropped"] == 1
    else:
        assert written == ["u3", "u4"] and "u3" not in removed
    index = _index_texts(tmp_path)
    if mode == "read":
        assert (
            sorted(index) == ["u1", "u2", "u3"]
            and DocIndex.open(str(tmp_path / "idx")).version == 1
        )
        return
    want = {"u1": _digest(LONG), "u2": _digest(greek), "u3": _digest(OTHER),
            "u4": _digest("brand new page")}  # fmt: skip
    if policy == "keep-both":
        want[derived] = _digest("a fresh text")
    elif policy == "replace":
        want["u3"] = _digest("a fresh text")  # the new text is the indexed document of u3
    assert index == want
    opened = DocIndex.open(str(tmp_path / "idx"))
    assert opened.version == 2 and opened.rows == len(want)


def test_index_recrawled_keep_both_twice_is_an_exact_copy_of_the_derived_id(tmp_path):
    """The same changed text again next month: its derived id is indexed with that text, so the
    row is dropped as its exact copy; the index holds each text once."""
    assert _run(tmp_path, "a", [New("u", LONG)]) == 0
    assert _run(tmp_path, "b", [New("u", OTHER)]) == 0
    derived = "u#rev-" + _digest(OTHER).hex()[:12]
    assert [r["id"] for r in _read(tmp_path / "b.out.jsonl")] == [derived]
    assert _run(tmp_path, "c", [New("u", OTHER)]) == 0
    assert _read(tmp_path / "c.out.jsonl") == []
    assert _removed(tmp_path, "c")["u"] | {"index_part": None} == {
        "reason": "exact", "duplicate_of": derived, "estimate": 1.0, "set": None, "item": None,
        "ngram": None, "index_part": None,
    }  # fmt: skip
    assert sorted(_index_texts(tmp_path)) == ["u", derived]


def test_index_recrawled_derived_id_of_another_row_is_exit_2(tmp_path, capsys):
    assert _run(tmp_path, "a", [New("u", LONG)]) == 0
    derived = "u#rev-" + _digest(OTHER).hex()[:12]
    capsys.readouterr()
    assert _run(tmp_path, "b", [New("u", OTHER), New(derived, "x y z")]) == 2
    assert repr(derived) in capsys.readouterr().err
    _nothing_written(tmp_path, "b", ["00000001.json"])


def test_index_recrawled_rows_link_nothing_else(tmp_path):
    """A dropped re-crawled row takes no further part: a new row near it (and not near the
    indexed document) is kept, and a new copy of it is decided against the index alone."""
    far = EDITED + " x3 x4 x5 x6"
    assert _edges(far, EDITED) and not _edges(far, LONG)
    assert _run(tmp_path, "a", [New("u", LONG)]) == 0
    assert _run(tmp_path, "b", [New("u", EDITED), New("v", far)]) == 0
    assert [r["id"] for r in _read(tmp_path / "b.out.jsonl")] == ["v"]
    assert _removed(tmp_path, "b")["u"]["duplicate_of"] == "u"


def test_index_dated_id_prefix_names_each_months_shards_apart(tmp_path, capsys):
    """Issue 33: shard names repeat month after month; a template prefix with the dump's date
    makes ids unique across months (a page's copy is then an exact duplicate by its text)."""
    for month in ("10", "11"):
        folder = tmp_path / f"dump-{month}"
        folder.mkdir()
        _write_rows(folder / "shard-0.jsonl", [New("p1", LONG), New(f"p{month}", f"only {month}")])
        assert main(["dedup", str(folder), "--output", str(tmp_path / f"o{month}.jsonl"),
                     "--removed", str(tmp_path / f"r{month}.jsonl"), "--index",
                     str(tmp_path / "idx"), "--id-prefix", f"cc-2024-{month}/{{file}}/",
                     *FLAGS]) == 0  # fmt: skip
    assert [r["id"] for r in _read(tmp_path / "o11.jsonl")] == ["cc-2024-11/shard-0.jsonl/p11"]
    (row,) = _read(tmp_path / "r11.jsonl")
    assert row["id"] == "cc-2024-11/shard-0.jsonl/p1"
    assert row["neardup"]["duplicate_of"] == "cc-2024-10/shard-0.jsonl/p1"
    assert sorted(_index_texts(tmp_path)) == [
        "cc-2024-10/shard-0.jsonl/p1", "cc-2024-10/shard-0.jsonl/p10",
        "cc-2024-11/shard-0.jsonl/p11",
    ]  # fmt: skip
    # A literal prefix; a template naming another field is refused before anything is read.
    assert _run(tmp_path, "b", [New("p1", "fresh words")], "--id-prefix", "cc-2024-12/") == 0
    assert [r["id"] for r in _read(tmp_path / "b.out.jsonl")] == ["cc-2024-12/p1"]
    capsys.readouterr()
    assert _run(tmp_path, "c", [New("p1", "x")], "--id-prefix", "cc-{date}/") == 2
    assert "--id-prefix 'cc-{date}/'" in capsys.readouterr().err
    assert not (tmp_path / "c.out.jsonl").exists()


def test_index_id_prefix_file_still_names_shards_apart(tmp_path):
    assert _run(tmp_path, "a", [New("i1", LONG), New("i2", "other words here")]) == 0
    assert _run(tmp_path, "b", [New("n1", "fresh"), New("i2", "new text")], "--id-prefix",
                "file") == 0  # fmt: skip
    assert [r["id"] for r in _read(tmp_path / "b.out.jsonl")] == ["b.jsonl/n1", "b.jsonl/i2"]


def test_index_outputs_apart_from_the_index(tmp_path, capsys):
    assert _run(tmp_path, "a", [New("i1", LONG)]) == 0
    (tmp_path / "b.jsonl").write_text(json.dumps({"id": "n", "text": "x"}) + "\n")
    for args in (
        ["--output", str(tmp_path / "idx/out.jsonl")],
        ["--output", str(tmp_path / "o.jsonl"), "--removed", str(tmp_path / "idx/parts/r.jsonl")],
        ["--output", str(tmp_path / "o.jsonl"), "--manifest", str(tmp_path / "idx/m.json")],
    ):
        assert main(["dedup", str(tmp_path / "b.jsonl"), *args, "--index", str(tmp_path / "idx"),
                     *FLAGS]) == 2  # fmt: skip
        assert "is inside --index" in capsys.readouterr().err
    assert main(["dedup", str(tmp_path / "idx"), "--output", str(tmp_path / "o.jsonl"), "--index",
                 str(tmp_path / "idx"), *FLAGS]) == 2  # fmt: skip
    assert "overlap" in capsys.readouterr().err
    assert [p.name for p in version_files(tmp_path / "idx")] == ["00000001.json"]


def test_index_cli_subprocess_dump_after_dump(tmp_path):
    """A real process: two dumps, the second deduped against the first, then a read-only run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def neardup(*args):
        return subprocess.run([sys.executable, "-m", "neardup", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    _write_rows(tmp_path / "d1.jsonl", [New("a", LONG), New("b", "cats and dogs and more cats")])
    _write_rows(tmp_path / "d2.jsonl", [New("c", LONG + " extra"), New("d", "brand new text")])
    one = neardup("dedup", "d1.jsonl", "--output", "o1.jsonl", "--index", "idx", *FLAGS)
    assert one.returncode == 0, one.stderr
    two = neardup("dedup", "d2.jsonl", "--output", "o2.parquet", "--removed", "r2.jsonl",
                  "--index", "idx", *FLAGS[:-1])  # fmt: skip
    assert two.returncode == 0, two.stderr
    assert "index idx: read version 1 (2 documents, 1 matched), added 1 rows as version 2" in (
        two.stderr
    )
    assert [r["id"] for r in _read(tmp_path / "o2.parquet")] == ["d"]
    (removed,) = _read(tmp_path / "r2.jsonl")
    assert removed["neardup"]["duplicate_of"] == "a"
    three = neardup("dedup", "d2.jsonl", "--output", "o3.jsonl", "--index", "idx",
                    "--index-mode", "read", "--id-prefix", "file", *FLAGS)  # fmt: skip
    assert three.returncode == 0, three.stderr
    assert _read(tmp_path / "o3.jsonl") == []  # both rows are in the index now
    assert DocIndex.open(str(tmp_path / "idx")).version == 2


def test_index_dry_run_adds_nothing(tmp_path, capsys):
    assert _run(tmp_path, "a", [New("i1", LONG)]) == 0
    capsys.readouterr()
    assert _run(tmp_path, "b", [New("n1", "all new words"), New("n2", LONG)], "--dry-run") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["exact_dropped"] == 1 and report["counts"]["written"] == 1
    assert [p.name for p in version_files(tmp_path / "idx")] == ["00000001.json"]
    assert len(os.listdir(tmp_path / "idx/parts")) == 1


def test_index_lost_commit_race_is_exit_3_and_adds_nothing(tmp_path, capsys, monkeypatch):
    """Another run commits the version this run meant to: exit 3, saying so; the index holds
    the winner's part only; this run's outputs are written (valid against what it read)."""
    import neardup.app.cli.dedup as dedup
    from neardup.core.engine import run_info, write_part

    assert _run(tmp_path, "a", [New("i1", LONG)]) == 0
    real = dedup.commit_index
    winner = []

    def racing(index, params, add=(), drop=(), **kw):
        texts = ["the other run's text"]
        part = write_part(index, params, ["w1"], text_digests(texts),
                          batch_signatures(texts, params), run_info("local", "t", []))  # fmt: skip
        winner.append(part.name)
        real(index, params, [part])
        return real(index, params, add, drop, **kw)

    monkeypatch.setattr(dedup, "commit_index", racing)
    capsys.readouterr()
    assert _run(tmp_path, "b", [New("n1", "fresh words here")]) == 3
    err = capsys.readouterr().err
    assert f"another run added version 2 (part {winner[0]}) while this run ran" in err
    assert "nothing was added to the index" in err and "rerun" in err
    index = DocIndex.open(str(tmp_path / "idx"))
    assert index.version == 2 and [p.name for p in index.parts][1:] == winner
    assert [r["id"] for r in _read(tmp_path / "b.out.jsonl")] == ["n1"]
    manifest = json.loads((tmp_path / "b.out.jsonl.manifest.json").read_text())["index"]
    assert manifest["version_written"] is None and "another run" in manifest["conflict"]


def test_index_with_other_id_and_text_fields(tmp_path):
    """--id-field/--text-field: the index holds the ids as written, the texts' digests."""
    rows = [{"doc": {"key": "k1"}, "body": LONG}, {"doc": {"key": "k2"}, "body": "other words"}]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "b.jsonl").write_text(json.dumps({"doc": {"key": "k3"}, "body": LONG}) + "\n")
    flags = ["--id-field", "doc.key", "--text-field", "body", "--index", str(tmp_path / "idx")]
    for name in ("a", "b"):
        assert main(["dedup", str(tmp_path / f"{name}.jsonl"), "--output",
                     str(tmp_path / f"{name}.out.jsonl"), "--removed",
                     str(tmp_path / f"{name}.removed.jsonl"), *flags, *FLAGS]) == 0  # fmt: skip
    (row,) = _read(tmp_path / "b.removed.jsonl")
    assert row["doc"] == {"key": "k3"} and row["neardup"]["reason"] == "exact"
    assert row["neardup"]["duplicate_of"] == "k1"
    table = pq.read_table(DocIndex.open(str(tmp_path / "idx")).file_urls())
    assert table.column("id").to_pylist() == ["k1", "k2"]


def test_index_copy_of_a_dropped_keeper_names_the_indexed_document(tmp_path):
    """Issue 33.12: n2 is a copy of n1, which is near the indexed i1: n2 names i1 (what was
    kept), with n1's estimate, not n1 (dropped too)."""
    edited = LONG + " x1 x2"
    assert _edges(edited, LONG)
    assert _run(tmp_path, "a", [New("i1", LONG)]) == 0
    assert _run(tmp_path, "b", [New("n1", edited), New("n2", edited)]) == 0
    removed = {r["id"]: r["neardup"] for r in _read(tmp_path / "b.removed.jsonl")}
    part = DocIndex.open(str(tmp_path / "idx")).parts[0].name
    assert removed["n1"]["reason"] == "near" and removed["n1"]["duplicate_of"] == "i1"
    assert removed["n2"] == {**removed["n1"], "reason": "exact"}
    assert removed["n2"]["index_part"] == part and removed["n2"]["estimate"] < 1.0


def test_copy_of_a_near_dropped_keeper_names_the_survivor(tmp_path):
    """Without an index: c copies b, b is near a (kept): c names a, with b's estimate."""
    edited = LONG + " x1 x2"
    rows = [New("a", LONG), New("b", edited), New("c", edited)]
    _write_rows(tmp_path / "in.jsonl", rows)
    assert main(["dedup", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "o.jsonl"),
                 "--removed", str(tmp_path / "r.jsonl"), *FLAGS]) == 0  # fmt: skip
    removed = {r["id"]: r["neardup"] for r in _read(tmp_path / "r.jsonl")}
    assert [r["id"] for r in _read(tmp_path / "o.jsonl")] == ["a"]
    assert removed["b"]["reason"] == "near" and removed["b"]["duplicate_of"] == "a"
    assert removed["c"] == {**removed["b"], "reason": "exact"}


def test_recrawled_flag_spells_the_engines_policies(tmp_path, capsys):
    from neardup.app.cli.main import RECRAWL_POLICIES as cli_policies
    from neardup.core.engine import RECRAWL_POLICIES

    assert cli_policies == RECRAWL_POLICIES and RECRAWL_POLICIES[0] == "keep-both"
    assert _run(tmp_path, "a", [New("u", LONG)]) == 0
    with pytest.raises(SystemExit) as stopped:
        _run(tmp_path, "b", [New("u", OTHER)], "--recrawled", "newest")
    assert stopped.value.code == 2 and "--recrawled" in capsys.readouterr().err


@st.composite
def recrawls(draw):
    """1 to 4 rounds whose ids come back (a small pool): texts copied, edited or new, with a
    policy and a mode each."""
    rounds = draw(st.integers(1, 4))
    texts: list[str] = []
    out = []
    for _ in range(rounds):
        ids = draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=5, unique=True))
        rows = []
        for doc_id in ids:
            how = draw(st.sampled_from(["fresh", "copy", "edit"] if texts else ["fresh"]))
            if how == "fresh":
                text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=7)))
            else:
                text = draw(st.sampled_from(texts))
                if how == "edit":
                    text = f"{text} {draw(st.sampled_from(WORDS))}"
            texts.append(text)
            rows.append(New(doc_id, text))
        policy = draw(st.sampled_from(["keep-both", "keep-indexed", "replace"]))
        out.append((rows, policy, draw(st.sampled_from(["append", "append", "read"]))))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=recrawls())
def test_index_recrawl_rounds_name_kept_documents_and_keep_ids_unique(tmp_path_factory, rounds):
    """Issues 33.1 and 33.12, any corpus, ids coming back round after round under every policy:
    every duplicate_of names a survivor of its round or a document indexed before it; a
    re-crawled row is decided against its own id's document; the index holds each id once, and
    exactly what the rounds kept (less what replace took out)."""
    tmp = tmp_path_factory.mktemp("recrawl")
    indexed: dict[str, str] = {}
    for k, (rows, policy, mode) in enumerate(rounds):
        name = f"r{k}"
        code = _run(tmp, name, rows, "--index-mode", mode, "--recrawled", policy)
        if mode == "read" and not indexed:
            assert code == 2
            continue
        assert code == 0
        out = {r["id"]: r for r in _read(tmp / f"{name}.out.jsonl")}
        removed = _removed(tmp, name)
        sigs = {r.id: batch_signatures([r.text], PARAMS)[0] for r in rows}
        replaced = set()
        assert len(out) + len(removed) == len(rows)
        for why in removed.values():
            assert why["duplicate_of"] in out or why["duplicate_of"] in indexed
        for r in rows:
            why = removed.get(r.id)
            if r.id not in indexed:
                continue
            old = batch_signatures([indexed[r.id]], PARAMS)[0]
            live = (sigs[r.id] != 2**31 - 1).any() and (old != 2**31 - 1).any()
            near = bool(live and (sigs[r.id] == old).mean() >= PARAMS.threshold)
            if r.text == indexed[r.id] or near:  # its own id's duplicate
                assert why is not None and why["duplicate_of"] == r.id
                assert why["reason"] == ("exact" if r.text == indexed[r.id] else "near")
            elif policy == "keep-indexed":
                assert why["reason"] == "recrawled" and why["duplicate_of"] == r.id
            elif policy == "replace":
                replaced.add(r.id)
            else:  # keep-both: on under its derived id (kept, or dropped as any new row)
                derived = f"{r.id}#rev-" + _digest(r.text).hex()[:12]
                assert r.id not in out and why is None
                assert (derived in out) != (derived in removed)
        if mode == "append":
            for doc_id in replaced:
                del indexed[doc_id]
            for doc_id, row in out.items():
                assert doc_id not in indexed
                indexed[doc_id] = row["text"]
    if indexed:
        assert _index_texts(tmp) == {i: _digest(t) for i, t in indexed.items()}
        assert index_table(tmp / "idx").num_rows == len(indexed)  # each id once
