"""Brute-force oracles the engine is held against: plain dicts and loops, written from
docs/algorithm.md alone and sharing no code with core's banding or union-find."""

from __future__ import annotations

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
