"""Hadoop's local file system sets a file's permissions without starting a process
(streamlab.local_files): PySpark from pip has no native Hadoop library, and Hadoop's own
``LocalFileSystem`` starts `chmod` for every file and folder it creates."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from streamlab import local_files
from streamlab.jvm_archive import java_executable

#: A Java program run from its source: creates a file and a folder through the local file
#: system named by its first argument, with permissions of its own choosing.
PROBE = """
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;

public class Probe {
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    conf.set("fs.file.impl", args[0]);
    conf.setBoolean("fs.file.impl.disable.cache", true);
    FileSystem fs = FileSystem.get(new URI("file:///"), conf);
    Path folder = new Path(args[1], "folder");
    fs.mkdirs(folder, new FsPermission((short) 0750));
    FSDataOutputStream out = fs.create(new Path(folder, "data"), new FsPermission((short) 0640),
        false, 4096, (short) 1, 1 << 20, null);
    out.write(new byte[] {1, 2, 3});
    out.close();
    System.out.println("CLASS " + fs.getClass().getName());
  }
}
"""


def _probe(tmp_path, file_system: str) -> subprocess.CompletedProcess:
    """Run the probe with no program on its PATH: a file system that starts `chmod` fails."""
    source = tmp_path / "Probe.java"
    source.write_text(PROBE)
    # The course's jar, then every jar of Spark's (Hadoop's classes and what they log with).
    spark_jars = local_files.hadoop_jars()[0].parent
    classpath = os.pathsep.join([str(local_files.jar()), str(spark_jars / "*")])
    return subprocess.run(
        [java_executable(), "-cp", classpath, str(source), file_system, str(tmp_path / "out")],
        env={**os.environ, "PATH": str(tmp_path / "no-programs-here")},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture(scope="module")
def built():
    if local_files.javac() is None:
        pytest.skip("no Java compiler (javac) on this machine: Hadoop starts `chmod` as before")
    if not local_files.conf():
        pytest.fail(
            f"No local file system jar for this environment at {local_files.jar()}: `nox` builds "
            "it with the course's packages (python -m streamlab.tooling.build_jvm_archive)"
        )


def test_permissions_are_set_without_starting_a_process(built, tmp_path):
    done = _probe(tmp_path, local_files.FILE_SYSTEM)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"CLASS {local_files.FILE_SYSTEM}" in done.stdout
    folder = tmp_path / "out" / "folder"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750
    assert stat.S_IMODE((folder / "data").stat().st_mode) == 0o640
    assert (folder / "data").read_bytes() == bytes([1, 2, 3])
    # Still Hadoop's checksummed file system: every file has its .crc beside it.
    assert (folder / ".data.crc").exists()


def test_hadoops_own_local_file_system_fails_the_same_probe(built, tmp_path):
    # The probe can tell: Hadoop's LocalFileSystem needs `chmod` for the same steps.
    done = _probe(tmp_path, "org.apache.hadoop.fs.LocalFileSystem")
    assert done.returncode != 0
    assert "chmod" in done.stderr


def test_course_sessions_use_it(built, spark):
    assert local_files.conf()["spark.hadoop.fs.file.impl"] == local_files.FILE_SYSTEM
    jvm = spark._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(
        jvm.java.net.URI("file:///"), spark._jsparkSession.sessionState().newHadoopConf()
    )
    assert fs.getClass().getName() == local_files.FILE_SYSTEM


def test_a_jar_built_for_another_spark_is_not_used(built, tmp_path, monkeypatch):
    monkeypatch.setenv(local_files.FOLDER_ENV, str(tmp_path))
    assert local_files.build() == 0
    assert local_files.conf()
    local_files.key_file().write_text("pyspark 0.0.0\n")
    assert local_files.conf() == {}
    monkeypatch.setenv(local_files.ENABLE_ENV, "0")
    local_files.key_file().write_text(local_files.key())
    assert local_files.conf() == {}
