"""``--tokenizer multilingual`` through a real ``neardup`` subprocess, on real translated text
(tests/catalogs.py): near copies in Chinese, Japanese and Thai found, eval items planted in
longer documents found and cut at the right characters; and, honestly, what ``words`` misses."""

import json

import pytest

from neardup.core.engine import word_spans
from tests.app.cli.test_cli import neardup
from tests.catalogs import MESSAGES, document

LOCALES = ("de", "ru", "zh_CN", "ja", "th")


def one_percent_changed(text: str) -> str:
    """``text`` with 1 % of its words by the multilingual tokenizer (at least one), evenly
    spread, each replaced by the next different word: a character of Chinese or Japanese, a
    cluster of Thai, a German or Russian word."""
    found, spans = word_spans(text, "multilingual")
    edits = max(1, round(len(found) / 100))
    pieces, pos = [], 0
    for e in range(edits):
        i = (2 * e + 1) * len(found) // (2 * edits)
        other = next(w for w in found[i + 1 :] + found if w != found[i])
        pieces += [text[pos : spans[i][0]], other]
        pos = spans[i][1]
    return "".join(pieces) + text[pos:]


def write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def rows(path):
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multilingual")
    docs = []
    for loc in LOCALES:
        for part in range(3):
            docs.append({"id": f"{loc}-{part}", "text": document(loc, 12 * part, 12)})
        docs.append({"id": f"{loc}-0~near", "text": one_percent_changed(document(loc, 0, 12))})
    write(tmp / "corpus.jsonl", docs)
    return tmp


def test_multilingual_dedup_finds_near_copies_in_every_language(copies):
    out = {}
    for tokenizer in ("multilingual", "words"):
        done = neardup("dedup", "corpus.jsonl", "--output", f"{tokenizer}.jsonl", "--tokenizer",
                       tokenizer, "--workers", "1", "--quiet", cwd=copies)  # fmt: skip
        assert done.returncode == 0, done.stderr
        out[tokenizer] = {r["id"] for r in rows(copies / f"{tokenizer}.jsonl")}
    originals = {f"{loc}-{part}" for loc in LOCALES for part in range(3)}
    assert out["multilingual"] == originals  # every near copy dropped
    # words: a Chinese or Japanese clause is one word, so each changed character changes it and
    # the shingles around it; those copies stay.
    assert {"zh_CN-0~near", "ja-0~near"} <= out["words"]
    assert "de-0~near" not in out["words"]
    manifest = json.loads((copies / "multilingual.jsonl.manifest.json").read_text())
    assert manifest["parameters"]["tokenizer"] == "multilingual"
    assert manifest["parameters"]["tokenizer_version"] == "multilingual-3@17.0.0"


ZH_ITEM = MESSAGES["zh_CN"][30]
JA_ITEM = MESSAGES["ja"][30]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("planted")
    write(
        tmp / "evals.jsonl",
        [{"id": "zh1", "question": ZH_ITEM}, {"id": "ja1", "question": JA_ITEM}],
    )
    write(tmp / "corpus.jsonl", [
        {"id": "zh-doc", "text": document("zh_CN", 0, 6) + ZH_ITEM + document("zh_CN", 6, 6)},
        {"id": "ja-doc", "text": document("ja", 0, 6) + " " + JA_ITEM + " " + document("ja", 6, 6)},
        {"id": "clean", "text": document("zh_CN", 12, 12)},
    ])  # fmt: skip
    return tmp


def test_planted_chinese_and_japanese_items_are_found_only_in_multilingual_mode(planted):
    assert len(word_spans(ZH_ITEM, "multilingual")[0]) >= 13
    assert len(word_spans(JA_ITEM, "multilingual")[0]) >= 13
    found = {}
    for tokenizer in ("multilingual", "words"):
        done = neardup("contamination", "corpus.jsonl", "--protected", "evals.jsonl",
                       "--tokenizer", tokenizer, "--output", f"{tokenizer}.json", "--quiet",
                       cwd=planted)  # fmt: skip
        assert done.returncode == 0, done.stderr
        report = json.loads((planted / f"{tokenizer}.json").read_text("utf-8"))
        found[tokenizer] = {i["item"]: i["document_ids"] for i in report["items"]}
    assert found["multilingual"] == {"zh1": ["zh-doc"], "ja1": ["ja-doc"]}
    assert found["words"] == {}  # fewer than 13 "words" each: no n-gram to find


