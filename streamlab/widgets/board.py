"""``StatusBoard``: the seed's consumer page as a notebook widget, fed by a table or a hub."""

from __future__ import annotations

import html
import json
import re
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import ipywidgets as widgets

from streamlab import processes
from streamlab.widgets._receive import consumer, receive_in_background
from streamlab.widgets._throttle import Throttle

#: Badge colour per status; ``None`` is a machine the board has no transition for yet. Each
#: is dark enough for white text (WCAG AA, 4.5:1 or more).
COLOURS: dict[str | None, str] = {
    None: "#616161",
    "Initializing": "#1565c0",
    "Healthy": "#2e7d32",
    "Unhealthy": "#c62828",
}
#: A shape per status beside its name, so that a badge says its status without its colour.
SHAPES: dict[str | None, str] = {
    None: "?",
    "Initializing": "\u25d4",  # a circle filling up
    "Healthy": "\u2714",  # a tick
    "Unhealthy": "\u2716",  # a cross
}


@dataclass(frozen=True)
class Transition:
    """One status change as the board saw it; times are seconds since the epoch."""

    machine_name: str
    status: str
    previous_status: str | None
    changed_at: float | None  # the row's last_status_change_time
    seen_at: float  # when the board received it

    @property
    def latency(self) -> float | None:
        """How long after the change the board saw it."""
        return None if self.changed_at is None else self.seen_at - self.changed_at


