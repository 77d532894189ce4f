"""Shuffle bytes per stage of a run, read from the driver's own status store (through py4j).

Each stage of the run sets a job group named after the run and the stage; at the end the driver's
``AppStatusStore`` (what the web UI and its REST API show) says which Spark stages each group
ran and how many bytes they wrote to and read from the shuffle. It is read in the driver's JVM,
not over HTTP: the first request to the UI's REST API starts its web stack (seconds on a busy
machine), and a probe that gave up waiting left a Jetty "Broken pipe" trace in the log and no
figures. The store exists with or without the UI (``spark.ui.enabled``); it keeps the last
``spark.ui.retainedJobs`` jobs and ``spark.ui.retainedStages`` stages (1000 each by default,
far more than a run has).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["shuffle_bytes"]

#: Milliseconds to wait for the listener bus to deliver the last stages' events.
_DRAIN_MS = 10_000


def shuffle_bytes(spark: SparkSession, prefix: str) -> dict[str, dict[str, int]]:
    """{stage: {"write": bytes, "read": bytes}} over the jobs of the groups named ``prefix +
    stage`` (a stage shared by jobs, a reused shuffle, counted once); {} if this Spark's status
    store cannot be read."""
    from py4j.protocol import Py4JError

    try:
        return _from_store(spark, prefix)
    except Py4JError:  # another Spark's internals: no figures rather than a failed run
        return {}


def _from_store(spark: SparkSession, prefix: str) -> dict[str, dict[str, int]]:
    sc = spark.sparkContext
    jvm: Any = sc._jvm
    context = sc._jsc.sc()
    context.listenerBus().waitUntilEmpty(_DRAIN_MS)  # the last stages' events, delivered
    store = context.statusStore()
    as_java = jvm.scala.jdk.javaapi.CollectionConverters.asJava
    gateway: Any = sc._gateway
    no_quantiles = gateway.new_array(jvm.double, 0)
    stages = as_java(
        store.stageList(jvm.java.util.ArrayList(), False, False, no_quantiles,
                        jvm.java.util.ArrayList())
    )  # fmt: skip
    by_stage: dict[int, list[tuple[int, int]]] = {}
    for stage in stages:
        sizes = (int(stage.shuffleWriteBytes()), int(stage.shuffleReadBytes()))
        by_stage.setdefault(int(stage.stageId()), []).append(sizes)
    out: dict[str, dict[str, int]] = {}
    seen: set[int] = set()
    for job in sorted(as_java(store.jobsList(None)), key=lambda j: int(j.jobId())):
        group = job.jobGroup()
        name = str(group.get()) if group.isDefined() else ""
        if not name.startswith(prefix):
            continue
        totals = out.setdefault(name[len(prefix) :], {"write": 0, "read": 0})
        for stage_id in as_java(job.stageIds()):
            if int(stage_id) in seen:
                continue
            seen.add(int(stage_id))
            for written, read in by_stage.get(int(stage_id), []):
                totals["write"] += written
                totals["read"] += read
    return out
