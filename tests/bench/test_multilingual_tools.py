"""``bench.multilingual.speed`` (interleaved speed per language) and ``bench.multilingual.digest``
(digests of the whole corpus), on the catalogs ``test_multilingual`` writes."""

import numpy as np

from bench.multilingual.digest import digests
from bench.multilingual.digest import main as digest
from bench.multilingual.speed import main as speed
from bench.multilingual.speed import measure
from neardup.core._tokens import Tokens
from tests.bench.test_multilingual import roots  # noqa: F401 (a fixture)
from tests.catalogs import MESSAGES


def test_speed_prints_a_row_per_language_text_or_messages(roots, capsys):  # noqa: F811
    assert speed(["--catalogs", roots, "--languages", "de,th,ja,km", "--repeats", "3",
                  "--speed-kb", "5", "--markdown"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("## Multilingual tokenising speed, interleaved")  # a section of its own
    assert "- command: `python -m bench.multilingual.speed --catalogs" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0].startswith("| language | MB |")
    by_language = {r.split("|")[1].strip(): r for r in rows[1:]}
    # Japanese has one message, too little for a document: timed on its messages.
    assert set(by_language) == {"de", "th", "ja (messages)", "km"}
    assert "not installed" in by_language["km"]
    for name in ("de", "th", "ja (messages)"):
        cells = [c.strip() for c in by_language[name].split("|")[1:-1]]
        assert len(cells) == 6
        low, high = (float(x) for x in cells[5].split(" - "))
        assert low <= float(cells[4].split()[0]) <= high


def test_speed_ratios_are_one_per_round(roots):  # noqa: F811
    row = measure("th", 4, 5, (roots,))
    assert row is not None and row.documents
    assert len(row.ratios) == 4 and all(r > 0 for r in row.ratios)
    assert row.megabytes > 0.004  # the documents, repeated to about 5 KB


def test_digest_lines_repeat_and_name_what_the_paths_agree_on(roots, capsys):  # noqa: F811
    argv = ["--catalogs", roots, "--languages", "th,zh_CN,km", "--docs", "4", "--copies", "2"]
    assert digest(argv) == 0
    first = capsys.readouterr().out
    assert digest(argv) == 0
    assert capsys.readouterr().out == first
    lines = first.splitlines()
    assert lines[0].split() == ["language", "tokenizer", "texts", "bytes", "compiled", "numpy",
                                "signatures", "same-words"]  # fmt: skip
    assert "km not installed" in lines
    rows = [line.split() for line in lines[1:] if "not installed" not in line]
    expected = [("th", "words"), ("th", "multilingual"), ("zh_CN", "words"),
                ("zh_CN", "multilingual")]  # fmt: skip
    assert [(r[0], r[1]) for r in rows] == expected
    assert all(r[7] == "yes" for r in rows)
    # multilingual: both paths lay the words out alike, so their arrays' digests are equal
    assert all(r[4] == r[5] for r in rows if r[1] == "multilingual")


def test_digest_changes_with_one_word():
    texts = list(MESSAGES["th"][:6])
    before = digests(texts, "multilingual")
    texts[3] = texts[3].replace(texts[3][:2], texts[3][1::-1], 1)  # two clusters swapped
    after = digests(texts, "multilingual")
    assert all(a != b for a, b in zip(before[:3], after[:3], strict=True))
    assert before[3] and after[3]


def test_digest_notices_paths_that_disagree(monkeypatch):
    texts = list(MESSAGES["th"][:4])
    assert digests(texts, "multilingual")[3]

    real = Tokens.__init__

    def numpy_drops_a_word(self, texts, jit=None, tokenizer="words"):
        real(self, texts, jit=jit, tokenizer=tokenizer)
        if jit is False:
            self.word_end = np.concatenate([self.word_start[:1], self.word_end[1:]])

    monkeypatch.setattr(Tokens, "__init__", numpy_drops_a_word)
    assert not digests(texts, "multilingual")[3]


def test_speed_decont_prints_the_check_and_the_build_per_language(roots, capsys):  # noqa: F811
    """``--decont``: what whole items cost a check and a build, a row per language in each
    table (``not installed`` for a language without catalogs), and the n-grams together."""
    assert speed(["--catalogs", roots, "--languages", "de,th,km", "--repeats", "2", "--decont",
                  "--markdown"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("## Whole items' cost, interleaved (`bench.multilingual.speed --decont`)")
    check, build = out.split("\n\n| language | n-grams |")
    rows = [line for line in check.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows[1:]] == ["de", "th", "km"]
    assert "not installed" in rows[-1]
    built = [line for line in build.splitlines()[2:] if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in built] == ["de", "th", "km", "all"]
    assert "not installed" in built[2]
    for line in [*rows[1:3], *built[:2], built[3]]:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        low, high = (float(x) for x in cells[5].split(" - "))
        assert 0 < low <= float(cells[4]) <= high
