"""``AlertFeed``: the alerts of :mod:`streamlab.alerts`, newest first, as they are raised."""

from __future__ import annotations

import html
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

import ipywidgets as widgets

from streamlab.alerts import Alert
from streamlab.widgets._receive import consumer, receive_in_background


class AlertFeed:
    """A list of alerts, newest first; ``display(feed)``.

    :meth:`add` shows alerts; :meth:`follow_eventhub` receives them from the event hub an
    :class:`~streamlab.alerts.AlertListener` sends to (from its start, by default), in a
    background thread, until :meth:`stop`.
    """

    def __init__(self, size: int = 20) -> None:
        self.alerts: deque[Alert] = deque(maxlen=size)
        self.ignored = 0  # events that were not alerts
        self._lock = threading.Lock()
        self._close = None
        self._thread: threading.Thread | None = None
        self.widget = widgets.HTML()
        self.widget.add_class("streamlab-alerts")
        self._render("")

    def add(self, alerts: Iterable[Alert]) -> None:
        with self._lock:
            for alert in alerts:
                self.alerts.appendleft(alert)
            self._render("")

    def follow_eventhub(
        self, connection_string: str, eventhub: str = "alerts", *, starting_position: Any = "-1"
    ) -> None:
        """Receive alerts sent to ``eventhub`` (JSON bodies of :meth:`Alert.to_json`)."""
        self.stop()
        client = consumer(connection_string, eventhub)

        def on_batch(context: Any, events: list[Any]) -> None:
            received = []
            for event in events:
                try:
                    received.append(Alert.from_json(event.body_as_str()))
                except (ValueError, TypeError):
                    self.ignored += 1
            self.add(received)

        def on_error(context: Any, error: Exception) -> None:
            self._render(f"event hub {eventhub!r}: {type(error).__name__}: {error}")

        self._close = client.close
        self._thread = receive_in_background(
            client, on_batch, on_error, starting_position, "streamlab-alerts"
        )

    def stop(self) -> None:
        """Stop receiving; the feed keeps what it shows."""
        if self._close is not None:
            self._close()
            self._thread.join(30)
            self._close = self._thread = None

    def _render(self, trouble: str) -> None:
        lines = "".join(
            f'<li class="streamlab-alert" data-rule="{html.escape(a.rule)}">'
            f"<code>{html.escape(a.at[:19].replace('T', ' '))}</code> "
            f"<b>{html.escape(a.rule)}</b> {_batch(a.batch_id)}: {html.escape(a.message)}</li>"
            for a in self.alerts
        )
        note = f'<div style="color:#c62828">{html.escape(trouble)}</div>' if trouble else ""
        self.widget.value = (
            f"<div><b>Alerts</b>{note}"
            + (
                f'<ul style="max-height:12em;overflow-y:auto;margin:0">{lines}</ul>'
                if lines
                else " <small>none so far</small>"
            )
            + "</div>"
        )

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def _batch(batch_id: int) -> str:
    """Which batch an alert is about; a query stalled before its first one has none."""
    return f"(batch {batch_id})" if batch_id >= 0 else "(before its first batch)"
