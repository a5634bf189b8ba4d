"""Spark's driver maps the classes it loads from an archive built once (class-data sharing),
instead of reading them from Spark's jars at every start, and compiles with Java's quick
compiler only (streamlab.session.QUICK_COMPILER)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streamlab import jvm_archive
from streamlab.cluster import daemon_env
from streamlab.session import DEFAULT_CONF, FULL_JIT_ENV, QUICK_COMPILER

START_SPARK = (
    "from streamlab.session import spark_session\n"
    "spark = spark_session('local[1]')\n"
    "spark.range(3).count()\n"
    "bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()\n"
    "print('JVM ARGS', list(bean.getInputArguments()))\n"
)


def _classes_loaded(tmp_path, **env: str) -> tuple[dict[str, int], str]:
    """Where a driver JVM started by spark_session took Spark's classes from: the number of
    org.apache.spark classes per source (the archive, or a jar); and the JVM's options."""
    log = tmp_path / "class-load.log"
    environ = {
        **os.environ,
        "STREAMLAB_BUILD_DIR": str(tmp_path / "build"),
        # The java launcher reads this; the classes' log says where each class came from.
        "JDK_JAVA_OPTIONS": f"-Xlog:class+load=info:file={log}",
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-c", START_SPARK],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    sources: dict[str, int] = {}
    for line in log.read_text().splitlines():
        if " org.apache.spark." not in line:
            continue
        if "source: shared objects file" in line:
            source = "archive"
        elif "source: jar:" in line or "source: file:" in line:
            source = "jar"
        else:
            continue  # a class the JVM made as it ran (a lambda's), from no file
        sources[source] = sources.get(source, 0) + 1
    options = next(line for line in done.stdout.splitlines() if line.startswith("JVM ARGS"))
    return sources, options


def test_the_driver_maps_spark_classes_from_the_archive(tmp_path):
    if not jvm_archive.java_options():
        pytest.fail(
            f"No archive of Spark's classes for this environment at {jvm_archive.archive()}: "
            "`nox` builds it with the course's packages (python -m streamlab.tooling.build_jvm_archive)"
        )
    sources, options = _classes_loaded(tmp_path)
    assert sources.get("archive", 0) > 1000, sources
    assert sources.get("jar", 0) < sources["archive"] / 10, sources
    # The same driver compiles with Java's quick compiler only.
    assert QUICK_COMPILER in options, options


def test_without_the_archive_the_driver_reads_spark_jars_and_full_jit_keeps_c2(tmp_path):
    sources, options = _classes_loaded(tmp_path, **{jvm_archive.ENABLE_ENV: "0", FULL_JIT_ENV: "1"})
    assert sources.get("archive", 0) == 0, sources
    assert sources.get("jar", 0) > 1000, sources
    assert "TieredStopAtLevel" not in options, options


def test_a_clusters_executors_and_daemons_compile_as_the_driver_does():
    assert DEFAULT_CONF["spark.executor.extraJavaOptions"] == QUICK_COMPILER
    assert QUICK_COMPILER in daemon_env()["SPARK_DAEMON_JAVA_OPTS"].split()


def test_an_archive_built_for_another_java_or_spark_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.FOLDER_ENV, str(tmp_path))
    jvm_archive.archive().write_bytes(b"not an archive")
    jvm_archive.archive_key_file().write_text("java 11, pyspark 3.5\n")
    assert jvm_archive.java_options() == ""
    jvm_archive.archive_key_file().write_text(jvm_archive.key())
    assert jvm_archive.java_options() == f"-XX:SharedArchiveFile={jvm_archive.archive()}"


def test_no_archive_no_option(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.FOLDER_ENV, str(tmp_path))
    assert jvm_archive.java_options() == ""
