"""Tokenising a whole batch at once: every document's words joined by single spaces in one
UTF-8 buffer, so that each shingle is one contiguous slice of it.

Two tokenisers give the same words (tests/core/test_tokens.py); ``Tokens`` picks one.

The compiled one (``core._jit.tokenise``), once this process has loaded the compiled kernels
(``core._compiled``): the texts are UTF-8 encoded and joined, and one pass over the bytes
writes the words out. ASCII bytes go through a byte table with no branch on the content;
non-ASCII characters are decoded and looked up in ``kernel_table`` (the lowered code point, the
word bit, and the bits a capital sigma's context needs), so a non-ASCII character costs a
decode and a gather, and corpus (a) about what the ASCII corpus (c) costs, its encoding aside.
At any other special character (below) the kernel stops; that text is lowered by ``str.lower``
and read in its place.

The numpy one, the reference (before the compiled kernels load, with ``NEARDUP_JIT=0``, or
where numba is missing): every text is encoded to UTF-8 once and its ASCII bytes lowered and
classified by a 256-entry ``bytes.translate`` table: word bytes lowered, every other ASCII byte
a space, bytes from 0x80 up unchanged. If the batch is all ASCII, that is all. Otherwise only
the lead bytes of non-ASCII characters are visited, vectorised: each character is decoded from
its UTF-8 bytes, lowered by a code-point table of ``str.lower`` (``lower_table``) and classified
by a code-point table of Python's ``\\w`` (``word_table``); a non-word character's bytes become
spaces, a word character that lowers to another one gets its bytes (of the same length)
rewritten in place. Then the words are the runs between spaces.

``str.lower`` is not a per-character map everywhere: capital sigma (U+03A3) lowers to the final
or the medial small sigma by its neighbours (``sigma_context``), U+0130 lowers to two code
points, and a few characters lower to one of another UTF-8 length (U+212A KELVIN SIGN to ASCII
``k``). A text holding any of these but the sigma is lowered by ``str.lower`` itself, then goes
the same way (nothing that ``str.lower`` returns is lowered further); the numpy path lowers a
sigma with ``str.lower`` over the words around it, the compiled one from the table's bits.
``core._text`` holds the scalar reference definitions these must agree with.

The ``multilingual`` tokenizer (``Tokens(texts, tokenizer="multilingual")``): the compiled
``core._jit.segment`` normalizes the texts' UTF-8 itself as it reads the words (folds of one
character or several from ``core._fold.fold_table``, marks put in canonical order), and hands
back only a text that needs more (``core._multilingual.normalize``, the shipped normalization
of ``core._nfkc``), read normalized in its place; the numpy path normalizes the batch with
``normalize_all``, then reads the words with ``core._multilingual.token_arrays``. Both read the
shipped table ``core._scripts.char_classes`` and agree exactly (tests/core/test_multilingual.py,
tests/core/test_multilingual_fold.py).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from neardup.core import _compiled
from neardup.core._fold import fold_table
from neardup.core._multilingual import normalize, normalize_all, token_arrays
from neardup.core._scripts import char_classes
from neardup.core._text import check_tokenizer
from neardup.core.errors import ParameterError

__all__ = [
    "Tokens",
    "Utf8Texts",
    "char_table",
    "kernel_table",
    "lower_table",
    "shingle_spans",
    "sigma_context",
    "word_table",
]

_SPACE = 0x20
# Separates documents in the buffer (texts' own newlines are translated to spaces): the
# compaction only drops spaces.
_NEWLINE = 0x0A
_CAPITAL_SIGMA = 0x3A3


def _all_code_points() -> str:
    """Every code point in order, with NUL in place of the surrogates (which no str encodes)."""
    codes = np.arange(sys.maxunicode + 1, dtype="<u4")
    codes[0xD800:0xE000] = 0
    return codes.tobytes().decode("utf-32-le")


def _utf32(text: str) -> NDArray[np.uint32]:
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.uint32, copy=False)


def _utf8_width(codes: NDArray[np.uint32]) -> NDArray[np.int64]:
    return 1 + (codes >= 0x80).astype(np.int64) + (codes >= 0x800) + (codes >= 0x10000)


@cache
def word_table() -> NDArray[np.bool_]:
    """True for every code point that Python's ``re`` counts as ``\\w``; built once a process."""
    # Every non-word code point becomes NUL; word code points stay (none is NUL).
    blanked = re.sub(r"\W+", lambda run: "\0" * (run.end() - run.start()), _all_code_points())
    table: NDArray[np.bool_] = _utf32(blanked) != 0
    return table


