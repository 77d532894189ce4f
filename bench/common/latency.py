"""Latency summaries: percentiles of a list of durations, in milliseconds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["Latency", "summarize"]


@dataclass(frozen=True)
class Latency:
    """Percentiles (numpy's default linear interpolation) of ``count`` durations, in ms."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float
    mean: float

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for JSON)."""
        return asdict(self)

    def short(self) -> str:
        """``p50 1.23 / p90 ... / p99 ... / max ... ms``."""
        return (
            f"p50 {self.p50:.2f} / p90 {self.p90:.2f} / p99 {self.p99:.2f} / "
            f"max {self.max:.2f} ms (n={self.count})"
        )


def summarize(seconds: Sequence[float]) -> Latency:
    """The percentiles of ``seconds`` (durations in seconds), reported in milliseconds.

    Args:
        seconds: at least one duration.

    Returns:
        count, p50, p90, p99, max and mean in ms.

    Raises:
        ValueError: ``seconds`` is empty.
    """
    if not seconds:
        raise ValueError("no durations to summarize")
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    p50, p90, p99 = (float(v) for v in np.percentile(ms, [50, 90, 99]))
    return Latency(len(ms), p50, p90, p99, float(ms.max()), float(ms.mean()))
