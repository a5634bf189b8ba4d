"""pytest fixtures for a Spark run: one shared session, every query stopped after each test.

Used by the graded checks (through :mod:`streamlab.grading.plugin`) and by the package's
own tests (``tests/conftest.py``), so both run Spark the same way: ``local[2]``, two
shuffle partitions, the RocksDB state store, the web UI off. The session starts with the
first test that asks for it, not before, so a run whose checks stop early never pays for it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# A notebook's kernel over Spark Connect starts the grader with PySpark's switch to Connect
# (SPARK_CONNECT_MODE_ENABLED) in its environment. The checks run on the course's own local
# session, and so must the columns and DataFrames they build before it starts.
os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@pytest.fixture
def spark():
    """The run's one SparkSession; queries and jobs a test leaves behind are stopped afterwards."""
    from streamlab.session import CHECKS_SESSION, spark_session

    session = spark_session(**CHECKS_SESSION)
    yield session
    from streamlab.deadlines import stop

    for query in session.streams.active:
        stop(query, what=f"the query {query.name or query.id} the test left running to stop")
    session.sparkContext.cancelAllJobs()


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> str:
    """A fresh, empty checkpoint folder for one test."""
    return str(tmp_path / "checkpoint")


def pytest_unconfigure(config: pytest.Config) -> None:
    if "pyspark" in sys.modules:
        from streamlab.session import stop_spark_session

        stop_spark_session()
