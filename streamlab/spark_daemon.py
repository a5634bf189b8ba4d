"""PySpark's daemon for the course's Python workers, silent when the JVM has hung up first.

Spark forks every Python worker from one daemon (``pyspark.daemon``). When the JVM closes a
worker's connection before the worker has flushed its last bytes (a task whose result is no
longer wanted, a query or a session stopping), the worker's flush fails with
``BrokenPipeError``, and the daemon prints its traceback to the JVM's console, which is the
course's ``build/logs/spark.log``: a traceback after every warm-up and shutdown that says
nothing is wrong. This module is that daemon (``spark.python.daemon.module``), with the
worker ending exactly as Spark's does on a failed flush (exit status 1), minus the traceback.
Any other error of a worker keeps its traceback.
"""

from __future__ import annotations

import os

from pyspark import daemon

_spark_worker = daemon.worker


def worker(sock, authenticated: bool) -> int:
    """Spark's worker, ended quietly when the JVM's side of its connection is gone."""
    try:
        return _spark_worker(sock, authenticated)
    except (BrokenPipeError, ConnectionResetError):
        # Runs only in a forked worker: ending it is what Spark's daemon does after printing.
        os._exit(1)


daemon.worker = worker  # the daemon's manager looks the function up at each fork

if __name__ == "__main__":
    daemon.manager()
