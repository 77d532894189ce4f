"""``neardup dedup`` on either engine, as a measured subprocess: what ``bench.spark`` and
``bench.spark.incremental`` run."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from bench.batch.proctree import TreeRun, run_checked

__all__ = ["Engines", "run_dedup"]


class Engines(Protocol):
    """The settings of both engines a benchmark's config holds."""

    @property
    def master(self) -> str:
        """``--spark-master``."""

    @property
    def driver_memory(self) -> str:
        """The driver's JVM heap (local mode: driver and executors are one JVM)."""

    @property
    def workers(self) -> int:
        """The local engine's ``--workers``."""

    @property
    def timeout(self) -> float:
        """Seconds before the subprocess is killed."""


def run_dedup(cfg: Engines, args: Sequence[str], *, spark: bool, log: Path, what: str) -> TreeRun:
    """``python -m neardup dedup ARGS --quiet``, measured (``run_checked``): on Spark
    (``--engine spark --spark-master``, the driver's heap set) when ``spark``, else the local
    engine with ``--workers``."""
    argv = [sys.executable, "-m", "neardup", "dedup", *args, "--quiet"]
    if spark:
        argv += ["--engine", "spark", "--spark-master", cfg.master]
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {cfg.driver_memory} pyspark-shell"
    else:
        argv += ["--workers", str(cfg.workers)]
    return run_checked(argv, timeout=cfg.timeout, log=log, what=what)
