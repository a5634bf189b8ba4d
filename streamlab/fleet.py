"""Simulated machines that send heartbeats to an event hub, as the seed's browser producers do.

Every machine sends ``{"machine_name": ..., "machine_time": ...}`` once a second (or at
its own rate) with ``partition_key = machine_name``, so one machine's heartbeats stay in
order on one partition. Machines can be added, paused, resumed, killed (stopped without
a goodbye, as a crashed machine would) and asked to send a malformed, late or duplicate
event. One background thread and one ``EventHubProducerClient`` serve the whole fleet, so
a notebook's kernel stays free::

    fleet = Fleet(connection_string)
    fleet.add(); fleet.add()            # Producer 1, Producer 2
    fleet.pause("Producer 2")           # it goes silent: Unhealthy after 5 s
    fleet.stop()
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from streamlab.background_sender import BackgroundSender

RUNNING, PAUSED, KILLED = "running", "paused", "killed"

#: Malformed bodies a learner can inject; lab 01 quarantines each with a reason.
MALFORMED = {
    "not-json": lambda name, now: b'{"machine_name": "' + name.encode() + b'", oops',
    "missing-name": lambda name, now: json.dumps({"machine_time": now}).encode(),
    "bad-time": lambda name, now: json.dumps(
        {"machine_name": name, "machine_time": "yesterday"}
    ).encode(),
    "empty": lambda name, now: b"",
    "oversized": lambda name, now: json.dumps(
        {"machine_name": name, "machine_time": now, "padding": "x" * 70_000}
    ).encode(),
}


def heartbeat(name: str, at: datetime) -> bytes:
    """The seed's heartbeat body for machine ``name`` at time ``at``."""
    stamp = at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"machine_name": name, "machine_time": stamp}).encode()


@dataclass
class Machine:
    """One simulated producer."""

    name: str
    rate: float = 1.0  # heartbeats per second
    state: str = RUNNING
    sent: int = 0
    next_due: float = 0.0
    last_sent_at: float | None = None
    last_body: bytes | None = None
    extra: list[bytes] = field(default_factory=list)  # one-off events waiting to be sent


