"""Notebook controls for the heartbeat story (ipywidgets 8).

- :class:`ProducerPanel`: add, pause, resume and kill simulated machines, set their rate,
  inject bad and late events; counts update live.
- :class:`StatusBoard`: one coloured badge per machine (grey unknown, blue Initializing,
  green Healthy, red Unhealthy), a log of transitions and how late the board saw them; fed
  from a memory-sink table or from the ``status`` event hub, in a background thread.
- :class:`BacklogMeter`: events behind per partition of a query's ``eventhubs`` source.
- :class:`HubExplorer`: each event hub's partitions, sequence numbers, newest events and
  readers, read again on its Refresh button.
- :class:`AlertFeed`: the alerts of :mod:`streamlab.alerts`, from a listener or the ``alerts``
  event hub.
- :class:`TimeView`: a query's micro-batches on an event-time axis, from its progress reports
  and its state: the watermark each batch ran with, the windows open and closed, rows in,
  dropped as late, in state and out.

None blocks the kernel::

    panel = ProducerPanel(fleet); display(panel)
    board = StatusBoard(fleet=fleet); display(board)
    board.follow_table(spark, "status")           # or board.follow_eventhub(connection_string)
    ...
    board.stop(); panel.close()
"""

from streamlab.widgets.alerts import AlertFeed
from streamlab.widgets.backlog import BacklogMeter
from streamlab.widgets.board import COLOURS, StatusBoard, Transition
from streamlab.widgets.hub_explorer import HubExplorer
from streamlab.widgets.producers import ProducerPanel, ProducerRow
from streamlab.widgets.time_view import TimeView

__all__ = [
    "COLOURS",
    "AlertFeed",
    "BacklogMeter",
    "HubExplorer",
    "ProducerPanel",
    "ProducerRow",
    "StatusBoard",
    "TimeView",
    "Transition",
]
