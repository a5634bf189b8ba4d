"""Hadoop's local file system without a `chmod` process for every file it creates.

PySpark from pip ships without Hadoop's native library, and without it Hadoop's local file
system sets permissions by starting `chmod` (``RawLocalFileSystem.setPermission`` through
Hadoop's ``Shell``). Hadoop sets the permissions of every file and folder it creates: a
streaming query's offset and commit log entries, each state store's changelog, and the
``.crc`` beside each. A micro-batch of a stream-stream join started about thirty processes.

``java/PosixLocalFileSystem.java`` is Hadoop's ``LocalFileSystem``, checksums included, whose
permissions Java sets itself (:data:`FILE_SYSTEM`). :func:`build` compiles it once per course
environment where a JDK's ``javac`` is found (``nox`` does, with the archive of Spark's
classes: :mod:`streamlab.tooling.build_jvm_archive`); :func:`conf` is what every course session
starts with (:data:`streamlab.session.DEFAULT_CONF`) when a jar built for this Spark exists,
and nothing otherwise: Hadoop then starts `chmod` as it always did.

``STREAMLAB_LOCAL_FILES=0`` starts every session without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from streamlab import jvm_env

#: The class Spark is given for ``file:`` paths (``spark.hadoop.fs.file.impl``).
FILE_SYSTEM = "streamlab.hadoop.PosixLocalFileSystem"
#: ``0`` turns it off.
ENABLE_ENV = "STREAMLAB_LOCAL_FILES"
#: The jar lives beside the archive of Spark's classes, in the course's environment.
FOLDER_ENV = jvm_env.FOLDER_ENV

SOURCE = Path(__file__).with_name("java") / "PosixLocalFileSystem.java"
#: The most javac may take: about five seconds on a 2-core machine.
COMPILE_WITHIN = 300.0


def folder() -> Path:
    return jvm_env.folder()


def jar() -> Path:
    return folder() / "streamlab-local-files.jar"


def key_file() -> Path:
    """What the jar was built for (:func:`key`), beside it."""
    return folder() / "streamlab-local-files.key"


def key() -> str:
    """The Spark (its Hadoop) and the source a jar is good for."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    return f"pyspark {metadata.version('pyspark')}\nsource {digest}\n"


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1") != "0"


def hadoop_jars() -> list[Path]:
    """Hadoop's classes in the installed PySpark."""
    return sorted((jvm_env.spark_home() / "jars").glob("hadoop-client-*.jar"))


def javac() -> str | None:
    """The Java compiler of the `java` Spark runs (JAVA_HOME's, or the one beside `java`),
    else the first on the PATH; None on a machine with a Java runtime only."""
    java = jvm_env.java_executable()
    if java:
        beside = Path(java).resolve().parent / "javac"
        if beside.exists():
            return str(beside)
    return shutil.which("javac")


def conf() -> dict[str, str]:
    """The settings that give a session this file system: ``{}`` when no jar was built for
    this Spark and this source (or it is turned off)."""
    if not enabled() or not jar().exists():
        return {}
    try:
        if key_file().read_text() != key():
            return {}
    except OSError:  # no key: the jar is not known to be this Spark's
        return {}
    return {
        "spark.hadoop.fs.file.impl": FILE_SYSTEM,
        # A local master's tasks run in the driver; a cluster's executors load it too.
        "spark.driver.extraClassPath": str(jar()),
        "spark.executor.extraClassPath": str(jar()),
    }


def build() -> int:
    """Compile the file system into :func:`jar`; 0 when it was built, 1 when it could not be
    (no javac, or javac failed), with a sentence that says so."""
    compiler, classpath = javac(), hadoop_jars()
    if compiler is None or not classpath:
        print(
            "No Java compiler (javac) here: Hadoop sets file permissions by starting `chmod`, "
            "as it always does without its native library."
        )
        return 1
    folder().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="streamlab-javac-") as tmp:
        classes = Path(tmp)
        try:
            done = subprocess.run(
                [
                    compiler,
                    "--release",
                    "17",
                    "-nowarn",
                    "-cp",
                    os.pathsep.join(str(path) for path in classpath),
                    "-d",
                    str(classes),
                    str(SOURCE),
                ],
                capture_output=True,
                text=True,
                timeout=COMPILE_WITHIN,
            )
        except subprocess.TimeoutExpired:
            print(
                f"Compiling {SOURCE.name} took over {COMPILE_WITHIN:.0f} s; Spark goes on without it."
            )
            return 1
        if done.returncode != 0:
            print(
                f"{SOURCE.name} did not compile; Spark goes on without it:\n{done.stderr[-2000:]}"
            )
            return 1
        part = jar().with_name(f"{jar().name}.part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
    os.replace(part, jar())
    key_file().write_text(key())
    return 0
