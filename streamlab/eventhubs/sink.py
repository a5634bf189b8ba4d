"""``df.writeStream.format("eventhubs")``: send a ``body`` column, optionally keyed.

Each task sends its rows in batches, grouped by ``partitionKey`` so that one machine's rows
keep their order on one partition. A send that fails raises, which fails the task and so
the micro-batch with one sentence naming the event hub and the endpoint: nothing of the
batch is committed, and Spark sends it again when the query restarts (at-least-once delivery).
"""

from __future__ import annotations

import atexit
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from streamlab.eventhubs.options import EventHubsOptionError, EventHubsOptions, unavailable

# Producers are reused by every task a Python worker runs: one connection per worker.
_producers: dict[tuple[str, str], Any] = {}
_producers_lock = threading.Lock()


def _producer(options: EventHubsOptions):
    from azure.eventhub import EventHubProducerClient

    key = (options.connection_string, options.eventhub)
    with _producers_lock:
        if key not in _producers:
            _producers[key] = EventHubProducerClient.from_connection_string(**options.client_kwargs)
        return _producers[key]


@atexit.register
def _close_producers() -> None:
    for producer in _producers.values():
        producer.close()
    _producers.clear()


def check_sink_schema(schema: StructType) -> None:
    """A ``body`` column (string or binary) and, if present, a string ``partitionKey``."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "body" not in fields:
        raise EventHubsOptionError(
            "the eventhubs sink sends the column `body`; select one, e.g. "
            'to_json(struct(...)).alias("body")'
        )
    if not isinstance(fields["body"], (StringType, BinaryType)):
        raise EventHubsOptionError(
            f"the column `body` must be a string or binary; it is {fields['body'].simpleString()}"
        )
    if "partitionKey" in fields and not isinstance(fields["partitionKey"], StringType):
        raise EventHubsOptionError("the column `partitionKey` must be a string")


@dataclass
class SentMessage(WriterCommitMessage):
    events: int


class EventHubsStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: EventHubsOptions, schema: StructType) -> None:
        check_sink_schema(schema)
        self.options = options
        self.keyed = "partitionKey" in schema.names

    def write(self, iterator: Iterator[Any]) -> SentMessage:
        from azure.eventhub import EventData

        by_key: dict[str | None, list[EventData]] = defaultdict(list)
        for row in iterator:
            body = row["body"]
            if body is None:
                continue
            key = row["partitionKey"] if self.keyed else None
            by_key[key].append(
                EventData(bytes(body) if isinstance(body, (bytes, bytearray)) else body)
            )
        try:
            return SentMessage(self._send(by_key))
        except Exception as error:  # the SDK raises several types; all mean the same to a learner
            raise unavailable(self.options, "send to", error) from None

    def _send(self, by_key: dict) -> int:
        producer = _producer(self.options)
        sent = 0
        for key, events in by_key.items():
            batch = producer.create_batch(partition_key=key)
            for event in events:
                try:
                    batch.add(event)
                except ValueError:  # the batch is full: send it and start the next
                    producer.send_batch(batch)
                    batch = producer.create_batch(partition_key=key)
                    batch.add(event)
            producer.send_batch(batch)
            sent += len(events)
        return sent

    def commit(self, messages: list, batchId: int) -> None:
        pass  # every event was acknowledged by the hub before its task ended

    def abort(self, messages: list, batchId: int) -> None:
        pass  # events already sent stay sent: delivery is at least once
