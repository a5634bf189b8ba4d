"""Azure Event Hubs for Spark Structured Streaming, as a Python data source (no JARs).

Registered by :func:`streamlab.spark_session`::

    df = (spark.readStream.format("eventhubs")
          .option("connectionString", connection_string)
          .option("eventHubName", "heartbeats")
          .option("startingPosition", "earliest")      # or latest, or {"0": 42, ...}
          .option("maxEventsPerTrigger", 10_000)        # optional
          .option("systemProperties", "true")           # optional: a systemProperties column
          .option("receiveOn", "executors")             # optional: tasks receive, not the driver
          .option("failOnDataLoss", "false")            # optional: read on past events the
          .load())                                      # hub's retention removed, and say so

    (transitions.selectExpr("to_json(struct(*)) AS body", "machine_name AS partitionKey")
     .writeStream.format("eventhubs")
     .option("connectionString", connection_string).option("eventHubName", "status")
     .option("checkpointLocation", ...).start())

The same code runs against Azure Event Hubs with the namespace's connection string.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from streamlab.eventhubs.options import (
    SCHEMA,
    SYSTEM_SCHEMA,
    EventHubsDataLoss,
    EventHubsOptionError,
    EventHubsUnavailable,
    parse_options,
)
from streamlab.eventhubs.sink import EventHubsStreamWriter
from streamlab.eventhubs.source import EventHubsStreamReader


class EventHubsDataSource(DataSource):
    """``format("eventhubs")``: the options are described in this package's docstring."""

    @classmethod
    def name(cls) -> str:
        return "eventhubs"

    def schema(self):
        return SYSTEM_SCHEMA if parse_options(self.options).system_properties else SCHEMA

    def streamReader(self, schema) -> EventHubsStreamReader:
        return EventHubsStreamReader(parse_options(self.options))

    def streamWriter(self, schema, overwrite: bool) -> EventHubsStreamWriter:
        return EventHubsStreamWriter(parse_options(self.options), schema)


def register(spark) -> None:
    """Make ``format("eventhubs")`` available in ``spark``."""
    spark.dataSource.register(EventHubsDataSource)


__all__ = [
    "SCHEMA",
    "SYSTEM_SCHEMA",
    "EventHubsDataLoss",
    "EventHubsDataSource",
    "EventHubsOptionError",
    "EventHubsUnavailable",
    "register",
]
