"""Shuffle bytes per stage of a run, read from Spark's monitoring REST API (best effort).

Each stage of the run sets a job group named after it; at the end the driver's UI
(``/api/v1/applications/<id>/jobs`` and ``/stages``) says which Spark stages each group ran and
how many bytes they wrote to and read from the shuffle. Without a UI (``spark.ui.enabled``
false) there is nothing to read and the figures are left out.
"""

from __future__ import annotations

import json
import urllib.request
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["shuffle_bytes"]

_TIMEOUT = 10.0


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=_TIMEOUT) as response:
        return json.loads(response.read().decode("utf-8"))


def shuffle_bytes(spark: SparkSession) -> dict[str, dict[str, int]]:
    """{job group: {"write": bytes, "read": bytes}} over the application's jobs; {} without a UI
    or when the UI cannot be read."""
    ui = spark.sparkContext.uiWebUrl
    if not ui:
        return {}
    base = f"{ui}/api/v1/applications/{spark.sparkContext.applicationId}"
    try:
        jobs, stages = _get(f"{base}/jobs"), _get(f"{base}/stages")
    except (OSError, ValueError):
        return {}
    by_stage = {(s["stageId"], s.get("attemptId", 0)): s for s in stages}
    out: dict[str, dict[str, int]] = {}
    seen: set[tuple[int, int]] = set()
    for job in jobs:
        group = job.get("jobGroup") or "other"
        totals = out.setdefault(group, {"write": 0, "read": 0})
        for stage_id in job.get("stageIds", []):
            for key, stage in by_stage.items():
                if key[0] != stage_id or key in seen:
                    continue
                seen.add(key)  # a stage shared by jobs (a reused shuffle) counts once
                totals["write"] += int(stage.get("shuffleWriteBytes", 0))
                totals["read"] += int(stage.get("shuffleReadBytes", 0))
    return out
