"""Alerts from a query's progress reports: the rules, an alerter, and a listener that sends them.

Each rule is a pure function of one query's recent reports (plain dicts, oldest first; see
:func:`streamlab.progress.as_dict`) that returns an :class:`Alert`, or None. No rule reads a
clock: the four below decide from the reports alone, and the two after them from the reports
and a moment (and an error) passed in, so the same input always gives the same alerts.

- :func:`watermark_lag`: the watermark is more than ``max_lag_s`` seconds behind the newest
  event time seen. A quiet input holds it back when a query has several (``min`` policy), and
  every stateful operator keeps its state that much longer.
- :func:`dropped_by_watermark`: the stateful operators dropped late rows in each of the last
  ``batches`` batches that read rows: events keep arriving later than the delay allows.
- :func:`state_growing`: a stateful operator's rows rose in each of the last ``batches``
  batches that read rows: state that is never cleaned up grows until memory runs out.
- :func:`slow_batches`: each of the last ``batches`` batches took longer than the trigger
  interval: the query cannot keep its pace and falls behind.

Rules that run when a report arrives cannot see a query that stops reporting: one whose batch
waits on a sink that never answers, whose source blocks, or that died. Two more rules watch for
that:

- :func:`stalled`: at ``now``, the query has shown no sign of progress (a finished batch, an
  idle event, its start) for longer than the stall bound (:meth:`Thresholds.stall_bound_ms`).
  From outside, a batch running far past its trigger and a query stuck before its next batch
  look the same: no report comes. The alert names the batch that has not finished.
- :func:`failed`: the query ended with an error (a ``QueryTerminatedEvent`` with an
  exception); the alert says the error in one line.

:class:`Alerter` runs the rules over every query's reports and says when a rule starts to fire
(once, until it stops firing: a stalled query raises one alert per stall). :class:`AlertListener`
is a ``StreamingQueryListener`` that feeds it, runs a watchdog thread that checks every running
query for a stall about once a second (on a clock that tests replace), and sends each alert, as
JSON, to an event hub::

    listener = AlertListener(Thresholds(trigger_ms=500), connection_string=hub, eventhub="alerts")
    spark.streams.addListener(listener)
    ...
    spark.streams.removeListener(listener)
    listener.close()  # stops the watchdog
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

from streamlab.progress import as_dict, timestamp

if TYPE_CHECKING:
    from azure.eventhub import EventHubProducerClient

#: The rules' names, as an alert's ``rule`` says them.
WATERMARK_LAG = "watermark_lag"
DROPPED_BY_WATERMARK = "dropped_by_watermark"
STATE_GROWING = "state_growing"
SLOW_BATCHES = "slow_batches"
STALLED = "stalled"
FAILED = "failed"

#: The stall bound, unless set: this many trigger intervals, and never less than
#: :data:`MIN_STALL_MS`. A query with no data to read says so with an idle event only every
#: ``spark.sql.streaming.noDataProgressEventInterval`` (10 s by default), and its first batch
#: starts Python workers (seconds): a shorter bound would call a healthy query stalled.
STALL_TRIGGERS = 10
MIN_STALL_MS = 30_000.0
#: The least default bound for a query that has not finished a batch since it started: its
#: first batch starts Spark's Python workers and plans its state, which a loaded machine can
#: take well over :data:`MIN_STALL_MS` to do. A bound set explicitly is taken as it is.
FIRST_BATCH_MS = 120_000.0

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Alert:
    """One rule firing on one query's report."""

    rule: str
    query: str  # the query's name, else its id
    batch_id: int
    value: float  # what the rule measured
    limit: float  # what it must not exceed
    message: str  # one sentence for the person on call
    at: str  # the report's timestamp (when that batch was triggered); stalled, failed: when seen

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Alert:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Thresholds:
    """When each rule fires. ``trigger_ms`` None: :func:`slow_batches` is not checked, nor
    :func:`stalled` unless ``stall_after_ms`` says its bound."""

    max_watermark_lag_s: float = 60.0
    dropped_batches: int = 3
    growing_batches: int = 5
    trigger_ms: float | None = None
    slow_batches: int = 3
    stall_after_ms: float | None = None

    def stall_bound_ms(self) -> float | None:
        """How long a running query may show no progress: ``stall_after_ms`` if set, else
        :data:`STALL_TRIGGERS` triggers and at least :data:`MIN_STALL_MS`; None (not checked)
        when neither is known, as a query's quiet spells last as long as its trigger."""
        if self.stall_after_ms is not None:
            return float(self.stall_after_ms)
        if self.trigger_ms is None:
            return None
        return max(STALL_TRIGGERS * float(self.trigger_ms), MIN_STALL_MS)


