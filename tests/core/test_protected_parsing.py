"""Protected sets, parsed and read: every format's items and labels, the CSV header rule, the
n-grams and the layout of a set, and the exact error each misuse gets (docs/algorithm.md 5)."""

import gzip
import json

import pytest

from neardup.core._protected import (
    NON_TEXT_KEYS,
    ProtectedFormat,
    ProtectedSet,
    item_label,
    item_strings,
    parse_protected_set,
    protected_as_jsonl,
    protected_items,
    protected_ngrams,
    protected_paths,
    read_protected_set,
)
from neardup.core.errors import CorpusError, ParameterError

FORMATS = ".jsonl, .ndjson, .json, .csv, .txt"
UNREADABLE = f"cannot read this file as protected items: name it by its format, one of {FORMATS}"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.jsonl", ProtectedFormat.JSONL),
        ("a.ndjson", ProtectedFormat.JSONL),
        ("a.json", ProtectedFormat.JSON),
        ("A.CSV", ProtectedFormat.CSV),
        ("dir/held.out.txt", ProtectedFormat.TEXT),
    ],
)
def test_the_format_of_a_file_is_its_name(name, fmt):
    assert ProtectedFormat.of(name) is fmt


@pytest.mark.parametrize("name", ["a.parquet", "a.csv.gz", "a.jsonl.zst", "a.md", "README"])
def test_a_name_the_store_cannot_read_as_items_is_refused_with_the_formats(name):
    with pytest.raises(CorpusError) as caught:
        ProtectedFormat.of(name)
    assert str(caught.value) == f"{name}: {UNREADABLE} (.txt is one item)"
    assert caught.value.line is None