def test_annotated_matches_span_the_planted_characters(planted):
    done = neardup("dedup", "corpus.jsonl", "--protected", "evals.jsonl", "--output", "out.jsonl",
                   "--tokenizer", "multilingual", "--decontamination", "annotate", "--workers",
                   "1", "--quiet", cwd=planted)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = {r["id"]: r for r in rows(planted / "out.jsonl")}
    for doc_id, item in (("zh-doc", ZH_ITEM), ("ja-doc", JA_ITEM)):
        text = out[doc_id]["text"]
        # The item's windows, merged into one span: from its first word to its last.
        [(start, end)] = out[doc_id]["meta"]["decontamination"]["spans"]
        assert text[start:end].strip("。．.、 ") == item.strip("。．.、 ")
        assert start == text.index(item)
    assert "decontamination" not in out["clean"]["meta"]


def test_an_unknown_tokenizer_is_one_line_and_exit_2(tmp_path):
    write(tmp_path / "c.jsonl", [{"id": "a", "text": "x"}])
    for command in (("dedup", "c.jsonl", "--output", "o.jsonl"), ("contamination", "c.jsonl",
                    "--protected", "c.jsonl")):  # fmt: skip
        done = neardup(*command, "--tokenizer", "chars", cwd=tmp_path)
        assert done.returncode == 2
        assert "argument --tokenizer: invalid choice: 'chars'" in done.stderr
        assert not (tmp_path / "o.jsonl").exists()


def test_neardup_tokenizer_is_read_by_dedup_and_contamination_and_a_flag_wins(planted, monkeypatch):
    # A Thai or Chinese run with NEARDUP_TOKENIZER=multilingual and no flag found almost
    # nothing: the batch commands ignored the variable. Each report names what ran.
    monkeypatch.setenv("NEARDUP_TOKENIZER", "multilingual")
    found, ran = {}, {}
    for flag in ((), ("--tokenizer", "words")):
        out = f"env{len(flag)}.json"
        done = neardup("contamination", "corpus.jsonl", "--protected", "evals.jsonl", *flag,
                       "--output", out, "--quiet", cwd=planted)  # fmt: skip
        assert done.returncode == 0, done.stderr
        report = json.loads((planted / out).read_text("utf-8"))
        found[flag], ran[flag] = {i["item"] for i in report["items"]}, report["tokenizer"]
    assert found == {(): {"zh1", "ja1"}, ("--tokenizer", "words"): set()}
    assert ran == {(): "multilingual-3@17.0.0", ("--tokenizer", "words"): "words"}
    done = neardup("dedup", "corpus.jsonl", "--protected", "evals.jsonl", "--output", "env.jsonl",
                   "--workers", "1", "--quiet", cwd=planted)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {r["id"] for r in rows(planted / "env.jsonl")} == {"clean"}  # both items dropped
    manifest = json.loads((planted / "env.jsonl.manifest.json").read_text())
    assert manifest["parameters"]["tokenizer"] == "multilingual"
    assert manifest["parameters"]["tokenizer_version"] == "multilingual-3@17.0.0"
    assert manifest["contamination"]["tokenizer"] == "multilingual-3@17.0.0"


def test_an_unknown_neardup_tokenizer_is_one_line_and_exit_2(tmp_path, monkeypatch):
    write(tmp_path / "c.jsonl", [{"id": "a", "text": "x"}])
    monkeypatch.setenv("NEARDUP_TOKENIZER", "chars")
    for command in (("dedup", "c.jsonl", "--output", "o.jsonl"), ("contamination", "c.jsonl",
                    "--protected", "c.jsonl")):  # fmt: skip
        done = neardup(*command, cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr == (
            f"neardup {command[0]}: error: NEARDUP_TOKENIZER='chars': tokenizer must be one of "
            "words, multilingual\n"
        )
        assert not (tmp_path / "o.jsonl").exists()
    assert neardup(*command, "--tokenizer", "words", cwd=tmp_path).returncode == 0


def test_an_index_of_the_previous_multilingual_tokenizer_is_refused_naming_both(planted):
    # The second multilingual tokenizer (unicodedata of the running Python); its index is never
    # extended (the first, recorded as plain multilingual: tests/core/test_index.py).
    flags = ("--tokenizer", "multilingual", "--workers", "1", "--quiet")
    done = neardup("dedup", "corpus.jsonl", "--output", "i.jsonl", "--index", "idx", *flags,
                   cwd=planted)  # fmt: skip
    assert done.returncode == 0, done.stderr
    version = planted / "idx" / "_index" / "00000001.json"  # the seal, read as the newest
    body = json.loads(version.read_text())
    assert body["params"]["tokenizer"] == "multilingual-3@17.0.0"
    version.write_text(
        json.dumps({**body, "params": {**body["params"], "tokenizer": "multilingual-2@17.0.0"}})
    )
    done = neardup("dedup", "corpus.jsonl", "--output", "j.jsonl", "--index", "idx", *flags,
                   cwd=planted)  # fmt: skip
    assert done.returncode == 2
    assert "the index has 'multilingual-2@17.0.0', this run 'multilingual-3@17.0.0'" in done.stderr
    assert "build it again with this one" in done.stderr
    assert not (planted / "j.jsonl").exists()
