"""``bench.multilingual`` at a tiny size, on catalogs written here: every table and column is
printed, and a language without catalogs is a "not installed" row, not a failure."""

import struct

import pytest

from bench.multilingual.__main__ import main
from tests.catalogs import MESSAGES

COLUMNS = (
    "| language | catalogs | documents | copies | tokenizer | 1 % | 3 % | 5 % | diacritics | NFD "
    "| full-width | confirmed pairs | false merges |",
    "| language | items | tokenizer | n | short | false flags | false flags, English | ratio "
    "| quotes caught | quotes caught, English | goal |",
    "| language | MB | words, compiled | multilingual, compiled | ratio | words, numpy "
    "| multilingual, numpy | ratio | normalization | signature ratio, compiled |",
)


def write_mo(path, pairs):
    """A little-endian GNU ``.mo`` file of (msgid, msgstr) pairs (no hash table)."""
    pairs = sorted(pairs)
    ids = [m.encode() for m, _ in pairs]
    strs = [t.encode() for _, t in pairs]
    start = 28 + 16 * len(pairs)
    blob, table = b"", []
    for raw in ids + strs:
        table.append((len(raw), start + len(blob)))
        blob += raw + b"\0"
    head = struct.pack("<7I", 0x950412DE, 0, len(pairs), 28, 28 + 8 * len(pairs), 0, 0)
    body = b"".join(struct.pack("<II", n, off) for n, off in table)
    path.parent.mkdir(parents=True)
    path.write_bytes(head + body + blob)


@pytest.fixture
def roots(tmp_path):
    """Catalogs of German, Chinese and Thai, each message with a 14-word English source (so
    that documents are about nine messages and every message can be an eval item), and one of
    a single Japanese message."""
    for locale in ("de", "zh_CN", "th"):
        pairs = [
            (f"message {i} of the {locale} test catalog says what this program does now", text)
            for i, text in enumerate(MESSAGES[locale])
        ]
        write_mo(tmp_path / locale / "LC_MESSAGES" / "test.mo", pairs)
    # Two short messages: a catalog, but too little text for one document.
    write_mo(tmp_path / "ja" / "LC_MESSAGES" / "test.mo", [("Yes", MESSAGES["ja"][0])])
    return str(tmp_path)


def test_a_quick_run_prints_every_column_and_a_missing_language(roots, capsys):
    sizes = ["--docs", "4", "--copies", "2", "--items", "3", "--clean", "2", "--speed-kb", "5"]
    assert main(["--quick", "--markdown", "--catalogs", roots, "--languages",
                 "de,zh_CN,th,km,ja,en", *sizes]) == 0  # fmt: skip
    out = capsys.readouterr().out
    for header in COLUMNS:
        assert header in out
    lines = out.splitlines()
    for table, header in enumerate(COLUMNS):
        rows = lines[lines.index(header) + 2 :]
        rows = rows[: next((i for i, r in enumerate(rows) if not r), len(rows))]
        width = header.count("|")
        assert rows and all(r.count("|") == width for r in rows)
        langs = {r.split("|")[1].strip() for r in rows}
        # The speed table leaves a language without text out; the others say why.
        assert langs == ({"de", "zh_CN", "th", "en"} | (set() if table == 2 else {"km", "ja"}))
        if table < 2:
            assert any("not installed" in r for r in rows if r.startswith("| km |"))
            assert any("too little text (1 messages" in r for r in rows if r.startswith("| ja |"))
    quality = lines[lines.index(COLUMNS[0]) + 2 :]
    zh = next(r for r in quality if r.startswith("| zh_CN |") and "| multilingual |" in r)
    assert zh.split("|")[11].strip() != "-"  # full-width copies of Chinese are planted
    assert roots in out  # the record says where the catalogs were read


@pytest.fixture
def near_copies(tmp_path):
    """A Thai catalog of 20 eval-length messages (14 English words), 19 shorter ones (12), and
    one near copy of the longest Thai message whose English source shares only its first ten
    words: the Thai text shared is a whole window, the English is not."""
    thai = MESSAGES["th"]
    pairs = [(f"message {i} of the th test catalog says what this program does now", thai[i])
             for i in range(20)]  # fmt: skip
    pairs[19] = (pairs[19][0], thai[39])
    pairs += [(f"filler {i} is a shorter message of the th test catalog here", thai[i])
              for i in range(20, 39)]  # fmt: skip
    pairs.append(("a message 19 of the th test catalog says what this", thai[39] + " ข"))
    write_mo(tmp_path / "th" / "LC_MESSAGES" / "test.mo", pairs)
    return str(tmp_path)


def test_pooled_flags_name_the_shared_text_and_english_is_the_baseline(near_copies, capsys):
    from bench.multilingual.pooled import main as pooled

    assert pooled(["--languages", "th", "--items", "20", "--seeds", "2", "--show",
                   "--catalogs", near_copies]) == 0  # fmt: skip
    out = capsys.readouterr().out
    # every seed flags the document holding the near copy, and English (10 words shared) not
    assert out.count("English flags it too: False; English shares 10 words in a row") == 2
    row = next(line for line in out.splitlines() if line.startswith("| th |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2] == "2 x 20"
    checks = int(cells[3])
    assert cells[4].startswith(f"2/{checks} = ")
    assert cells[5].startswith(f"0/{checks} = 0.00 % [0.00, ")
    assert cells[7] == "2/2"  # both flags are shared text
    assert cells[9] == "40/40"  # English catches every quote of 14 words


def test_wilson_intervals_are_the_textbook_values():
    from bench.multilingual.pooled import wilson

    low, high = wilson(5, 100)
    assert (round(low, 4), round(high, 4)) == (0.0215, 0.1118)
    assert wilson(0, 10)[0] == 0.0 and round(wilson(0, 10)[1], 4) == 0.2775


def test_whole_reproduces_pooled_under_weighted_3_and_scales_weighted_2(near_copies, capsys):
    """``bench.multilingual.whole`` (issue 31's prototype, its own hashes of word ids) counts
    what core counts: its table of ``weighted-3``'s weights gives ``pooled``'s row, and its
    scaled windows of 13 with no floor are ``weighted-2``'s own weights."""
    from bench.multilingual.pooled import main as pooled
    from bench.multilingual.whole import main as whole

    common = ["--languages", "th", "--items", "20", "--seeds", "2", "--catalogs", near_copies]
    assert pooled(common) == 0
    core = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("| th |"))
    weighted_3 = "38,16,12,12,12,12,12:85,35,27,27,27,29,26"
    assert whole([*common, "--weights", weighted_3, "--table"]) == 0
    mine = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("| th |"))
    assert mine == core
    assert whole([*common, "--windows", "13", "--floors", "none"]) == 0
    scaled = capsys.readouterr().out.splitlines()[1].split(":", 1)[1]
    weighted_2 = "59,24,19,19,19,20,18"
    assert whole([*common, "--weights", f"{weighted_2}:{weighted_2}"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split(":", 1)[1] == scaled
