"""The course's SparkSession: local by default, RocksDB state store, quiet logs.

Every notebook, check and test calls :func:`spark_session` and gets the same session for
the life of the process, so a Python process starts at most one JVM.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from streamlab import jvm_archive, local_files, spark_log
from streamlab.jvm_archive import java_executable
from streamlab.paths import BUILD_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"

#: Environment variable naming the Spark master; ``local[*]`` when unset.
MASTER_ENV = "STREAMLAB_SPARK_MASTER"
#: Environment variable naming a Spark Connect server (``sc://HOST:PORT``); used when set.
REMOTE_ENV = "STREAMLAB_SPARK_REMOTE"

#: PySpark's switch to Spark Connect, which its Connect client sets in ``os.environ``.
CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"
#: Whether this process has made a Spark Connect session (see :func:`_connect_session`).
_CONNECTED = False

_LOG4J = Path(__file__).with_name("log4j2.properties")

#: ``1`` gives Spark's JVMs Java's optimizing compiler back (see :data:`QUICK_COMPILER`).
FULL_JIT_ENV = "STREAMLAB_FULL_JIT"
#: Java compiles the code a JVM runs often twice: at once with its quick compiler (C1), then,
#: for code that stays hot, again with its optimizing one (C2). The course's data is small:
#: a driver spends more processor time in C2's compiler threads than C2's code ever saves it,
#: and on two cores those threads slow the query beside them. Stopping at C1 took a solved
#: lab 09's first grading from about 90 to 55 s of processor time (site/setup.md;
#: `nox -s bench -- learner_loop` compares the two).
QUICK_COMPILER = "-XX:TieredStopAtLevel=1"


def jit_options() -> str:
    """The options every JVM of the course starts with for its compilers: ``""`` when
    ``STREAMLAB_FULL_JIT=1``, else :data:`QUICK_COMPILER`."""
    return "" if os.environ.get(FULL_JIT_ENV) == "1" else QUICK_COMPILER


#: How the course's sessions write checkpoint files (see DEFAULT_CONF).
CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)

#: Settings every course session starts with. Lab 00 explains the state store's; the others
#: keep the output quiet and the JVM light (``spark.*.extraJavaOptions``: :func:`jit_options`).
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Arrow makes toPandas() and the pandas state APIs cheap on a laptop.
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # A learner's stopped query must not leave a lock behind that blocks the next run.
    "spark.sql.streaming.stopActiveRunOnRestart": "true",
    # Checkpoints (offset and commit logs, state store changelogs) written through Hadoop's
    # FileSystem: Spark's default goes through Hadoop's FileContext, which without Hadoop's
    # native library (pip's PySpark has none) starts two `readlink` processes for every file
    # it writes, about 100 a micro-batch of a stream-stream join (site/setup.md).
    "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
    "spark.driver.extraJavaOptions": " ".join(
        part for part in (f"-Dlog4j2.configurationFile=file:{_LOG4J}", jit_options()) if part
    ),
}
# Hadoop's local file system with permissions set by Java, not by a `chmod` process for every
# checkpoint file (streamlab.local_files), where the course's environment built it.
DEFAULT_CONF.update(local_files.conf())
if jit_options():
    # Executors of a cluster (streamlab.cluster); a local master's run in the driver.
    DEFAULT_CONF["spark.executor.extraJavaOptions"] = jit_options()
if os.name == "posix":
    # The JVM and its Python workers meet on socket files, not loopback TCP ports. A Python
    # transformWithState task's state server accepts the first connection to its port only;
    # any other process that reaches the port first (one that tries a port it believes free)
    # leaves the worker, and the query, waiting for ever. tests/test_state_server_strays.py
    # shows it.
    DEFAULT_CONF["spark.python.unix.domain.socket.enabled"] = "true"


#: Where the JVM and the Python workers it starts write their console output.
LOG_FILE = BUILD_DIR / "logs" / "spark.log"

#: Seconds the first start of Spark in a process takes: 31-33 s measured on a busy 2-core
#: machine (the session, then its first job), 23-25 s on a quieter one.
FIRST_START_SECONDS = 30


@contextmanager
def _output_to(path: Path):
    """Point this process's stdout and stderr at ``path`` while the JVM starts.

    The JVM inherits them, and so do the Python workers it starts later, whose start-up
    chatter would otherwise land in every notebook cell that runs a stateful query.
    Errors still reach the notebook: Spark raises them as Python exceptions. What they write
    passes through :mod:`streamlab.spark_log`, which leaves out the tracebacks of workers
    whose connection the JVM had already closed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    log = spark_log.writer(path)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


