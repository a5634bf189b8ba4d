"""Support package for the stateful stream processing course.

One module or subpackage per part of the course; the README's "Where things live" maps each
to the labs that use it.

- :mod:`streamlab.session`: the shared SparkSession (RocksDB state store, quiet logs).
- :mod:`streamlab.hub`: a local Azure Event Hubs emulator.
- :mod:`streamlab.eventhubs`: the Spark source and sink ``format("eventhubs")``.
- :mod:`streamlab.fleet`, :mod:`streamlab.sensors`, :mod:`streamlab.background_sender`:
  simulated producers (heartbeats, sensor readings) and what they share.
- :mod:`streamlab.widgets`: the producer panel and the status board.
- :mod:`streamlab.monitor`: the reference monitor; :mod:`streamlab.demo` runs it in a terminal.
- :mod:`streamlab.delta`: Delta tables written from ``foreachBatch``.
- :mod:`streamlab.cluster`, :mod:`streamlab.connect`: a standalone cluster and a Spark Connect
  server from the installed PySpark.
- :mod:`streamlab.processes`: starting, waiting on and stopping processes; Ctrl-C and SIGTERM.
- :mod:`streamlab.deadlines`: waits on a streaming query that give up in time and say why.
- :mod:`streamlab.grading`: grades exercise cells from a notebook (``nox -s check``, ``%check``).
- :mod:`streamlab.notebook_api`: the names notebooks use, the package's public API.
- :mod:`streamlab.solutions`: a lab's solution, or the learner's own code, for later labs.
- :mod:`streamlab.spark_private`: the private members of PySpark the course relies on, behind a
  check of the release.
- :mod:`streamlab.spark_errors`: the Spark error classes the course teaches, and what each
  means here (added to the grader's messages and under a notebook cell that raises one).
- :mod:`streamlab.benchmarks`: benchmark results and their charts.
- :mod:`streamlab.paths`, :mod:`streamlab.spark_fixtures`: the course's folders, the checks'
  Spark fixtures.
- :mod:`streamlab.tooling`: the course's own tooling, never imported by a notebook: the lab
  registry (``course.toml``), the notebook conventions, the generation of ``labs/``, hints and
  their leak check, mutation testing of the checks, the website's hooks and ``nox -s lab``.

In a notebook, ``import streamlab`` also registers the ``%check`` magic
(:mod:`streamlab.grading.magic`).
"""

from streamlab.paths import REPO_ROOT, work_dir
from streamlab.session import JavaNotFoundError, spark_session, stop_spark_session

__all__ = ["REPO_ROOT", "JavaNotFoundError", "spark_session", "stop_spark_session", "work_dir"]


def load_ipython_extension(ipython) -> None:
    """``%load_ext streamlab``: record cell runs, explain the Spark errors the course teaches
    under a cell that raises one, and ``%check`` (imported when first used)."""
    from streamlab import exercise_stops, spark_errors
    from streamlab.grading.cell_history import install

    install(ipython)
    spark_errors.install(ipython)
    exercise_stops.install(ipython)
    ipython.magics_manager.register_lazy("check", "streamlab.grading.magic:CheckMagics", "line")


def _register_in_ipython() -> None:
    # In a notebook, ``import streamlab`` is enough for ``%check``. IPython is looked up,
    # never imported: outside a kernel this costs nothing.
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        load_ipython_extension(shell)


_register_in_ipython()
