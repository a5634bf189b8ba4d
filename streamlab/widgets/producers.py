"""``ProducerPanel``: the seed's browser producers as notebook controls over a :class:`Fleet`."""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass

import ipywidgets as widgets

from streamlab.fleet import KILLED, MALFORMED, PAUSED, RUNNING, Fleet
from streamlab.widgets._throttle import Throttle

FIRST_RUNNING = "first running"
#: A machine's row after ``fleet.stop()``: whatever its state, it sends nothing more.
STOPPED = "stopped"
#: What the status line says when a row's state changes, from the panel or from code.
_SAID = {PAUSED: "paused", RUNNING: "resumed", KILLED: "killed"}
#: A paused row tinted amber with a bar at its left, a stopped one greyed.
_STYLE = (
    "<style>.streamlab-producer-paused{background:#fff4d6;box-shadow:inset 4px 0 #b26a00}"
    ".streamlab-producer-stopped{opacity:.6}"
    ".streamlab-producer .widget-html-content{white-space:nowrap}</style>"
)
_STATE_HTML = {
    RUNNING: '<span style="color:#2e7d32">&#9679; running</span>',
    PAUSED: '<b style="color:#8a5300">&#10074;&#10074; paused</b>',
    KILLED: '<span style="color:#555">&#10005; killed</span>',
    STOPPED: '<span style="color:#555">&#9632; stopped</span>',
}


@dataclass
class ProducerRow:
    """The controls of one producer: its name, pause/resume, kill, and how much it sent."""

    name: str
    pause: widgets.ToggleButton  # value True = paused
    kill: widgets.Button
    sent: widgets.Label
    box: widgets.HBox
    state: widgets.HTML  # running, paused, killed or stopped, in words
    shown: str = ""  # the state the row shows, to say in the status line when it changes


