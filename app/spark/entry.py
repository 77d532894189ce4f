"""A Spark run from the command line: the session, the run, the manifest and the summary."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from neardup.app.spark.corpus import HadoopPath
from neardup.app.spark.index import open_index
from neardup.app.spark.job import SparkManifest, SparkParams, StageWatch, run_spark_dedup
from neardup.core.engine import ParameterError, index_record_line, nan_as_null_note

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ProgressWatch", "check_master", "dedup_on_spark", "local_defaults", "spark_session"]


class ProgressWatch(StageWatch, AbstractContextManager[Any], Protocol):
    """A ``StageWatch`` that is closed when the run ends (its last stage's line)."""


#: spark.sql.shuffle.partitions on a local master (Spark's configuration decides elsewhere).
_LOCAL_SHUFFLE_PARTITIONS = 8
#: The master URLs Spark 4 takes (mesos:// is gone): local[N|*][,F], local-cluster[N,C,M],
#: spark://HOST:PORT[,HOST:PORT...], yarn, k8s://[https://]HOST[:PORT].
_THREADS = r"(\d+|\*)"
_MASTER = re.compile(
    rf"local(\[{_THREADS}(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn"
    r"|spark://[^\s,/:]+:\d+(,[^\s,/:]+:\d+)*|k8s://\S+"
)
#: Where a local master's driver binds unless SPARK_LOCAL_IP says otherwise.
_LOOPBACK = "127.0.0.1"
#: Loggers set to ERROR (``_quiet_loggers``).
_NOISY_LOGGERS = (
    "org.apache.spark.sql.execution.streaming.FileStreamSink",  # Spark 4.0
    "org.apache.spark.sql.execution.streaming.sinks.FileStreamSink",  # later Spark 4
)
#: Seconds to wait for a standalone master to accept a connection.
_CONNECT_TIMEOUT = 5.0


def check_master(master: str) -> None:
    """ParameterError, before any JVM starts, for a master URL Spark would not take or a
    standalone master (``spark://``) that accepts no connection: one line, where Spark itself
    prints pages of Python and Java traces (or retries for a minute first)."""
    if not _MASTER.fullmatch(master):
        raise ParameterError(
            f"--spark-master {master!r} is not a Spark master URL (local, local[N], local[*], "
            "spark://HOST:PORT, yarn, k8s://HOST:PORT)"
        )
    if not master.startswith("spark://"):
        return
    failures = []
    for address in master[len("spark://") :].split(","):
        host, port = address.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT).close()
            return
        except OSError as exc:
            failures.append(f"{address}: {exc.strerror or exc}")
    raise ParameterError(
        f"--spark-master {master}: cannot reach the Spark master ({'; '.join(failures)})"
    )


def _conf_dir() -> str | None:
    """Spark's configuration directory: ``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``."""
    if os.environ.get("SPARK_CONF_DIR"):
        return os.environ["SPARK_CONF_DIR"]
    home = os.environ.get("SPARK_HOME")
    return os.path.join(home, "conf") if home else None


def _configured(key: str, flag: str) -> str | None:
    """The value Spark's launcher will give ``key``: ``flag`` (``--master``) or ``--conf
    KEY=VALUE`` in ``PYSPARK_SUBMIT_ARGS``, else ``KEY`` in ``spark-defaults.conf``; None."""
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(args):
        following = args[i + 1] if i + 1 < len(args) else ""
        if arg == flag and following:
            return following
        if arg.startswith(flag + "="):
            return arg.partition("=")[2]
        if arg == "--conf" and following.startswith(key + "="):
            return following.partition("=")[2]
    conf_dir = _conf_dir()
    if conf_dir is None:
        return None
    line_of = re.compile(re.escape(key) + r"(?:\s*[=:]\s*|\s+)(\S.*)")
    try:
        with open(os.path.join(conf_dir, "spark-defaults.conf"), encoding="utf-8") as conf:
            for line in conf:
                found = line_of.fullmatch(line.strip())
                if found:
                    return found.group(1).strip()
    except OSError:  # no such file: Spark's defaults
        pass
    return None


