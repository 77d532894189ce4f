"""The parts of the batch tokeniser (core/_tokens.py) one by one, on hand-made inputs with
exact expected values: the code-point helpers, ``Utf8Texts``, the buffer growth, the UTF-8
decoding and writing, the runs and words of a buffer, and the shingle spans."""

import sys
from itertools import pairwise

import numpy as np
import pytest

from neardup.core import _tokens
from neardup.core._text import words
from neardup.core.errors import ParameterError


def test_all_code_points_are_every_code_point_with_nul_for_the_surrogates():
    chars = _tokens._all_code_points()
    assert len(chars) == sys.maxunicode + 1 == 0x110000
    codes = np.frombuffer(chars.encode("utf-32-le"), dtype="<u4")
    expected = np.arange(0x110000, dtype=np.uint32)
    expected[0xD800:0xE000] = 0
    assert np.array_equal(codes, expected)
    assert chars[0xD7FF] == "\ud7ff" and chars[0xD800] == chars[0xDFFF] == "\0"
    assert chars[0xE000] == "\ue000" and chars[-1] == "\U0010ffff"


def test_utf32_is_the_code_points_as_uint32():
    codes = _tokens._utf32("aé中🙂")
    assert codes.dtype == np.uint32
    assert codes.tolist() == [0x61, 0xE9, 0x4E2D, 0x1F642]
    assert _tokens._utf32("").tolist() == []


@pytest.mark.parametrize(
    ("code", "width"),
    [(0, 1), (0x7F, 1), (0x80, 2), (0x7FF, 2), (0x800, 3), (0xFFFF, 3), (0x10000, 4),
     (0x10FFFF, 4)],
)  # fmt: skip
def test_utf8_width_of_a_code_point(code, width):
    assert width == len(chr(code).encode("utf-8"))
    got = _tokens._utf8_width(np.array([code], dtype=np.uint32))
    assert got.dtype == np.int64 and got.tolist() == [width]


def test_utf8_texts_encode_join_and_cut():
    texts = ["ab", "", "çé", "x"]
    encoded = _tokens.Utf8Texts.encode(texts)
    assert encoded.data == "abçéx".encode()
    assert encoded.ends.dtype == np.int64 and encoded.ends.tolist() == [2, 2, 6, 7]
    assert len(encoded) == 4
    assert encoded.sizes().tolist() == [2, 0, 4, 1]
    assert [encoded.text(d) for d in range(4)] == texts == encoded.texts()
    assert encoded.part(0, 4) is encoded
    for lo, hi in [(0, 1), (0, 3), (1, 3), (1, 4), (2, 3), (3, 4), (2, 2)]:
        part = encoded.part(lo, hi)
        assert part is not encoded
        assert part.texts() == texts[lo:hi], (lo, hi)
        assert part.data == "".join(texts[lo:hi]).encode(), (lo, hi)
        assert part.sizes().tolist() == encoded.sizes()[lo:hi].tolist(), (lo, hi)
    empty = _tokens.Utf8Texts.encode([])
    assert len(empty) == 0 and empty.data == b"" and empty.texts() == []


@pytest.mark.parametrize(
    ("texts", "first", "message"),
    [
        (["a", "b\ud800c"], 0, "text 1 is not valid Unicode (a lone surrogate at character 1)"),
        (["a", "b\ud800c"], 5, "text 6 is not valid Unicode (a lone surrogate at character 1)"),
        (["\udfff", "\ud800"], 0, "text 0 is not valid Unicode (a lone surrogate at character 0)"),
        (["ok", "fine", "abc\udc00"], 40, "text 42 is not valid Unicode (a lone surrogate at "
         "character 3)"),
    ],
)  # fmt: skip
def test_a_lone_surrogate_is_named_by_text_and_character(texts, first, message):
    whole = f"{message}; shingles are hashed as UTF-8, so every text must encode"
    with pytest.raises(ParameterError) as raised:
        _tokens._raise_for_surrogates(texts, first)
    assert str(raised.value) == whole
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    with pytest.raises(ParameterError) as raised:
        _tokens.Utf8Texts.encode(texts, first)
    assert str(raised.value) == whole
    if first == 0:
        for call in (_tokens._encoded, _tokens._utf8):
            with pytest.raises(ParameterError) as raised:
                call(texts)
            assert str(raised.value) == whole
        for jit in (True, False):
            for tokenizer in ("words", "multilingual"):
                with pytest.raises(ParameterError) as raised:
                    _tokens.Tokens(texts, jit=jit, tokenizer=tokenizer)
                assert str(raised.value) == whole


