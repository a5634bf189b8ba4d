"""``python -m streamlab.connect``: a Spark Connect server with the course's configuration.

PySpark ships the Spark Connect server (``pyspark/jars/spark-connect_*.jar``), so the course
starts one on loopback without a Spark download: the RocksDB state store with changelog
checkpointing and every other setting of :func:`streamlab.spark_session` (but its web UI, on,
where a client's queries show), its Python workers
on this interpreter (which imports ``streamlab``), logs under ``build/connect/``. A client then
needs no Java::

    spark = streamlab.spark_session(remote="sc://127.0.0.1:15002")
    # or: export STREAMLAB_SPARK_REMOTE=sc://127.0.0.1:15002

``--master`` runs the server's queries on a cluster (``python -m streamlab.cluster`` prints
one). Ctrl-C or SIGTERM stops the server and everything it started. From Python,
:class:`ConnectServer` is a context manager.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from streamlab import processes
from streamlab.cluster import LOOPBACK, daemon_env, free_port, spark_home, start_daemon, stop_daemon
from streamlab.paths import BUILD_DIR
from streamlab.session import DEFAULT_CONF

LOG_DIR = BUILD_DIR / "connect"
#: Spark Connect's own default port.
DEFAULT_PORT = 15002
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServerError(RuntimeError):
    """The Spark Connect server did not start."""


class ConnectServer:
    """A Spark Connect server on loopback, run by ``spark-submit`` from PySpark.

    ``port`` 0 picks a free one; ``master`` is where its queries run (default ``local[*]``).
    """

    def __init__(
        self,
        port: int = 0,
        *,
        master: str = "local[*]",
        conf: dict[str, str] | None = None,
        log_dir: Path | str | None = None,
        host: str = LOOPBACK,
    ) -> None:
        self.port = port
        self.master = master
        self.conf = {**DEFAULT_CONF, **(conf or {})}
        self.log_dir = Path(log_dir) if log_dir else LOG_DIR
        self.host = host
        #: The port of the server's web UI (chosen at start): a Connect client has no UI of its
        #: own, and its queries are the server's.
        self.ui_port = 0
        self._process: processes.Child | None = None

    @property
    def url(self) -> str:
        """``sc://HOST:PORT``: the value for ``spark_session(remote=...)``."""
        return f"sc://{self.host}:{self.port}"

    @property
    def ui_url(self) -> str:
        """``http://HOST:PORT`` of the server's web UI, where its queries show."""
        return f"http://{self.host}:{self.ui_port}"

    @property
    def log(self) -> Path:
        return self.log_dir / "connect-server.log"

    def command(self) -> list[str]:
        """The ``spark-submit`` line that runs the server in the foreground."""
        conf = {
            **self.conf,
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            # streamlab.spark_ui finds it from a client through these two settings.
            "spark.ui.enabled": "true",
            "spark.ui.port": str(self.ui_port),
        }
        args = [
            str(spark_home() / "bin" / "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--name",
            "Spark Connect server",
            "--master",
            self.master,
        ]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args

    def start(self, timeout: float = 180.0) -> ConnectServer:
        """Start the server; return once it accepts connections."""
        if not self.port:
            self.port = free_port(self.host)
        self.ui_port = self.ui_port or free_port(self.host)
        self._process = start_daemon(self.command(), self.log, daemon_env(self.host))
        try:
            processes.wait_until(
                self._listening,
                timeout=timeout,
                watch=[self._process],
                exited=lambda process: ConnectServerError(
                    f"the server exited with code {process.returncode}; the end of "
                    f"{self.log}:\n{process.output()}"
                ),
                expired=lambda: ConnectServerError(
                    f"the server did not listen on {self.url} within "
                    f"{timeout:.0f} s; see {self.log}"
                ),
            )
        except ConnectServerError:
            self.stop()
            raise
        return self

    def _listening(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Stop the server, its JVM and the Python workers it started."""
        if self._process is not None:
            stop_daemon(self._process)
            self._process = None

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamlab.connect",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--master",
        default="local[*]",
        help="where the queries run (default local[*]; or spark://HOST:PORT)",
    )
    parser.add_argument("--log-dir", default=str(LOG_DIR), help="where the log goes")
    args = parser.parse_args(argv)

    server = ConnectServer(args.port, master=args.master, log_dir=args.log_dir)
    return processes.serve_until_stopped(
        server,
        lambda: [
            f"Spark Connect  {server.url}  (queries run on {server.master})",
            f"web UI         {server.ui_url}",
            f"log            {server.log}",
            "Use it from a notebook with streamlab.spark_session(remote=...), or after:",
            f"  export STREAMLAB_SPARK_REMOTE={server.url}",
            "Ctrl-C stops the server.",
        ],
        start_error=ConnectServerError,
        did_not_start="the Spark Connect server did not start",
        stopped="Spark Connect server stopped",
        died=lambda: f"the server exited; see {server.log}",
    )


if __name__ == "__main__":
    sys.exit(main())
