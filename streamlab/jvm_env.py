"""The `java` the course's Spark runs, PySpark's folder, and the folder of what the course builds for it once per
environment: the archive of Spark's classes (:mod:`streamlab.jvm_archive`) and the jar of its
local file system (:mod:`streamlab.local_files`)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

#: Where they live (default: a folder of the course's Python environment, so that they go
#: with the packages whose classes they hold or were built against).
FOLDER_ENV = "STREAMLAB_JVM_ARCHIVE_DIR"


def folder() -> Path:
    return Path(os.environ.get(FOLDER_ENV) or Path(sys.prefix) / "streamlab-jvm")


def java_executable() -> str | None:
    """The `java` Spark's launcher runs: JAVA_HOME's, else the first on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def spark_home() -> Path:
    """The installed PySpark's folder, which is a complete ``SPARK_HOME``."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "PySpark is not installed in this Python; run this from the course "
            "environment (`nox -s cluster`)."
        )
    return Path(spec.origin).parent