@cache
def lower_table() -> tuple[NDArray[np.uint32], NDArray[np.bool_]]:
    """For every code point, the one ``str.lower`` maps it to, and whether a text holding it
    must be lowered by ``str.lower`` itself (see the module docstring); built once a process."""
    chars = _all_code_points()
    codes = _utf32(chars)
    special = np.zeros(len(codes), dtype=np.bool_)
    special[_CAPITAL_SIGMA] = True
    # Lowered one block at a time; a block whose length changes is lowered char by char.
    lowered = codes.copy()
    block = 4096
    for lo in range(0, len(chars), block):
        part = chars[lo : lo + block].replace(chr(_CAPITAL_SIGMA), "\0")
        low = part.lower()
        if len(low) == len(part):
            lowered[lo : lo + block] = _utf32(low)
            continue
        for i, char in enumerate(part, start=lo):
            low = char.lower()
            if len(low) == 1:
                lowered[i] = ord(low)
            else:
                special[i] = True
    special |= _utf8_width(lowered) != _utf8_width(codes)
    lowered[special] = codes[special]
    return lowered, special


#: Bits of ``char_table`` (and ``kernel_table``): the low 21 the lowered code point, then flags.
_WORD_BIT = np.uint32(1 << 21)
_SPECIAL_BIT = np.uint32(1 << 22)
_CASED_BIT = np.uint32(1 << 23)
_IGNORABLE_BIT = np.uint32(1 << 24)
_CODE_POINT_BITS = np.uint32((1 << 21) - 1)


@cache
def char_table() -> NDArray[np.uint32]:
    """Per code point, in one uint32: the code point ``str.lower`` maps it to (21 bits), whether
    that is a word character (``_WORD_BIT``), and whether a text holding it must be lowered by
    ``str.lower`` itself (``_SPECIAL_BIT``); one gather classifies a character."""
    lowered, special = lower_table()
    table = lowered.copy()
    table[word_table().take(lowered)] |= _WORD_BIT
    table[special] |= _SPECIAL_BIT
    return table


@cache
def kernel_table() -> NDArray[np.uint32]:
    """``char_table`` with what the capital sigma's context makes of each code point
    (``_CASED_BIT``, ``_IGNORABLE_BIT``: see ``sigma_context``), for the compiled kernel, which
    lowers capital sigmas itself; built once a process, when it first runs."""
    table = char_table().copy()
    cased, ignorable = sigma_context()
    table[cased] |= _CASED_BIT
    table[ignorable] |= _IGNORABLE_BIT
    return table


_SMALL_SIGMAS = (0x3C2, 0x3C3)  # final, medial


#: The code points ``sigma_context`` reads off ``str.lower``: planes 0 and 1 and the tags and
#: variation selectors of plane 14. Every other one (CJK ideographs, private use, unassigned)
#: is neither cased nor case-ignorable (tests/core/test_tokens.py probes them all).
SIGMA_PROBED = ((0, 0x20000), (0xE0000, 0xE1000))