def to_epoch(value: Any) -> float | None:
    """Seconds since the epoch from a datetime, an ISO-8601 string, or a number.

    A naive datetime is local time, as PySpark's ``collect()`` returns timestamps; a naive
    string is UTC (the course's Spark session time zone). Numbers above 1e11 are milliseconds.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    number = float(value)
    return number / 1000 if number > 1e11 else number


def _clock_text(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S.%f")[:-3] + " UTC"


def _natural(name: str) -> list:
    # "Producer 10" after "Producer 9".
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _field(row: Any, name: str) -> Any:
    if isinstance(row, dict):
        return row.get(name)
    return getattr(row, name, None)


def _change_time(row: Any) -> float | None:
    return to_epoch(_field(row, "last_status_change_time"))


class StatusBoard:
    """One badge per machine, a transition log and a latency readout; ``display(board)``.

    :meth:`update` applies transition rows (dicts or Spark Rows with ``machine_name``,
    ``status``, ``previous_status``, ``last_status_change_time``). The feeds
    :meth:`follow_table` and :meth:`follow_eventhub` call it from a background thread;
    :meth:`stop` ends them. With ``fleet=``, machines the fleet knows but no transition has
    mentioned yet show grey.
    """

    def __init__(
        self, *, fleet: Any = None, log_size: int = 50, clock: Callable[[], float] = time.time
    ) -> None:
        self._clock = clock
        self._lock = threading.RLock()  # feeds, the fleet's thread and the kernel all update
        self._machines: dict[str, tuple[str | None, float | None]] = {}
        self._badges: dict[str, widgets.HTML] = {}
        self._badge_classes: dict[str, str] = {}
        self._log: deque[Transition] = deque(maxlen=log_size)
        self._latencies: deque[float] = deque(maxlen=50)
        self._feeds: list[tuple[threading.Event, threading.Thread, Callable[[], None]]] = []
        self._stopped = False

        self.badges = widgets.Box(layout=widgets.Layout(flex_flow="row wrap"))
        self.latency = widgets.HTML("Latency: no transition yet")
        self.info = widgets.HTML()
        self.log = widgets.HTML()
        self.widget = widgets.VBox([self.badges, widgets.HBox([self.latency, self.info]), self.log])
        self.widget.add_class("streamlab-status-board")
        self.fleet = fleet
        if fleet is not None:
            self._fleet_throttle = Throttle(self._sync_fleet, 0.25)
            self._unsubscribe = fleet.on_change(self._on_fleet_change)
            self._sync_fleet()
        self._render_log()

    # -- the core ---------------------------------------------------------------------------

    def update(self, rows: Iterable[Any], *, measure: bool = True) -> list[Transition]:
        """Apply transition rows in order; return them as :class:`Transition` s.

        A row older than the machine's current status is logged but does not move its badge
        back. ``measure=False`` keeps replayed history out of the latency readout.
        """
        seen_at = self._clock()
        applied = []
        with self._lock:
            for row in rows:
                transition = Transition(
                    machine_name=str(_field(row, "machine_name")),
                    status=_field(row, "status"),
                    previous_status=_field(row, "previous_status"),
                    changed_at=_change_time(row),
                    seen_at=seen_at,
                )
                applied.append(transition)
                self._log.appendleft(transition)
                if measure and transition.latency is not None:
                    self._latencies.append(transition.latency)
                _, current_at = self._machines.get(transition.machine_name, (None, None))
                if (
                    current_at is None
                    or transition.changed_at is None
                    or transition.changed_at >= current_at
                ):
                    self._machines[transition.machine_name] = (
                        transition.status,
                        transition.changed_at,
                    )
                    self._render_badge(transition.machine_name)
            if applied:
                self._render_log()
                self._render_latency()
        return applied

    @property
    def statuses(self) -> dict[str, str | None]:
        """Each machine's status as the board shows it (None: unknown, grey)."""
        with self._lock:
            return {name: status for name, (status, _) in self._machines.items()}

    def badge(self, name: str) -> widgets.HTML:
        """The badge widget of machine ``name``."""
        return self._badges[name]

    @property
    def transitions(self) -> list[Transition]:
        """The logged transitions, newest first (at most ``log_size``)."""
        with self._lock:
            return list(self._log)

    def wait_for(
        self,
        what: str,
        done: Callable[[dict[str, str | None]], bool],
        *,
        timeout: float,
        query: Any = None,
        hint: str = "",
        note_every: float = 10.0,
    ) -> None:
        """Block until ``done(board.statuses)`` holds.

        For notebook cells that script what a learner would click: prints ``what`` and the
        time when it happens, and a line of the board's statuses every ``note_every`` seconds
        meanwhile. Raises ``TimeoutError`` after ``timeout`` seconds, saying what the board
        shows (and ``hint``), and ``RuntimeError`` as soon as ``query`` (a streaming query
        feeding the board) has stopped, with its error.
        """
        began = time.monotonic()
        note_at = began + note_every

        def ready() -> bool:
            nonlocal note_at
            if done(self.statuses):
                return True
            if query is not None and not query.isActive:
                raise RuntimeError(f"the query feeding the board stopped: {query.exception()}")
            if time.monotonic() >= note_at:
                waited = time.monotonic() - began
                print(f"   ... {waited:.0f} s, waiting for {what}: {self.describe()}", flush=True)
                note_at += note_every
            return False

        processes.wait_until(
            ready,
            timeout=timeout,
            every=0.1,
            expired=lambda: TimeoutError(
                f"waited {timeout:.0f} s for {what}; the board shows "
                f"{self.describe()}. {hint}".rstrip()
            ),
        )
        print(f"{what} after {time.monotonic() - began:.1f} s", flush=True)

    def describe(self) -> str:
        """The statuses as one line: ``Producer 1: Healthy, Producer 2: unknown``."""
        statuses = self.statuses
        return (
            ", ".join(
                f"{name}: {statuses[name] or 'unknown'}" for name in sorted(statuses, key=_natural)
            )
            or "no machines"
        )

    # -- feeds ------------------------------------------------------------------------------

    def follow_table(self, spark: Any, table_name: str, interval: float = 0.5) -> None:
        """Poll ``spark.table(table_name)`` (a memory sink) and apply its new rows."""
        from pyspark.errors import AnalysisException

        seen = 0

        def poll() -> None:
            nonlocal seen
            try:
                rows = spark.table(table_name).collect()
            except AnalysisException:
                self._say(f"waiting for table {table_name!r} (is the query started?)")
                return
            if len(rows) < seen:  # the table was replaced by a new query: start over
                seen = 0
            new, seen = rows[seen:], len(rows)
            self._say(f"following table {table_name!r}")
            # Within a micro-batch the memory sink keeps no order; by time is the story's order.
            self.update(sorted(new, key=lambda r: _change_time(r) or 0))

        self._start_feed(f"table {table_name}", poll, interval)

    def follow_eventhub(
        self,
        connection_string: str,
        eventhub: str = "status",
        *,
        consumer_group: str = "$Default",
        starting_position: Any = "-1",
    ) -> None:
        """Receive JSON transition bodies from ``eventhub`` (from the start, by default)."""
        client = consumer(connection_string, eventhub, consumer_group)
        since = self._clock()
        ignored = 0

        def on_batch(context: Any, events: list[Any]) -> None:
            nonlocal ignored
            rows, replayed = [], True
            for event in events:
                try:
                    body = json.loads(event.body_as_str())
                except ValueError:
                    body = None
                if not isinstance(body, dict) or not body.get("machine_name"):
                    ignored += 1
                    continue
                rows.append(body)
                enqueued = event.enqueued_time
                replayed = replayed and enqueued is not None and enqueued.timestamp() < since
            note = f"; {ignored} unreadable event(s) ignored" if ignored else ""
            self._say(f"following event hub {eventhub!r}{note}")
            self.update(rows, measure=not replayed)

        def on_error(context: Any, error: Exception) -> None:
            self._say(f"event hub {eventhub!r}: {type(error).__name__}: {error}", error=True)

        self._say(f"connecting to event hub {eventhub!r}")
        stop = threading.Event()
        with self._lock:  # recorded as it starts, so that a stop() never misses it
            thread = receive_in_background(
                client, on_batch, on_error, starting_position, "streamlab-board-eventhub"
            )
            self._feeds.append((stop, thread, client.close))

    def stop(self) -> None:
        """Stop every feed and wait for their threads; the board keeps what it shows."""
        with self._lock:
            feeds, self._feeds = self._feeds, []
            if self.fleet is not None:
                self._unsubscribe()
                self._fleet_throttle.cancel()
            self._stopped = True
        for stop, _, close in feeds:
            stop.set()
            close()
        for _, thread, _ in feeds:
            thread.join(30)
        self._say("stopped")

    def _start_feed(self, what: str, poll: Callable[[], None], interval: float) -> None:
        stop = threading.Event()

        def run() -> None:
            while not stop.is_set():
                try:
                    poll()
                except Exception as error:  # Spark stopped, a query failed: say so, keep trying
                    self._say(f"{what}: {type(error).__name__}: {str(error)[:200]}", error=True)
                stop.wait(interval)

        thread = threading.Thread(target=run, name=f"streamlab-board-{what}", daemon=True)
        self._feeds.append((stop, thread, lambda: None))
        thread.start()

    # -- display ----------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _on_fleet_change(self) -> None:
        if not self._stopped:
            self._fleet_throttle()

    def _sync_fleet(self) -> None:
        with self._lock:
            for machine in self.fleet.machines:
                if machine.name not in self._machines:
                    self._machines[machine.name] = (None, None)
                    self._render_badge(machine.name)

    def _render_badge(self, name: str) -> None:
        status, changed_at = self._machines[name]
        badge = self._badges.get(name)
        new = badge is None
        if badge is None:
            badge = self._badges[name] = widgets.HTML(layout=widgets.Layout(margin="3px"))
        since = f"since {_clock_text(changed_at)}" if changed_at is not None else "&nbsp;"
        colour = COLOURS.get(status, COLOURS[None])
        with badge.hold_sync():  # colour and class reach the browser in one message
            badge.value = (
                f'<div style="background:{colour};color:white;border-radius:6px;'
                'padding:4px 10px;min-width:10em;line-height:1.4">'
                f"<b>{html.escape(name)}</b><br>"
                f'<span aria-hidden="true">{SHAPES.get(status, SHAPES[None])}</span> '
                f"{html.escape(status or 'unknown')}<br>"
                f"<small>{since}</small></div>"
            )
            # Classes let a browser test (or CSS) find a badge's state without reading colours.
            state_class = f"streamlab-{(status or 'unknown').lower()}"
            previous = self._badge_classes.get(name)
            if new:
                badge.add_class("streamlab-badge")
            if previous != state_class:
                if previous is not None:
                    badge.remove_class(previous)
                badge.add_class(state_class)
                self._badge_classes[name] = state_class
        if new:  # painted first, so it never shows up blank
            self.badges.children = tuple(
                self._badges[n] for n in sorted(self._badges, key=_natural)
            )

    def _render_log(self) -> None:
        lines = [
            f"{_clock_text(t.changed_at) or '?':>16}  {html.escape(t.machine_name)}: "
            f"{html.escape(str(t.previous_status))} &rarr; {html.escape(str(t.status))}"
            for t in self._log
        ]
        self.log.value = (
            # A region that scrolls takes the keyboard's focus, so that it scrolls without a mouse.
            '<div role="log" aria-label="Transitions, newest first" tabindex="0" '
            'style="max-height:12em;overflow-y:auto;font-family:monospace;'
            'font-size:90%;white-space:pre">'
            + ("\n".join(lines) or "No transitions yet.")
            + "</div>"
        )

    def _render_latency(self) -> None:
        if not self._latencies:
            return
        last, median = self._latencies[-1], statistics.median(self._latencies)
        self.latency.value = (
            f"Latency: last <b>{last:.2f} s</b>, median {median:.2f} s of {len(self._latencies)}"
        )

    def _say(self, text: str, error: bool = False) -> None:
        colour = "#c62828" if error else "#777"
        self.info.value = f'<span style="color:{colour};margin-left:1em">{html.escape(text)}</span>'
