"""``neardup dedup --decontamination`` and ``neardup contamination``'s report and caps, through a
real subprocess, on the hand-worked examples of tests/core/test_decont_modes.py."""

import json

import pytest

from neardup.core.engine import words
from tests.app.cli.test_cli import neardup

SHELL = "Tom found a shiny red shell by the river and carried it home to show his sister."
M = "Tom found a shiny red shell by the river and carried it home"
L = len(M)
BOILER = "Answer the following question with one word and explain nothing at all please"


def pad(k: int, tag: str) -> str:
    """``k`` characters of words of its own (so no two documents are near duplicates)."""
    return (" " + " ".join(f"{tag}{j}" for j in range(k)))[: k - 1] + " "


TWO = pad(500, "a") + M + pad(150, "b") + M + pad(500, "c")
ELEVEN = pad(500, "d") + "".join(M + pad(700, f"e{i}x") for i in range(9)) + M + pad(500, "f")
CLEAN = pad(400, "g")


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path):
    write(tmp_path / "corpus.jsonl", [
        {"id": "two", "text": TWO, "meta": {"src": "web"}},
        {"id": "eleven", "text": ELEVEN}, {"id": "clean", "text": CLEAN},
    ])  # fmt: skip
    write(tmp_path / "evals.jsonl", [{"id": "q1", "question": SHELL}])
    return tmp_path


def rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_dedup_cut_writes_pieces_and_removes_an_eleven_piece_row(corpus):
    result = neardup("dedup", "corpus.jsonl", "--protected", "evals.jsonl", "--output",
                     "out.jsonl", "--removed", "removed.jsonl", "--decontamination", "cut",
                     "--workers", "1", "--quiet", cwd=corpus)  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = {r["id"]: r for r in rows(corpus / "out.jsonl")}
    assert sorted(out) == ["clean", "two#1", "two#2"]
    # The window [300, 850 + 2L) starts inside "a77" and ends inside "c52": widened to both.
    assert TWO[299:303] == "a77 " and TWO[849 + 2 * L : 853 + 2 * L] == "c52 "
    assert out["two#1"]["text"] == TWO[:299] and out["two#2"]["text"] == TWO[852 + 2 * L :]
    cut = out["two#1"]["meta"]["decontamination"]
    assert (cut["source"], cut["removed"], cut["items"]) == (
        "two",
        [[299, 852 + 2 * L]],
        [{"set": "evals.jsonl", "item": "q1", "matches": 2}],
    )
    # The rows hand back no protected text: ids, counts and offsets only.
    protected = " ".join(words(M))
    assert protected not in (corpus / "out.jsonl").read_text().lower()
    assert out["two#1"]["meta"]["src"] == "web" and out["two#1"]["meta"]["minhash_cluster"] == "two"
    [removed] = rows(corpus / "removed.jsonl")
    assert removed["id"] == "eleven" and removed["neardup"]["reason"] == "contaminated"
    why = removed["meta"]["decontamination"]
    assert (why["mode"], why["dropped"], why["match_count"], len(why["spans"])) == (
        "cut",
        "too many pieces",
        10,
        10,
    )
    manifest = json.loads((corpus / "out.jsonl.manifest.json").read_text())
    expected = {"read": 3, "exact_dropped": 0, "near_dropped": 0, "decontaminated": 1,
                "cut": 1, "pieces": 2, "written": 3}  # fmt: skip
    assert manifest["counts"] == expected
    [item] = manifest["contamination"]["items"]
    assert (item["item"], item["documents"]) == ("q1", 2)
    assert manifest["parameters"]["decontamination"] == "cut"


def test_dedup_annotate_keeps_every_row_with_offsets(corpus):
    result = neardup("dedup", "corpus.jsonl", "--protected", "evals.jsonl", "--output",
                     "out.jsonl", "--decontamination", "annotate", "--workers", "1", "--quiet",
                     cwd=corpus)  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = {r["id"]: r for r in rows(corpus / "out.jsonl")}
    assert sorted(out) == ["clean", "eleven", "two"]
    assert out["two"]["text"] == TWO and "decontamination" not in out["clean"]["meta"]
    found = out["two"]["meta"]["decontamination"]
    assert found["spans"] == [[500, 500 + L], [650 + L, 650 + 2 * L]]
    eleven = out["eleven"]["meta"]["decontamination"]
    assert (eleven["match_count"], eleven["span_count"], len(eleven["spans"])) == (10, 10, 10)


