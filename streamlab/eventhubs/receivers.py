"""The source's receivers: the driver's buffer and the receivers a task keeps open.

* :mod:`streamlab.eventhubs.buffer`: :class:`Receivers`, one long-lived receiver per partition
  whose events wait in a buffer between micro-batches (``receiveOn=driver``), and the
  measurement hooks (the receive log, the socket timeout).
* :mod:`streamlab.eventhubs.kept`: with ``receiveOn=executors``, the receivers a task's Python
  worker keeps open for the partition's next range (:func:`read_range`).
"""

from __future__ import annotations

from streamlab.eventhubs.buffer import (
    RECEIVE_LOG,
    SOCKET_TIMEOUT_ENV,
    SOCKET_TIMEOUT_S,
    Receivers,
    ReceiveTimeout,
    Row,
    event_row,
)
from streamlab.eventhubs.kept import (
    KEEP_OPEN_S,
    KEPT,
    KeptReceivers,
    close_idle_receivers,
    close_kept_receivers,
    kept_partitions,
    read_range,
)

__all__ = [
    "KEEP_OPEN_S",
    "KEPT",
    "RECEIVE_LOG",
    "SOCKET_TIMEOUT_ENV",
    "SOCKET_TIMEOUT_S",
    "KeptReceivers",
    "ReceiveTimeout",
    "Receivers",
    "Row",
    "close_idle_receivers",
    "close_kept_receivers",
    "event_row",
    "kept_partitions",
    "read_range",
]
