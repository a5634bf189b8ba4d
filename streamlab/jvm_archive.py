"""An archive of the classes Spark's driver loads, mapped by every driver JVM after the first.

A JVM that starts Spark reads and verifies some twenty thousand classes from Spark's jars, a
large part of the seconds a first grading or a notebook's first cell waits for. Java's
class-data sharing keeps them, once loaded, in an archive file that later JVMs map as they
start (``-XX:SharedArchiveFile``). :mod:`streamlab.tooling.build_jvm_archive` builds it once per
course environment (``nox`` does, with the course's packages); :func:`java_options` is what
:func:`streamlab.session.spark_session` gives the driver when an archive made for this Java
and this Spark exists. Java checks the archive again as it maps it, and goes on without it
(reading the jars, as always) when it does not match.

``STREAMLAB_JVM_ARCHIVE=0`` starts every driver without it.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

from streamlab import local_files

# Where the archive lives, and the `java` it is for.
from streamlab.jvm_env import FOLDER_ENV as FOLDER_ENV
from streamlab.jvm_env import folder as folder
from streamlab.jvm_env import java_executable as java_executable

#: ``0`` turns the archive off.
ENABLE_ENV = "STREAMLAB_JVM_ARCHIVE"


def archive() -> Path:
    return folder() / "spark-classes.jsa"


def archive_key_file() -> Path:
    """What the archive was built for (:func:`key`), beside it."""
    return folder() / "spark-classes.key"


def key() -> str:
    """The Java, the Spark and the environment an archive is good for: another of any of them
    loads other classes from other files."""
    java = java_executable() or "java"
    real = Path(java).resolve()
    stat = real.stat() if real.exists() else None
    # The course's local file system's jar comes first on the driver's class path, which Java
    # checks against the archive's.
    return (
        f"java {real} {stat.st_size if stat else 0} {stat.st_mtime_ns if stat else 0}\n"
        f"pyspark {metadata.version('pyspark')}\n"
        f"environment {sys.prefix}\n"
        f"class path {local_files.conf().get('spark.driver.extraClassPath', '')}\n"
    )


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1") != "0"


def java_options() -> str:
    """The driver's option that maps the archive, or ``""`` when there is none for this Java,
    Spark and environment (or it is turned off)."""
    if not enabled() or not archive().exists() or not archive_key_file().exists():
        return ""
    if archive_key_file().read_text() != key():
        return ""
    return f"-XX:SharedArchiveFile={archive()}"