class Fleet(BackgroundSender):
    """A fleet of simulated machines sending to one event hub from one background thread."""

    def __init__(
        self,
        connection_string: str,
        eventhub: str = "heartbeats",
        *,
        name_format: str = "Producer {n}",
        tick: float = 0.05,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(connection_string, eventhub)
        self.name_format = name_format
        self._tick = tick
        self._clock = clock
        self._machines: dict[str, Machine] = {}
        self._lock = threading.Lock()
        #: Rounds the sending thread has completed: lets a caller wait for one full round.
        self.rounds = 0
        self._listeners: list[Callable[[], None]] = []

    # -- controls ---------------------------------------------------------------------------

    def add(self, name: str | None = None, rate: float = 1.0) -> Machine:
        """Add a machine (named ``Producer 1``, ``Producer 2``, ... unless named) and start it."""
        with self._lock:
            if name is None:
                n = len(self._machines) + 1
                while self.name_format.format(n=n) in self._machines:
                    n += 1
                name = self.name_format.format(n=n)
            if name in self._machines and self._machines[name].state != KILLED:
                raise ValueError(f"there is already a machine called {name!r}")
            machine = Machine(name=name, rate=rate, next_due=self._clock())
            self._machines[name] = machine
        self._ensure_running()
        self._changed()
        return machine

    def pause(self, name: str) -> None:
        self._set_state(name, PAUSED, allowed=(RUNNING, PAUSED))

    def resume(self, name: str) -> None:
        self._set_state(name, RUNNING, allowed=(RUNNING, PAUSED))
        with self._lock:
            self._machines[name].next_due = self._clock()

    def kill(self, name: str) -> None:
        """Stop the machine for good, without a last message."""
        self._set_state(name, KILLED, allowed=(RUNNING, PAUSED, KILLED))

    def set_rate(self, rate: float, name: str | None = None) -> None:
        """Heartbeats per second for one machine, or for all when ``name`` is None."""
        if rate <= 0:
            raise ValueError("the rate must be positive; pause a machine to silence it")
        with self._lock:
            for machine in self._select(name):
                machine.rate = rate
                if machine.last_sent_at is not None:
                    machine.next_due = min(machine.next_due, machine.last_sent_at + 1.0 / rate)
        self._changed()

    def send_malformed(self, name: str, kind: str = "not-json") -> None:
        """Queue one malformed event from ``name`` (see :data:`MALFORMED`)."""
        if kind not in MALFORMED:
            raise ValueError(f"kind must be one of {', '.join(MALFORMED)}; got {kind!r}")
        self._queue(name, lambda m, now: MALFORMED[kind](m.name, now.isoformat()))

    def send_late(self, name: str, seconds: float = 60.0) -> None:
        """Queue one heartbeat whose machine_time is ``seconds`` in the past."""
        self._queue(name, lambda m, now: heartbeat(m.name, now - timedelta(seconds=seconds)))

    def send_duplicate(self, name: str) -> None:
        """Queue an exact copy of the machine's last heartbeat (a replay)."""
        self._queue(name, lambda m, now: m.last_body or heartbeat(m.name, now))

    # -- what the fleet is doing ------------------------------------------------------------

    @property
    def machines(self) -> list[Machine]:
        with self._lock:
            return list(self._machines.values())

    def machine(self, name: str) -> Machine:
        with self._lock:
            if name not in self._machines:
                raise KeyError(
                    f"no machine called {name!r}; the fleet has "
                    f"{', '.join(self._machines) or 'no machines'}"
                )
            return self._machines[name]

    @property
    def running(self) -> list[str]:
        """The names of the machines sending heartbeats now (neither paused nor killed)."""
        with self._lock:
            return [m.name for m in self._machines.values() if m.state == RUNNING]

    def wait_for_heartbeats(
        self,
        seen: Callable[[], Iterable[str]],
        *,
        names: Iterable[str] | None = None,
        query: Any = None,
        within: float = 60.0,
        every: float = 0.5,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> list[str]:
        """Wait until ``seen()`` (the machines a query has read) holds every machine awaited;
        return their names.

        Awaited are ``names`` if given, else the machines running at each look: a producer
        added, paused or resumed in the panel meanwhile counts as it is then. After ``within``
        seconds, a ``TimeoutError`` names the machines still missing and why they may be. With
        ``query`` (the one that feeds ``seen``), its end ends the wait at once, with its error.
        """
        deadline = clock() + within
        while True:
            awaited = list(names) if names is not None else self.running
            heard = set(seen())
            if awaited and heard.issuperset(awaited):
                return awaited
            if query is not None and not query.isActive:
                error = query.exception()
                if error is not None:
                    raise error
                raise TimeoutError(
                    f"The query {query.name} stopped before every producer was heard."
                )
            if clock() >= deadline:
                raise TimeoutError(self._not_heard(awaited, heard, within))
            sleep(min(every, max(deadline - clock(), 0.0)))

    def _not_heard(self, awaited: list[str], heard: set[str], within: float) -> str:
        """Which awaited machines sent nothing the query read, and what the fleet says of them."""
        if not awaited:
            return (
                f"Waited {within:g} s, and no producer is running: resume one in the panel "
                "(or add one), then run this cell again."
            )
        states = {m.name: m.state for m in self.machines}
        missing = [name for name in awaited if name not in heard]
        why = [
            f"{name} is {states[name]}" if states.get(name, RUNNING) != RUNNING else ""
            for name in missing
        ]
        told = "; ".join(filter(None, why))
        return (
            f"No heartbeat from {', '.join(missing)} in {within:g} s"
            + (f" ({told}: resume it in the panel, or leave it out)" if told else "")
            + f"; heard from {', '.join(sorted(heard)) or 'no machine'}. "
            "Is the query running (spark.streams.active) and the emulator up?"
        )

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` ran (until :meth:`add` or an event queued starts it again)."""
        return self._stop.is_set()

    def stop(self) -> None:
        """Stop sending and close the connection; listeners (the panel) hear of it."""
        super().stop()
        self._changed()

    @property
    def events_sent(self) -> int:
        with self._lock:
            return sum(m.sent for m in self._machines.values())

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` whenever machines or counts change; return a function that stops it.

        Listeners run on the sending thread, after each send: keep them quick (the widgets
        only schedule a redraw).
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    # -- internals --------------------------------------------------------------------------

    def _select(self, name: str | None) -> list[Machine]:
        if name is None:
            return [m for m in self._machines.values() if m.state != KILLED]
        if name not in self._machines:
            raise KeyError(f"no machine called {name!r}")
        return [self._machines[name]]

    def _set_state(self, name: str, state: str, allowed: tuple[str, ...]) -> None:
        with self._lock:
            machine = self._select(name)[0]
            if machine.state not in allowed:
                raise ValueError(f"{name} is {machine.state}; it cannot be made {state}")
            machine.state = state
        self._changed()

    def _queue(self, name: str, make: Callable[[Machine, datetime], bytes]) -> None:
        with self._lock:
            machine = self._select(name)[0]
            if machine.state == KILLED:
                raise ValueError(f"{name} was killed; it sends nothing more")
            machine.extra.append(make(machine, datetime.fromtimestamp(self._clock(), UTC)))
        self._ensure_running()

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception as error:  # a broken display must not stop the producers
                self.errors.append(f"listener: {error}")

    def _ensure_running(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="streamlab-fleet", daemon=True)
            self._thread.start()

    def _due(self) -> list[tuple[Machine, bytes]]:
        """Collect what is due now, advancing each machine's schedule."""
        now = self._clock()
        stamp = datetime.fromtimestamp(now, UTC)
        due: list[tuple[Machine, bytes]] = []
        with self._lock:
            for machine in self._machines.values():
                if machine.state == KILLED:
                    continue
                due.extend((machine, body) for body in machine.extra)
                machine.extra.clear()
                if machine.state == RUNNING and machine.next_due <= now:
                    body = heartbeat(machine.name, stamp)
                    machine.last_body = body
                    machine.last_sent_at = now
                    due.append((machine, body))
                    # Keep to the schedule; after a stall, start afresh instead of sending
                    # the missed heartbeats in a burst.
                    machine.next_due += 1.0 / machine.rate
                    if machine.next_due <= now:
                        machine.next_due = now + 1.0 / machine.rate
        return due

    def _send(self, due: list[tuple[Machine, bytes]]) -> None:
        by_machine: dict[str, list[tuple[Machine, bytes]]] = {}
        for machine, body in due:
            by_machine.setdefault(machine.name, []).append((machine, body))
        for name, items in by_machine.items():
            self._send_keyed(name, (body for _, body in items))
            with self._lock:
                items[0][0].sent += len(items)

    def _run(self) -> None:
        while not self._stop.is_set():
            due = self._due()
            if due:
                try:
                    self._send(due)
                    self._changed()
                except Exception as error:  # the hub may be down: report, keep going
                    self._report(error)
            self.rounds += 1
            self._stop.wait(self._tick)
