"""A check's query run once to the end of what its source holds.

A check's query reads the files it was given and stops: ``trigger(availableNow=True)``. With
processing-time timers Spark runs a batch every trigger even without data, so such a query,
no-data batches on, would never end; :func:`start_available` starts it with them off.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from streamlab.session import NO_DATA_BATCHES, session_conf


def start_available(spark: SparkSession, writer: DataStreamWriter) -> StreamingQuery:
    """``writer``'s query, started with ``trigger(availableNow=True)`` and no no-data batches:
    it reads what its source holds now and stops. The setting is read when the query starts,
    and the session has its own back afterwards."""
    with session_conf(spark, {NO_DATA_BATCHES: "false"}):
        return writer.trigger(availableNow=True).start()