def test_contamination_report_caps_boilerplate_by_items_and_by_a_sample(corpus):
    write(corpus / "evals.jsonl", [
        {"id": "q1", "question": f"{BOILER}. {SHELL}"},
        {"id": "q2", "question": f"{BOILER}. What colour is the sky over the sea at noon today?"},
    ])  # fmt: skip
    write(corpus / "web.jsonl", [{"id": "quiz", "text": f"Quiz. {BOILER}. Ok."},
                                 {"id": "two", "text": TWO}])  # fmt: skip
    write(corpus / "sample.jsonl", [{"id": str(i), "text": f"{i}: {BOILER}"} for i in range(4)])
    boiler = " ".join(words(BOILER))
    for flags in (["--item-cap", "1"], ["--sample", "sample.jsonl", "--sample-cap", "0.5"]):
        result = neardup("contamination", "web.jsonl", "--protected", "evals.jsonl", "--quiet",
                         *flags, cwd=corpus)  # fmt: skip
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert (report["documents"], report["contaminated_ids"]) == (2, ["two"])
        [s] = report["sets"]
        assert s["capped"] == {"ngrams": 1, "list": [boiler]}
        # q1 is 13/30 = 43% covered: not clean, not dirty; q2 (only capped n-grams) is clean.
        assert s["subsets"] == {"clean": 1, "not clean": 1, "not dirty": 2, "dirty": 0}
        [q1] = report["items"]
        # q1: 13 + 17 words, 18 windows; the one 13-gram of M found covers 13 of its 30 words.
        assert (q1["item"], q1["document_ids"], q1["ngrams"], q1["ngrams_found"]) == (
            "q1",
            ["two"],
            18,
            1,
        )
        assert q1["coverage"] == 13 / 30
    plain = json.loads(neardup("contamination", "web.jsonl", "--protected", "evals.jsonl",
                               "--quiet", cwd=corpus).stdout)  # fmt: skip
    assert plain["contaminated_ids"] == ["quiz", "two"] and plain["item_cap"] is None


def test_the_report_stays_small_and_the_ids_file_holds_every_id(corpus):
    write(corpus / "web.jsonl", [
        {"id": f"doc-{i:05}", "text": f"{i} {M if i % 2 else 'nothing to see here'} {i}."}
        for i in range(4000)
    ])  # fmt: skip
    result = neardup("contamination", "web.jsonl", "--protected", "evals.jsonl", "--ids-file",
                     "ids.jsonl", "--output", "report.json", "--quiet", cwd=corpus)  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = (corpus / "report.json").read_text()
    report = json.loads(text)
    dirty = [f"doc-{i:05}" for i in range(1, 4000, 2)]
    # Counts in full, ids capped: one set, one item, 10 ids a list (3.1 KB whatever the corpus).
    assert (report["documents"], report["contaminated"]) == (4000, 2000)
    assert report["contaminated_ids"] == dirty[:10]
    [item] = report["items"]
    assert (item["documents"], item["document_ids"]) == (2000, dirty[:10])
    assert len(text) < 4096
    lines = rows(corpus / "ids.jsonl")
    assert lines == [{"id": d, "items": [{"set": "evals.jsonl", "item": "q1"}]} for d in dirty]


@pytest.mark.parametrize(
    "args",
    [
        ["dedup", "corpus.jsonl", "--protected", "evals.jsonl", "--output", "out.parquet",
         "--decontamination", "cut"],
        ["dedup", "corpus.jsonl", "--output", "out.jsonl", "--decontamination", "annotate"],
        ["dedup", "corpus.jsonl", "--protected", "evals.jsonl", "--output", "out.jsonl",
         "--decontamination", "cut", "--max-pieces", "0"],
        ["contamination", "corpus.jsonl", "--protected", "evals.jsonl", "--sample-cap", "0.1"],
        ["contamination", "corpus.jsonl", "--protected", "evals.jsonl", "--item-cap", "0"],
        ["contamination", "corpus.jsonl", "--protected", "evals.jsonl", "--dirty-from", "0.1"],
        ["contamination", "corpus.jsonl", "--protected", "evals.jsonl", "--ids-file",
         "corpus.jsonl"],
        ["contamination", "corpus.jsonl", "--protected", "evals.jsonl", "--ids-file",
         "ids.jsonl", "--output", "ids.jsonl"],
    ],
)  # fmt: skip
def test_bad_decontamination_flags_exit_2_writing_nothing(corpus, args):
    before = sorted(p.name for p in corpus.iterdir())
    result = neardup(*args, "--quiet", cwd=corpus)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.strip()
    assert sorted(p.name for p in corpus.iterdir()) == before
