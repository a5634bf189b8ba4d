"""Alerts from a query's progress reports: the rules, an alerter, and a listener that sends them.

Each rule is a pure function of one query's recent reports (plain dicts, oldest first; see
:func:`streamlab.progress.as_dict`) that returns an :class:`Alert` about the newest report, or
None. Nothing here reads a clock: a rule decides from the reports alone, so the same reports
always give the same alerts.

- :func:`watermark_lag`: the watermark is more than ``max_lag_s`` seconds behind the newest
  event time seen. A quiet input holds it back when a query has several (``min`` policy), and
  every stateful operator keeps its state that much longer.
- :func:`dropped_by_watermark`: the stateful operators dropped late rows in each of the last
  ``batches`` batches that read rows: events keep arriving later than the delay allows.
- :func:`state_growing`: a stateful operator's rows rose in each of the last ``batches``
  batches that read rows: state that is never cleaned up grows until memory runs out.
- :func:`slow_batches`: each of the last ``batches`` batches took longer than the trigger
  interval: the query cannot keep its pace and falls behind.

:class:`Alerter` runs the rules over every query's reports and says when a rule starts to fire
(once, until it stops firing). :class:`AlertListener` is a ``StreamingQueryListener`` that
feeds it and sends each alert, as JSON, to an event hub::

    listener = AlertListener(Thresholds(trigger_ms=500), connection_string=hub, eventhub="alerts")
    spark.streams.addListener(listener)
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from streamlab.progress import as_dict, timestamp

#: The rules' names, as an alert's ``rule`` says them.
WATERMARK_LAG = "watermark_lag"
DROPPED_BY_WATERMARK = "dropped_by_watermark"
STATE_GROWING = "state_growing"
SLOW_BATCHES = "slow_batches"

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
    at: str  # the report's timestamp: when that batch was triggered

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Alert:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Thresholds:
    """When each rule fires. ``trigger_ms`` None: :func:`slow_batches` is not checked."""

    max_watermark_lag_s: float = 60.0
    dropped_batches: int = 3
    growing_batches: int = 5
    trigger_ms: float | None = None
    slow_batches: int = 3


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
    newest = [timestamp((r.get("eventTime") or {}).get("max")) for r in history]
    newest = [t for t in newest if t is not None]
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


def check(history: Sequence[dict], thresholds: Thresholds) -> list[Alert]:
    """Every rule's alert on the newest report of ``history`` (one query's reports)."""
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
    """

    def __init__(self, thresholds: Thresholds | None = None, keep: int = 100) -> None:
        self.thresholds = thresholds or Thresholds()
        self._history: dict[str, deque[dict]] = {}
        self._firing: dict[str, set[str]] = {}
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
            alerts = check(history, self.thresholds)
            firing = {alert.rule for alert in alerts}
            new = [a for a in alerts if a.rule not in self._firing.get(key, set())]
            self._firing[key] = firing
        return new


class AlertListener(StreamingQueryListener):
    """Feeds every query's progress to an :class:`Alerter` and sends what it raises.

    With ``connection_string``, each alert goes to ``eventhub`` as one JSON event with the
    query as its partition key; ``send`` replaces that with any callable taking a list of
    alerts. Spark calls a listener on its own thread and only logs what it raises, so a failed
    send is kept in :attr:`errors` instead of raised.
    """

    def __init__(
        self,
        thresholds: Thresholds | None = None,
        *,
        connection_string: str | None = None,
        eventhub: str = "alerts",
        send: Callable[[list[Alert]], None] | None = None,
    ) -> None:
        self.alerter = Alerter(thresholds)
        self.alerts: list[Alert] = []
        self.errors: list[str] = []
        self.reports = 0  # progress reports heard, for a caller waiting for the listener
        self._producer = None
        if send is None and connection_string is not None:
            send = self._sender(connection_string, eventhub)
        self._send = send

    def _sender(self, connection_string: str, eventhub: str) -> Callable[[list[Alert]], None]:
        from azure.eventhub import EventData, EventHubProducerClient

        extra = {} if "EntityPath=" in connection_string else {"eventhub_name": eventhub}
        self._producer = EventHubProducerClient.from_connection_string(connection_string, **extra)

        def send(alerts: list[Alert]) -> None:
            for query in dict.fromkeys(a.query for a in alerts):
                batch = self._producer.create_batch(partition_key=query)
                for alert in alerts:
                    if alert.query == query:
                        batch.add(EventData(alert.to_json()))
                self._producer.send_batch(batch)

        return send

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        try:
            alerts = self.alerter.observe(event.progress)
            self.alerts.extend(alerts)
            if alerts and self._send is not None:
                self._send(alerts)
        except Exception as error:  # Spark would only log it: keep it where a test can see it
            self.errors.append(f"{type(error).__name__}: {error}")
        finally:
            self.reports += 1

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    def close(self) -> None:
        """Close the connection to the hub (remove the listener from Spark first)."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None
