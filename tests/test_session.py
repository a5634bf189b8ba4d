"""The session factory: one shared session with the course's settings, and Java advice."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest

from streamlab import session
from streamlab.session import ROCKSDB_PROVIDER, JavaNotFoundError


def test_session_has_the_course_settings(spark):
    conf = spark.conf
    assert conf.get("spark.sql.streaming.stateStore.providerClass") == ROCKSDB_PROVIDER
    assert (
        conf.get("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled") == "true"
    )
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.master == "local[2]"
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


def test_checkpoints_are_written_without_starting_a_process_per_file(spark, tmp_path):
    # Spark's default for local folders writes through Hadoop's FileContext, which, without
    # Hadoop's native library (pip's PySpark has none), starts two `readlink` processes for
    # every file: about 100 a micro-batch of a stream-stream join. The course's sessions write
    # checkpoints (offset and commit logs, state store changelogs) through Hadoop's
    # FileSystem instead, which starts none.
    jvm = spark._jvm
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    folder = jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri())
    checkpointing = jvm.org.apache.spark.sql.execution.streaming.checkpointing
    manager = checkpointing.CheckpointFileManager.create(folder, hadoop_conf)
    assert manager.getClass().getSimpleName() == "FileSystemBasedCheckpointFileManager"
    # It writes as Spark needs: atomically, and never over a file that is there.
    target = jvm.org.apache.hadoop.fs.Path(folder, "0")
    for overwrite in (False, True):
        stream = manager.createAtomic(target, overwrite)
        stream.write(b"v1")
        stream.close()
    stream = manager.createAtomic(target, False)
    stream.write(b"v2")
    with pytest.raises(Exception, match="FileAlreadyExists|already exists"):
        stream.close()
    assert (tmp_path / "0").read_bytes() == b"v1"


def test_session_is_shared(spark):
    assert session.spark_session() is spark


def test_an_explicit_master_outranks_the_connect_server_of_the_environment(spark, monkeypatch):
    # The graded checks ask for local[2]; a learner's STREAMLAB_SPARK_REMOTE must not move them.
    monkeypatch.setenv(session.REMOTE_ENV, "sc://127.0.0.1:9")
    assert session.spark_session("local[2]") is spark


def test_a_process_started_by_a_connect_client_still_gets_a_classic_session(spark, monkeypatch):
    # A kernel over Spark Connect leaves PySpark's switch to Connect in the environment of the
    # processes it starts (the grader, lab 05's monitor): their local session must stay local.
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    assert session.spark_session("local[2]") is spark
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ


@pytest.mark.parametrize(
    "remote, words",
    [
        ("sc://127.0.0.1:9", "No Spark Connect server answers at sc://127.0.0.1:9"),
        ("127.0.0.1:15002", "starts with sc://"),
    ],
)
def test_a_connect_address_with_no_server_gets_one_sentence(monkeypatch, remote, words):
    monkeypatch.setenv(session.REMOTE_ENV, remote)
    with pytest.raises(session.SparkConnectUnavailable, match=words):
        session.spark_session()


def test_python_workers_run_this_interpreter(spark):
    # The workers must see the same packages as the driver (protobuf for transformWithState).
    seen = (
        spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect()
    )
    assert seen == [sys.executable]


def _fake_java(tmp_path, version_line: str | None):
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    body = f"echo '{version_line}' >&2" if version_line else "exit 1"
    java.write_text(f"#!/bin/sh\n{body}\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return tmp_path


@pytest.mark.parametrize(
    "version_line, words",
    [
        ('openjdk version "11.0.2" 2019-01-15', "is Java 11"),
        ('java version "1.8.0_292"', "is Java 8"),
        (None, "did not answer"),
    ],
)
def test_old_or_broken_java_gets_install_advice(tmp_path, monkeypatch, version_line, words):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, version_line)))
    with pytest.raises(JavaNotFoundError) as error:
        session.check_java()
    assert words in str(error.value) and "openjdk-17-jdk-headless" in str(error.value)


def test_missing_java_gets_install_advice(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match="no `java` was found"):
        session.check_java()


def test_java_17_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "JAVA_HOME", str(_fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15'))
    )
    session.check_java()


CHATTY = """
import streamlab
spark = streamlab.spark_session("local[1]")
jvm_log = spark._jvm.org.apache.logging.log4j.LogManager.getLogger("streamlab.test")
jvm_log.error("jvm-chatter-7361")
print("python-says-hello")
"""


def test_spark_console_output_goes_to_the_log_not_the_caller():
    from streamlab.session import LOG_FILE

    out = subprocess.run(
        [sys.executable, "-c", CHATTY], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    # The caller (a notebook cell, a terminal) sees its own output only.
    assert out.stdout.strip() == "python-says-hello"
    assert "jvm-chatter-7361" not in out.stderr and "WARNING" not in out.stderr
    assert "jvm-chatter-7361" in LOG_FILE.read_text()


def _kernel_output(code: str, timeout: float = 240) -> str:
    """What a real Jupyter kernel prints (stdout) while it runs ``code``."""
    from jupyter_client.manager import start_new_kernel

    from streamlab.paths import REPO_ROOT

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "STREAMLAB_SPARK_MASTER": "local[2]"}
    manager, client = start_new_kernel(kernel_name="python3", env=env)
    printed: list[str] = []
    try:
        reply = client.execute_interactive(
            code,
            timeout=timeout,
            output_hook=lambda m: printed.append(m["content"].get("text", "")),
        )
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return "".join(printed)


def test_the_first_start_in_a_kernel_says_so_and_how_long_it_takes():
    from streamlab.session import FIRST_START_SECONDS

    printed = _kernel_output(
        "import streamlab\nstreamlab.spark_session()\nstreamlab.spark_session()"
    )
    first, _, rest = printed.partition("\n")
    assert first.startswith("Starting Spark") and f"about {FIRST_START_SECONDS} s" in first, printed
    assert re.search(r"Spark started in \d+ s\.", rest), printed
    assert "Kernel > Shut Down Kernel" in rest, printed
    assert printed.count("Starting Spark") == 1, printed  # the second call finds it running
