"""Where lab 10's notebook takes ``Meter`` from (``streamlab.tws_batches.Meter``).

The checks' own heartbeat helpers are in :mod:`streamlab.kit`.
"""

from streamlab.tws_batches import Meter as Meter