class ProducerPanel:
    """Controls for a fleet of simulated machines; ``display(panel)`` shows them.

    Every control acts on the fleet at once; the counts follow the fleet's own changes
    (heartbeats sent from its background thread) a few times a second. The panel does not
    own the fleet: :meth:`close` removes the controls, ``fleet.stop()`` stops the sending.
    """

    def __init__(
        self, fleet: Fleet, *, late_seconds: float = 60.0, refresh_interval: float = 0.25
    ) -> None:
        self.fleet = fleet
        self.late_seconds = late_seconds
        self.rows: dict[str, ProducerRow] = {}
        self._lock = threading.RLock()  # refreshes come from the kernel and the fleet's thread
        self._closed = False
        self._errors_shown = 0

        self._build_controls()
        self._wire()
        self.widget = self._arrange()
        self._throttle = Throttle(self.refresh, refresh_interval)
        self._unsubscribe = fleet.on_change(self._on_fleet_change)
        self.refresh()

    def _build_controls(self) -> None:
        """The panel's controls: add a producer, its rate, and the bad and late events."""
        fit = widgets.Layout(width="auto")  # the default width cuts the labels short
        wide_label = {"description_width": "initial"}
        self.add_button = widgets.Button(
            description="Add producer", icon="plus", button_style="primary", layout=fit
        )
        # A number field rather than a slider: a screen reader names it by its description,
        # and the keyboard types a rate or steps it with the arrow keys.
        self.rate = widgets.BoundedFloatText(
            value=1.0,
            min=0.2,
            max=10.0,
            step=0.1,
            description="Heartbeats/s",
            continuous_update=False,
            style=wide_label,
            layout=widgets.Layout(width="12em"),
        )
        # "" rather than None: a Dropdown treats the value None as "nothing selected".
        self.sender = widgets.Dropdown(
            options=[(FIRST_RUNNING, "")],
            value="",
            description="Send from",
            style=wide_label,
            layout=widgets.Layout(width="16em"),
        )
        self.bad_kind = widgets.Dropdown(
            options=list(MALFORMED),
            value="not-json",
            description="bad event",
            style=wide_label,
            layout=widgets.Layout(width="14em"),
        )
        self.bad_button = widgets.Button(
            description="Send bad event", icon="bug", button_style="warning", layout=fit
        )
        self.late_button = widgets.Button(
            description="Send late event",
            icon="clock-o",
            tooltip=f"a heartbeat {self.late_seconds:g} s in the past",
            layout=fit,
        )
        self.counter = widgets.HTML(layout=widgets.Layout(margin="0 0 0 1em"))
        # JupyterLab draws no colour for a box's box_style: the panel brings its own.
        self.style = widgets.HTML(_STYLE, layout=widgets.Layout(display="none"))
        self.message = widgets.HTML()
        self.producers = widgets.VBox()

    def _wire(self) -> None:
        """Each control acts on the fleet."""
        self.add_button.on_click(lambda _: self._act(self._add))
        self.bad_button.on_click(lambda _: self._act(self._send_bad))
        self.late_button.on_click(lambda _: self._act(self._send_late))
        self.rate.observe(
            lambda change: self._act(lambda: self.fleet.set_rate(change["new"])), names="value"
        )

    def _arrange(self) -> widgets.VBox:
        """The controls in rows: add and rate, the producers, then bad and late events."""
        widget = widgets.VBox(
            [
                widgets.HBox([self.add_button, self.rate, self.counter]),
                self.producers,
                widgets.HBox([self.sender, self.bad_kind, self.bad_button, self.late_button]),
                self.message,
                self.style,
            ]
        )
        widget.add_class("streamlab-producer-panel")
        return widget

    # -- display ----------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def refresh(self) -> None:
        """Bring the rows and counts up to date with the fleet (any thread may call this)."""
        with self._lock:
            if self._closed:
                return
            machines = self.fleet.machines
            added = False
            stopped = self.fleet.stopped
            for machine in machines:
                row = self.rows.get(machine.name)
                if row is None:
                    row = self.rows[machine.name] = self._new_row(machine.name)
                    added = True
                state = STOPPED if stopped and machine.state != KILLED else machine.state
                if row.shown and state != row.shown and state in _SAID:
                    self._say(f"{machine.name} {_SAID[state]}.")
                self._show(row, state, machine.sent)
            if added:
                self.producers.children = tuple(row.box for row in self.rows.values())
            self.counter.value = f"Events sent: <b>{self.fleet.events_sent}</b>"
            choices = [(FIRST_RUNNING, "")] + [
                (m.name, m.name) for m in machines if m.state != KILLED
            ]
            if list(self.sender.options) != choices:
                chosen = self.sender.value
                keep = chosen if (chosen, chosen) in choices else ""
                self.sender.options = choices
                self.sender.value = keep
            self._show_stopped(stopped)
            if len(self.fleet.errors) > self._errors_shown:
                self._errors_shown = len(self.fleet.errors)
                self._say(f"The fleet could not send: {self.fleet.errors[-1]}", error=True)

    def _show_stopped(self, stopped: bool) -> None:
        """After ``fleet.stop()`` no control is live: a click would start the fleet again."""
        for control in (self.add_button, self.bad_button, self.late_button, self.rate):
            control.disabled = stopped
        if stopped and "stopped" not in self.message.value:
            self._say("The fleet is stopped: its producers send nothing more.")

    def close(self) -> None:
        """Stop following the fleet and remove the controls (the fleet keeps running)."""
        with self._lock:
            self._closed = True
            self._unsubscribe()
            self._throttle.cancel()
            self._close_widgets()

    # -- internals --------------------------------------------------------------------------

    def _close_widgets(self) -> None:
        for row in self.rows.values():
            for widget in (row.pause, row.kill, row.sent, row.state, row.box):
                widget.close()
        for widget in (
            self.add_button,
            self.rate,
            self.sender,
            self.bad_kind,
            self.bad_button,
            self.late_button,
            self.counter,
            self.message,
            self.style,
            self.producers,
            self.widget,
        ):
            widget.close()

    def _on_fleet_change(self) -> None:
        if not self._closed:  # a call already under way when close() ran
            self._throttle()

    def _new_row(self, name: str) -> ProducerRow:
        label = widgets.Label(name, layout=widgets.Layout(width="9em"))
        pause = widgets.ToggleButton(
            value=False, description="Pause", icon="pause", layout=widgets.Layout(width="7em")
        )
        kill = widgets.Button(
            description="Kill",
            icon="times",
            button_style="danger",
            layout=widgets.Layout(width="6em"),
        )
        sent = widgets.Label("0 sent")
        state = widgets.HTML(layout=widgets.Layout(width="7.5em"))
        pause.observe(lambda change: self._toggled(name, change["new"]), names="value")
        kill.on_click(lambda _: self._act(lambda: self.fleet.kill(name)))
        box = widgets.HBox([label, state, pause, kill, sent])
        box.add_class("streamlab-producer")
        return ProducerRow(name, pause, kill, sent, box, state)

    @staticmethod
    def _show(row: ProducerRow, state: str, sent: int) -> None:
        row.shown = state
        row.sent.value = f"{sent} sent" + (" (killed)" if state == KILLED else "")
        row.state.value = _STATE_HTML[state]
        # A paused row stands out as a whole (a tinted box), not only by its button's label.
        row.box.box_style = "warning" if state == PAUSED else ""
        for name in ("streamlab-producer-paused", "streamlab-producer-stopped"):
            row.box.remove_class(name)
        if state in (PAUSED, STOPPED):
            row.box.add_class(f"streamlab-producer-{state}")
        row.pause.value = state == PAUSED
        row.pause.description = "Resume" if state == PAUSED else "Pause"
        row.pause.icon = "play" if state == PAUSED else "pause"
        row.pause.disabled = row.kill.disabled = state in (KILLED, STOPPED)

    def _toggled(self, name: str, paused: bool) -> None:
        # The toggle also moves when refresh() shows the fleet's state (a pause made in code):
        # act only when it disagrees with the fleet.
        state = self.fleet.machine(name).state
        if paused and state == RUNNING:
            self._act(lambda: self.fleet.pause(name))
        elif not paused and state == PAUSED:
            self._act(lambda: self.fleet.resume(name))

    def _add(self) -> None:
        machine = self.fleet.add(rate=self.rate.value)
        self._say(f"{machine.name} started.")

    def _source(self) -> str | None:
        """The producer to send from: the chosen one, else the first running one."""
        if self.sender.value:
            return self.sender.value
        running = [m.name for m in self.fleet.machines if m.state == RUNNING]
        return running[0] if running else None

    def _send_bad(self) -> None:
        name = self._source()
        if name is None:
            self._say("No running producer to send from: add one first.", error=True)
            return
        self.fleet.send_malformed(name, self.bad_kind.value)
        self._say(f"{name} sent a bad event ({self.bad_kind.value}).")

    def _send_late(self) -> None:
        name = self._source()
        if name is None:
            self._say("No running producer to send from: add one first.", error=True)
            return
        self.fleet.send_late(name, self.late_seconds)
        self._say(f"{name} sent a heartbeat {self.late_seconds:g} s late.")

    def _act(self, action) -> None:
        # A control's callback runs in the kernel: show a mistake instead of raising into it.
        # Catch up first with changes made in code, so the line ends with this action's words.
        self.refresh()
        try:
            action()
        except (KeyError, ValueError) as error:
            self._say(str(error).strip("'\""), error=True)
        self.refresh()

    def _say(self, text: str, error: bool = False) -> None:
        colour = "#c62828" if error else "#555"
        self.message.value = f'<span style="color:{colour}">{html.escape(text)}</span>'
