"""The master URL checked before any JVM starts: Spark's forms pass, anything else is one
ParameterError, and a standalone master must accept a connection."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from neardup.app.spark.entry import (
    check_master,
    configured_master,
    local_defaults,
    quiet_logging,
)
from neardup.core.engine import ParameterError


@pytest.mark.parametrize(
    "master",
    ["local", "local[2]", "local[*]", "local[4,3]", "local[*,2]", "local-cluster[2,1,1024]",
     "yarn", "k8s://https://host:6443", "k8s://host:443"],
)  # fmt: skip
def test_spark_master_forms_pass(master: str) -> None:
    check_master(master)


@pytest.mark.parametrize(
    "master", ["bogus://x", "local[abc]", "local[]", "spark://host", "mesos://h:5050", "", "yarn "]
)
def test_other_masters_are_one_parameter_error(master: str) -> None:
    with pytest.raises(ParameterError, match="is not a Spark master URL"):
        check_master(master)


def test_a_standalone_master_must_accept_a_connection() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        port = listening.getsockname()[1]
        check_master(f"spark://127.0.0.1:1,127.0.0.1:{port}")  # one of them answers
    with pytest.raises(ParameterError, match="cannot reach the Spark master"):
        check_master(f"spark://127.0.0.1:{port}")  # closed now


def test_the_errors_name_the_forms_and_every_address_tried() -> None:
    with pytest.raises(ParameterError) as bad:
        check_master("bogus://x")
    assert str(bad.value) == (
        "--spark-master 'bogus://x' is not a Spark master URL (local, local[N], local[*], "
        "spark://HOST:PORT, yarn, k8s://HOST:PORT)"
    )
    ports = []
    for _ in range(2):
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            ports.append(closed.getsockname()[1])
    a, b = (f"127.0.0.1:{port}" for port in ports)
    with pytest.raises(ParameterError) as unreachable:
        check_master(f"spark://{a},{b}")
    assert str(unreachable.value) == (
        f"--spark-master spark://{a},{b}: cannot reach the Spark master "
        f"({a}: Connection refused; {b}: Connection refused)"
    )


def test_a_local_master_binds_the_driver_on_loopback_unless_told_otherwise(monkeypatch) -> None:
    """Issue 33.10: SPARK_LOCAL_IP defaults to 127.0.0.1 for local masters only; a value the
    user set (the documented way to choose another address) is kept."""
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    local_defaults("yarn")
    local_defaults(None)  # spark-submit's own configuration decides
    assert "SPARK_LOCAL_IP" not in os.environ and "PYSPARK_PYTHON" not in os.environ
    local_defaults("local[2]")
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")
    local_defaults("local-cluster[2,1,1024]")
    assert os.environ["SPARK_LOCAL_IP"] == "10.1.2.3"


def test_without_a_named_master_the_one_spark_would_choose_is_read_before_its_jvm(
    monkeypatch, tmp_path
) -> None:
    """Spark's default master (no --spark-master, no configuration) is local[*]: the driver then
    binds on loopback as for a named local master (it listened on the host's address); a
    configured master (PYSPARK_SUBMIT_ARGS, spark-defaults.conf) is read as Spark reads it, and
    inside spark-submit (a running JVM) nothing is guessed."""
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert configured_master() == "local[*]"
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert configured_master() == "local[*]"  # no spark-defaults.conf there
    (tmp_path / "spark-defaults.conf").write_text(
        "# a comment\nspark.masterless x\nspark.master   yarn\n"
    )
    assert configured_master() == "yarn"
    (tmp_path / "spark-defaults.conf").write_text("spark.master=spark://h:7077\n")
    assert configured_master() == "spark://h:7077"
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-memory 4g --master local[3] pyspark-shell")
    assert configured_master() == "local[3]"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4321")
    assert configured_master() is None


def test_the_driver_logs_through_neardups_profile_unless_the_user_configured_logging(
    monkeypatch, tmp_path
) -> None:
    """Spark's start-up banner and the native-Hadoop notice are not printed on every run: the
    driver gets app/spark/log4j2.properties, except where the user set the driver's Java
    options or a log4j2.properties of their own, or spark-submit started the JVM."""
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME"):
        monkeypatch.delenv(name, raising=False)
    option = quiet_logging()
    assert option is not None and option.startswith("-Dlog4j2.configurationFile=file:")
    profile = Path(url2pathname(urlparse(option.partition("=")[2]).path))
    text = profile.read_text()
    assert "rootLogger.level = warn" in text
    assert "org.apache.hadoop.util.NativeCodeLoader" in text
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert quiet_logging() == option  # a configuration directory without logging settings
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Dx=1\n")
    assert quiet_logging() is None
    (tmp_path / "spark-defaults.conf").unlink()
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert quiet_logging() is None
    (tmp_path / "log4j2.properties").unlink()
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Dy=2 pyspark-shell")
    assert quiet_logging() is None
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.driver.extraJavaOptions=-Dy=2 x")
    assert quiet_logging() is None
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4321")
    assert quiet_logging() is None
