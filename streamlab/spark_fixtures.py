"""pytest fixtures for a Spark run: one shared session, every query stopped after each test.

Used by the graded checks (through :mod:`streamlab.grading.plugin`) and by the package's
own tests (``tests/conftest.py``), so both run Spark the same way: ``local[2]``, two
shuffle partitions, the RocksDB state store, the web UI off.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_spark():
    """The run's one SparkSession, stopped when the run ends."""
    from streamlab.session import spark_session, stop_spark_session

    session = spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    yield session
    stop_spark_session()


@pytest.fixture
def spark(shared_spark):
    """The shared session; queries and jobs a test leaves behind are stopped afterwards."""
    yield shared_spark
    for query in shared_spark.streams.active:
        query.stop()
    shared_spark.sparkContext.cancelAllJobs()


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> str:
    """A fresh, empty checkpoint folder for one test."""
    return str(tmp_path / "checkpoint")