@cache
def sigma_context(
    probed: tuple[tuple[int, int], ...] = SIGMA_PROBED,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """For every code point, whether ``str.lower`` counts it as cased and not case-ignorable,
    and whether as case-ignorable: the capital sigma lowers to the final small sigma when the
    first character before it that is not case-ignorable is cased, and the first one after it
    that is not case-ignorable is not (or there is none); else to the medial one.

    Read off ``str.lower`` itself for the ``probed`` ranges of code points: each x is lowered
    in ``" xΣ "`` (final sigma: x cased and not ignorable) and ``"AxΣ "`` (final: x cased, or
    ignorable); built once a process.
    """
    codes = _utf32(_all_code_points())
    at = np.concatenate([np.arange(lo, hi) for lo, hi in probed])
    chars = codes[at]
    chars[np.isin(at, [_CAPITAL_SIGMA, *_SMALL_SIGMAS])] = _SPACE  # set below: would add sigmas

    def final_sigma(before: str) -> NDArray[np.bool_]:
        probes = np.empty((len(chars), 4), dtype="<u4")
        probes[:, 0] = ord(before)
        probes[:, 1] = chars
        probes[:, 2] = _CAPITAL_SIGMA
        probes[:, 3] = _SPACE
        lowered = _utf32(probes.tobytes().decode("utf-32-le").lower())
        small = lowered[np.isin(lowered, _SMALL_SIGMAS)]
        if len(small) != len(chars):
            raise AssertionError("str.lower made other sigmas than the probes'")
        out: NDArray[np.bool_] = small == _SMALL_SIGMAS[0]
        return out

    cased = np.zeros(len(codes), dtype=np.bool_)
    ignorable = np.zeros(len(codes), dtype=np.bool_)
    cased[at] = final_sigma(" ")
    ignorable[at] = final_sigma("A") & ~cased[at]
    sigmas = [_CAPITAL_SIGMA, *_SMALL_SIGMAS]
    cased[sigmas] = True
    ignorable[sigmas] = False
    return cased, ignorable


def _byte_translation() -> bytes:
    """The translation of UTF-8 bytes: ASCII word bytes lowered, other ASCII bytes a space, and
    bytes from 0x80 up (parts of non-ASCII characters) unchanged."""
    table = bytearray([_SPACE] * 128) + bytearray(range(128, 256))
    for code in range(128):
        char = chr(code)
        if char.isalnum() or char == "_":
            table[code] = ord(char.lower())
    return bytes(table)


_TRANSLATION = _byte_translation()
_ASCII = np.frombuffer(_TRANSLATION, dtype=np.uint8)


class Utf8Texts:
    """Texts already UTF-8 encoded, one after another in one ``bytes``: what a pool's worker is
    sent instead of the ``str`` objects. Pickling a list of ``str`` encodes every text to UTF-8
    and the worker decodes them again, only for the tokeniser to encode them once more; one
    ``bytes`` object pickles as a copy and the compiled tokeniser reads it as it is.

    Attributes:
        data: the texts' UTF-8, joined with nothing between them.
        ends: where each text ends in ``data`` (int64, one per text).
    """

    __slots__ = ("data", "ends")

    def __init__(self, data: bytes, ends: NDArray[np.int64]) -> None:
        self.data = data
        self.ends = ends

    @classmethod
    def encode(cls, texts: Sequence[str], first: int = 0) -> Utf8Texts:
        """The texts encoded; ParameterError naming the first that cannot be (a lone
        surrogate), counted from ``first`` (the slab's place in a larger call)."""
        encoded = _utf8(texts, first)
        ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        return cls(b"".join(encoded), ends)

    def __len__(self) -> int:
        return len(self.ends)

    def sizes(self) -> NDArray[np.int64]:
        """Every text's length in bytes."""
        return np.diff(self.ends, prepend=0)

    def part(self, lo: int, hi: int) -> Utf8Texts:
        """Texts ``lo`` to ``hi - 1`` (their bytes copied, unless that is all of them)."""
        if lo == 0 and hi == len(self):
            return self
        start = int(self.ends[lo - 1]) if lo else 0
        return Utf8Texts(self.data[start : int(self.ends[hi - 1])], self.ends[lo:hi] - start)

    def text(self, d: int) -> str:
        """Text ``d``, decoded."""
        start = int(self.ends[d - 1]) if d else 0
        return self.data[start : int(self.ends[d])].decode("utf-8")

    def texts(self) -> list[str]:
        """Every text, decoded."""
        return [self.text(d) for d in range(len(self))]


class Tokens:
    """A batch tokenised into one byte buffer (UTF-8) in which words are joined by single spaces.

    Attributes:
        buf: the bytes, as uint8. Documents may be separated by other bytes.
        word_start, word_end: byte offsets of every word of the batch, in order.
        doc_words: how many words each document has.
        kernels: the compiled kernels if they tokenised the batch (``shingle_spans`` then uses
            them too), else None.
    """

    __slots__ = ("buf", "doc_words", "kernels", "word_end", "word_start")

    def __init__(
        self,
        texts: Sequence[str] | Utf8Texts,
        jit: bool | None = None,
        tokenizer: str = "words",
    ) -> None:
        """Tokenise ``texts`` into the words of ``tokenizer``: with the compiled kernel if
        ``jit`` is True (loading it), or None and this process has loaded it; else (or where it
        declines the batch) with numpy."""
        check_tokenizer(tokenizer)
        kernels = _compiled.load() if jit else None if jit is False else _compiled.loaded()
        if tokenizer != "words":
            self.kernels = kernels
            self.buf, self.word_start, self.word_end, self.doc_words = _multilingual_tokens(
                texts, kernels
            )
            return
        arrays = None
        if kernels is not None:
            arrays = _compiled_tokens(texts, kernels.tokenise)
        if arrays is None:
            kernels = None
            plain = texts.texts() if isinstance(texts, Utf8Texts) else texts
            arrays = _numpy_tokens(plain)
        self.kernels = kernels
        self.buf, self.word_start, self.word_end, self.doc_words = arrays


_TokenArrays = tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]


