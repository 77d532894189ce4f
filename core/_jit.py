"""The compiled (numba) kernels of the hot loops; imported only by ``core._compiled.load``,
because importing numba costs more than a small batch takes.

Their numpy counterparts, ``core._fnv.fnv1a64_spans`` (then ``mod P``), ``core._permute.minima``
and ``core._tokens``' numpy tokeniser, are the reference: the values are identical, bit for bit
(tests/core/test_compiled.py, tests/core/test_tokens.py).

- ``tokenise``: a batch's UTF-8 to its lowered words joined by single spaces, in one pass over
  the bytes: ASCII through a byte table without a branch on the content, other characters
  decoded and looked up in ``core._tokens.kernel_table`` (capital sigmas lowered by their
  context, ``_lowered_sigma``); it stops at a text ``str.lower`` must lower, and reads the
  lowered text in its place. (Its ``_UNSPACED``/``_CONTINUATION`` branches served the first
  multilingual tokenizer; no table sets those bits now, so they are never taken.)
- ``segment``: the multilingual tokenizer's words of a batch, in one pass: each character
  decoded, folded (to one character, or to the list of a multi-character fold) and
  NFKC-checked by ``core._fold.fold_table``, marks out of canonical order moved back where
  nothing composes, two characters side by side written as their composite where the table
  lists them (``_composite``: two-part vowels; a text that needs more of ``normalize`` is
  handed back), looked up in ``core._scripts.char_classes``, clusters cut by UAX #29's rules as
  ``core._multilingual.word_edges`` cuts them, by one table of moves (``_TRANSITIONS``: the
  state between characters and the next one's classes to what is written and the next state,
  no branch on the script); ASCII runs (and ASCII separators after a word) through a byte
  table as in ``tokenise``, and a character that folds to one of its UTF-8 length and composes
  with nothing, starter or combining mark in canonical order, takes one lane (one test, rarely
  true, for everything else). Its hot paths index with unsigned integers (``_U``): numba
  checks a signed index for a negative one at every access.
- ``shingle_spans``: each shingle's first word's start and last word's end, document by
  document.
- ``shingle_values``: FNV-1a 64 of each shingle's bytes, then ``mod P`` (docs/algorithm.md
  section 2), one byte after another: O(bytes) for any length.
- ``minima``: per document and permutation, ``min over its shingles of (a*x + b) mod P``. With
  a, x < 2**31 and b < P, ``a*x + b`` is below 2**62, exact in uint64; two Mersenne folds
  (``(y & P) + (y >> 31)``, each keeping the value mod P) bring it to at most P + 2, and one
  conditional subtraction to ``[0, P)``. Four shingles at a time against the row of
  permutations, a loop LLVM vectorises (vpmuludq, vpminuq).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from neardup.core._hashing import FNV_OFFSET, FNV_PRIME, MERSENNE31
from neardup.core._scripts import (
    CONSONANT,
    EXTEND,
    GCB_MASK,
    HL,
    HLV,
    HLVT,
    HT,
    HV,
    INCB_EXTEND,
    INCB_SHIFT,
    LINKER,
    PREPEND,
    SPACING,
    UNSPACED_BIT,
    WORD_BIT,
    ZWJ,
)

__all__ = ["minima", "segment", "shingle_spans", "shingle_values", "tokenise"]

_P = MERSENNE31
_jit = numba.njit(cache=True, nogil=True, boundscheck=False)
#: An index as uint64: numba adds no check for a negative one (read from the end).
_U = np.uint64


@_jit
def shingle_spans(
    word_start: Any, word_end: Any, doc_words: Any, k: int, start: Any, end: Any
) -> None:
    """The byte spans ``[start, end)`` of every shingle of the batch, in order (int64 arrays
    as long as the shingles): a document of m >= k words has m - k + 1, of 1 to k-1 words one
    (all its words), of none none (``core._tokens.shingle_spans``)."""
    w = 0
    s = 0
    for d in range(doc_words.shape[0]):
        m = doc_words[d]
        if m >= k:
            for i in range(w, w + m - k + 1):
                start[s] = word_start[i]
                end[s] = word_end[i + k - 1]
                s += 1
        elif m > 0:
            start[s] = word_start[w]
            end[s] = word_end[w + m - 1]
            s += 1
        w += m


@_jit
def shingle_values(buf: Any, start: Any, end: Any, out: Any) -> None:
    """``out[i] = fnv1a64(buf[start[i]:end[i]]) mod P`` (uint8, int64, int64, uint64 arrays)."""
    prime = np.uint64(FNV_PRIME)
    modulus = np.uint64(_P)
    for i in range(start.shape[0]):
        h = np.uint64(FNV_OFFSET)
        for p in range(start[i], end[i]):
            h = (h ^ np.uint64(buf[p])) * prime
        out[i] = h % modulus


@numba.njit(inline="always")
def _hash(a: Any, x: Any, b: Any) -> Any:
    """``(a*x + b) mod P`` as uint32, for uint64 a, x < 2**31 and b < P."""
    mask = np.uint64(_P)
    shift = np.uint64(31)
    y = a * x + b  # < 2**62
    y = (y & mask) + (y >> shift)  # < 2**32 + 2**31
    y = (y & mask) + (y >> shift)  # <= P + 2
    v = np.uint32(y)
    return v - np.uint32(_P) if v >= np.uint32(_P) else v


@_jit
def minima(x: Any, per_doc: Any, a: Any, b: Any, out: Any) -> None:
    """``out[d, i]`` = min over document d's shingles of ``(a[i] * x + b[i]) mod P``; P for a
    document without shingles.

    Args:
        x: uint32 shingle values (below P), the documents' shingles one after another.
        per_doc: int64 shingles per document.
        a: uint32 multipliers; b: uint64 offsets (both below P).
        out: uint32, C-contiguous, documents x permutations.
    """
    n_perm = a.shape[0]
    acc = np.empty(n_perm, dtype=np.uint32)
    first = 0
    for d in range(per_doc.shape[0]):
        end = first + per_doc[d]
        acc[:] = np.uint32(_P)
        j = first
        while j + 4 <= end:
            x0 = np.uint64(x[j])
            x1 = np.uint64(x[j + 1])
            x2 = np.uint64(x[j + 2])
            x3 = np.uint64(x[j + 3])
            for i in range(n_perm):
                ai = np.uint64(a[i])
                bi = b[i]
                low = min(_hash(ai, x0, bi), _hash(ai, x1, bi))
                high = min(_hash(ai, x2, bi), _hash(ai, x3, bi))
                acc[i] = min(acc[i], min(low, high))
            j += 4
        while j < end:
            xj = np.uint64(x[j])
            for i in range(n_perm):
                acc[i] = min(acc[i], _hash(np.uint64(a[i]), xj, b[i]))
            j += 1
        out[d, :] = acc
        first = end


def warm_up() -> None:
    """Compile the kernels for the argument types the signature kernel passes (or read them
    from numba's cache), on a tiny input: exactly those types, one specialisation a kernel
    (a read-only ``buf`` and ``b``, as ``core._signatures`` passes them), so that nothing else
    is compiled on first use, and a process loads no more than it runs."""
    x = np.empty(1, dtype=np.uint64)
    one = np.ones(1, dtype=np.int64)
    shingle_values(np.frombuffer(b"a", dtype=np.uint8), one - 1, one, x)
    out = np.empty((1, 1), dtype=np.uint32)
    b = np.zeros(1, np.uint64)
    b.setflags(write=False)  # as ``core._hashing.perm_params`` returns it
    minima(x.astype(np.uint32), one, np.ones(1, np.uint32), b, out)
    src = np.frombuffer(b"a", dtype=np.uint8)
    # The kernels run without bounds checks: a whole byte table (each byte to itself, read-only
    # as ``core._tokens._ASCII``), and room for the word, its two edges and a newline.
    ascii = np.frombuffer(bytes(range(256)), dtype=np.uint8)
    table = np.zeros(256, dtype=np.uint32)
    buf = np.empty(2, dtype=np.uint8)
    state = np.zeros(3, dtype=np.int64)
    edges = np.empty(4, dtype=np.int64)
    tokenise(src, one, src, -1, ascii, table, 1, buf, edges, np.empty(2, np.int64), state)
    # Word starts and ends are every other edge: strided views.
    shingle_spans(edges[0::2], edges[1::2], one, 5, one - 1, one - 1)
    classes = np.zeros(256, dtype=np.uint16)
    fold = np.zeros(256, dtype=np.uint32)
    room = np.empty(4, dtype=np.uint8)
    fresh = np.zeros(3, dtype=np.int64)
    segment(src, one, src, -1, fold, classes, room, edges, np.empty(2, np.int64), fresh)


# The bits of ``core._tokens.kernel_table`` (kept in step with it; tests/core/test_tokens.py).
_CODE_POINT = np.uint32((1 << 21) - 1)
_WORD = np.uint32(1 << 21)
_SPECIAL = np.uint32(1 << 22)
_CASED = np.uint32(1 << 23)
_IGNORABLE = np.uint32(1 << 24)
_UNSPACED = np.uint32(1 << 25)
_CONTINUATION = np.uint32(1 << 26)
_SCRIPT_BITS = _UNSPACED | _CONTINUATION
#: The bits of ``core._fold.fold_table`` (kept in step with it).
_FOLD_SPECIAL = np.uint32(1 << 21)
_FOLD_MAYBE = np.uint32(1 << 22)
_FOLD_FIRST = np.uint32(1 << 23)
_FOLD_SKIP = np.uint32((1 << 21) - 1)
_SPACE = 0x20
_CAPITAL_SIGMA = 0x3A3
_FINAL_SIGMA = np.uint32(0x3C2)
_MEDIAL_SIGMA = np.uint32(0x3C3)
#: The fields of ``tokenise``'s state: the next document, bytes written, edges written.
DOC, OUT, EDGE = range(3)
#: What ``tokenise`` returns: done; stopped for room; stopped at a special character.
DONE, ROOM, SPECIAL = range(3)


@numba.njit(inline="always")
def _decode(data: Any, p: int) -> Any:
    """The code point of the non-ASCII UTF-8 character whose lead byte is ``data[p]``, and its
    length in bytes."""
    c = np.uint32(data[p])
    if c < 0xE0:
        return ((c & np.uint32(0x1F)) << np.uint32(6)) | (data[p + 1] & np.uint32(0x3F)), 2
    if c < 0xF0:
        return (
            ((c & np.uint32(0x0F)) << np.uint32(12))
            | ((data[p + 1] & np.uint32(0x3F)) << np.uint32(6))
            | (data[p + 2] & np.uint32(0x3F))
        ), 3
    return (
        ((c & np.uint32(0x07)) << np.uint32(18))
        | ((data[p + 1] & np.uint32(0x3F)) << np.uint32(12))
        | ((data[p + 2] & np.uint32(0x3F)) << np.uint32(6))
        | (data[p + 3] & np.uint32(0x3F))
    ), 4


@numba.njit(inline="always")
def _decode_at(data: Any, p: int) -> Any:
    """``_decode`` with unsigned indices: numba checks a signed index for a negative value
    (read from the end) at every access, a few instructions each (``segment``'s)."""
    c = np.uint32(data[_U(p)])
    if c < 0xE0:
        return ((c & np.uint32(0x1F)) << np.uint32(6)) | (data[_U(p + 1)] & np.uint32(0x3F)), 2
    if c < 0xF0:
        return (
            ((c & np.uint32(0x0F)) << np.uint32(12))
            | ((data[_U(p + 1)] & np.uint32(0x3F)) << np.uint32(6))
            | (data[_U(p + 2)] & np.uint32(0x3F))
        ), 3
    return (
        ((c & np.uint32(0x07)) << np.uint32(18))
        | ((data[_U(p + 1)] & np.uint32(0x3F)) << np.uint32(12))
        | ((data[_U(p + 2)] & np.uint32(0x3F)) << np.uint32(6))
        | (data[_U(p + 3)] & np.uint32(0x3F))
    ), 4


@_jit
def _lowered_sigma(data: Any, p: int, start: int, end: int, table: Any) -> Any:
    """The table entry of what ``str.lower`` makes of the capital sigma at ``data[p]``
    in the text ``data[start:end]``: the final small sigma if the first character before it
    that is not case-ignorable is cased and the first one after it is not (or there is none),
    else the medial one (CPython's ``handle_capital_sigma``)."""
    final = False
    q = p - 1
    while q >= start:
        while data[q] & 0xC0 == 0x80:  # back to the lead byte
            q -= 1
        info = table[data[q]] if data[q] < 0x80 else table[_decode(data, q)[0]]
        if not info & _IGNORABLE:
            final = (info & _CASED) != 0
            break
        q -= 1
    q = p + 2  # the capital sigma is two bytes
    while final and q < end:
        if data[q] < 0x80:
            info = table[data[q]]
            q += 1
        else:
            cp, width = _decode(data, q)
            info = table[cp]
            q += width
        if not info & _IGNORABLE:
            final = not info & _CASED
            break
    return (_FINAL_SIGMA if final else _MEDIAL_SIGMA) | _WORD


@_jit
def tokenise(
    src: Any,
    ends: Any,
    alt: Any,
    alt_doc: int,
    ascii: Any,
    table: Any,
    grow: int,
    buf: Any,
    edges: Any,
    doc_edges: Any,
    state: Any,
) -> int:
    """The words of UTF-8 documents, lowered, each document's joined by single spaces, in
    one pass over the bytes (``core._tokens`` has the contract; this is its compiled form).

    ASCII bytes go through ``ascii`` (``core._tokens._TRANSLATION``: word bytes lowered, the
    rest a space) without a branch on the content: every byte is written, and the output and
    the edge count move on by whether it continues or ends a word. A non-ASCII character is
    decoded and looked up in ``table`` (``core._tokens.kernel_table``): a word character is
    written lowered (of the same UTF-8 length), any other as one space; a capital sigma
    lowered by its context (``_lowered_sigma``). At any other special character (``str.lower``
    must lower the text) the kernel stops, that document not written; the caller lowers it and
    passes it back as ``alt``. A table marking characters that start a word of their own
    (``_UNSPACED``) and continuations (``_CONTINUATION``) would cut grapheme clusters (the
    first multilingual tokenizer's); ``kernel_table`` marks neither, so those branches are
    never taken.

    Args:
        src: uint8, the documents' UTF-8 one after another (valid, as ``str.encode`` makes it).
        ends: int64, where each document ends in ``src``.
        alt, alt_doc: uint8 UTF-8 read in place of document ``alt_doc`` (-1: none).
        ascii: uint8[256]; table: uint32, per code point (see above).
        grow: the most output bytes (and edges) a byte in may make: 1 (2 would be needed by
            a table with ``_UNSPACED`` bits: a word of one byte, then a space).
        buf: uint8: the output; each document's words joined by single spaces, then a space
            (after a word) and a newline.
        edges: int64: the offsets in ``buf`` where words start and end, in turn.
        doc_edges: int64, ``len(ends) + 1``: the first edge of each document, then the end.
        state: int64 (``DOC``, ``OUT``, ``EDGE``), zeros at first; where to go on.

    Returns:
        ``DONE``; ``ROOM`` if the next document might not fit ``buf`` or ``edges`` (call again
        with larger ones, what is written kept); ``SPECIAL`` if document ``state[DOC]`` holds a
        special character.
    """
    d = state[DOC]
    o = state[OUT]
    e = state[EDGE]
    stop = DONE
    while d < ends.shape[0]:
        if d == alt_doc:
            data = alt
            p = 0
            end = alt.shape[0]
        else:
            data = src
            p = ends[d - 1] if d > 0 else 0
            end = ends[d]
        # ``grow`` bytes and edges out at most for a byte in (lowering keeps the UTF-8 length),
        # and a newline and a last edge.
        if o + grow * (end - p) + 1 > buf.shape[0] or e + grow * (end - p) + 2 > edges.shape[0]:
            stop = ROOM
            break
        doc_edges[d] = e
        first_byte = o
        first_src = p
        prev = 0  # whether the last character was part of a word
        cluster = 0  # whether that word is a grapheme cluster of an unspaced script
        while p < end:
            c = data[p]
            while c < 0x80:  # ASCII: no branch on what the byte is
                b = ascii[c]
                word = int(b != _SPACE)
                buf[o] = b
                edges[e] = o
                e += word ^ prev
                o += word | prev
                prev = word
                p += 1
                if p == end:
                    break
                c = data[p]
            if p == end:
                break
            cp, width = _decode(data, p)
            info = table[cp]
            if info & _SPECIAL:
                if cp != _CAPITAL_SIGMA:
                    stop = SPECIAL
                    break
                info = _lowered_sigma(data, p, first_src, end, table)
            # 1: it continues a grapheme cluster of an unspaced script; 2: it starts one; 0: a
            # character as the words tokenizer reads it (always, with the words table).
            kind = 0
            if info & _SCRIPT_BITS:
                if cluster and info & _CONTINUATION:
                    kind = 1
                elif info & _UNSPACED:
                    kind = 2
            if cluster and kind != 1:  # what follows a cluster is not in it
                buf[o] = _SPACE
                edges[e] = o
                e += 1
                o += 1
                prev = 0
                cluster = 0
            elif kind == 2 and prev:  # a cluster starts: the word before it ends
                buf[o] = _SPACE
                edges[e] = o
                e += 1
                o += 1
                prev = 0
            edges[e] = o
            if kind or info & _WORD:
                e += 1 - prev
                prev = 1
                cluster = int(kind != 0)
                low = info & _CODE_POINT
                if low == cp:
                    for i in range(width):
                        buf[o + i] = data[p + i]
                elif width == 2:
                    buf[o] = 0xC0 | (low >> np.uint32(6))
                    buf[o + 1] = 0x80 | (low & np.uint32(0x3F))
                elif width == 3:
                    buf[o] = 0xE0 | (low >> np.uint32(12))
                    buf[o + 1] = 0x80 | ((low >> np.uint32(6)) & np.uint32(0x3F))
                    buf[o + 2] = 0x80 | (low & np.uint32(0x3F))
                else:
                    buf[o] = 0xF0 | (low >> np.uint32(18))
                    buf[o + 1] = 0x80 | ((low >> np.uint32(12)) & np.uint32(0x3F))
                    buf[o + 2] = 0x80 | ((low >> np.uint32(6)) & np.uint32(0x3F))
                    buf[o + 3] = 0x80 | (low & np.uint32(0x3F))
                o += width
            else:
                buf[o] = _SPACE
                e += prev
                o += prev
                prev = 0
            p += width
            if cluster and p < end and data[p] < 0x80:  # no ASCII character is in a cluster
                buf[o] = _SPACE
                edges[e] = o
                e += 1
                o += 1
                prev = 0
                cluster = 0
        if stop == SPECIAL:
            e = doc_edges[d]
            o = first_byte
            break
        edges[e] = o  # the end of a last word
        e += prev
        buf[o] = 0x0A
        o += 1
        d += 1
    doc_edges[d] = e
    state[DOC] = d
    state[OUT] = o
    state[EDGE] = e
    return stop


@numba.njit(inline="always")
def _stays(prev: Any, gcb: Any, incb: Any, joined: bool) -> bool:
    """Whether UAX #29 keeps a character of Grapheme_Cluster_Break ``gcb`` and
    Indic_Conjunct_Break ``incb`` in the cluster of the one before (``prev``); ``joined``: a
    Consonant, then Extend and Linker characters with a Linker among them, precede it.
    (Chains of ``==``, not ``in`` tuples: numba compiles them to plain compares.)"""
    # GB9, GB9a, GB9b
    if gcb == EXTEND or gcb == ZWJ or gcb == SPACING or prev == PREPEND:  # noqa: SIM109
        return True
    # GB6, GB7, GB8: Hangul syllables
    if prev == HL and (gcb == HL or gcb == HV or gcb == HLV or gcb == HLVT):  # noqa: SIM109
        return True
    if (prev == HLV or prev == HV) and (gcb == HV or gcb == HT):  # noqa: SIM109
        return True
    if (prev == HLVT or prev == HT) and gcb == HT:  # noqa: SIM109
        return True
    return incb == CONSONANT and joined  # GB9c


#: ``segment``'s state between characters, in the bits of one int: inside a word; its cluster's
#: first character is of an unspaced script; the Grapheme_Cluster_Break before (4 bits); the
#: last character not Extend or Linker (InCB) is a Consonant; a Linker came after it.
_IN_WORD, _UNSPACED_NOW, _PREV_SHIFT, _CONSONANT_NOW, _LINKED_NOW = 1, 2, 2, 64, 128
#: A move's other bits: how many edges it writes, whether a space, whether the character.
_EDGES_SHIFT, _SPACE_SHIFT, _PUT = 8, 10, 1 << 11


@_jit
def _transition_table() -> Any:
    """``_TRANSITIONS``: for each state and ``char_classes`` bits of the next character (its
    low 8: Grapheme_Cluster_Break, Indic_Conjunct_Break, word, unspaced), the next state and
    what is written. A word character starts a word, or continues it, or ends it and starts
    the next where a cluster of an unspaced script ends or begins (a break ``_stays`` allows:
    a cluster of an unspaced script is a word; elsewhere a break is no cut); any other ends
    the word it follows."""
    out = np.empty(1 << 16, dtype=np.uint16)
    for now in range(256):
        in_word = (now & _IN_WORD) != 0
        unspaced = (now & _UNSPACED_NOW) != 0
        prev = (now >> _PREV_SHIFT) & GCB_MASK
        consonant = (now & _CONSONANT_NOW) != 0
        linked = (now & _LINKED_NOW) != 0
        for info in range(256):
            gcb = info & GCB_MASK
            incb = (info >> INCB_SHIFT) & 3
            here = (info & UNSPACED_BIT) != 0
            cluster = unspaced  # whether the cluster after it is of an unspaced script
            move = 0
            if info & WORD_BIT:
                move = _PUT | _IN_WORD
                if not in_word:  # a word starts
                    move |= 1 << _EDGES_SHIFT
                    cluster = here
                elif (unspaced or here) and not _stays(prev, gcb, incb, consonant and linked):
                    move |= (2 << _EDGES_SHIFT) | (1 << _SPACE_SHIFT)  # one ends, one starts
                    cluster = here
            elif in_word:  # the word ends
                move = (1 << _EDGES_SHIFT) | (1 << _SPACE_SHIFT)
            if incb == LINKER or incb == INCB_EXTEND:  # noqa: SIM109
                joint, joined = consonant, linked or incb == LINKER
            else:
                joint, joined = incb == CONSONANT, False
            move |= (_UNSPACED_NOW if cluster else 0) | (gcb << _PREV_SHIFT)
            move |= (_CONSONANT_NOW if joint else 0) | (_LINKED_NOW if joined else 0)
            out[(now << 8) | info] = move
    return out


#: Read by ``segment`` (numba freezes it into the compiled code).
_TRANSITIONS = _transition_table()


@_jit
def segment(
    src: Any,
    ends: Any,
    alt: Any,
    alt_doc: int,
    fold: Any,
    table: Any,
    buf: Any,
    edges: Any,
    doc_edges: Any,
    state: Any,
) -> int:
    """The multilingual tokenizer's words of UTF-8 documents, each word followed by one space
    (``core._multilingual.token_arrays`` is the numpy form; they agree exactly).

    A document is normalized on the way (``core._fold.fold_table``: each character folded as
    ``normalize`` folds it, to one character or to the several of a ``FOLD_EXPAND`` entry,
    read in its place, while the text stays one NFKC leaves alone; a combining mark out of
    canonical order moved back among the marks before it where nothing can compose and
    nothing the words depend on moves, ``_plain_mark``; a second part of a composition the
    table lists written with the first as their composite, ``_composite``); at a character
    that needs ``normalize`` the kernel stops, that document not written, and the caller
    passes it back normalized as ``alt`` (read as it is). Runs of ASCII go through a byte
    table with no branch on the content (``_ascii_run``).

    Args:
        src: uint8, the documents' UTF-8 one after another; ends: int64, where each ends.
        alt, alt_doc: uint8, the normalized UTF-8 read in place of document ``alt_doc``.
        fold: uint32 per code point (``fold_table``), then the expansions' lists; table:
            uint16 per code point (``core._scripts.char_classes``).
        buf: uint8; edges: int64 (word starts and ends in turn); doc_edges: int64,
            ``len(ends) + 1``: the first edge of each document, then the end.
        state: int64 (``DOC``, ``OUT``, ``EDGE``), zeros at first; where to go on.

    Returns:
        ``DONE``; ``ROOM`` if the next document might not fit ``buf`` or ``edges`` (call again
        with larger ones: twice as large always makes progress); ``SPECIAL`` if document
        ``state[DOC]`` needs ``normalize``.
    """
    ascii = np.empty(128, dtype=np.uint8)  # an ASCII character's folded byte, or a space
    for c in range(128):
        low = fold[c] & _CODE_POINT
        ascii[c] = low if table[low] & WORD_BIT else np.uint32(_SPACE)
    d = state[DOC]
    o = state[OUT]
    e = state[EDGE]
    stop = DONE
    while d < ends.shape[0]:
        folding = d != alt_doc
        if folding:
            data = src
            p = ends[d - 1] if d > 0 else 0
            end = ends[d]
        else:
            data = alt
            p = 0
            end = alt.shape[0]
        # A byte out a byte in (folding keeps UTF-8 lengths), a space after a one-byte word;
        # an expansion checks for its own room.
        if o + 2 * (end - p) + 1 > buf.shape[0] or e + 2 * (end - p) + 2 > edges.shape[0]:
            stop = ROOM
            break
        doc_edges[d] = e
        first_byte = o
        now = 0  # the state between characters (``_TRANSITIONS``): outside a word
        last_class = 0  # the canonical combining class of the character before
        composes = False  # the last starter may compose with a character after it
        marks = o  # where the combining marks after the last starter start in ``buf``
        at = 0  # the next character of an expansion in ``fold``
        left = 0  # and how many are left
        simple = True  # an ASCII character here needs nothing of what came before
        while p < end or left:
            if not left and data[_U(p)] < 0x80 and (simple or ascii[data[_U(p)]] == _SPACE):
                p, o, e, in_word, c = _ascii_run(
                    data, p, end, ascii, buf, o, edges, e, (now & _IN_WORD) != 0
                )
                # After Other, Control, CR or LF (no rule of ``_stays`` looks at these), no
                # cluster of an unspaced script, no conjunct.
                now = int(in_word)
                composes = (fold[c] & _FOLD_FIRST) != 0
                last_class = 0
                marks = o
                continue
            if left:
                cp = fold[at]
                at += 1
                left -= 1
            else:
                if data[_U(p)] < 0x80:
                    cp, width = np.uint32(data[_U(p)]), 1
                else:
                    cp, width = _decode_at(data, p)
                p += width
            mark = -1  # where an out-of-order combining mark goes
            if folding:
                f = fold[cp]
                # int64, as ``last_class`` (numba's ``int`` of a uint32 is a uint64, and a
                # uint64 where an int64 was makes the variable a float64)
                ccc = int(np.int64(f >> np.uint32(24)))
                # One branch, rarely taken, for starters and marks alike: a character folded to
                # one of the same length that composes with nothing before it, and a mark in
                # canonical order, need no check (combining marks follow almost every letter
                # in Indic, Khmer, Burmese or Tibetan text: a branch on whether a character
                # is one would be mispredicted that often).
                if (
                    (f & (_FOLD_SPECIAL | (_FOLD_MAYBE if composes else np.uint32(0)))) != 0
                    or (f & _CODE_POINT) == _FOLD_SKIP
                    or (ccc != 0) & (ccc < last_class)
                ):
                    if f & _FOLD_SPECIAL:
                        if ccc != _FOLD_EXPAND_CLASS:
                            stop = SPECIAL
                            break
                        at = f & _CODE_POINT
                        left = fold[at]
                        at += 1
                        if (
                            o + 5 * left + 2 * (end - p) + 1 > buf.shape[0]
                            or e + 2 * left + 2 * (end - p) + 2 > edges.shape[0]
                        ):
                            stop = ROOM
                            break
                        continue
                    if f & _FOLD_MAYBE and composes:
                        # The starter just read and this one compose: the kernel writes the
                        # composite in the starter's place where it may (``_composite``).
                        made, width = _composite(data, p, cp, fold)
                        if made == 0:
                            stop = SPECIAL
                            break
                        o = _put(buf, o - width, made, _width(made))
                        marks = o
                        composes = (fold[made] & _FOLD_FIRST) != 0
                        simple = False  # (the first may have been read in an ASCII run)
                        continue
                    if f & _CODE_POINT == _FOLD_SKIP:  # dropped: as if it were not there
                        continue
                    cp = f & _CODE_POINT
                    # A mark out of canonical order. Nothing composes: were the last starter
                    # to (``composes``), no mark after it would be one that may (checked above).
                    mark = (
                        _mark_place(buf, marks, o, ccc, fold, table)
                        if _plain_mark(table[cp])
                        else -1
                    )
                    # (Nor may it go first in its word, ``edges[e - 1]``: a cluster of an
                    # unspaced script is one whose first character is.)
                    if mark < 0 or mark == edges[e - 1]:
                        stop = SPECIAL
                        break
                else:
                    cp = f & _CODE_POINT
                    # A starter: whether it may compose with what follows; a mark: as before.
                    composes = (f & _FOLD_FIRST) != 0 if ccc == 0 else composes
                    last_class = ccc
            # The move from the state before by the character's classes, written without a
            # branch: a space and two edges always (in ``buf`` and ``edges``' room for this
            # character), counted where the move writes them, overwritten where it does not.
            move = _TRANSITIONS[_U((now << 8) | (table[cp] & 0xFF))]
            now = move & 0xFF
            buf[_U(o)] = 0x20
            edges[_U(e)] = o
            edges[_U(e + 1)] = o + 1
            e += (move >> _EDGES_SHIFT) & 3
            o += (move >> _SPACE_SHIFT) & 1
            if move & _PUT:
                width = _width(cp)
                o = _put(buf, o, cp, width)
                if mark >= 0:  # it goes at ``mark``: the marks from there move up
                    _rotate(buf, mark, o, width)
            if last_class == 0:
                marks = o
            simple = not now & _IN_WORD or (cp < 0x80 and not now & _UNSPACED_NOW)
        if stop != DONE:
            e = doc_edges[d]
            o = first_byte
            break
        if now & _IN_WORD:
            buf[o] = 0x20
            edges[e] = o
            e += 1
            o += 1
        d += 1
    doc_edges[d] = e
    state[DOC] = d
    state[OUT] = o
    state[EDGE] = e
    return stop


#: ``core._fold.FOLD_EXPAND``'s value in the combining-class field.
_FOLD_EXPAND_CLASS = np.uint32(0xFF)
#: A fold entry with none of these bits maps its character to one starter (of the same UTF-8
#: length) that may compose with nothing before it.
_FOLD_BUSY = np.uint32(0xFF << 24) | _FOLD_SPECIAL | _FOLD_MAYBE


@numba.njit(inline="always")
def _width(cp: Any) -> int:
    """The length of ``cp`` in UTF-8."""
    return 1 + int(cp >= 0x80) + int(cp >= 0x800) + int(cp >= 0x10000)


@numba.njit(inline="always")
def _holds(data: Any, q: int, cp: Any, width: int) -> bool:
    """Whether the character at ``data[q]`` (UTF-8) is ``cp`` of ``width`` bytes."""
    if width == 1:
        return bool(data[q] == cp)
    if data[q] < 0xC0:  # not a lead byte
        return False
    found, length = _decode(data, q)
    return bool(found == cp and length == width)


@_jit
def _composite(data: Any, p: int, second: Any, fold: Any) -> Any:
    """The composite of ``core._fold.fold_table``'s compositions (the triples before its last
    entry) that ``second``, the character just read (ending at ``data[p]``), makes with the
    one before it, and the first's UTF-8 length; 0 if none. Both are checked in ``data``
    itself: the text holds them side by side (nothing dropped or marked between, neither read
    from an expansion), as NFKC composes them, and the kernel has just written the first (a
    word character). (The first is in the same document: ``segment`` reads a second only after
    a starter that composes.)"""
    last = fold.shape[0] - 1
    i = last - 3 * int(fold[last])
    wide = _width(second)
    while i < last:
        if fold[i + 1] == second:
            first = fold[i]
            width = _width(first)
            q = p - wide - width
            # (Valid UTF-8: a character found at ``q`` ends where ``second`` starts, in the
            # same document; ``q >= 0``: not read from the end.)
            if q >= 0 and _holds(data, q, first, width) and _holds(data, p - wide, second, wide):
                return fold[i + 2], width
        i += 3
    return np.uint32(0), 0


@numba.njit(inline="always")
def _plain_mark(info: Any) -> bool:
    """Whether a combining mark of ``char_classes`` bits ``info`` may change places with
    another such one without changing the words: word material that stays in its cluster
    (Grapheme_Cluster_Break Extend) and leaves the Indic conjunct state as it is."""
    incb = (info >> INCB_SHIFT) & 3
    plain: bool = (
        (info & WORD_BIT) != 0
        and (info & GCB_MASK) == EXTEND
        and (incb == LINKER or incb == INCB_EXTEND)  # noqa: SIM109
    )
    return plain


@numba.njit(inline="always")
def _mark_place(buf: Any, lo: int, hi: int, ccc: Any, fold: Any, table: Any) -> int:
    """Where in ``buf[lo:hi]`` (combining marks in canonical order) a mark of combining
    class ``ccc`` goes: before the first of a higher class (canonical ordering is stable);
    -1 if one of them is no ``_plain_mark``."""
    place = -1
    q = lo
    while q < hi:
        cp, width = _decode(buf, q)
        if not _plain_mark(table[cp]):
            return -1
        if place < 0 and fold[cp] >> np.uint32(24) > ccc:
            place = q
        q += width
    return place


@_jit
def _rotate(buf: Any, lo: int, hi: int, width: int) -> None:
    """Move the last ``width`` bytes of ``buf[lo:hi]`` to ``lo``, the others up."""
    last = buf[hi - width : hi].copy()
    for i in range(hi - width - 1, lo - 1, -1):
        buf[i + width] = buf[i]
    buf[lo : lo + width] = last


@numba.njit(inline="always")
def _ascii_run(
    data: Any, p: int, end: int, ascii: Any, buf: Any, o: int, edges: Any, e: int, in_word: bool
) -> Any:
    """Read ASCII from ``data[p]`` on, as ``tokenise`` does: every byte written through
    ``ascii``, the output and the edges moving on by whether it continues or ends a word.
    Returns where it stopped (the end, or a non-ASCII byte), the output and edge counts,
    whether a word is open, and the last byte read."""
    prev = int(in_word)
    c = data[_U(p)]
    while True:
        b = ascii[c]
        word = int(b != _SPACE)
        buf[_U(o)] = b
        edges[_U(e)] = o
        e += word ^ prev
        o += word | prev
        prev = word
        p += 1
        if p == end or data[_U(p)] >= 0x80:
            break
        c = data[_U(p)]
    return p, o, e, prev == 1, c


@numba.njit(inline="always")
def _put(buf: Any, o: int, cp: Any, width: int) -> int:
    """Write ``cp`` as UTF-8 of ``width`` bytes at ``buf[o]``; where the next byte goes."""
    if width == 1:
        buf[_U(o)] = cp
    elif width == 2:
        buf[_U(o)] = 0xC0 | (cp >> np.uint32(6))
        buf[_U(o + 1)] = 0x80 | (cp & np.uint32(0x3F))
    elif width == 3:
        buf[_U(o)] = 0xE0 | (cp >> np.uint32(12))
        buf[_U(o + 1)] = 0x80 | ((cp >> np.uint32(6)) & np.uint32(0x3F))
        buf[_U(o + 2)] = 0x80 | (cp & np.uint32(0x3F))
    else:
        buf[_U(o)] = 0xF0 | (cp >> np.uint32(18))
        buf[_U(o + 1)] = 0x80 | ((cp >> np.uint32(12)) & np.uint32(0x3F))
        buf[_U(o + 2)] = 0x80 | ((cp >> np.uint32(6)) & np.uint32(0x3F))
        buf[_U(o + 3)] = 0x80 | (cp & np.uint32(0x3F))
    return o + width