def test_encodable_texts_raise_nothing():
    _tokens._raise_for_surrogates(["a", "é", "🙂"], 3)
    assert _tokens._utf8(["a", "é"]) == [b"a", "é".encode()]
    assert _tokens._encoded(["A-b", "É!"]) == [b"a b", "É ".encode()]


@pytest.mark.parametrize(
    ("size", "used", "more", "grown_to"),
    [(10, 4, 6, None), (10, 0, 10, None), (10, 4, 7, 20), (10, 10, 1, 20), (10, 5, 30, 35),
     (4, 2, 7, 9), (0, 0, 0, None), (0, 0, 3, 3)],
)  # fmt: skip
def test_grown_keeps_the_used_entries_and_at_least_doubles(size, used, more, grown_to):
    array = np.arange(size, dtype=np.int64) + 100
    out = _tokens._grown(array, used, more)
    if grown_to is None:
        assert out is array
        return
    assert len(out) == grown_to and out.dtype == array.dtype
    assert out[:used].tolist() == array[:used].tolist()


def test_padded_joins_by_newlines_with_three_zeros_after_writably():
    out = _tokens._padded([b"ab", b"", b"c"])
    assert out.dtype == np.uint8 and out.flags.writeable
    assert out.tobytes() == b"ab\n\nc\0\0\0"
    assert _tokens._padded([]).tobytes() == b"\0\0\0"


#: Characters at each UTF-8 length's bounds, and around them.
_EDGE_CHARS = "\x80é\u07ff\u0800中\uffff\U00010000🙂\U0010ffff"


def test_code_points_decode_each_lead_byte():
    text = "a" + "b".join(_EDGE_CHARS) + "z"
    codes = _tokens._padded([text.encode()])
    at = np.flatnonzero(codes >= 0xC0)
    got = _tokens._code_points(codes, at)
    assert got.dtype == np.uint32
    assert got.tolist() == [ord(c) for c in _EDGE_CHARS]
    # Each alone, at the very end of the buffer (only the padding after it).
    for char in _EDGE_CHARS:
        codes = _tokens._padded([char.encode()])
        assert _tokens._code_points(codes, np.array([0])).tolist() == [ord(char)], char


def test_write_utf8_writes_each_code_point_over_one_of_its_length():
    # Each character replaced by another of the same UTF-8 length.
    before = "xÀy\u0800z\U00010000w\u07ffP"
    after = "xàyꀀz\U0010fffdw\x80p"
    codes = np.frombuffer(bytearray(before.encode()), dtype=np.uint8)
    at = np.append(np.flatnonzero(codes >= 0xC0), len(codes) - 1)
    new = np.array([ord(c) for c in after if ord(c) >= 0x80] + [ord("p")], dtype=np.uint32)
    _tokens._write_utf8(codes, at, new)
    assert codes.tobytes().decode() == after


@pytest.mark.parametrize(
    ("gap", "start", "end"),
    [
        ([], [], []),
        ([True], [], []),
        ([False], [0], [1]),
        ([True, True], [], []),
        ([False, False], [0], [2]),
        ([True, False], [1], [2]),
        ([False, True], [0], [1]),
        ([True, False, False, True, False], [1, 4], [3, 5]),
        ([False, True, False, True, False], [0, 2, 4], [1, 3, 5]),
        ([True, False, True, True, False, False, True], [1, 4], [2, 6]),
    ],
)
def test_runs_are_the_maximal_runs_of_false(gap, start, end):
    for scratch in (None, np.ones(len(gap) + 3, dtype=np.bool_)):
        got = _tokens._runs(np.array(gap, dtype=np.bool_), scratch)
        assert [a.tolist() for a in got] == [start, end]
    # Given a scratch, the edges are written there (the caller's memory, no new array).
    scratch = np.zeros(len(gap) + 3, dtype=np.bool_)
    _tokens._runs(np.array(gap, dtype=np.bool_), scratch)
    assert np.flatnonzero(scratch).tolist() == sorted(start + end)


