"""Hypothesis: for any corpus and any ``--keep`` policy, the output and ``--removed`` split the
input rows, each cluster keeps one row, and every dropped row names a row that explains it."""

import json
import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.app.cli import main
from tests.app.cli.licenses import mit

HOLDERS = ["1998 The Open Group", "1988 The Open Group", "2008 The pip developers", "2010 Six"]
OTHERS = ["a short note", "Copyright (c) The Regents. " + " ".join(f"w{i}" for i in range(60))]


@st.composite
def corpora(draw):
    texts = draw(st.lists(st.sampled_from([mit(h) for h in HOLDERS] + OTHERS), min_size=1,
                          max_size=12))  # fmt: skip
    ids = draw(st.lists(st.one_of(st.integers(0, 999), st.from_regex(r"[a-z]{1,3}/[a-z]{1,4}",
                                                                     fullmatch=True)),
                        min_size=len(texts), max_size=len(texts),
                        unique_by=str))  # fmt: skip
    rows = [{"id": i, "text": t, "q": draw(st.one_of(st.none(), st.integers(0, 3)))}
            for i, t in zip(ids, texts, strict=True)]  # fmt: skip
    if all(r["q"] is None for r in rows):  # --keep max:q needs a row with q (else exit 2)
        rows[0]["q"] = 0
    policy = draw(st.sampled_from(["smallest-id", "first", "longest", "max:q"]))
    return rows, policy


def dedup(tmp: Path, rows, policy):
    (tmp / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        code = main(["dedup", "in.jsonl", "--output", "o.jsonl", "--removed", "r.jsonl",
                     "--keep", policy, "--workers", "1", "--quiet"])  # fmt: skip
    finally:
        os.chdir(cwd)
    assert code == 0
    read = lambda name: [json.loads(x) for x in (tmp / name).read_text().splitlines()]  # noqa: E731
    return read("o.jsonl"), read("r.jsonl")


@settings(max_examples=25)
@given(corpora())
def test_output_and_removed_split_the_input_and_every_drop_is_explained(case):
    rows, policy = case
    with tempfile.TemporaryDirectory() as tmp:
        kept, removed = dedup(Path(tmp), rows, policy)
    by_id = {str(r["id"]): r for r in rows}
    kept_ids = [str(r["id"]) for r in kept]
    removed_ids = [str(r["id"]) for r in removed]
    assert sorted(kept_ids + removed_ids) == sorted(by_id)
    assert kept_ids == [str(r["id"]) for r in rows if str(r["id"]) in kept_ids]  # input order
    reasons = {str(r["id"]): r["neardup"] for r in removed}
    for row in removed:
        why = row.pop("neardup")
        assert row == by_id[str(row["id"])]  # unchanged
        target = by_id[why["duplicate_of"]]
        assert why["duplicate_of"] in kept_ids  # what was kept in its place (issue 33.12)
        if why["reason"] == "exact" and target["text"] == row["text"]:
            assert why["estimate"] == 1.0
        elif why["reason"] == "exact":  # its text's kept row was dropped too: what that names
            (keeper,) = [
                i for i, w in reasons.items()
                if w["reason"] == "near" and by_id[i]["text"] == row["text"]
            ]  # fmt: skip
            assert (why["duplicate_of"], why["estimate"]) == (
                reasons[keeper]["duplicate_of"], reasons[keeper]["estimate"],
            )  # fmt: skip
        else:
            assert why["reason"] == "near"
    clusters = [r["meta"]["minhash_cluster"] for r in kept]
    assert len(clusters) == len(set(clusters))  # one survivor per cluster
    for r in kept:  # the cluster's identity is its smallest id, whoever survives
        assert r["meta"]["minhash_cluster"] <= str(r["id"])


WORDLESS = ["!!!", "", "— … —"]


def clusters_named(tmp: Path, rows, policy) -> dict[str, str]:
    (tmp / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["dedup", str(tmp / "in.jsonl"), "--output", str(tmp / "all.jsonl"),
                 "--keep-duplicates", "--keep", policy, "--workers", "1", "--quiet"])  # fmt: skip
    assert code == 0
    out = [json.loads(x) for x in (tmp / "all.jsonl").read_text().splitlines()]
    return {str(r["id"]): r["meta"]["minhash_cluster"] for r in out}


@settings(max_examples=15)
@given(corpora(), st.lists(st.sampled_from(WORDLESS), min_size=1, max_size=6), st.randoms())
def test_every_row_is_named_by_the_same_cluster_under_every_policy(case, wordless, rnd):
    """Identical wordless texts too: their cluster is named by its smallest id, whichever row
    the policy keeps."""
    rows, _ = case
    used = {str(r["id"]) for r in rows}
    extra = [{"id": f"w{i}", "text": t, "q": rnd.choice([None, 0, 7])}
             for i, t in enumerate(wordless) if f"w{i}" not in used]  # fmt: skip
    rows = rows + extra
    rnd.shuffle(rows)
    with tempfile.TemporaryDirectory() as tmp:
        named = [clusters_named(Path(tmp), rows, p) for p in ("smallest-id", "first", "max:q")]
    assert named[0] == named[1] == named[2]
    for text in set(wordless):
        same = [str(r["id"]) for r in rows if r["text"] == text]
        assert len({named[0][i] for i in same}) == 1  # one cluster, one name
