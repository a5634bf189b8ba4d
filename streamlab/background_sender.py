"""What the course's simulated producers share: one background thread, one SDK client.

:class:`Fleet` (heartbeats) and :class:`SensorProducer` (sensor readings) both send from a
background thread through one ``EventHubProducerClient``, one batch per partition key, so
that a key's events stay in order on one partition and a notebook's kernel stays free.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class BackgroundSender:
    """A background sending thread and a lazily opened producer client; ``stop()`` ends both.

    Subclasses start ``self._thread`` on their ``_run`` and call :meth:`_send_keyed` from it,
    and :meth:`_report` when a send fails (the hub may be down; they keep going).
    """

    def __init__(self, connection_string: str, eventhub: str) -> None:
        self.connection_string = connection_string
        self.eventhub = eventhub
        #: The last errors of the sending thread, newest last (at most 20).
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer = None

    def _send_keyed(self, key: str, bodies: Iterable[bytes | str]) -> None:
        """Send ``bodies`` as one batch with partition key ``key``."""
        from azure.eventhub import EventData, EventHubProducerClient

        if self._producer is None:
            from streamlab.eventhubs.options import client_kwargs

            self._producer = EventHubProducerClient.from_connection_string(
                **client_kwargs(self.connection_string, self.eventhub)
            )
        batch = self._producer.create_batch(partition_key=key)
        for body in bodies:
            batch.add(EventData(body))
        self._producer.send_batch(batch)

    def _report(self, error: Exception) -> None:
        self.errors.append(f"{type(error).__name__}: {error}")
        del self.errors[:-20]

    def stop(self) -> None:
        """Stop sending and close the connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        if self._producer is not None:
            self._producer.close()
            self._producer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
