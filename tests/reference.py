"""Brute-force oracles the engine is held against: plain dicts and loops, written from
docs/algorithm.md (and UAX #29) alone and sharing no code with core's banding or union-find."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

from neardup.core.minhash import MERSENNE31


def band_keys(
    sig: Sequence[int], bands: int, rows: int
) -> list[tuple[int, tuple[int, ...]]] | None:
    """(band index, the band's rows) of every band; None for an empty (all-P) signature."""
    values = [int(v) for v in sig]
    if all(v == MERSENNE31 for v in values):
        return None
    return [(b, tuple(values[b * rows : (b + 1) * rows])) for b in range(bands)]


def candidates(sigs: np.ndarray, bands: int) -> list[tuple[int, int]]:
    """Every (i, j), i < j, sharing all rows of some band, by comparing every pair."""
    rows = sigs.shape[1] // bands
    keys = [band_keys(s, bands, rows) for s in sigs]
    found = []
    for i in range(len(sigs)):
        for j in range(i + 1, len(sigs)):
            if keys[i] is not None and keys[j] is not None and set(keys[i]) & set(keys[j]):
                found.append((i, j))
    return found


def query(sigs: np.ndarray, sig: Sequence[int], bands: int) -> list[int]:
    """The rows of ``sigs`` sharing a band with ``sig``."""
    rows = sigs.shape[1] // bands
    mine = band_keys(sig, bands, rows)
    if mine is None:
        return []
    return [
        i for i, s in enumerate(sigs) if (k := band_keys(s, bands, rows)) and set(k) & set(mine)
    ]


def components(nodes: Iterable[Hashable], edges: Iterable[tuple[Hashable, Hashable]]) -> dict:
    """node -> the smallest node of its connected component (graph search, no union-find)."""
    nodes = list(nodes)
    adjacent: dict = {n: set() for n in nodes}
    for a, b in edges:
        adjacent[a].add(b)
        adjacent[b].add(a)
    root: dict = {}
    for start in nodes:
        if start in root:
            continue
        seen, todo = {start}, [start]
        while todo:
            for other in adjacent[todo.pop()]:
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        smallest = min(seen)
        root.update(dict.fromkeys(seen, smallest))
    return root


# --- The multilingual tokenizer, from docs/algorithm.md section 1 and UAX #29 -----------------
# Character by character, properties read off the ``regex`` module at the pinned version (the
# one the shipped table was generated from), nothing of core's table, arrays or kernel.

_UNSPACED = ("Han", "Hiragana", "Katakana", "Bopomofo", "Thai", "Lao", "Khmer", "Myanmar")
_UNSPACED += ("Tibetan",)
_BREAKS = ("Extend", "SpacingMark", "Prepend", "ZWJ", "L", "V", "T", "LV", "LVT", "Control", "CR")
_BREAKS += ("LF", "Regional_Indicator")


@functools.cache
def char_props(char: str) -> tuple[str, str, bool, bool]:
    """(Grapheme_Cluster_Break, Indic_Conjunct_Break, word material, unspaced script)."""
    import regex

    gcb = next(
        (n for n in _BREAKS if regex.match(rf"\p{{Grapheme_Cluster_Break={n}}}", char)), "Other"
    )
    incb = next(
        name
        for name in ("Consonant", "Linker", "Extend", "None")
        if name == "None" or regex.match(rf"\p{{Indic_Conjunct_Break={name}}}", char)
    )
    word = bool(regex.match(r"[\p{L}\p{M}\p{N}_]", char))
    unspaced = any(regex.match(rf"\p{{Script={s}}}", char) for s in _UNSPACED)
    return gcb, incb, word, unspaced


def _dropped(char: str) -> bool:
    from neardup.core._scripts import DROPPED_RANGES  # the documented list

    return any(lo <= ord(char) <= hi for lo, hi in DROPPED_RANGES)


def casefold_17(text: str) -> str:
    """Full case folding at Unicode 17.0: ``str.casefold`` for a character this Python assigns
    (its folding never changes once assigned), ``regex``'s (release 2026.12.2, Unicode 17.0)
    for one assigned later (``unicodedata2`` has no case data)."""
    from regex import FULLCASE, IGNORECASE, UNICODE, _regex

    return "".join(
        c.casefold()
        if unicodedata.category(c) != "Cn"
        else _regex.fold_case(FULLCASE | IGNORECASE | UNICODE, c)
        for c in text
    )


def multilingual_normalize(text: str) -> str:
    """NFKC, case folding, NFKC; dropped characters removed; NFKC again: all at Unicode 17.0
    (``unicodedata2`` 17.0.0's NFKC, ``casefold_17``), whatever this Python's ``unicodedata``
    is."""
    import unicodedata2

    nfkc = functools.partial(unicodedata2.normalize, "NFKC")
    folded = nfkc(casefold_17(nfkc(text)))
    return nfkc("".join(c for c in folded if not _dropped(c)))


def _no_break(chars: str, i: int) -> bool:
    """Whether UAX #29 (GB6-GB9c) keeps chars[i - 1] and chars[i] in one cluster."""
    before, here = char_props(chars[i - 1])[0], char_props(chars[i])[0]
    if here in ("Extend", "ZWJ", "SpacingMark") or before == "Prepend":
        return True
    if before == "L" and here in ("L", "V", "LV", "LVT"):
        return True
    if before in ("LV", "V") and here in ("V", "T"):
        return True
    if before in ("LVT", "T") and here == "T":
        return True
    if char_props(chars[i])[1] != "Consonant":
        return False
    j, linker = i - 1, False
    while j >= 0 and char_props(chars[j])[1] in ("Extend", "Linker"):
        linker = linker or char_props(chars[j])[1] == "Linker"
        j -= 1
    return linker and j >= 0 and char_props(chars[j])[1] == "Consonant"


def multilingual_words(text: str) -> list[str]:
    """The multilingual tokenizer's words: runs of word material, each extended grapheme
    cluster that starts with a character of a script written without spaces cut out alone."""
    norm = multilingual_normalize(text)
    out: list[str] = []
    clusters: list[tuple[str, bool]] = []  # the current run's clusters: (text, unspaced)
    for i, char in enumerate(norm + " "):
        if i == len(norm) or not char_props(char)[2]:
            word = ""
            for cluster, unspaced in clusters:
                if unspaced:
                    out.extend(w for w in (word, cluster) if w)
                    word = ""
                else:
                    word += cluster
            out.extend([word] if word else [])
            clusters = []
        elif clusters and _no_break(norm, i):
            clusters[-1] = (clusters[-1][0] + char, clusters[-1][1])
        else:
            clusters.append((char, char_props(char)[3]))
    return out


def grapheme_clusters(text: str) -> list[str]:
    """``text`` cut into extended grapheme clusters by GB6-GB9c and GB999 alone (text of word
    characters: no controls, no emoji or regional indicators)."""
    out: list[str] = []
    for i, char in enumerate(text):
        if out and _no_break(text, i):
            out[-1] += char
        else:
            out.append(char)
    return out