@pytest.mark.parametrize(
    ("buffer", "docs", "kept", "start", "end", "doc_words"),
    [
        (b"", 1, b"", [], [], [0]),
        (b"ab cd", 1, b"ab cd", [0, 3], [2, 5], [2]),
        (b"  ab   cd  ", 1, b"ab cd ", [0, 3], [2, 5], [2]),
        (b" \n ab", 2, b"\nab", [1], [3], [0, 1]),
        (b"ab\ncd", 2, b"ab\ncd", [0, 3], [2, 5], [1, 1]),
        (b"ab \n cd\n\n", 4, b"ab \ncd\n\n", [0, 4], [2, 6], [1, 1, 0, 0]),
        (b"\n\nx", 3, b"\n\nx", [2], [3], [0, 0, 1]),
        (b"a b c\n \nd", 3, b"a b c\n\nd", [0, 2, 4, 7], [1, 3, 5, 8], [3, 0, 1]),
        (b"\xc3\xa9  \xc3\xa0b", 1, b"\xc3\xa9 \xc3\xa0b", [0, 3], [2, 6], [2]),
    ],
)  # fmt: skip
def test_words_drop_repeated_spaces_and_count_words_per_document(
    buffer, docs, kept, start, end, doc_words
):
    codes, got_start, got_end, got_doc_words = _tokens._words(
        np.frombuffer(buffer, dtype=np.uint8), docs
    )
    assert codes.tobytes() == kept
    assert got_start.tolist() == start and got_end.tolist() == end
    assert got_doc_words.tolist() == doc_words


#: A batch of documents of 0 to 6 words (an empty one first and last), and per k the spans of
#: its shingles as text.
_SHINGLE_BATCH = ["", "a", "b c", "d e f", "g h i j", "", "k l m n o p", "q"]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("use_jit", [True, False])
def test_shingle_spans_are_each_documents_windows_in_order(jit, k, use_jit):
    tokens = _tokens.Tokens([*_SHINGLE_BATCH, ""], jit=use_jit)
    assert (tokens.kernels is not None) == use_jit
    start, end, per_doc = _tokens.shingle_spans(tokens, k)
    assert start.dtype == end.dtype == per_doc.dtype == np.int64
    buf = tokens.buf.tobytes().decode()
    got = [buf[a:b] for a, b in zip(start.tolist(), end.tolist(), strict=True)]
    expected, counts = [], []
    for text in [*_SHINGLE_BATCH, ""]:
        w = text.split()
        windows = [" ".join(w[i : i + k]) for i in range(len(w) - k + 1)] or (
            [" ".join(w)] if w else []
        )
        expected += windows
        counts.append(len(windows))
    assert got == expected
    assert per_doc.tolist() == counts


def test_shingle_spans_of_a_batch_of_one_document_and_of_none(jit):
    for use_jit in (True, False):
        for batch, k, spans in [([], 3, []), ([""], 3, []), (["a b"], 3, ["a b"]),
                                (["a b c"], 3, ["a b c"]), (["x y"], 1, ["x", "y"])]:  # fmt: skip
            tokens = _tokens.Tokens(batch, jit=use_jit)
            start, end, per_doc = _tokens.shingle_spans(tokens, k)
            buf = tokens.buf.tobytes().decode()
            assert [buf[a:b] for a, b in zip(start, end, strict=True)] == spans
            assert per_doc.tolist() == ([len(spans)] if batch else [])


