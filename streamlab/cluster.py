"""``python -m streamlab.cluster``: a Spark standalone cluster on this machine, from PySpark.

PySpark ships everything a standalone cluster needs (``bin/spark-class`` and the master and
worker classes), so the course starts one on loopback without a Spark download: a master and
``--workers`` workers, each on free ports, logs under ``build/cluster/``. Point a notebook, the
checks or the monitor at it with the line it prints::

    export STREAMLAB_SPARK_MASTER=spark://127.0.0.1:PORT

Ctrl-C or SIGTERM stops every process it started: each daemon runs in its own process group,
which the executors and their Python workers share, so no JVM outlives the command. From
Python, :class:`LocalCluster` is a context manager::

    with LocalCluster(workers=1) as cluster:
        os.environ["STREAMLAB_SPARK_MASTER"] = cluster.master_url
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import urllib.request
from pathlib import Path

from streamlab import processes
from streamlab.jvm_env import spark_home as spark_home
from streamlab.paths import BUILD_DIR
from streamlab.session import jit_options

#: Where the daemons' logs and the workers' scratch folders go.
LOG_DIR = BUILD_DIR / "cluster"
LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def daemon_env(host: str = LOOPBACK) -> dict[str, str]:
    """The environment a Spark daemon on ``host`` starts with.

    ``SPARK_LOCAL_IP`` keeps every listener on loopback; ``PYSPARK_PYTHON`` makes the Python
    workers of the executors run this interpreter, which imports ``streamlab``.
    """
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": host,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # The master and the workers compile as the course's drivers do.
        "SPARK_DAEMON_JAVA_OPTS": " ".join(
            part for part in (os.environ.get("SPARK_DAEMON_JAVA_OPTS", ""), jit_options()) if part
        ),
    }


def start_daemon(command: list[str], log: Path, env: dict[str, str]) -> processes.Child:
    """Start a Spark daemon in a process group of its own, its output appended to ``log``."""
    return processes.Child(command, log=log, env=env, group=True)


def stop_daemon(process: processes.Child, timeout: float = 20.0) -> None:
    """Stop a daemon and everything in its process group: SIGTERM, then SIGKILL."""
    processes.terminate(process, group=True, grace=timeout)


class ClusterError(RuntimeError):
    """The standalone cluster did not start."""


class LocalCluster:
    """A standalone master and ``workers`` workers on loopback, started from PySpark.

    ``cores`` is what each worker offers (default: this machine's cores shared out),
    ``memory`` what each worker gives its executors.
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        cores: int | None = None,
        memory: str = "2g",
        log_dir: Path | str | None = None,
        host: str = LOOPBACK,
    ) -> None:
        if workers < 1:
            raise ValueError("a cluster needs at least one worker")
        self.workers = workers
        self.cores = cores or max(1, (os.cpu_count() or 2) // workers)
        self.memory = memory
        self.log_dir = Path(log_dir) if log_dir else LOG_DIR
        self.host = host
        self.port = 0
        self.web_ui_port = 0
        self._master: processes.Child | None = None
        self._workers: list[processes.Child] = []

    @property
    def master_url(self) -> str:
        """``spark://HOST:PORT``: the value for ``STREAMLAB_SPARK_MASTER``."""
        return f"spark://{self.host}:{self.port}"

    @property
    def web_ui(self) -> str:
        """The master's web UI: workers, applications, executors."""
        return f"http://{self.host}:{self.web_ui_port}"

    def status(self) -> dict:
        """The master's own report (its web UI's ``/json/``): workers, cores, applications."""
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=5) as answer:
            return json.load(answer)

    def start(self, timeout: float = 180.0) -> LocalCluster:
        """Start the master, then the workers; return once every worker has registered."""
        home, env = spark_home(), daemon_env(self.host)
        spark_class = str(home / "bin" / "spark-class")
        self.port, self.web_ui_port = free_port(self.host), free_port(self.host)
        master_log = self.log_dir / "master.log"
        self._master = start_daemon(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                self.host,
                "--port",
                str(self.port),
                "--webui-port",
                str(self.web_ui_port),
            ],
            master_log,
            env,
        )
        for n in range(1, self.workers + 1):
            work_dir = self.log_dir / f"worker-{n}"
            work_dir.mkdir(parents=True, exist_ok=True)
            self._workers.append(
                start_daemon(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        self.master_url,
                        "--host",
                        self.host,
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--webui-port",
                        str(free_port(self.host)),
                        "--work-dir",
                        str(work_dir),
                    ],
                    self.log_dir / f"worker-{n}.log",
                    env,
                )
            )
        try:
            self._wait_for_workers(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_workers(self, timeout: float) -> None:
        def registered() -> bool:
            try:
                return self.status().get("aliveworkers", 0) >= self.workers
            except (OSError, ValueError):  # its web UI is not up, or answered before it was
                return False

        def exited(process: processes.Child) -> ClusterError:
            log = process.log
            return ClusterError(
                f"{log.stem} exited with code {process.returncode}; "
                f"the end of {log}:\n{process.output()}"
            )

        processes.wait_until(
            registered,
            timeout=timeout,
            watch=[self._master, *self._workers],
            exited=exited,
            expired=lambda: ClusterError(
                f"the workers did not register with {self.master_url} within "
                f"{timeout:.0f} s; see the logs in {self.log_dir}"
            ),
        )

    def running(self) -> bool:
        """Whether the master is still up."""
        return self._master is not None and self._master.poll() is None

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master."""
        for process in self._workers:
            stop_daemon(process)
        self._workers = []
        if self._master is not None:
            stop_daemon(self._master)
            self._master = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamlab.cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workers", type=int, default=2, help="how many workers (default 2)")
    parser.add_argument(
        "--cores",
        type=int,
        default=None,
        help="cores each worker offers (default: this machine's, shared out)",
    )
    parser.add_argument("--memory", default="2g", help="memory each worker offers (default 2g)")
    parser.add_argument("--log-dir", default=str(LOG_DIR), help="where the logs go")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")

    cluster = LocalCluster(args.workers, cores=args.cores, memory=args.memory, log_dir=args.log_dir)
    return processes.serve_until_stopped(
        cluster,
        lambda: [
            f"Spark master  {cluster.master_url}",
            f"workers       {cluster.workers}, each offering {cluster.cores} core(s) and "
            f"{cluster.memory}",
            f"web UI        {cluster.web_ui}",
            f"logs          {cluster.log_dir}",
            "Run labs, checks and the monitor on it from another terminal after:",
            f"  export STREAMLAB_SPARK_MASTER={cluster.master_url}",
            "Ctrl-C stops the cluster.",
        ],
        start_error=ClusterError,
        did_not_start="the cluster did not start",
        stopped="cluster stopped",
        died=lambda: "the master exited; stopping the workers",
    )


if __name__ == "__main__":
    sys.exit(main())
