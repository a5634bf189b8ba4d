"""Events from an event hub, received on a thread of their own, for the widgets that show them.

``receive_batch``, not ``receive``: the SDK's one-event API waits on idle partitions. An error
inside ``receive_batch`` is handed to ``on_error`` rather than ending the thread silently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def consumer(connection_string: str, eventhub: str, consumer_group: str = "$Default") -> Any:
    """An ``EventHubConsumerClient`` on ``eventhub``, unless the string names one already."""
    from azure.eventhub import EventHubConsumerClient

    from streamlab.eventhubs.options import client_kwargs

    return EventHubConsumerClient.from_connection_string(
        consumer_group=consumer_group, **client_kwargs(connection_string, eventhub)
    )


def receive_in_background(
    client: Any,
    on_batch: Callable[[Any, list[Any]], None],
    on_error: Callable[[Any, Exception], None],
    starting_position: Any,
    name: str,
) -> threading.Thread:
    """Start a daemon thread that receives batches of up to 100 events until the client closes."""

    def receive() -> None:
        try:
            client.receive_batch(
                on_event_batch=on_batch,
                on_error=on_error,
                starting_position=starting_position,
                max_batch_size=100,
            )
        except Exception as error:  # the thread would end silently otherwise
            on_error(None, error)

    thread = threading.Thread(target=receive, name=name, daemon=True)
    thread.start()
    return thread