def _numpy_tokens(texts: Sequence[str]) -> _TokenArrays:
    """The reference tokeniser: ``bytes.translate``, then the code-point tables over the lead
    bytes of non-ASCII characters, then the words of the buffer, all in numpy."""
    encoded = _encoded(texts)
    if all(map(str.isascii, texts)):
        codes = np.frombuffer(b"\n".join(encoded), dtype=np.uint8)
    else:
        codes = _lower_non_ascii(texts, encoded)
    return _words(codes, len(texts))


def _multilingual_tokens(
    texts: Sequence[str] | Utf8Texts, kernels: _compiled.Compiled | None
) -> _TokenArrays:
    """The multilingual tokenizer's arrays: numpy (``core._multilingual.token_arrays``) over
    every text normalized (``normalize_all``), or the compiled ``core._jit.segment``, which folds
    the texts as it reads them and hands back those that need ``normalize``; they agree
    exactly. A text that does not encode is refused first, as every other path refuses it."""
    if kernels is None:
        plain = texts.texts() if isinstance(texts, Utf8Texts) else texts
        _utf8(plain)
        return token_arrays(normalize_all(plain))
    utf8 = texts if isinstance(texts, Utf8Texts) else Utf8Texts.encode(texts)
    text_of = utf8.text if isinstance(texts, Utf8Texts) else texts.__getitem__
    ends = utf8.ends
    n = len(ends)
    src = np.frombuffer(utf8.data, dtype=np.uint8)
    fold, table = fold_table(), char_classes()
    buf = np.empty(2 * len(src) + n, dtype=np.uint8)
    edges = np.empty(2 * len(src) + 2, dtype=np.int64)
    doc_edges = np.empty(n + 1, dtype=np.int64)
    state = np.zeros(3, dtype=np.int64)
    alt, alt_doc = src, -1
    while stop := kernels.segment(
        src, ends, alt, alt_doc, fold, table, buf, edges, doc_edges, state
    ):
        d, written, used = state.tolist()
        if stop == _ROOM:  # this text (normalized, if it is read) and all after it
            start = int(ends[d - 1]) if d else 0
            here = len(alt) if d == alt_doc else int(ends[d]) - start
            rest = 2 * (here + int(ends[-1] - ends[d])) + 2 * (n - d)
            # A text's expansions may need more than that (the kernel stops where one would
            # not fit): the arrays double at least, so every call gets further.
            buf = _grown(buf, written, max(rest, len(buf) + 1 - written))
            edges = _grown(edges, used, max(rest, len(edges) + 1 - used))
        elif d == alt_doc:  # never: the kernel reads a normalized text as it is
            raise AssertionError(f"the multilingual kernel stopped at text {d} normalized")
        else:
            alt = np.frombuffer(normalize(text_of(d)).encode("utf-8"), dtype=np.uint8)
            alt_doc = d
    used = int(state[_EDGE])
    return buf[: state[_OUT]], edges[0:used:2], edges[1:used:2], np.diff(doc_edges) // 2