class _Lowered(str):
    """A text that counts how often it is lowered whole (a slice of it is a plain ``str``)."""

    calls: list[int]

    def lower(self):
        type(self).calls.append(len(self))
        return str.lower(self)


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        ("x " + "α" * 126 + "Σ" + "α" * 127 + " y", 0),  # 254 between the spaces: 256 with them
        ("x " + "α" * 127 + "Σ" + "α" * 127 + " y", 1),  # 257: the whole text
        ("Σ" + "α" * 254 + " y", 0),  # from the text's start
        ("Σ" + "α" * 255 + " y", 1),
        ("x " + "α" * 254 + "Σ", 0),  # to its end
        ("x " + "α" * 255 + "Σ", 1),
        ("ΑΣ " + "b" * 400 + " ΑΣ", 0),  # a sigma just before a space, one at the very end
        ("α" * 300 + "Σ" + "α" * 300 + " ΑΣ " + "Σ" + "α" * 300, 1),  # lowered once for both
        (" " + "α" * 300 + "Σ", 1),
    ],
)
def test_a_capital_sigma_is_lowered_among_its_neighbours_unless_its_word_is_long(text, whole):
    # str.lower reads the case-ignorable run each side of a capital sigma and the character
    # past it, never past a space: the numpy tokeniser lowers the words around it (at most
    # 256 characters with their spaces), the whole text only for a longer word, once.
    _Lowered.calls = []
    tokens = _tokens.Tokens(["ΑΣ ok", _Lowered(text), "πλάΣ"], jit=False)
    assert _Lowered.calls == [len(text)] * whole
    buf = tokens.buf.tobytes()
    spans = zip(tokens.word_start.tolist(), tokens.word_end.tolist(), strict=True)
    assert [buf[a:b].decode() for a, b in spans] == ["ας", "ok", *text.lower().split(), "πλάς"]


def test_only_the_texts_holding_a_special_character_are_lowered_whole():
    # İ lowers to two code points, K (Kelvin) to ASCII: their texts are lowered by str.lower;
    # the others' characters (é, ά, a capital sigma) by the tables, in place.
    batch = ["é ΑΣ", "xİy é", "plain", "ÉΣά", "\u212a", "ok"]
    _Lowered.calls = []
    tokens = _tokens.Tokens([_Lowered(text) for text in batch], jit=False)
    assert sorted(_Lowered.calls) == [1, 5]
    buf = tokens.buf.tobytes()
    spans = zip(tokens.word_start.tolist(), tokens.word_end.tolist(), strict=True)
    expected = [words(text) for text in batch]
    assert [buf[a:b].decode() for a, b in spans] == [w for each in expected for w in each]
    assert tokens.doc_words.tolist() == [len(each) for each in expected] == [2, 3, 1, 1, 1, 1]


_DONE, _ROOM, _SPECIAL = 0, 1, 2


