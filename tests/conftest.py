"""Fixtures for the support package's own tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """The test run's one SparkSession: local[2], 2 shuffle partitions, RocksDB."""
    from streamlab.session import spark_session, stop_spark_session

    session = spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    yield session
    stop_spark_session()


@pytest.fixture
def stop_queries(spark):
    """Stops every query a test started, even when the test fails."""
    yield spark
    for query in spark.streams.active:
        query.stop()