class JavaNotFoundError(RuntimeError):
    """Spark needs a Java runtime (17 or newer) and none was found."""


_INSTALL_JAVA = (
    "Install Java 17 and try again: on Debian or Ubuntu `sudo apt-get install "
    "openjdk-17-jdk-headless`, on macOS `brew install openjdk@17`, on Windows the "
    "Temurin 17 installer from adoptium.net. If Java is installed elsewhere, set JAVA_HOME."
)


def java_major_version(java: str) -> int | None:
    """Return the major version that ``java -version`` reports, or None if it will not say."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    # Java 8 and older call themselves 1.x.
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """Raise :class:`JavaNotFoundError` with install advice unless Java 17+ is available."""
    java = java_executable()
    if java is None:
        raise JavaNotFoundError(f"Spark needs Java, and no `java` was found. {_INSTALL_JAVA}")
    major = java_major_version(java)
    if major is None:
        raise JavaNotFoundError(f"`{java} -version` did not answer. {_INSTALL_JAVA}")
    if major < 17:
        raise JavaNotFoundError(
            f"Spark 4 needs Java 17 or newer, and `{java}` is Java {major}. {_INSTALL_JAVA}"
        )


#: Whether a streaming query runs micro-batches with no new data (for timers, watermarks).
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


@contextmanager
def session_conf(spark, conf: dict[str, str]):
    """Set ``conf`` on the session for the block, then put every key back as it was.

    ``spark.conf.unset`` would not do: it falls back to Spark's default, not to the value the
    session started with (200 shuffle partitions instead of the course's 2).
    """
    with settings_kept(spark, conf):
        for key, value in conf.items():
            spark.conf.set(key, value)
        yield


@contextmanager
def settings_kept(spark, keys):
    """Put each of ``keys`` back after the block as it was before it, whatever the block set or
    unset (a key that was not set is unset again); the block gets the values it found."""
    before = {key: spark.conf.get(key, None) for key in keys}
    try:
        yield before
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


#: The session the graded checks and the course's tests share (streamlab.spark_fixtures), and
#: the one a warm grading child starts ahead of time (streamlab.grading.warm).
CHECKS_SESSION = {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "2"}}


def spark_session(
    master: str | None = None,
    *,
    app_name: str = "streamlab",
    conf: dict[str, str] | None = None,
    remote: str | None = None,
    ui: bool = False,
) -> SparkSession:
    """Return the process's shared SparkSession, starting it on the first call.

    ``master`` defaults to the ``STREAMLAB_SPARK_MASTER`` environment variable, else
    ``local[*]``. ``conf`` adds to or overrides :data:`DEFAULT_CONF`; it only matters on the
    call that starts the session. Python workers run the interpreter that runs this code,
    so they see the same packages; on a cluster master a ``PYSPARK_PYTHON`` already set wins,
    for workers whose Python lives elsewhere.

    ``remote`` (default: the ``STREAMLAB_SPARK_REMOTE`` environment variable, unless
    ``master`` is given) is a Spark Connect server, ``sc://HOST:PORT`` (``python -m
    streamlab.connect`` starts one): the session is a Connect client, and this process starts
    no JVM.

    ``ui=True`` starts Spark's web UI (off otherwise) on a free port of 127.0.0.1 and prints
    its address; like ``conf``, it only matters on the call that starts the session.

    >>> spark = spark_session()                                  # doctest: +SKIP
    >>> spark.conf.get("spark.sql.streaming.stateStore.providerClass")  # doctest: +SKIP
    'org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider'
    """
    from pyspark.sql import SparkSession

    # An explicit master (the checks ask for local[2]) outranks the environment's server.
    remote = remote or (None if master else os.environ.get(REMOTE_ENV))
    spark = _connect_session(remote, conf) if remote else _active_classic_session()
    if spark is not None:
        if ui:
            _say_ui(spark)
        return spark
    check_java()
    master = master or os.environ.get(MASTER_ENV, "local[*]")
    os.environ["PYSPARK_PYTHON"] = _worker_python(master)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**DEFAULT_CONF, **_driver_conf(master), **(_ui_conf(master) if ui else {})}
    # Spark's classes mapped from the course's archive rather than read from the jars.
    archived = jvm_archive.java_options()
    if archived:
        settings["spark.driver.extraJavaOptions"] += f" {archived}"
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    started = _say_starting()
    with _output_to(LOG_FILE):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _say_started(started)
    from streamlab.eventhubs import register

    register(spark)
    if ui:
        _say_ui(spark)
    return spark


def _active_classic_session() -> SparkSession | None:
    """This process's classic session, if it has started one."""
    from pyspark.sql import SparkSession

    if not _CONNECTED:
        # A Spark Connect session in the process that started this one (a notebook's kernel
        # over Connect, starting the grader or the monitor) leaves PySpark's own switch to
        # Connect on in the environment, which would make this classic session a Connect one.
        os.environ.pop(CONNECT_MODE_ENV, None)
    return SparkSession.getActiveSession()


