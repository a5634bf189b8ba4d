"""A local Azure Event Hubs emulator for the course (AMQP 1.0, durable, loopback only).

The unmodified ``azure-eventhub`` SDK talks to it through a connection string with
``UseDevelopmentEmulator=true``. Run it with ``streamlab-hub`` / ``python -m
streamlab.hub``, or from Python with :class:`Hub` (background thread) or
:func:`start_subprocess`.
"""

from .api import HUB_ENV, Hub, HubProcess, course_connection_string, start_subprocess
from .broker import partition_for_key
from .server import DEFAULT_EVENTHUBS, connection_string
from .storage import Policy

__all__ = [
    "HUB_ENV",
    "Hub",
    "HubProcess",
    "course_connection_string",
    "start_subprocess",
    "Policy",
    "DEFAULT_EVENTHUBS",
    "connection_string",
    "partition_for_key",
]
