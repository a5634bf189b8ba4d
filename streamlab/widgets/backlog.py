"""``BacklogMeter``: events behind per partition of a running query's ``eventhubs`` source, live."""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as widgets

from streamlab.progress import as_dict, backlog


class BacklogMeter:
    """One bar per partition: the events the hub holds beyond the query's last batch.

    :meth:`update` shows one progress report; :meth:`follow` shows a query's newest report a
    few times a second, from a background thread, until :meth:`stop`. ``display(meter)``.
    """

    def __init__(self, *, source: int = 0) -> None:
        self.source = source
        self.behind: dict[str, int] | None = None  # what the meter shows
        self.widget = widgets.HTML("Events behind: no progress report yet")
        self.widget.add_class("streamlab-backlog")
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def update(self, progress: Any) -> dict[str, int] | None:
        """Show the backlog of one report (a query's ``lastProgress``, or its JSON as a dict)."""
        report = as_dict(progress)
        try:
            self.behind = backlog(report, self.source)
        except ValueError as error:
            self.behind = None
            self.widget.value = f'<span style="color:#c62828">{html.escape(str(error))}</span>'
            return None
        self.widget.value = _render(self.behind, report)
        return self.behind

    def follow(self, query: Any, interval: float = 0.5) -> None:
        """Show ``query.lastProgress`` as it changes, until :meth:`stop`."""
        self.stop()
        stop = self._stop = threading.Event()

        def run() -> None:
            shown = None
            while not stop.is_set():
                progress = query.lastProgress
                if progress is not None and progress["batchId"] != shown:
                    shown = progress["batchId"]
                    try:
                        self.update(progress)
                    except Exception as error:  # the display must not kill the thread
                        self.widget.value = html.escape(f"{type(error).__name__}: {error}")
                stop.wait(interval)

        self._thread = threading.Thread(target=run, name="streamlab-backlog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following; the meter keeps what it shows."""
        if self._stop is not None:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(10)
            self._stop = self._thread = None

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def _render(behind: dict[str, int], report: dict) -> str:
    widest = max(behind.values(), default=0) or 1
    rows = "".join(
        f'<tr class="streamlab-backlog-partition" data-partition="{html.escape(p)}"'
        f' data-behind="{n}"><td>partition {html.escape(p)}</td>'
        f'<td style="width:16em"><div style="background:{"#e53935" if n else "#43a047"};'
        f'height:0.9em;width:{max(2, 100 * n // widest)}%"></div></td>'
        f'<td style="text-align:right">{n:,}</td></tr>'
        for p, n in behind.items()
    )
    total = sum(behind.values())
    return (
        f"<div><b>Events behind</b>: {total:,} after batch {report.get('batchId', '?')}"
        f" <small>(the hub's newest event each partition held when the batch was planned, "
        f"minus where the batch stopped)</small>"
        f'<table style="font-family:monospace;font-size:90%">{rows}</table></div>'
    )