@pytest.mark.parametrize(
    ("batch", "tokenizer", "stops"),
    [
        (["hello world", "foo"], "words", [_DONE]),
        ([], "words", [_DONE]),
        (["a b c d e " * 300], "words", [_ROOM, _DONE]),  # a word every other byte
        (["x", "a b " * 100, "y" * 1000], "words", [_ROOM, _DONE]),
        (["İstanbul", "ok"], "words", [_SPECIAL, _DONE]),
        (["Ⱥ" * 100, "ok"], "words", [_ROOM, _SPECIAL, _ROOM, _DONE]),  # lowered: 1.5x longer
        (["x" * 100, "Ⱥ" * 100, "a b c"], "words", [_ROOM, _SPECIAL, _DONE]),
    ],
)
@pytest.mark.parametrize("as_utf8", [False, True])
def test_the_compiled_tokeniser_stops_only_to_grow_or_to_read_a_lowered_text(
    jit, batch, tokenizer, stops, as_utf8
):
    # Its first buffers: a byte out a byte in and a newline a text; two edges every fourth
    # byte and 16. Grown once for all the rest. (The multilingual tokenizer has its own kernel,
    # ``segment``: tests/core/test_multilingual.py.)
    calls = []

    def tokenise(src, ends, alt, alt_doc, ascii, table, grow, buf, edges, doc_edges, state):
        before = state.tolist()
        stop = jit.tokenise(src, ends, alt, alt_doc, ascii, table, grow, buf, edges, doc_edges,
                            state)  # fmt: skip
        calls.append((stop, before, alt_doc, alt.tobytes(), len(buf), len(edges), grow))
        assert len(doc_edges) == len(batch) + 1 and ascii is _tokens._ASCII
        assert table is _tokens.kernel_table()
        return stop

    texts = _tokens.Utf8Texts.encode(batch) if as_utf8 else batch
    out = _tokens._compiled_tokens(texts, tokenise)
    assert [stop for stop, *_ in calls] == stops
    size, grow = sum(len(t.encode()) for t in batch), 1
    assert calls[0][1:] == ([0, 0, 0], -1, b"".join(t.encode() for t in batch),
                            grow * size + len(batch), size // 2 + 16, grow)  # fmt: skip
    for (stop, _, alt_doc, *_), (_, state, next_alt_doc, alt, *_) in pairwise(calls):
        if stop == _SPECIAL:  # the text it stopped at, lowered, read in its place
            assert next_alt_doc == state[0] and alt == batch[state[0]].lower().encode()
        else:
            assert next_alt_doc == alt_doc
    assert out is not None
    buf, start, end, doc_words = out
    got = [buf[a:b].tobytes().decode() for a, b in zip(start, end, strict=True)]
    expected = [words(text, tokenizer) for text in batch]
    assert got == [w for each in expected for w in each]
    assert doc_words.tolist() == [len(each) for each in expected]


@pytest.mark.parametrize(
    ("batch", "tokenizer", "path"),
    [
        (["Plain ASCII"], "words", "numpy"),
        (["Ünïcode 中文"], "words", "numpy"),
        (["Plain ASCII", ""], "multilingual", "multilingual"),
        (["ascii", "中文"], "multilingual", "multilingual"),
    ],
)
def test_without_the_kernels_each_tokenizer_takes_its_numpy_path(
    monkeypatch, batch, tokenizer, path
):
    taken = []
    for name in ("_numpy_tokens", "_multilingual_tokens"):
        real = getattr(_tokens, name)
        monkeypatch.setattr(
            _tokens, name, lambda *args, real=real, name=name: taken.append(name) or real(*args)
        )
    tokens = _tokens.Tokens(batch, jit=False, tokenizer=tokenizer)
    assert taken == [f"_{path}_tokens"] and tokens.kernels is None
    tokens = _tokens.Tokens(_tokens.Utf8Texts.encode(batch), jit=False, tokenizer=tokenizer)
    assert taken == [f"_{path}_tokens"] * 2
    buf = tokens.buf.tobytes()
    spans = zip(tokens.word_start.tolist(), tokens.word_end.tolist(), strict=True)
    assert [buf[a:b].decode() for a, b in spans] == [w for t in batch for w in words(t, tokenizer)]


def test_a_batch_the_kernel_declines_is_tokenised_by_numpy_with_no_kernels(jit, monkeypatch):
    # No character stays special once lowered; a table that says "é" is, makes one.
    table = _tokens.kernel_table().copy()
    table[ord("é")] |= _tokens._SPECIAL_BIT
    monkeypatch.setattr(_tokens, "kernel_table", lambda: table)
    tokens = _tokens.Tokens(["plain", "Été"], jit=True)
    assert tokens.kernels is None
    assert tokens.doc_words.tolist() == [1, 1]
    assert tokens.buf[tokens.word_start[1] : tokens.word_end[1]].tobytes().decode() == "été"
    assert _tokens.Tokens(["plain", "ete"], jit=True).kernels is jit


def test_jit_true_loads_the_kernels_and_jit_none_only_uses_loaded_ones(jit, monkeypatch):
    from neardup.core import _compiled

    monkeypatch.setattr(_compiled._State, "kernels", None)
    monkeypatch.setattr(_compiled._State, "failed", False)
    assert _tokens.Tokens(["not loaded"]).kernels is None
    assert _compiled.loaded() is None
    assert _tokens.Tokens(["loads them"], jit=True).kernels is _compiled.loaded() is not None
    assert _tokens.Tokens(["loaded now"]).kernels is _compiled.loaded()
    assert _tokens.Tokens(["never"], jit=False).kernels is None
