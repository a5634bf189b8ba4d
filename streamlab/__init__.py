"""Support package for the stateful stream processing course.

One module per part of the course:

- :mod:`streamlab.session`: the shared SparkSession (RocksDB state store, quiet logs).
- :mod:`streamlab.registry`: the list of labs and exercises (``course.toml``).
- :mod:`streamlab.authoring`: generates the learner's notebooks in ``labs/`` from ``solutions/``.
- :mod:`streamlab.grading`: loads exercise cells from a notebook and grades them.
- :mod:`streamlab.hub`: a local Azure Event Hubs emulator.
"""

from streamlab.paths import REPO_ROOT, work_dir
from streamlab.session import JavaNotFoundError, spark_session, stop_spark_session

__all__ = ["REPO_ROOT", "JavaNotFoundError", "spark_session", "stop_spark_session", "work_dir"]
