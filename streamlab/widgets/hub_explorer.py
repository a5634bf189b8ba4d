"""``HubExplorer``: what an event hub holds, partition by partition, with a Refresh button."""

from __future__ import annotations

import html
import threading
from collections.abc import Iterable

import ipywidgets as widgets

from streamlab.hub_explorer import RECENT, HubUnreachable, HubView, explore, readers_said, when


class HubExplorer:
    """Each event hub's partitions (first and last sequence numbers, last enqueued time), their
    newest events decoded, and the open readers with where they stand. ``display(explorer)``.

    :meth:`refresh` reads the hub now and returns what it shows; the button does the same on a
    thread of its own (reading takes a few seconds), so the kernel stays free meanwhile.
    """

    def __init__(
        self,
        connection_string: str,
        eventhubs: Iterable[str] | None = None,
        *,
        recent: int = RECENT,
    ) -> None:
        self.connection_string = connection_string
        self.eventhubs = list(eventhubs) if eventhubs is not None else None
        self.recent = recent
        self.view: HubView | None = None
        self.button = widgets.Button(description="Refresh", icon="refresh")
        self.button.on_click(lambda _: self._refresh_in_background())
        self.html = widgets.HTML("Press Refresh to read the hub.")
        self.widget = widgets.VBox([self.button, self.html])
        self.widget.add_class("streamlab-hub-explorer")
        self._lock = threading.Lock()

    def refresh(self) -> HubView | None:
        """Read the hub and show it; None (and a sentence in the widget) when it cannot."""
        with self._lock:
            self.button.disabled = True
            self.html.value = f"{self.html.value}<div><i>Reading the hub ...</i></div>"
            try:
                self.view = explore(self.connection_string, self.eventhubs, recent=self.recent)
            except (HubUnreachable, ValueError) as error:
                self.view = None
                self.html.value = f'<span style="color:#c62828">{html.escape(str(error))}</span>'
            else:
                self.html.value = render(self.view)
            finally:
                self.button.disabled = False
            return self.view

    def _refresh_in_background(self) -> None:
        def run() -> None:
            try:
                self.refresh()
            except Exception as error:  # the button must say what went wrong, not go silent
                self.html.value = html.escape(f"{type(error).__name__}: {error}")

        threading.Thread(target=run, name="streamlab-hub-explorer", daemon=True).start()

    def close(self) -> None:
        self.widget.close()

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def render(view: HubView) -> str:
    """The view as HTML: one table per event hub."""
    parts = [f"<div><b>Event hubs at {html.escape(view.endpoint)}</b></div>"]
    for hub in view.eventhubs:
        rows = []
        for part in hub.partitions:
            span = (
                "empty"
                if part.is_empty
                else (f"{part.first_sequence_number} .. {part.last_sequence_number}")
            )
            rows.append(
                f'<tr class="streamlab-hub-partition" data-partition="{html.escape(part.id)}"'
                f' data-first="{part.first_sequence_number}"'
                f' data-last="{part.last_sequence_number}"><td><b>partition '
                f"{html.escape(part.id)}</b></td><td>{span}</td>"
                f"<td>{when(part.last_enqueued_time)}</td><td></td></tr>"
            )
            rows += [
                f'<tr class="streamlab-hub-event" data-sequence-number="{event.sequence_number}">'
                f"<td style='text-align:right'>#{event.sequence_number}</td>"
                f"<td>{html.escape(event.partition_key or '(no key)')}</td>"
                f"<td>{when(event.enqueued_time)}</td>"
                f"<td>{html.escape(event.body[:120])}</td></tr>"
                for event in part.recent
            ]
        readers = "<br>".join(html.escape(sentence) for sentence in readers_said(hub))
        parts.append(
            f'<div class="streamlab-hub-eventhub" data-eventhub="{html.escape(hub.name)}">'
            f"<h4>{html.escape(hub.name)}</h4>"
            '<table style="font-family:monospace;font-size:90%">'
            "<tr><th>partition / event</th><th>sequence numbers / key</th>"
            f"<th>enqueued (UTC)</th><th>body</th></tr>{''.join(rows)}</table>"
            f"<div><small>{readers}</small></div></div>"
        )
    parts += [f"<div>{html.escape(name)}: no such event hub here</div>" for name in view.missing]
    return "".join(parts)