def _compiled_tokens(
    texts: Sequence[str] | Utf8Texts, tokenise: Callable[..., int]
) -> _TokenArrays | None:
    """The compiled tokeniser (``core._jit.tokenise``) over the texts' UTF-8, in one pass; a
    text holding a special character is lowered by ``str.lower`` and read in its place. None
    (numpy does the batch) if the lowered text still holds one."""
    utf8 = texts if isinstance(texts, Utf8Texts) else Utf8Texts.encode(texts)
    text_of = utf8.text if isinstance(texts, Utf8Texts) else texts.__getitem__
    ends = utf8.ends
    n = len(ends)
    src = np.frombuffer(utf8.data, dtype=np.uint8)
    table = kernel_table()
    grow = 1  # bytes (and edges) out a byte in, at most
    buf = np.empty(grow * len(src) + n, dtype=np.uint8)
    # Two edges a word: room for a word every fourth byte at first, more if needed.
    edges = np.empty(len(src) // 2 + 16, dtype=np.int64)
    doc_edges = np.empty(n + 1, dtype=np.int64)
    state = np.zeros(3, dtype=np.int64)
    alt, alt_doc = src, -1
    while stop := tokenise(
        src, ends, alt, alt_doc, _ASCII, table, grow, buf, edges, doc_edges, state
    ):
        d, written, used = state.tolist()
        if stop == _ROOM:
            # Room for this text (the lowered one, if it is read) and all after it: a byte and
            # an edge for a byte, a newline and a last edge each.
            start = int(ends[d - 1]) if d else 0
            here = len(alt) if d == alt_doc else int(ends[d]) - start
            rest = grow * (here + int(ends[-1] - ends[d])) + 2 * (n - d)
            buf = _grown(buf, written, rest)
            edges = _grown(edges, used, rest)
        elif d == alt_doc:  # lowered, it still holds a special character
            return None
        else:
            lowered = text_of(d).lower().encode("utf-8")
            alt, alt_doc = np.frombuffer(lowered, dtype=np.uint8), d
    used = int(state[_EDGE])
    return buf[: state[_OUT]], edges[0:used:2], edges[1:used:2], np.diff(doc_edges) // 2


#: ``core._jit``'s state fields and stops (it imports numba: not imported here).
_OUT, _EDGE = 1, 2
_ROOM = 1


def _grown(array: NDArray[Any], used: int, more: int) -> NDArray[Any]:
    """``array`` with room for ``more`` entries after its first ``used`` (which are kept)."""
    if used + more <= len(array):
        return array
    out = np.empty(max(2 * len(array), used + more), dtype=array.dtype)
    out[:used] = array[:used]
    return out


def _utf8(texts: Sequence[str], first: int = 0) -> list[bytes]:
    """Every text UTF-8 encoded."""
    try:
        return [text.encode("utf-8") for text in texts]
    except UnicodeEncodeError:
        _raise_for_surrogates(texts, first)
        raise


def _encoded(texts: Sequence[str]) -> list[bytes]:
    """Every text UTF-8 encoded and translated by ``_TRANSLATION``."""
    try:
        return [text.encode("utf-8").translate(_TRANSLATION) for text in texts]
    except UnicodeEncodeError:
        _raise_for_surrogates(texts)
        raise


def _raise_for_surrogates(texts: Sequence[str], first: int = 0) -> None:
    """Raise ``ParameterError`` for the first text that does not encode to UTF-8, counting
    the texts from ``first``."""
    for i, text in enumerate(texts, start=first):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ParameterError(
                f"text {i} is not valid Unicode (a lone surrogate at character {exc.start}); "
                "shingles are hashed as UTF-8, so every text must encode"
            ) from None


def _lower_non_ascii(texts: Sequence[str], encoded: list[bytes]) -> NDArray[np.uint8]:
    """The translated texts joined by newlines, with every non-ASCII character lowered as
    ``str.lower`` does and every non-word one blanked (``encoded`` is updated in place)."""
    codes = _padded(encoded)
    at = np.flatnonzero(codes >= 0xC0)
    code_point = _code_points(codes, at)
    table = char_table()
    info = table.take(code_point)
    special = np.flatnonzero(info & _SPECIAL_BIT)
    if len(special):
        moving = code_point[special] != _CAPITAL_SIGMA
        if moving.any():
            codes, at, code_point = _lowered_by_python(
                texts, encoded, at, code_point, special[moving]
            )
            info = table.take(code_point)
            special = np.flatnonzero(info & _SPECIAL_BIT)
        # Capital sigmas are left, in texts that hold no other special character.
        info[special] = _lowered_sigmas(texts, encoded, at[special]) | _WORD_BIT
    word = (info & _WORD_BIT).astype(np.bool_)
    info &= _CODE_POINT_BITS
    changed = np.flatnonzero(word & (info != code_point))
    if len(changed):
        _write_utf8(codes, at[changed], info[changed])
    blank = at[~word]
    width = _LEAD_WIDTH.take(codes[blank])
    for i in range(4):
        codes[blank[width > i] + i] = _SPACE
    return codes[:-3]


def _lowered_sigmas(
    texts: Sequence[str], encoded: list[bytes], at: NDArray[np.int64]
) -> NDArray[np.uint32]:
    """What ``str.lower`` makes of the capital sigma whose UTF-8 starts at each offset of
    ``at`` (in order) in the joined texts, which hold no other character ``str.lower`` maps
    to another length: the final or the medial small sigma, by its neighbours.

    The neighbours ``str.lower`` looks at are a run of case-ignorable characters each side and
    the character past it, and a space is not case-ignorable: so the sigma is lowered within
    the text between the spaces around it (the whole text if that is long).
    """
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)) + 1
    doc = np.searchsorted(np.cumsum(lengths) - lengths, at, side="right") - 1
    out: list[int] = []
    for d in np.unique(doc).tolist():
        text = texts[d]
        whole = None
        i = text.find(_SIGMA)
        while i >= 0:
            lo = max(text.rfind(" ", 0, i), 0)
            hi = text.find(" ", i + 1)
            hi = len(text) if hi < 0 else hi + 1
            if hi - lo <= _SIGMA_WINDOW:
                out.append(ord(text[lo:hi].lower()[i - lo]))
            else:
                whole = text.lower() if whole is None else whole
                out.append(ord(whole[i]))
            i = text.find(_SIGMA, i + 1)
    return np.array(out, dtype=np.uint32)