def test_a_file_of_an_unknown_name_is_refused_naming_compression_and_parquet(tmp_path):
    path = tmp_path / "evals.md"
    path.write_text(WORDS, encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        read_protected_set(path)
    assert str(caught.value) == (
        f"{path}: {UNREADABLE} (each also .gz or .zst) or .parquet (.txt is one item)"
    )


@pytest.mark.parametrize(
    ("value", "strings"),
    [
        ("text", ["text"]),
        (7, []),
        (None, []),
        (True, []),
        ({"a": "x", "b": ["y", {"c": "z", "id": "no"}], "d": 1.5}, ["x", "y", "z"]),
        ({key: "label" for key in NON_TEXT_KEYS}, []),
        ({"tags": ["t"], "case_id": "c", "scorer_args": {"k": "v"}, "q": "kept"}, ["kept"]),
        (["a", ["b", ["c"]]], ["a", "b", "c"]),
        ({"meta": {"id": "inner", "text": "nested"}}, ["nested"]),
    ],
)
def test_item_strings_are_every_string_but_under_label_keys(value, strings):
    assert list(item_strings(value)) == strings


def test_the_label_keys_are_the_documented_four():
    assert frozenset({"case_id", "id", "tags", "scorer_args"}) == NON_TEXT_KEYS


@pytest.mark.parametrize(
    ("item", "label"),
    [
        ({"id": "q1", "case_id": "c1"}, "q1"),
        ({"id": 7}, "7"),
        ({"id": 0}, "0"),
        ({"id": ""}, ""),
        ({"id": True, "case_id": "c1"}, "c1"),
        ({"id": 1.5, "case_id": 3}, "3"),
        ({"id": None, "case_id": "c1"}, "c1"),
        ({"id": ["q1"]}, "12"),
        ({"case_id": False}, "12"),
        ({"text": "x"}, "12"),
    ],
)
def test_an_item_is_labelled_by_id_then_case_id_then_line(item, label):
    assert item_label(item, 12) == label


@pytest.mark.parametrize(
    ("fmt", "body", "items"),
    [
        (ProtectedFormat.TEXT, "a\nb", [(1, {"text": "a\nb"})]),
        (ProtectedFormat.TEXT, "\ufeffa", [(1, {"text": "\ufeffa"})]),
        (ProtectedFormat.JSONL, '{"q": "a\u2028b"}\n\n{"q": 2}',
         [(1, {"q": "a\u2028b"}), (3, {"q": 2})]),
        (ProtectedFormat.JSON, ' [{"q": 1}, {"id": "x"}]', [(1, {"q": 1}), (2, {"id": "x"})]),
        (ProtectedFormat.JSON, '\ufeff[{"q": 1}]', [(1, {"q": 1})]),
        (ProtectedFormat.JSON, '\ufeff{"q": 1}\n{"q": 2}', [(1, {"q": 1}), (2, {"q": 2})]),
        (ProtectedFormat.CSV, "\ufeffq,a\n\n1,2,3\n4\n",
         [(1, {"q": "1", "a": "2", "3": "3"}), (2, {"q": "4"})]),
        (ProtectedFormat.CSV, "1,2\n,\n3\n", [(1, {"1": "1", "2": "2"}), (2, {"1": "3"})]),
        (ProtectedFormat.CSV, "", []),
        # a quoted cell keeps its line breaks as written
        (ProtectedFormat.CSV, 'q,a\r\n"x\r\ny","z\rw"\r\n', [(1, {"q": "x\r\ny", "a": "z\rw"})]),
    ],
)  # fmt: skip
def test_protected_items_of_every_format(fmt, body, items):
    assert protected_items("p", body, fmt) == items


def test_a_byte_order_mark_in_json_lines_is_an_error_of_its_line():
    with pytest.raises(CorpusError, match=r"^p:1: not valid JSON \(Unexpected UTF-8 BOM"):
        protected_items("p", '\ufeff{"q": 1}', ProtectedFormat.JSONL)


@pytest.mark.parametrize("fmt", [ProtectedFormat.JSONL, ProtectedFormat.JSON])
def test_nan_is_refused_unless_read_as_null(fmt):
    body = '[{"q": NaN}]' if fmt is ProtectedFormat.JSON else '{"q": NaN}'
    with pytest.raises(CorpusError, match="NaN is not JSON"):
        protected_items("p", body, fmt)
    with pytest.raises(CorpusError, match="NaN is not JSON"):
        parse_protected_set("p", body, fmt)
    assert protected_items("p", body, fmt, nan_as_null=True) == [(1, {"q": None})]
    assert parse_protected_set("p", body, fmt, nan_as_null=True).items == 1


@pytest.mark.parametrize(
    ("cells", "header"),
    [
        (["question", "A", "B", "answer"], True),
        (["_x", "a.b-c d", "Ab9_ c9"], True),
        (["a b c d"], True),
        (["a b c d e"], False),
        (["a" * 64], True),
        (["a" * 65], False),
        (["a", "a"], False),
        (["1a"], False),
        (["a  b"], False),
        (["a-"], False),
        (["ok", "What is 2 + 2?"], False),
    ],
)
def test_a_csvs_first_row_is_a_header_when_every_cell_names_a_column(cells, header):
    body = ",".join(cells) + "\nv1\n"
    items = protected_items("p.csv", body, ProtectedFormat.CSV)
    if header:
        assert items == [(1, {cells[0]: "v1"})]
    else:
        assert items == [(1, {str(i): c for i, c in enumerate(cells, 1)}), (2, {"1": "v1"})]


def test_a_csv_that_cannot_be_parsed_names_its_line():
    body = "q,a\n" + "c" * 140_000 + ",d\n"
    with pytest.raises(CorpusError) as caught:
        protected_items("p.csv", body, ProtectedFormat.CSV)
    assert str(caught.value) == "p.csv:2: not valid CSV (field larger than field limit (131072))"


@pytest.mark.parametrize(
    ("fmt", "body", "stored"),
    [
        (ProtectedFormat.JSONL, '\ufeff{"q": 1}', ('\ufeff{"q": 1}', ProtectedFormat.JSONL)),
        (ProtectedFormat.TEXT, "\ufeffÉté", ("\ufeffÉté", ProtectedFormat.TEXT)),
        (ProtectedFormat.JSON, '\ufeff {"q": 1}\n', (' {"q": 1}\n', ProtectedFormat.JSONL)),
        (ProtectedFormat.JSON, '[{"q": "Été"}, {"id": 2}]',
         ('{"q": "Été"}\n{"id": 2}\n', ProtectedFormat.JSONL)),
        (ProtectedFormat.CSV, "\ufeffq\nÉté\n", ('{"q": "Été"}\n', ProtectedFormat.JSONL)),
        (ProtectedFormat.CSV, "", ("", ProtectedFormat.JSONL)),
        (ProtectedFormat.JSON, ' \n [{"q": 1}] ', ('{"q": 1}\n', ProtectedFormat.JSONL)),
    ],
)  # fmt: skip
def test_a_store_keeps_json_lines_and_text_and_converts_the_rest(fmt, body, stored):
    assert protected_as_jsonl("p", body, fmt) == stored


@pytest.mark.parametrize(
    ("fmt", "body", "error"),
    [
        (ProtectedFormat.JSON, '{"q": 1}\n[1]', "p:2: expected a JSON object, got list"),
        (ProtectedFormat.JSON, '[{"q": 1}, 2]',
         "p: element 2 of the array is not an object (a int)"),
        (ProtectedFormat.CSV, "q\n" + "c" * 140_000,
         "p:2: not valid CSV (field larger than field limit (131072))"),
    ],
)  # fmt: skip
def test_a_store_refuses_a_bad_body(fmt, body, error):
    with pytest.raises(CorpusError) as caught:
        protected_as_jsonl("p", body, fmt)
    assert str(caught.value).startswith(error)


def test_a_set_maps_each_ngram_to_its_items_and_lays_out_each_items_texts():
    body = "\n".join(json.dumps(item) for item in [
        {"id": "q1", "a": "one two three four", "b": "two three"},
        {"id": "q2", "a": "Two THREE four; one two three"},
        {"id": "q1", "a": "one two three"},
        {"c": "x"},
    ])  # fmt: skip
    found = parse_protected_set("evals", body, ProtectedFormat.JSONL, 3)
    assert (found.name, found.items, found.n, found.tokenizer) == ("evals", 4, 3, "words")
    assert found.grams == {
        "one two three": ["q1", "q2"],
        "two three four": ["q1", "q2"],
        "three four one": ["q2"],
        "four one two": ["q2"],
    }
    assert found.ngrams == 4
    assert found.windows == [
        "one two three", "two three four",
        "two three four", "three four one", "four one two", "one two three",
        "one two three",
    ]  # fmt: skip
    # (words, lo, hi) per text: "two three" has 2 words and no window; "x" has 1
    assert found.layout == {
        "q1": [(4, 0, 2), (2, 2, 2), (3, 6, 7)],
        "q2": [(6, 2, 6)],
        "4": [(1, 7, 7)],
    }
    assert found.index.n == 3 and found.index.tokenizer == "words"
    assert set(found.index.grams) == set(found.grams)
    assert found.shared("so ONE two three four five") == {"one two three", "two three four"}
    assert found.shared("one two") == set()
    assert found.hits("four one two three") == [("q2", "four one two"), ("q1", "one two three")]
    assert found.hits_many(["x y z", "three four one"]) == [[], [("q2", "three four one")]]
    assert found.hits_many([]) == []


def test_the_defaults_are_13_words_and_the_words_tokenizer():
    body = " ".join(WORDS.split()[:13])
    found = parse_protected_set("t", body, ProtectedFormat.TEXT)
    assert (found.n, found.tokenizer, list(found.grams)) == (13, "words", [body])
    assert parse_protected_set("t", body + " x", ProtectedFormat.TEXT).ngrams == 2
    # 4 English words' worth of Han: 5 characters (each 59/64 of a word)
    cjk = parse_protected_set("t", "请检查路径", ProtectedFormat.TEXT, 4, "multilingual")
    assert (cjk.tokenizer, list(cjk.grams)) == ("multilingual", ["请 检 查 路 径"])
    assert (cjk.index.tokenizer, cjk.index.n) == ("multilingual", 4)
    assert cjk.index.contaminated_many(["x 请检查路径 y", "请检查"]).tolist() == [True, False]
    assert cjk.hits("x 请检查路径 y") == [("1", "请 检 查 路 径")]
    assert cjk.shared("x 请检查路径 y") == {"请 检 查 路 径"}


def test_the_ngrams_in_more_than_cap_items_are_computed_once_per_cap():
    body = "\n".join(json.dumps({"t": t}) for t in ["a b", "a b c", "a b c", "c d"])
    found = parse_protected_set("s", body, ProtectedFormat.JSONL, 2)
    assert found.grams == {"a b": ["1", "2", "3"], "b c": ["2", "3"], "c d": ["4"]}
    assert found.capped_by_items(1) == frozenset({"a b", "b c"})
    assert found.capped_by_items(2) == frozenset({"a b"})
    assert found.capped_by_items(3) == frozenset()
    assert found.capped_by_items(0) == frozenset(found.grams)
    # cached: a later change of the n-grams is not seen for a cap already asked for
    found.grams["c d"].extend(["5", "6"])
    assert found.capped_by_items(1) == frozenset({"a b", "b c"})
    assert found.capped_by_items(4) == frozenset()
    assert set(found._caps) == {0, 1, 2, 3, 4}


def test_a_set_built_by_hand_has_an_empty_layout_and_the_words_tokenizer():
    made = ProtectedSet("s", 1, {"a b": ["1"]}, 2)
    assert (made.layout, made.windows, made.tokenizer) == ({}, [], "words")
    assert made.hits("A b") == [("1", "a b")]
    assert "layout" not in repr(made) and "index" not in repr(made)


@pytest.mark.parametrize(
    ("n", "tokenizer", "error"),
    [
        (0, "words", "n (words per n-gram) must be a whole number >= 1, got 0"),
        (True, "words", "n (words per n-gram) must be a whole number >= 1, got True"),
        (3, "bytes", "tokenizer must be"),
    ],
)
def test_bad_parameters_are_refused_before_anything_is_read(tmp_path, n, tokenizer, error):
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(ParameterError, match=error.replace("(", r"\(").replace(")", r"\)")):
        read_protected_set(missing, n, tokenizer=tokenizer)
    with pytest.raises(ParameterError, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse_protected_set("p", "{", ProtectedFormat.JSONL, n, tokenizer)
    if tokenizer == "words":
        with pytest.raises(ParameterError, match=r"must be a whole number >= 1"):
            protected_ngrams([missing], n)


def test_a_missing_file_or_a_directory_is_refused_by_its_name(tmp_path):
    with pytest.raises(CorpusError) as caught:
        read_protected_set(tmp_path / "missing.jsonl")
    assert str(caught.value) == (
        f"{tmp_path / 'missing.jsonl'}: no such file: a protected set must be a readable file"
    )
    folder = tmp_path / "dir.jsonl"
    folder.mkdir()
    with pytest.raises(CorpusError) as caught:
        read_protected_set(folder, name="evals")
    assert str(caught.value) == "evals: not a regular file: a protected set must be a readable file"


def test_a_sets_name_is_its_path_unless_given(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("a b c", encoding="utf-8")
    assert read_protected_set(path, 3).name == str(path)
    assert read_protected_set(path, 3, name="mine").name == "mine"
    assert read_protected_set(path, 3, name="").name == str(path)
    found = read_protected_set(path, tokenizer="multilingual", n=2)
    assert (found.n, found.tokenizer) == (2, "multilingual")
    assert found.grams == {"a b": ["1"], "b c": ["1"]}
    thirteen = " ".join(WORDS.split()[:13])
    path.write_text(thirteen + " x", encoding="utf-8")
    default = read_protected_set(path)
    assert (default.n, default.tokenizer, default.ngrams) == (13, "words", 2)
    assert thirteen in default.grams


@pytest.mark.parametrize(
    ("name", "data", "error"),
    [
        ("bad.jsonl.gz", gzip.compress(b'{"t": "a b"}\n', mtime=0)[:-9],
         "cannot read: Compressed file ended before the end-of-stream marker was reached"),
        ("bad.csv.gz", b"not gzip at all", "cannot read: Not a gzipped file (b'no')"),
        ("bad.txt.zst", b"not zstd at all", "cannot read: zstd decompress error"),
        ("bad.parquet", b"not parquet at all", "cannot read: "),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_read_is_an_error_naming_it(tmp_path, name, data, error):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CorpusError) as caught:
        read_protected_set(path, name="evals")
    assert str(caught.value).startswith(f"evals: {error}")
    assert caught.value.line is None


@pytest.mark.parametrize(
    ("name", "data", "where"),
    [
        ("bad.jsonl", b'{"t": "a"}\n{"t": "\xff"}\n', ":2: not UTF-8 (invalid start byte at byte 7 "
         "of the line, byte 18 of the file)"),
        ("bad.txt", b"ok\r\nok \xc3", ":2: not UTF-8 (unexpected end of data at byte 3 of the "
         "line, byte 7 of the file)"),
        ("bad.txt.gz", gzip.compress(b"a\nb\nc \xe9t\xe9", mtime=0), ":3: not UTF-8 (invalid "
         "continuation byte at byte 2 of the line, byte 6 of the file)"),
    ],
)  # fmt: skip
def test_a_protected_file_that_is_not_utf8_names_its_line_and_byte(tmp_path, name, data, where):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CorpusError) as caught:
        read_protected_set(path, name="evals")
    assert str(caught.value) == f"evals{where}"


def test_an_error_of_the_parser_itself_is_not_disguised(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    path.write_text('{"t": "a b"}\n', encoding="utf-8")

    def broken(*args, **kwargs):
        raise KeyError("bug")

    monkeypatch.setattr("neardup.core._protected._from_items", broken)
    with pytest.raises(KeyError, match="bug"):
        read_protected_set(path)


JSONL_BODY = '{"id": "q", "t": "one two three"}\n\n{"t": "two three four"}\n'
TWO = {"one two three": ["q"], "two three four": ["3"]}


@pytest.mark.parametrize(
    ("name", "body", "items", "grams"),
    [
        ("s.jsonl", JSONL_BODY, 2, TWO),
        ("s.ndjson.gz", JSONL_BODY, 2, TWO),
        ("s.json.zst", JSONL_BODY, 2, TWO),
        ("s.json", '[{"id": "q", "t": "one two three"}, {"x": 1}, {"t": "two three four"}]',
         3, TWO),
        ("s.csv.gz", "t,id\none two three,q\n,\nx\ntwo three four\n", 3, TWO),
        ("s.txt.gz", "one two three\nfour", 1, {"one two three": ["1"], "two three four": ["1"]}),
    ],
)  # fmt: skip
def test_every_format_reads_to_its_items_and_labels(tmp_path, name, body, items, grams):
    path = tmp_path / name
    data = body.encode()
    if name.endswith(".gz"):
        data = gzip.compress(data)
    elif name.endswith(".zst"):
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    found = read_protected_set(path, 3)
    assert (found.name, found.items, found.grams) == (str(path), items, grams)


def test_parquet_rows_are_items_labelled_by_row_from_1(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "s.parquet"
    table = pa.table({"id": [None, "q2", None], "t": ["a b", "b c", "c d"]})
    pq.write_table(table, path, row_group_size=2)
    found = read_protected_set(path, 2, name="evals")
    assert (found.name, found.items) == ("evals", 3)
    assert found.grams == {"a b": ["1"], "b c": ["q2"], "c d": ["3"]}


def test_protected_ngrams_are_the_union_of_the_files(tmp_path):
    one, two = tmp_path / "one.txt", tmp_path / "two.jsonl"
    one.write_text(" ".join(WORDS.split()[:14]), encoding="utf-8")
    two.write_text(json.dumps({"t": "请检查路径"}) + "\n", encoding="utf-8")
    assert protected_ngrams([one]) == {
        " ".join(WORDS.split()[:13]), " ".join(WORDS.split()[1:14])}  # fmt: skip
    # a Han character weighs 59/64 of an English word: 2 English words are 3 characters
    assert protected_ngrams([one, two], 2, "multilingual") == {
        *parse_protected_set("x", " ".join(WORDS.split()[:14]), ProtectedFormat.TEXT, 2).grams,
        "请 检 查 路", "检 查 路 径"}  # fmt: skip
    assert protected_ngrams([]) == set()
    assert protected_ngrams(iter([two]), 5) == set()


@pytest.mark.parametrize(
    ("paths", "error"),
    [
        ("evals.jsonl", "expected a list of protected file paths, got the single path "
         "'evals.jsonl': wrap it in a list"),
        (b"evals.jsonl", "expected a list of protected file paths, got the single path "
         "b'evals.jsonl': wrap it in a list"),
        ({"a b", "c d"}, "expected a list of protected file paths, got a set of 2; to check "
         "against n-grams you already have, build an NgramIndex(grams, n) and call "
         "decontaminate_with(docs, index)"),
        ({"a": 1}, "expected a list of protected file paths, got a dict of 1; to check "
         "against n-grams you already have, build an NgramIndex(grams, n) and call "
         "decontaminate_with(docs, index)"),
        (["a.jsonl", 3, None], "protected files must be paths, got 3"),
        ([b"a.jsonl"], "protected files must be paths, got b'a.jsonl'"),
    ],
)  # fmt: skip
def test_protected_paths_refuse_what_is_not_a_list_of_paths(paths, error):
    with pytest.raises(ParameterError) as caught:
        protected_paths(paths)
    assert str(caught.value) == error


def test_protected_paths_are_the_paths_as_a_list(tmp_path):
    assert protected_paths(iter(["a.jsonl", tmp_path])) == ["a.jsonl", tmp_path]
    assert protected_paths(("a",)) == ["a"]
    assert protected_paths([]) == []


def test_a_csv_of_old_mac_line_ends_is_read_row_by_row():
    body = "q,a\r1,2\r3,4\r"
    assert protected_items("p.csv", body, ProtectedFormat.CSV) == [
        (1, {"q": "1", "a": "2"}), (2, {"q": "3", "a": "4"})]  # fmt: skip