def _in_a_kernel() -> bool:
    """True in a Jupyter kernel, where a learner waits for a cell; a check or a test prints
    nothing of its own."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _say_starting() -> float | None:
    """In a notebook, say that Spark starts and how long that takes; the time it started."""
    if not _in_a_kernel():
        return None
    print(
        f"Starting Spark, the first time in this kernel: about {FIRST_START_SECONDS} s ...",
        flush=True,
    )
    return time.monotonic()


def _say_started(started: float | None) -> None:
    if started is None:
        return
    print(
        f"Spark started in {time.monotonic() - started:.0f} s. Each open lab runs its own Spark "
        "(a Java process of half a gigabyte or more): when you move on to another lab, shut "
        "down this one's kernel (Kernel > Shut Down Kernel).",
        flush=True,
    )


def _ui_conf(master: str) -> dict[str, str]:
    """The web UI on a free port; for a local master, listening on 127.0.0.1 only.

    The UI listens on every interface unless ``SPARK_LOCAL_IP`` names one (the JVM reads it
    when it starts; for a local master, whose driver is the whole of Spark, loopback is enough).
    """
    import socket

    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return {"spark.ui.enabled": "true", "spark.ui.port": str(port)}


def _say_ui(spark: SparkSession) -> None:
    from streamlab.spark_ui import address

    url = address(spark)
    if url is None and type(spark).__module__.startswith("pyspark.sql.connect."):
        print("This Spark Connect session's server runs without a web UI.")
    elif url is None:
        print(
            "This session started without its web UI: restart the kernel and call "
            "streamlab.spark_session(ui=True) before anything else starts Spark."
        )
    else:
        print(f"Spark UI: {url}  (Structured Streaming tab: {url}/StreamingQuery/)")


def _worker_python(master: str) -> str:
    """The Python the executors start: this one, unless a cluster's was set on purpose."""
    if master.startswith("local"):
        return sys.executable
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


def _driver_conf(master: str) -> dict[str, str]:
    """A driver for a master on loopback listens on loopback: executors connect back there."""
    if re.match(r"spark://(127\.0\.0\.1|localhost)[:/]", master):
        return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    return {}


class SparkConnectUnavailable(RuntimeError):
    """No Spark Connect server answers at the address given."""


def _check_server(remote: str) -> None:
    # The client would retry for minutes before saying anything; one probe says it at once.
    import socket
    from urllib.parse import urlparse

    address = urlparse(remote.split(";", 1)[0])
    host, port = address.hostname or "localhost", address.port or 15002
    try:
        with socket.create_connection((host, port), timeout=5):
            return
    except OSError:
        pass
    raise SparkConnectUnavailable(
        f"No Spark Connect server answers at {remote}: start one with `nox -s connect` "
        f"(it prints its address), or correct {REMOTE_ENV}."
    )


def _connect_session(remote: str, conf: dict[str, str] | None) -> SparkSession:
    """A Spark Connect session on ``remote``, the course's SQL settings applied, ``eventhubs`` registered.

    The server holds the static settings (``python -m streamlab.connect`` starts it with
    :data:`DEFAULT_CONF`); a client can change only the SQL ones, per session.
    """
    from pyspark.sql import SparkSession

    if not remote.startswith("sc://"):
        raise SparkConnectUnavailable(
            f"A Spark Connect address starts with sc://, as in sc://127.0.0.1:15002; got {remote!r}."
        )
    global _CONNECTED
    _check_server(remote)
    spark = SparkSession.builder.remote(remote).getOrCreate()
    _CONNECTED = True
    from streamlab.spark_private import read_progress_as_classic

    read_progress_as_classic()
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        if key.startswith("spark.sql."):
            spark.conf.set(key, value)
    from streamlab.eventhubs import register

    register(spark)
    return spark


def stop_spark_session() -> None:
    """Stop every active streaming query and the shared session, if one is running."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        return
    for query in spark.streams.active:
        query.stop()
    spark.stop()