_SIGMA = chr(_CAPITAL_SIGMA)
# Characters around a capital sigma lowered on their own; a longer run lowers the whole text.
_SIGMA_WINDOW = 256


def _lowered_by_python(
    texts: Sequence[str],
    encoded: list[bytes],
    at: NDArray[np.int64],
    code_point: NDArray[np.uint32],
    flagged: NDArray[np.int64],
) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint32]]:
    """The buffer, ``at`` and ``code_point`` once the texts holding a ``flagged`` character
    are lowered by ``str.lower`` (``encoded`` is updated).

    Those texts may change length: they are decoded again on their own, the other texts'
    characters move by as many bytes as the texts before them grew, and the buffer is rebuilt.
    """
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)) + 1
    starts = np.cumsum(lengths) - lengths
    moving = np.unique(np.searchsorted(starts, at[flagged], side="right") - 1)
    for d in moving.tolist():
        encoded[d] = texts[d].lower().encode("utf-8").translate(_TRANSLATION)
    new_lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)) + 1
    new_starts = np.cumsum(new_lengths) - new_lengths
    # Characters per text (at is in order), and whether to keep them (not in a moving text).
    per_doc = np.diff(np.searchsorted(at, np.append(starts, starts[-1] + lengths[-1])))
    keep = np.ones(len(encoded), dtype=np.bool_)
    keep[moving] = False
    kept = np.repeat(keep, per_doc)
    kept_at = at[kept] + np.repeat(new_starts - starts, per_doc)[kept]
    # The moving texts on their own, then placed where they now start.
    alone = _padded([encoded[d] for d in moving.tolist()])
    alone_at = np.flatnonzero(alone >= 0xC0)
    alone_code_point = _code_points(alone, alone_at)
    alone_lengths = new_lengths[moving]
    alone_starts = np.cumsum(alone_lengths) - alone_lengths
    which = np.searchsorted(alone_starts, alone_at, side="right") - 1
    alone_at += (new_starts[moving] - alone_starts)[which]
    # Kept characters first, then the moving texts': sort back into buffer order.
    at = np.concatenate((kept_at, alone_at))
    order = np.argsort(at, kind="stable")
    return _padded(encoded), at[order], np.concatenate((code_point[kept], alone_code_point))[order]


