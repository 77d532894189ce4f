"""One SparkSession for the whole test session (a JVM takes seconds to start), on local[2]
with few shuffle partitions, and helpers to write shards and read part files back."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The test session's SparkSession (local[2]); stopped at the end."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if "MUTANT_UNDER_TEST" in os.environ:  # a mutation run: the executors run the same mutant
        builder = builder.config(
            "spark.executorEnv.MUTANT_UNDER_TEST", os.environ["MUTANT_UNDER_TEST"]
        )
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # a JVM shared by the runs (tests/mutation)
        _stop_a_left_context()
    session = (
        builder.master("local[2]")
        .appName("neardup tests")
        .config("spark.sql.shuffle.partitions", "3")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")  # keep the 3 partitions: more seams
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")  # shuffled joins, as at scale
        # Tiny inputs: compiling each query's generated Java costs more than running the plan
        # interpreted (about 30 % of these tests' CPU time). Same results; the Spark CLI test
        # (its own session, the engine's defaults) still runs the generated code.
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.setCheckpointDir(str(tmp_path_factory.mktemp("checkpoints")))
    yield session
    session.stop()


def _stop_a_left_context() -> None:
    """Stop the context a killed test process left in a shared JVM (one context a JVM)."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    jvm: Any = SparkContext._jvm
    active = getattr(getattr(jvm.org.apache.spark, "SparkContext$"), "MODULE$").getActive()
    if active.isDefined():
        active.get().stop()


def write_shards(
    folder: Path, docs: Sequence[dict[str, Any]], parts: int, name: str = "shard"
) -> list[str]:
    """``docs`` as ``parts`` JSON Lines files, round robin (so neighbours land apart)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}-{i}.jsonl" for i in range(parts)]
    chunks: list[list[str]] = [[] for _ in range(parts)]
    for i, doc in enumerate(docs):
        chunks[i % parts].append(json.dumps(doc))
    for path, lines in zip(paths, chunks, strict=True):
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return [str(p) for p in paths]


def part_lines(output: Path, *, ordered: bool = False) -> list[str]:
    """Every line of every part file of a JSON Lines output directory (``.jsonl`` or
    ``.jsonl.gz`` parts), the parts concatenated in name order; sorted unless ``ordered``."""
    import gzip

    lines: list[str] = []
    for part in sorted(output.glob("part-*")):
        assert part.name.endswith((".jsonl", ".jsonl.gz")), part.name
        data = part.read_bytes()
        text = gzip.decompress(data) if part.suffix == ".gz" else data
        lines.extend(text.decode("utf-8").splitlines())
    return lines if ordered else sorted(lines)


def run_local(inputs: Sequence[str], output: Path, **options: Any) -> Path:
    """The local engine's output file for the same inputs."""
    from neardup.app.cli.dedup import run_dedup
    from neardup.app.cli.options import DedupOptions, DedupParams

    params = DedupParams(**options.pop("params", {}))
    protected = tuple(str(p) for p in options.pop("protected", ()))
    run_dedup(
        DedupOptions(
            inputs=tuple(str(p) for p in inputs),
            output=str(output),
            protected=protected,
            params=params,
            quiet=True,
            **options,
        )
    )
    return output


def local_lines(inputs: Sequence[str], output: Path, **options: Any) -> list[str]:
    """The local engine's output lines for the same inputs, sorted."""
    path = run_local(inputs, output, **options)
    return sorted(path.read_text(encoding="utf-8").splitlines())
