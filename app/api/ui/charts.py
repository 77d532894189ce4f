"""Inline SVG charts for the /ui pages: the cluster-size histogram and the LSH S-curve."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from neardup.core.engine import lsh_probability, lsh_threshold

__all__ = ["Bar", "SCurve", "s_curve", "size_histogram"]

#: Cluster-size buckets of the histogram: (label, smallest size, largest size).
SIZE_BUCKETS = [("2", 2, 2), ("3", 3, 3), ("4", 4, 4), ("5", 5, 5), ("6-10", 6, 10),
                ("11-20", 11, 20), ("21-50", 21, 50), ("51-100", 51, 100),
                ("101+", 101, 1 << 62)]  # fmt: skip


@dataclass(frozen=True)
class Bar:
    """One histogram bar, in SVG user units."""

    label: str
    count: int
    x: float
    y: float
    height: float


def size_histogram(
    sizes: Mapping[int, int], height: float = 120.0, width: float = 40.0
) -> list[Bar]:
    """Bars of clusters by size bucket (clusters of two or more members), from how many
    clusters there are of each size."""
    counts = [sum(n for s, n in sizes.items() if lo <= s <= hi) for _, lo, hi in SIZE_BUCKETS]
    top = max(counts, default=0) or 1
    bars = []
    for i, ((label, _, _), count) in enumerate(zip(SIZE_BUCKETS, counts, strict=True)):
        h = height * count / top
        bars.append(Bar(label, count, 10 + i * (width + 8), 10 + height - h, h))
    return bars


@dataclass(frozen=True)
class SCurve:
    """The S-curve p(s) = 1 - (1 - s^r)^b as an SVG polyline, with its marks."""

    points: str
    lsh_threshold: float
    threshold: float
    lsh_x: float
    threshold_x: float
    table: list[tuple[float, float]]
    choices: list[tuple[int, int, float]]


def s_curve(num_perm: int, bands: int, threshold: float, size: float = 300.0) -> SCurve:
    """The curve of the running configuration, p(s) at 0.5..0.95, and every (bands, rows)
    pair for ``num_perm`` with its threshold (1/b)^(1/r)."""
    rows = num_perm // bands
    steps = 200
    coords = []
    for i in range(steps + 1):
        s = i / steps
        p = lsh_probability(s, bands, rows)
        coords.append(f"{40 + s * size:.1f},{10 + (1 - p) * size:.1f}")
    t = lsh_threshold(bands, rows)
    table = [(s / 100, lsh_probability(s / 100, bands, rows)) for s in range(50, 100, 5)]
    choices = [(b, num_perm // b, lsh_threshold(b, num_perm // b))
               for b in range(1, num_perm + 1) if num_perm % b == 0]  # fmt: skip
    return SCurve(" ".join(coords), t, threshold, 40 + t * size, 40 + threshold * size, table,
                  choices)  # fmt: skip