def _alert(report: dict, rule: str, value: float, limit: float, message: str) -> Alert:
    query = report.get("name") or report.get("id") or "?"
    return Alert(
        rule=rule,
        query=str(query),
        batch_id=int(report.get("batchId", -1)),
        value=float(value),
        limit=float(limit),
        message=f"query {query}: {message}",
        at=str(report.get("timestamp", "")),
    )


def _read_rows(history: Sequence[dict]) -> list[dict]:
    """The reports of batches that read rows: only they can drop late rows or add keys."""
    return [r for r in history if r.get("numInputRows", 0) > 0]


def _clock(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def watermark_lag(history: Sequence[dict], max_lag_s: float) -> Alert | None:
    """The watermark of the newest report, more than ``max_lag_s`` behind the newest event time."""
    if not history:
        return None
    report = history[-1]
    watermark = timestamp((report.get("eventTime") or {}).get("watermark"))
    maxima = [timestamp((r.get("eventTime") or {}).get("max")) for r in history]
    newest = [t for t in maxima if t is not None]
    if watermark is None or watermark == _EPOCH or not newest:
        return None  # no watermark yet: nothing to lag
    lag = (max(newest) - watermark).total_seconds()
    if lag <= max_lag_s:
        return None
    return _alert(
        report,
        WATERMARK_LAG,
        lag,
        max_lag_s,
        f"the watermark ({_clock(watermark)}) is {lag:.0f} s behind the newest event time "
        f"({_clock(max(newest))}), more than {max_lag_s:g} s: state waits that long to be "
        "cleaned up (with several inputs, the quietest one holds the watermark back)",
    )


def _dropped(report: dict) -> int:
    return sum(op.get("numRowsDroppedByWatermark", 0) for op in report.get("stateOperators", []))


def dropped_by_watermark(history: Sequence[dict], batches: int) -> Alert | None:
    """Late rows dropped in each of the last ``batches`` batches that read rows."""
    recent = _read_rows(history)[-batches:]
    if len(recent) < batches or not all(_dropped(r) > 0 for r in recent):
        return None
    total = sum(_dropped(r) for r in recent)
    return _alert(
        recent[-1],
        DROPPED_BY_WATERMARK,
        total,
        0,
        f"{total} row(s) dropped as later than the watermark in each of the last {batches} "
        "batches: events keep arriving later than the watermark's delay allows",
    )


def state_growing(history: Sequence[dict], batches: int) -> Alert | None:
    """A stateful operator whose rows rose in each of the last ``batches`` batches that read rows."""
    recent = _read_rows(history)[-(batches + 1) :]
    if len(recent) < batches + 1:
        return None
    for index, op in enumerate(recent[-1].get("stateOperators", [])):
        totals = [
            r["stateOperators"][index].get("numRowsTotal", 0)
            for r in recent
            if len(r.get("stateOperators", [])) > index
        ]
        if len(totals) == len(recent) and all(a < b for a, b in zip(totals, totals[1:])):
            return _alert(
                recent[-1],
                STATE_GROWING,
                totals[-1] - totals[0],
                0,
                f"the state of operator {index} ({op.get('operatorName', '?')}) grew in each "
                f"of the last {batches} batches, from {totals[0]} to {totals[-1]} rows: "
                "is anything ever removed from it?",
            )
    return None


def _duration_ms(report: dict) -> float:
    return float((report.get("durationMs") or {}).get("triggerExecution", 0))


def slow_batches(history: Sequence[dict], trigger_ms: float, batches: int) -> Alert | None:
    """Each of the last ``batches`` reports took longer than the trigger interval."""
    recent = list(history)[-batches:]
    if len(recent) < batches or not all(_duration_ms(r) > trigger_ms for r in recent):
        return None
    slowest = max(_duration_ms(r) for r in recent)
    return _alert(
        recent[-1],
        SLOW_BATCHES,
        slowest,
        trigger_ms,
        f"each of the last {batches} batches took longer than the {trigger_ms:g} ms trigger "
        f"(up to {slowest:.0f} ms): the query falls behind; make batches cheaper or the "
        "trigger longer",
    )


def _spark_time(moment: datetime) -> str:
    """A moment as Spark writes a report's timestamp: ``2026-11-22T10:00:05.000Z``."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _log_file() -> str:
    from streamlab.session import LOG_FILE

    return str(LOG_FILE)


def _seconds(ms: float) -> str:
    """Seconds, rounded up: what is more than a bound never reads as the bound."""
    if ms < 100_000:
        return f"{math.ceil(ms / 100) / 10:.1f}"
    return f"{math.ceil(ms / 1000)}"


def finished_at(report: dict) -> datetime | None:
    """When a report's batch finished: its timestamp (the trigger) plus ``triggerExecution``."""
    started = timestamp(report.get("timestamp"))
    if started is None:
        return None
    return started + timedelta(milliseconds=_duration_ms(report))


def stalled(
    history: Sequence[dict],
    now: datetime,
    stall_after_ms: float,
    *,
    alive_at: datetime | None = None,
    query: str | None = None,
) -> Alert | None:
    """At ``now``, more than ``stall_after_ms`` since the query's last sign of progress.

    A sign of progress is the end of the newest report's batch (:func:`finished_at`) or
    ``alive_at``: when the query started, or last said it was idle (waiting for data, with
    nothing to do), whichever is later. With neither, nothing is known of the query: no alert.
    ``query`` names it when ``history`` is empty.
    """
    finished = finished_at(history[-1]) if history else None
    signs = [t for t in (finished, alive_at) if t is not None]
    if not signs:
        return None
    last = max(signs)
    quiet_ms = (now - last).total_seconds() * 1000
    if quiet_ms <= stall_after_ms:
        return None
    name = (history[-1].get("name") or history[-1].get("id")) if history else None
    name = str(name or query or "?")
    if history:
        batch = int(history[-1].get("batchId", -1)) + 1
        late = f"batch {batch} has not finished"
    else:
        batch = -1
        late = "it has not finished a micro-batch since it started"
    return Alert(
        rule=STALLED,
        query=name,
        batch_id=batch,
        value=float(quiet_ms),
        limit=float(stall_after_ms),
        message=(
            f"query {name}: no progress for {_seconds(quiet_ms)} s, more than the "
            f"{stall_after_ms / 1000:g} s allowed: {late} (last sign of progress at "
            f"{_clock(last)}); Spark's log may say where it waits: {_log_file()}"
        ),
        at=_spark_time(now),
    )


def error_summary(error: str) -> str:
    """The line of a query's error that says what went wrong (Spark's text has a stack trace).

    A Python error (in a ``foreachBatch`` function, a UDF, a processor) is the traceback's last
    line, ``ValueError: ...``; a JVM error, its exception's first line.
    """
    head = error.split("\n\tat ", 1)[0].split("\n=== Streaming Query ===", 1)[0]
    lines = [line.strip() for line in head.splitlines()]
    lines = [line for line in lines if line and not line.startswith("SQLSTATE:")]
    if not lines:
        return "(no message)"
    traceback = any("Traceback (most recent call last)" in line for line in lines)
    line = lines[-1] if traceback else lines[0]
    return line if len(line) <= 300 else line[:297] + "..."


def failed(
    history: Sequence[dict],
    error: str | None,
    at: datetime,
    *,
    query: str | None = None,
) -> Alert | None:
    """The query ended with ``error`` (Spark's text of it, stack trace included) at ``at``.

    None when it ended without one (stopped, or an ``availableNow`` run done). ``query`` names
    it when ``history`` is empty.
    """
    if not error:
        return None
    name = (history[-1].get("name") or history[-1].get("id")) if history else None
    name = str(name or query or "?")
    batch = int(history[-1].get("batchId", -1)) + 1 if history else -1
    where = f"in batch {batch}" if history else "before it finished a micro-batch"
    return Alert(
        rule=FAILED,
        query=name,
        batch_id=batch,
        value=1.0,
        limit=0.0,
        message=(
            f"query {name}: stopped with an error {where}: {error_summary(error)}; "
            f"Spark's log has the whole trace: {_log_file()}"
        ),
        at=_spark_time(at),
    )


def check(history: Sequence[dict], thresholds: Thresholds) -> list[Alert]:
    """Every report rule's alert on the newest report of ``history`` (one query's reports).

    :func:`stalled` and :func:`failed` are not among them: a report is itself progress.
    """
    found = [
        watermark_lag(history, thresholds.max_watermark_lag_s),
        dropped_by_watermark(history, thresholds.dropped_batches),
        state_growing(history, thresholds.growing_batches),
    ]
    if thresholds.trigger_ms is not None:
        found.append(slow_batches(history, thresholds.trigger_ms, thresholds.slow_batches))
    return [alert for alert in found if alert is not None]


class Alerter:
    """Runs the rules over each query's reports; an alert is raised when its rule starts firing.

    A rule that keeps firing batch after batch raises one alert, and a new one only after a
    report on which it did not fire. ``keep`` reports per query are kept (the rules look back at
    most ``max(batches) + 1`` batches that read rows).

    Besides reports, it hears when a query starts (:meth:`started`), says it is idle
    (:meth:`idle`) and ends (:meth:`ended`); :meth:`watch` runs :func:`stalled` over every query
    that is running, at a moment passed in. A stall raises one alert; the query's next report,
    idle event or start ends it, and a later stall raises a new one.
    """

    def __init__(self, thresholds: Thresholds | None = None, keep: int = 100) -> None:
        self.thresholds = thresholds or Thresholds()
        self._history: dict[str, deque[dict]] = {}
        self._firing: dict[str, set[str]] = {}
        self._running: dict[str, str | None] = {}  # query id -> its name, while it runs
        self._alive_at: dict[str, datetime] = {}  # query id -> its start or newest idle event
        self._lock = threading.Lock()
        self._keep = keep

    def observe(self, progress: Any) -> list[Alert]:
        """Take one report (any form :func:`as_dict` reads); return the alerts it raises."""
        report = as_dict(progress)
        key = str(report.get("id") or report.get("name"))
        with self._lock:
            history = self._history.setdefault(key, deque(maxlen=self._keep))
            if history and history[-1].get("batchId") == report.get("batchId"):
                history.pop()  # a report of the same batch again (an idle query's): the newer
            history.append(report)
            self._running[key] = report.get("name")  # also a query that started before we heard
            alerts = check(history, self.thresholds)
            firing = {alert.rule for alert in alerts}  # a report is progress: no longer stalled
            new = [a for a in alerts if a.rule not in self._firing.get(key, set())]
            self._firing[key] = firing
        return new

    def started(self, query_id: str, name: str | None, at: datetime) -> None:
        """The query ``query_id`` started (or restarted on its checkpoint) at ``at``."""
        with self._lock:
            self._running[query_id] = name
            self._alive_at[query_id] = at
            self._firing.get(query_id, set()).discard(STALLED)

    def idle(self, query_id: str, at: datetime) -> None:
        """The query said at ``at`` that it waits for data, with nothing to do: it is alive."""
        with self._lock:
            self._running.setdefault(query_id, None)  # also a query that started before we heard
            self._alive_at[query_id] = max(at, self._alive_at.get(query_id, at))
            self._firing.get(query_id, set()).discard(STALLED)

    def ended(self, query_id: str, error: str | None, at: datetime) -> list[Alert]:
        """The query ended at ``at``, with Spark's text of ``error`` if it failed; the alerts."""
        with self._lock:
            name = self._running.pop(query_id, None)
            self._alive_at.pop(query_id, None)
            self._firing.get(query_id, set()).discard(STALLED)
            history = self._history.get(query_id, ())
            alert = failed(history, error, at, query=name or query_id)
        return [alert] if alert is not None else []

    def watch(self, now: datetime) -> list[Alert]:
        """Every running query that has newly stalled at ``now``: one alert per stall."""
        bound = self.thresholds.stall_bound_ms()
        if bound is None:
            return []
        new = []
        with self._lock:
            for key, name in self._running.items():
                history = self._history.get(key, ())
                first = not history and self.thresholds.stall_after_ms is None
                alert = stalled(
                    history,
                    now,
                    max(bound, FIRST_BATCH_MS) if first else bound,
                    alive_at=self._alive_at.get(key),
                    query=name or key,
                )
                firing = self._firing.setdefault(key, set())
                if alert is None:
                    firing.discard(STALLED)
                elif STALLED not in firing:
                    firing.add(STALLED)
                    new.append(alert)
        return new


def _now(clock: Callable[[], float]) -> datetime:
    return datetime.fromtimestamp(clock(), UTC)


class AlertListener(StreamingQueryListener):
    """Feeds every query's events to an :class:`Alerter` and sends what it raises.

    With ``connection_string``, each alert goes to ``eventhub`` as one JSON event with the
    query as its partition key; ``send`` replaces that with any callable taking a list of
    alerts. Spark calls a listener on its own thread and only logs what it raises, so a failed
    send is kept in :attr:`errors` instead of raised.

    When the thresholds give a stall bound, a watchdog thread (a daemon, started with the first
    query heard of) runs :meth:`check_stalls` every ``every`` seconds; ``clock`` (seconds since
    the epoch, as ``time.time``) is what it reads the time from. :meth:`close` stops it.
    """

    def __init__(
        self,
        thresholds: Thresholds | None = None,
        *,
        connection_string: str | None = None,
        eventhub: str = "alerts",
        send: Callable[[list[Alert]], None] | None = None,
        clock: Callable[[], float] = time.time,
        every: float = 1.0,
    ) -> None:
        self.alerter = Alerter(thresholds)
        self.alerts: list[Alert] = []
        self.errors: list[str] = []
        self.reports = 0  # progress reports heard, for a caller waiting for the listener
        self.checks = 0  # the watchdog's rounds, for a caller waiting for its next look
        self._producer: EventHubProducerClient | None = None
        if send is None and connection_string is not None:
            send = self._sender(connection_string, eventhub)
        self._send = send
        self._send_lock = threading.Lock()  # the listener's thread and the watchdog both send
        self._clock = clock
        self._every = every
        self._closed = threading.Event()
        self._watchdog: threading.Thread | None = None

    def _sender(self, connection_string: str, eventhub: str) -> Callable[[list[Alert]], None]:
        from azure.eventhub import EventData, EventHubProducerClient

        from streamlab.eventhubs.options import client_kwargs

        self._producer = EventHubProducerClient.from_connection_string(
            **client_kwargs(connection_string, eventhub)
        )

        def send(alerts: list[Alert]) -> None:
            producer = self._producer
            if producer is None:  # closed: no connection is opened again
                return
            for query in dict.fromkeys(a.query for a in alerts):
                batch = producer.create_batch(partition_key=query)
                for alert in alerts:
                    if alert.query == query:
                        batch.add(EventData(alert.to_json()))
                producer.send_batch(batch)

        return send

    def _raise(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        self.alerts.extend(alerts)
        if self._send is not None:
            with self._send_lock:
                self._send(alerts)

    def _kept(self, what: Callable[[], None]) -> None:
        try:
            what()
        except Exception as error:  # Spark would only log it: keep it where a test can see it
            self.errors.append(f"{type(error).__name__}: {error}")

    def _watch_from_now_on(self) -> None:
        if self._watchdog is not None or self.alerter.thresholds.stall_bound_ms() is None:
            return
        if self._closed.is_set():
            return
        self._watchdog = threading.Thread(target=self._watch, name="alerts-watchdog", daemon=True)
        self._watchdog.start()

    def _watch(self) -> None:
        while not self._closed.wait(self._every):
            self.check_stalls()

    @property
    def watching(self) -> bool:
        """Whether the watchdog thread runs."""
        return self._watchdog is not None and self._watchdog.is_alive()

    def check_stalls(self) -> list[Alert]:
        """Run :func:`stalled` over every running query now; raise and return the new alerts."""
        alerts: list[Alert] = []

        def run() -> None:
            alerts.extend(self.alerter.watch(_now(self._clock)))
            self._raise(alerts)

        self._kept(run)
        self.checks += 1
        return alerts

    def onQueryStarted(self, event) -> None:
        at = timestamp(event.timestamp) or _now(self._clock)
        self._kept(lambda: self.alerter.started(str(event.id), event.name, at))
        self._watch_from_now_on()

    def onQueryProgress(self, event) -> None:
        try:
            self._kept(lambda: self._raise(self.alerter.observe(event.progress)))
            self._watch_from_now_on()
        finally:
            self.reports += 1

    def onQueryIdle(self, event) -> None:
        at = timestamp(event.timestamp) or _now(self._clock)
        self._kept(lambda: self.alerter.idle(str(event.id), at))

    def onQueryTerminated(self, event) -> None:
        error = getattr(event, "exception", None)
        self._kept(lambda: self._raise(self.alerter.ended(str(event.id), error, _now(self._clock))))

    def close(self) -> None:
        """Stop the watchdog and close the connection to the hub (remove the listener from
        Spark first)."""
        self._closed.set()
        if self._watchdog is not None:
            self._watchdog.join(self._every + 10)
        if self._producer is not None:
            self._producer.close()
            self._producer = None
