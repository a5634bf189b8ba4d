"""Build the archive of Spark's driver classes (:mod:`streamlab.jvm_archive`).

``python -m streamlab.tooling.build_jvm_archive`` starts Spark once in a process of its own,
with the JVM told to archive every class it loaded when it exits; runs what a grading's first
queries run (the warm grading child's warm-up: a batch job, a Python UDF, a stateful query on
RocksDB, a ``transformWithState`` query); and ends the JVM. The archive, and what it was built for, land
beside each other in :func:`streamlab.jvm_archive.folder`. ``nox`` runs it when the course's
environment has none.

Before the archive it compiles the course's local file system (:mod:`streamlab.local_files`),
whose jar is on the class path of every driver the archive is for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from streamlab import jvm_archive, local_files

#: The most a build may take: a busy 2-core machine takes two minutes.
BUILD_WITHIN = 600.0
#: How long the JVM has to write the archive once told to end.
EXIT_WITHIN = 180.0


def build(within: float = BUILD_WITHIN) -> int:
    """Build the archive in a process of its own (its JVM must start with the option that
    archives); 0 when it was built."""
    started = time.monotonic()
    # The folder says a build was tried: nox tries again only with a new install.
    jvm_archive.folder().mkdir(parents=True, exist_ok=True)
    # First the course's local file system, whose jar is on the class path the archive is for.
    local_files.build()
    print(
        "Archiving the classes Spark loads, so that Spark starts faster (once, a minute or two) ...",
        flush=True,
    )
    env = {**os.environ, jvm_archive.ENABLE_ENV: "0"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "streamlab.tooling.build_jvm_archive", "--in-this-process"],
            env=env,
            timeout=within,
            check=False,
        )
    except subprocess.TimeoutExpired:
        print(f"Archiving Spark's classes took over {within:.0f} s; Spark starts without it.")
        return 1
    if done.returncode != 0 or not jvm_archive.java_options():
        print("Spark's classes could not be archived; Spark starts without the archive, as before.")
        return 1
    size = jvm_archive.archive().stat().st_size / 2**20
    print(
        f"Archived in {time.monotonic() - started:.0f} s ({size:.0f} MiB, {jvm_archive.archive()})."
    )
    return 0


def build_here() -> int:
    """Start Spark with the archiving option, warm it up, and end its JVM so that it writes."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from streamlab import session
    from streamlab.grading.warm import warm_up_steps

    jvm_archive.folder().mkdir(parents=True, exist_ok=True)
    part = jvm_archive.archive().with_name(f"{jvm_archive.archive().name}.part")
    part.unlink(missing_ok=True)
    session.DEFAULT_CONF["spark.driver.extraJavaOptions"] += f" -XX:ArchiveClassesAtExit={part}"
    for _name, step in warm_up_steps():
        step()
    SparkSession.getActiveSession().stop()  # type: ignore[union-attr]
    jvm = SparkContext._gateway.proc  # type: ignore[union-attr]
    # The gateway ends its JVM when its input closes; Java writes the archive as it exits.
    jvm.stdin.close()
    try:
        jvm.wait(timeout=EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        print(f"The JVM did not end within {EXIT_WITHIN:.0f} s of being told to.", file=sys.stderr)
        return 1
    if not part.exists():
        print("The JVM ended without writing the archive.", file=sys.stderr)
        return 1
    os.replace(part, jvm_archive.archive())
    jvm_archive.archive_key_file().write_text(jvm_archive.key())
    return 0


def main(argv: list[str]) -> int:
    return build_here() if argv == ["--in-this-process"] else build()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