def _padded(encoded: list[bytes]) -> NDArray[np.uint8]:
    """The texts joined by newlines, as a writable uint8 array with three bytes of zeros after
    it: joined into a bytearray, which numpy then wraps without a copy."""
    joined = bytearray(b"\n").join(encoded)
    joined += b"\0\0\0"
    return np.frombuffer(joined, dtype=np.uint8)


def _code_points(codes: NDArray[np.uint8], at: NDArray[np.int64]) -> NDArray[np.uint32]:
    """The code point of the non-ASCII UTF-8 character whose lead byte is at each offset of
    ``at`` in ``codes`` (which has three bytes of padding).

    Each lead byte is read with the three bytes after it and decoded as if it led a 4-byte
    character; a shift right then drops the payload of the bytes past its own end. (Four byte
    gathers: one gather of an unaligned uint32 view made numpy copy the whole buffer.)
    """
    lead = codes.take(at).astype(np.uint32)
    code_point = (lead & np.uint32(0x1F)) << np.uint32(18)  # bit 4 of a 4-byte lead: masked
    for i, shift in ((1, 12), (2, 6), (3, 0)):
        following = codes[i:].take(at).astype(np.uint32)
        following &= np.uint32(0x3F)
        following <<= np.uint32(shift)
        code_point |= following
    # 2-byte characters have 12 bits too many, 3-byte ones 6.
    too_many = (lead < 0xF0).astype(np.uint32)
    too_many += lead < 0xE0
    too_many *= np.uint32(6)
    code_point >>= too_many
    code_point &= np.uint32(0x1FFFFF)
    return code_point


def _write_utf8(
    codes: NDArray[np.uint8], at: NDArray[np.int64], code_point: NDArray[np.uint32]
) -> None:
    """Write the UTF-8 of each code point at its offset, over a character of the same length."""
    width = _utf8_width(code_point)
    lead_mark = np.array([0, 0, 0xC0, 0xE0, 0xF0], dtype=np.uint32)[width]
    cp = code_point.astype(np.uint32)
    codes[at] = (lead_mark | (cp >> (6 * (width - 1)).astype(np.uint32))).astype(np.uint8)
    for i in range(1, 4):
        more = width > i
        shift = (6 * (width[more] - 1 - i)).astype(np.uint32)
        codes[at[more] + i] = (0x80 | ((cp[more] >> shift) & 0x3F)).astype(np.uint8)


