"""Support package for the stateful stream processing course.

One module per part of the course:

- :mod:`streamlab.session`: the shared SparkSession (RocksDB state store, quiet logs).
- :mod:`streamlab.registry`: the list of labs and exercises (``course.toml``).
- :mod:`streamlab.authoring`: generates the learner's notebooks in ``labs/`` from ``solutions/``.
- :mod:`streamlab.grading`: loads exercise cells from a notebook and grades them.
- :mod:`streamlab.hub`: a local Azure Event Hubs emulator.

In a notebook, ``import streamlab`` also registers the ``%check`` magic
(:mod:`streamlab.grading.magic`).
"""

from streamlab.paths import REPO_ROOT, work_dir
from streamlab.session import JavaNotFoundError, spark_session, stop_spark_session

__all__ = ["REPO_ROOT", "JavaNotFoundError", "spark_session", "stop_spark_session", "work_dir"]


def load_ipython_extension(ipython) -> None:
    """``%load_ext streamlab``: record cell runs, and ``%check`` (imported when first used)."""
    from streamlab.grading.cell_history import install

    install(ipython)
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