def configured_master() -> str | None:
    """The master Spark will choose when none is named, read before its JVM starts as Spark
    reads it: ``--master`` in ``PYSPARK_SUBMIT_ARGS``, else ``spark.master`` in
    ``spark-defaults.conf`` (``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``), else Spark's
    default ``local[*]``. None inside ``spark-submit`` (its JVM is already running: its own
    configuration decided)."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    return _configured("spark.master", "--master") or "local[*]"


def quiet_logging() -> str | None:
    """The driver's Java options that make neardup's own log4j2 profile (app/spark/log4j2
    .properties: warnings, none of Spark's start-up banner or the native-Hadoop notice) the
    JVM's, or None where the user configured logging or the driver's Java options (a
    ``log4j2.properties`` in Spark's configuration directory, ``spark.driver.extraJavaOptions``
    or ``--driver-java-options``), or the JVM already runs (``spark-submit``)."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    if _configured("spark.driver.extraJavaOptions", "--driver-java-options") is not None:
        return None
    conf_dir = _conf_dir()
    if conf_dir is not None and os.path.exists(os.path.join(conf_dir, "log4j2.properties")):
        return None
    profile = Path(__file__).with_name("log4j2.properties")
    return f"-Dlog4j2.configurationFile={profile.as_uri()}"


def local_defaults(master: str | None) -> None:
    """For a local master, the environment the JVM and the executors' Python start with,
    where the user set none: executors run this interpreter (``PYSPARK_PYTHON``), and the
    driver and its web UI listen on loopback (``SPARK_LOCAL_IP``), not on the address the host
    name resolves to. ``SPARK_LOCAL_IP``, or ``spark.driver.bindAddress`` /
    ``spark.driver.host`` in Spark's configuration, choose another address."""
    if master is not None and master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", _LOOPBACK)


def spark_session(master: str | None, quiet: bool = False) -> SparkSession:
    """The session: ``master`` if given, else whatever Spark's configuration says (so inside
    ``spark-submit`` the cluster's). A local master, given or the one Spark's configuration
    chose (``local[*]`` by default), runs executors' Python with this interpreter unless
    ``PYSPARK_PYTHON`` says otherwise: Spark's own default, ``python3`` on the PATH, is not
    the virtual environment neardup is installed in unless it is activated."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        from importlib.metadata import version

        raise ParameterError(
            "the Spark engine needs the spark extra (pyspark) and Java 17: "
            "pip install -e '.[spark]' in a clone of neardup, "
            f"or pip install 'neardup-{version('neardup')}-py3-none-any.whl[spark]' from its wheel"
        ) from None
    if master is not None:
        check_master(master)
    user_python = os.environ.get("PYSPARK_PYTHON")
    chosen = master if master is not None else configured_master()
    local_defaults(chosen)
    builder = SparkSession.builder.appName("neardup dedup")
    if master is not None:
        builder = builder.master(master)
    if chosen is not None and chosen.startswith("local"):
        # One machine (named, or Spark's default local[*]): a few shuffle partitions a core,
        # not a cluster's default of 200 (a small run on the default local[*] took 2.5x as long).
        builder = builder.config("spark.sql.shuffle.partitions", str(_LOCAL_SHUFFLE_PARTITIONS))
    # neardup's own progress (app.cli.progress) replaces Spark's console bar, which ends
    # without a newline (the summary after it shared its line).
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    java_options = quiet_logging()
    if java_options is not None:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # Spark's own refusal (a cluster manager's check, no Java...)
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise ParameterError(f"cannot start Spark (--spark-master {master}): {first}") from None
    context = spark.sparkContext
    # Spark's configuration chose the master: only once it is known to be local may the
    # executors run this interpreter (a cluster's nodes have their own). The context read its
    # Python from the environment when it started; every task is sent with this one.
    running = str(getattr(context, "master", ""))
    if master is None and user_python is None and running.startswith("local"):
        context.pythonExec = sys.executable
    context.setLogLevel("ERROR" if quiet else "WARN")
    _quiet_loggers(spark)
    return spark


def _quiet_loggers(spark: SparkSession) -> None:
    """Spark's loggers that warn of what is not wrong, set to ERROR: ``FileStreamSink`` looks
    for a streaming sink's metadata under every input path, and logs a page-long
    FileNotFoundException trace for a glob (``shards/*.jsonl``), which is no directory."""
    from py4j.protocol import Py4JError

    jvm: Any = getattr(spark.sparkContext, "_jvm", None)
    if jvm is None:  # no JVM of this process's own to configure
        return
    try:
        level = jvm.org.apache.logging.log4j.Level.ERROR
        for name in _NOISY_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Py4JError:  # another logging backend: its traces stay
        pass


def dedup_on_spark(
    inputs: Sequence[str],
    output: str,
    *,
    protected: Sequence[str] = (),
    params: SparkParams | None = None,
    master: str | None = None,
    manifest_path: str | None = None,
    quiet: bool = False,
    removed: str | None = None,
    dry_run: bool = False,
    progress: Callable[[Any], ProgressWatch] | None = None,
) -> SparkManifest:
    """Run on Spark and write the manifest (default ``OUTPUT.manifest.json``, any Hadoop path).
    An ``--index`` is opened and checked (parameters, files) before any JVM starts. With
    ``dry_run`` nothing is written: the counts go to standard output as the local engine's
    ``--dry-run`` report (the same keys). ``progress``: made from Spark's status tracker, it
    follows the run's stages (closed before the summary, which has its own line)."""
    params = params or SparkParams()
    if params.index is not None:
        open_index(params.index, params.index_mode, params.minhash)
    spark = spark_session(master, quiet)
    path = manifest_path or output.rstrip("/") + ".manifest.json"

    def write(manifest: SparkManifest) -> None:
        body = json.dumps(manifest.as_json(), indent=2) + "\n"
        HadoopPath(spark, path).write_bytes(body.encode("utf-8"))

    watch = None if progress is None else progress(spark.sparkContext.statusTracker())
    try:
        with watch if watch is not None else nullcontext():
            manifest = run_spark_dedup(
                spark, inputs, output, protected=protected, params=params, on_conflict=write,
                removed=removed, dry_run=dry_run, watch=watch,
            )  # fmt: skip
        if not dry_run:
            write(manifest)
    finally:
        spark.stop()
    nulls = manifest.counts.get("nan_as_null", 0)
    if nulls:
        print(f"neardup dedup: warning: {nan_as_null_note(nulls)}", file=sys.stderr)
    if dry_run:
        counts = {k: v for k, v in manifest.counts.items() if k != "edges"}
        report = {"dry_run": True, "counts": counts, "clusters": manifest.clusters,
                  "cluster_sizes": manifest.cluster_sizes,
                  "singletons": manifest.singletons}  # fmt: skip
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return manifest
    if not quiet:
        c = manifest.counts
        print(
            f"neardup dedup (spark, {manifest.master}): read {c['read']}, exact-dropped "
            f"{c['exact_dropped']}, near-dropped {c['near_dropped']}, decontaminated "
            f"{c['decontaminated']}, wrote {c['written']} to {output}"
            + (f" and {manifest.removed['rows']} to {removed}" if manifest.removed else "")
            + f" (manifest {path})",
            file=sys.stderr,
        )
        if manifest.index is not None:
            print(index_record_line(manifest.index), file=sys.stderr)
    return manifest