# The length of a UTF-8 character by its lead byte (continuation bytes: 0).
_LEAD_WIDTH = np.array(
    [1] * 128 + [0] * 64 + [2] * 32 + [3] * 16 + [4] * 8 + [0] * 8, dtype=np.uint8
)


def _words(codes: NDArray[np.uint8], n_docs: int) -> _TokenArrays:
    """Tokens of a buffer of documents separated by newlines in which every byte that is not
    part of a word is a space: spaces after a space or a newline are dropped, then the words
    are the runs between them."""
    separator = codes <= _SPACE
    scratch = np.empty(len(codes) + 1, dtype=np.bool_)
    redundant = np.equal(codes, _SPACE, out=scratch[: len(codes)])
    redundant[1:] &= separator[:-1]
    if redundant.any():
        keep = np.logical_not(redundant, out=redundant)
        codes = codes[keep]
        separator = separator[keep]
    start, end = _runs(separator, scratch)  # the scratch is free again afterwards
    # Document d ends at the d-th newline: count the words that start before each newline.
    newlines = np.flatnonzero(np.equal(codes, _NEWLINE, out=scratch[: len(codes)]))
    bounds = np.empty(n_docs + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[1:-1] = np.searchsorted(start, newlines)
    bounds[-1] = len(start)
    return codes, start, end, np.diff(bounds)


def _runs(
    gap: NDArray[np.bool_], scratch: NDArray[np.bool_] | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``[start, end)`` of every maximal run of False in ``gap``.

    The edges go to ``scratch`` (at least ``len(gap) + 1`` booleans) if given.
    """
    edge = np.empty(len(gap) + 1, dtype=np.bool_) if scratch is None else scratch[: len(gap) + 1]
    edge[0] = len(gap) > 0 and not gap[0]
    np.not_equal(gap[1:], gap[:-1], out=edge[1:-1])
    edge[-1] = len(gap) > 0 and not gap[-1]
    flips = np.flatnonzero(edge)
    return flips[0::2], flips[1::2]


def shingle_spans(
    tokens: Tokens, k: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Byte spans ``[start, end)`` of every shingle of the batch, and shingles per document.

    A document of m >= k words has m - k + 1 shingles; of 1 to k-1 words, one (all its words);
    of none, none. Compiled (``core._jit.shingle_spans``) if the tokens are, else numpy.
    """
    m = tokens.doc_words
    per_doc = np.where(m >= k, m - k + 1, np.minimum(m, 1))
    if tokens.kernels is not None:
        start = np.empty(int(per_doc.sum()), dtype=np.int64)
        end = np.empty(len(start), dtype=np.int64)
        tokens.kernels.shingle_spans(tokens.word_start, tokens.word_end, m, k, start, end)
        return start, end, per_doc
    first_word = np.zeros(len(m), dtype=np.int64)
    np.cumsum(m[:-1], out=first_word[1:])
    first_shingle = np.zeros(len(m), dtype=np.int64)
    np.cumsum(per_doc[:-1], out=first_shingle[1:])
    # The first word of each shingle: one more than the previous one's, except where a
    # document starts (its first word), as a cumulative sum of steps.
    lo = np.ones(int(per_doc.sum()), dtype=np.int64)
    nonempty = np.flatnonzero(per_doc)
    at = first_shingle[nonempty]
    lo[at] = first_word[nonempty]
    lo[at[1:]] -= first_word[nonempty[:-1]] + per_doc[nonempty[:-1]] - 1
    np.cumsum(lo, out=lo)
    start = tokens.word_start[lo]
    # Its last word is k - 1 further on, except in documents shorter than k.
    lo += k - 1
    end = np.take(tokens.word_end, lo, mode="clip")
    short = np.flatnonzero((m > 0) & (m < k))
    end[first_shingle[short]] = tokens.word_end[first_word[short] + m[short] - 1]
    return start, end, per_doc
