"""``TimeView``: event time as a query's own micro-batches saw it, batch by batch.

Everything it shows comes from Spark: the query's progress reports (``query.recentProgress``)
and, for a windowed aggregation, the state reader on its checkpoint. :func:`time_batches`
turns them into one :class:`TimeBatch` per micro-batch; :class:`TimeView` draws those::

    view = TimeView.of(query, spark=spark, checkpoint=checkpoint); display(view)
    view.refresh()                       # a running query: read its reports again
    view.follow(); ...; view.stop()      # or keep reading them in the background

A batch runs with the watermark Spark computed at the end of the batch before it: that is
the watermark its report gives (``eventTime.watermark``), the one up to which it closes
windows (removes them from state, and in append mode emits them). A row is dropped as too
late (``numRowsDroppedByWatermark``) against the watermark the batch before ran with: a
window still open when a batch starts takes that batch's rows, even behind its watermark.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from streamlab.progress import as_dict, timestamp

#: The watermark of a query that has seen no event time yet.
NO_WATERMARK_MS = 0

OPEN_COLOUR = "#1e88e5"
CLOSED_COLOUR = "#9e9e9e"
WATERMARK_COLOUR = "#c62828"
EVENTS_COLOUR = "#fbc02d"


@dataclass(frozen=True)
class OperatorStep:
    """One stateful operator in one batch, as the report's ``stateOperators[i]`` says."""

    name: str  # operatorName: stateStoreSave, dedupe, transformWithStateExec, ...
    rows_total: int  # numRowsTotal: rows in its state after the batch
    rows_updated: int
    rows_removed: int
    dropped_by_watermark: int  # input rows it dropped as later than the watermark


@dataclass(frozen=True, order=True)
class StateWindow:
    """A window held in a windowed aggregation's state; times in ms since the epoch (UTC)."""

    start_ms: int
    end_ms: int
    group: str = ""  # the key's other columns, ``machine_name=a``; empty for a window alone

    @property
    def label(self) -> str:
        text = f"{_clock(self.start_ms)}-{_clock(self.end_ms)}"
        return f"{text} {self.group}" if self.group else text


@dataclass(frozen=True)
class TimeBatch:
    """One micro-batch: the watermark it ran with, its event times, rows in and out, state.

    Event times are ISO-8601 text as the report gives them (``2026-11-22T10:00:25.000Z``);
    ``events_min``/``events_max``/``events_avg`` are None for a batch without input.
    ``open_windows`` are the windows in state after the batch and ``closed_windows`` those in
    state after the batch before that it removed; both None when the state was not read.
    """

    batch_id: int
    timestamp: str  # when the batch started
    watermark: str | None
    events_min: str | None
    events_max: str | None
    events_avg: str | None
    input_rows: int
    output_rows: int | None  # sink.numOutputRows; None when the sink does not count (-1)
    operators: tuple[OperatorStep, ...] = ()
    open_windows: tuple[StateWindow, ...] | None = None
    closed_windows: tuple[StateWindow, ...] | None = None

    @property
    def dropped_by_watermark(self) -> int:
        """Input rows every stateful operator together dropped as late."""
        return sum(op.dropped_by_watermark for op in self.operators)

    @property
    def watermark_ms(self) -> int | None:
        return to_ms(self.watermark)


#: What the state reader says of an operator whose key holds no window.
NOT_WINDOWED = "not windowed"
#: A cache of state reads: (operator id, batch id) -> the windows after that batch.
StateCache = MutableMapping[tuple[int, int], "tuple[StateWindow, ...] | str"]


def to_ms(text: str | None) -> int | None:
    """Milliseconds since the epoch of a report's ISO-8601 time; None for None."""
    parsed = timestamp(text)
    return None if parsed is None else round(parsed.timestamp() * 1000)


def _clock(ms: int | None) -> str:
    """``10:00:25`` (UTC), with milliseconds only when there are any."""
    if ms is None:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    text = moment.strftime("%H:%M:%S")
    return text + (f".{ms % 1000:03d}" if ms % 1000 else "")


def _moment(ms: int) -> str:
    """``2026-11-22 10:00:25 UTC``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{ms % 1000:03d}Z"
    )


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def time_batches(
    progresses: Iterable[Any],
    *,
    spark: Any = None,
    checkpoint: str | Path | None = None,
    operator_id: int = 0,
    cache: StateCache | None = None,
) -> list[TimeBatch]:
    """One :class:`TimeBatch` per progress report, in batch order.

    ``progresses`` are a query's reports: ``query.recentProgress``, its JSON text or dicts.
    A batch Spark reported twice (it ran again after a restart) counts once, as last reported.
    With ``spark`` and ``checkpoint`` the state reader reads stateful operator ``operator_id``
    at each batch; for a windowed aggregation (its key has a ``window`` struct) the batches
    get their open and closed windows. ``cache`` keeps those reads between calls: the state
    of a committed batch does not change. A batch whose state cannot be read (it is older
    than the checkpoint keeps) has None for both.
    """
    reports: dict[int, dict] = {}
    for progress in progresses:
        report = as_dict(progress)
        reports[int(report["batchId"])] = report
    batches = [_batch(reports[b]) for b in sorted(reports)]
    if spark is None or checkpoint is None or not batches:
        return batches
    if not any(b.operators for b in batches):
        return batches  # no state to read
    reads = cache if cache is not None else {}
    first = batches[0].batch_id
    before = _windows_at(spark, checkpoint, first - 1, operator_id, reads) if first > 0 else ()
    if isinstance(before, str):  # NOT_WINDOWED, the only text a read gives
        return batches
    placed = []
    for batch in batches:
        after = _windows_at(spark, checkpoint, batch.batch_id, operator_id, reads)
        if isinstance(after, str):
            return batches
        if after is None:
            placed.append(batch)
            before = None
            continue
        closed = tuple(sorted(set(before) - set(after))) if before is not None else None
        closed = _born_and_closed(spark, checkpoint, batch, operator_id, closed, after)
        placed.append(_with_windows(batch, tuple(sorted(after)), closed))
        before = after
    return placed


def _batch(report: dict) -> TimeBatch:
    event_time = report.get("eventTime") or {}
    sink = report.get("sink") or {}
    output = sink.get("numOutputRows")
    return TimeBatch(
        batch_id=int(report["batchId"]),
        timestamp=report.get("timestamp", ""),
        watermark=event_time.get("watermark"),
        events_min=event_time.get("min"),
        events_max=event_time.get("max"),
        events_avg=event_time.get("avg"),
        input_rows=_int(report.get("numInputRows")),
        output_rows=None if output is None or int(output) < 0 else int(output),
        operators=tuple(
            OperatorStep(
                name=op.get("operatorName", ""),
                rows_total=_int(op.get("numRowsTotal")),
                rows_updated=_int(op.get("numRowsUpdated")),
                rows_removed=_int(op.get("numRowsRemoved")),
                dropped_by_watermark=_int(op.get("numRowsDroppedByWatermark")),
            )
            for op in report.get("stateOperators") or []
        ),
    )


def _born_and_closed(
    spark: Any,
    checkpoint: str | Path,
    batch: TimeBatch,
    operator_id: int,
    closed: tuple[StateWindow, ...] | None,
    after: tuple[StateWindow, ...],
) -> tuple[StateWindow, ...] | None:
    """``closed`` with the windows the batch opened and closed itself, which neither the state
    before it nor the state after it holds (a late row behind the batch's own watermark but
    not the one before). The operator's count of removed rows says when there are any; the
    state's change feed (the changelog of this batch) says which."""
    if closed is None or operator_id >= len(batch.operators):
        return closed
    if batch.operators[operator_id].rows_removed <= len(closed):
        return closed
    deleted = windows_in_state(
        spark, checkpoint, batch.batch_id, operator_id=operator_id, deleted=True
    )
    if not isinstance(deleted, tuple):
        return closed
    return tuple(sorted((set(closed) | set(deleted)) - set(after)))


def _with_windows(
    batch: TimeBatch,
    open_windows: tuple[StateWindow, ...],
    closed: tuple[StateWindow, ...] | None,
) -> TimeBatch:
    return replace(batch, open_windows=open_windows, closed_windows=closed)


def _windows_at(
    spark: Any, checkpoint: str | Path, batch_id: int, operator_id: int, cache: StateCache
) -> tuple[StateWindow, ...] | str | None:
    key = (operator_id, batch_id)
    if key in cache:
        return cache[key]
    windows = windows_in_state(spark, checkpoint, batch_id, operator_id=operator_id)
    if windows is not None:  # unreadable now is asked again next time
        cache[key] = windows
    return windows


def windows_in_state(
    spark: Any,
    checkpoint: str | Path,
    batch_id: int,
    *,
    operator_id: int = 0,
    deleted: bool = False,
) -> tuple[StateWindow, ...] | str | None:
    """The windows in a windowed aggregation's state after batch ``batch_id``, by the reader.

    ``spark.read.format("statestore")`` on ``checkpoint`` at that batch and stateful operator.
    :data:`NOT_WINDOWED` when the operator's key holds no ``window`` struct; None when the
    reader finds no state for the batch. ``deleted=True``: instead, the windows the batch
    removed from state, from its change feed (a state store that keeps a changelog).
    """
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    unreadable = (PySparkException, Py4JError, KeyError)
    try:
        state = _state_reader(spark, checkpoint, batch_id, operator_id, deleted)
        key_type = state.schema["key"].dataType
    except unreadable:
        return None
    names = key_type.names if isinstance(key_type, StructType) else []
    if "window" not in names or not isinstance(key_type["window"].dataType, StructType):
        return NOT_WINDOWED
    others = [n for n in names if n != "window"]
    columns = [
        F.unix_micros(F.col("key.window.start")).alias("start"),
        F.unix_micros(F.col("key.window.end")).alias("end"),
        *[F.col(f"key.{n}").cast("string").alias(f"_{i}") for i, n in enumerate(others)],
    ]
    try:
        rows = state.select(*columns).collect()
    except unreadable:
        return None
    return tuple(
        sorted(
            {
                StateWindow(
                    start_ms=row["start"] // 1000,
                    end_ms=row["end"] // 1000,
                    group=", ".join(f"{n}={row[f'_{i}']}" for i, n in enumerate(others)),
                )
                for row in rows
            }
        )
    )


def _state_reader(
    spark: Any, checkpoint: str | Path, batch_id: int, operator_id: int, deleted: bool
) -> Any:
    """The state after ``batch_id``; with ``deleted``, the keys it removed (its change feed)."""
    from pyspark.sql import functions as F

    reader = spark.read.format("statestore").option("operatorId", operator_id)
    if not deleted:
        return reader.option("batchId", batch_id).load(str(checkpoint))
    changes = (
        reader.option("readChangeFeed", "true")
        .option("changeStartBatchId", batch_id)
        .option("changeEndBatchId", batch_id)
        .load(str(checkpoint))
    )
    return changes.where(F.col("change_type") == "delete")


class TimeView:
    """Event time per micro-batch: an axis with the watermark and the windows, and a table.

    Each batch gets a line on one event-time axis: the span of its event times, the
    watermark it ran with, and (when the state was read) the windows open after it and those
    it closed; then a table of its numbers. ``display(view)``. :meth:`show` draws reports;
    :meth:`of` a query's, which :meth:`refresh` reads again and :meth:`follow` keeps reading.
    """

    def __init__(
        self,
        progresses: Iterable[Any] = (),
        *,
        spark: Any = None,
        checkpoint: str | Path | None = None,
        operator_id: int = 0,
        title: str = "Event time, batch by batch",
    ) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self.operator_id = operator_id
        self.title = title
        self.query: Any = None
        self.batches: list[TimeBatch] = []
        self._cache: dict = {}
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self.heading = widgets.HTML()
        self.timeline = widgets.HTML()
        self.timeline.add_class("streamlab-timeline")
        self.table = widgets.HTML()
        self.table.add_class("streamlab-time-table")
        self.widget = widgets.VBox([self.heading, self.timeline, self.table])
        self.widget.add_class("streamlab-time-view")
        self.show(progresses)

    @classmethod
    def of(
        cls,
        query: Any,
        *,
        spark: Any = None,
        checkpoint: str | Path | None = None,
        operator_id: int = 0,
        title: str = "Event time, batch by batch",
    ) -> TimeView:
        """The view of ``query``'s progress reports (and, with ``checkpoint``, its state)."""
        if checkpoint is not None and spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession()
            if spark is None:
                raise ValueError("reading the state needs the query's session: pass spark=")
        view = cls(spark=spark, checkpoint=checkpoint, operator_id=operator_id, title=title)
        view.query = query
        view.refresh()
        return view

    def show(self, progresses: Iterable[Any], note: str = "") -> list[TimeBatch]:
        """Draw these progress reports; return the batches drawn."""
        with self._lock:
            batches = time_batches(
                progresses,
                spark=self.spark,
                checkpoint=self.checkpoint,
                operator_id=self.operator_id,
                cache=self._cache,
            )
            self.batches = batches
            self._draw(note)
        return batches

    def refresh(self) -> list[TimeBatch]:
        """Read the query's reports again (the newest 100 Spark keeps) and draw them."""
        if self.query is None:
            raise ValueError("this view shows given reports; TimeView.of(query) follows a query")
        active = self.query.isActive
        return self.show(self.query.recentProgress, "" if active else "the query has stopped")

    def follow(self, interval: float = 2.0) -> None:
        """Refresh every ``interval`` seconds in a background thread, until :meth:`stop` or
        the query ends."""
        if self.query is None:
            raise ValueError("TimeView.of(query) makes a view that can follow its query")
        self.stop()
        stop = self._stop = threading.Event()

        def run() -> None:
            while not stop.is_set():
                try:
                    self.refresh()
                except Exception as error:  # the display must not kill the thread
                    self._say(f"{type(error).__name__}: {str(error)[:200]}")
                if not self.query.isActive:
                    return
                stop.wait(interval)

        self._thread = threading.Thread(target=run, name="streamlab-time-view", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following; the view keeps what it shows."""
        if self._stop is not None:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(30)
            self._stop = self._thread = None

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def html(self) -> str:
        """The view as one HTML fragment (what the widget's parts show, together)."""
        return (
            '<div class="streamlab-time-view">'
            + self.heading.value
            + self.timeline.value
            + self.table.value
            + "</div>"
        )

    # -- drawing ----------------------------------------------------------------------------

    def _say(self, note: str) -> None:
        self.heading.value = _heading(self.title, self.batches, note)

    def _draw(self, note: str) -> None:
        with self.widget.hold_sync():
            self.heading.value = _heading(self.title, self.batches, note)
            self.timeline.value = _timeline(self.batches)
            self.table.value = _table(self.batches)


def _heading(title: str, batches: list[TimeBatch], note: str) -> str:
    count = len(batches)
    said = f"{count} micro-batch{'es' if count != 1 else ''}" if count else "no micro-batch yet"
    extra = f"; {html.escape(note)}" if note else ""
    span = _span(batches)
    day = f" of {_moment(span[0])[:10]}" if span else ""
    return f"<div><b>{html.escape(title)}</b> <small>{said}{extra}; times in UTC{day}</small></div>"


def _span(batches: list[TimeBatch]) -> tuple[int, int] | None:
    moments: list[int] = []
    for batch in batches:
        for text in (batch.events_min, batch.events_max):
            ms = to_ms(text)
            if ms is not None:
                moments.append(ms)
        watermark = batch.watermark_ms
        if watermark is not None and watermark != NO_WATERMARK_MS:
            moments.append(watermark)
        for window in (batch.open_windows or ()) + (batch.closed_windows or ()):
            moments += [window.start_ms, window.end_ms]
    if not moments:
        return None
    low, high = min(moments), max(moments)
    return (low, high) if high > low else (low - 1000, high + 1000)


@dataclass(frozen=True)
class _Axis:
    """The event-time axis from ``low`` to ``high`` (ms): where a moment sits on it, in %."""

    low: int
    high: int

    def at(self, ms: int) -> float:
        return max(0.0, min(100.0, (ms - self.low) * 100 / (self.high - self.low)))


#: Pixels from a batch's line top to its first window bar, and from one bar to the next.
_FIRST_LANE = 14
_LANE = 18


def _timeline(batches: list[TimeBatch]) -> str:
    span = _span(batches)
    if span is None:
        return "<div><small>No event time yet: no batch has read a row with one.</small></div>"
    axis = _Axis(*span)
    rows = "".join(_timeline_row(batch, axis) for batch in batches)
    return f'<div style="margin:4px 0">{_axis_labels(axis)}{rows}{_LEGEND}</div>'


def _timeline_row(batch: TimeBatch, axis: _Axis) -> str:
    """One batch's line: its label, then its event times, windows and watermark on the axis."""
    marks = _events_mark(batch, axis)
    windows = _window_marks(batch, axis)
    marks += windows
    marks.append(_watermark_mark(batch, axis))
    height = _FIRST_LANE + _LANE * len(windows) + 16
    dropped = batch.dropped_by_watermark
    late = (
        f'<br><small style="color:#c62828">{dropped} row{"s" if dropped != 1 else ""} '
        "dropped as late</small>"
        if dropped
        else ""
    )
    return (
        f'<div class="streamlab-time-batch" data-batch="{batch.batch_id}" '
        'style="display:flex;align-items:stretch;margin:2px 0">'
        '<div style="width:6em;font-size:12px;line-height:1.3">'
        f"batch {batch.batch_id}{late}</div>"
        f'<div style="position:relative;flex:1;height:{height}px;'
        f'border-bottom:1px solid #ccc;margin-right:6em">{"".join(marks)}</div></div>'
    )


def _events_mark(batch: TimeBatch, axis: _Axis) -> list[str]:
    """The bar of the batch's event times; none for a batch that read no event time."""
    first, last = to_ms(batch.events_min), to_ms(batch.events_max)
    if first is None or last is None:
        return []
    return [
        f'<div class="streamlab-events" data-min="{batch.events_min}" '
        f'data-max="{batch.events_max}" title="event times of this batch" '
        f'style="position:absolute;top:2px;height:8px;left:{axis.at(first):.2f}%;'
        f"width:max(2px,{axis.at(last) - axis.at(first):.2f}%);"
        f'background:{EVENTS_COLOUR}"></div>'
    ]


def _window_marks(batch: TimeBatch, axis: _Axis) -> list[str]:
    """One bar per window, each in its own lane: the open windows, then the closed ones."""
    marks: list[str] = []
    for state, windows in (("open", batch.open_windows), ("closed", batch.closed_windows)):
        for window in windows or ():
            lane = _FIRST_LANE + _LANE * len(marks)
            marks.append(_window_mark(state, window, axis, lane))
    return marks


def _window_mark(state: str, window: StateWindow, axis: _Axis, lane: int) -> str:
    """A window's bar, ``lane`` pixels from the top: solid blue open, dashed grey closed."""
    colour = OPEN_COLOUR if state == "open" else CLOSED_COLOUR
    border = "solid" if state == "open" else "dashed"
    left = axis.at(window.start_ms)
    side = "right" if left > 55 else "left"  # near the right end, the label keeps to it
    return (
        f'<div class="streamlab-window streamlab-window-{state}" '
        f'data-state="{state}" data-start="{_iso(window.start_ms)}" '
        f'data-end="{_iso(window.end_ms)}" '
        f'title="{state}: {html.escape(window.label)}" '
        f'style="position:absolute;top:{lane}px;height:16px;box-sizing:border-box;'
        f"left:{left:.2f}%;"
        f"width:{axis.at(window.end_ms) - left:.2f}%;"
        f"border:1px {border} {colour};background:{colour}22;overflow:hidden;"
        f'font-size:11px;line-height:14px;padding:0 2px">'
        # The label fits its box, cut short with an ellipsis; the title holds it whole.
        '<span class="streamlab-window-label" style="display:block;overflow:hidden;'
        f'white-space:nowrap;text-overflow:ellipsis;text-align:{side}">'
        f"{state} {html.escape(window.label)}</span></div>"
    )


def _watermark_mark(batch: TimeBatch, axis: _Axis) -> str:
    """The watermark the batch ran with, a red line; or words when there is none yet."""
    watermark = batch.watermark_ms
    if watermark is None or watermark == NO_WATERMARK_MS:
        return (
            '<div class="streamlab-watermark streamlab-no-watermark" data-watermark="" '
            'style="position:absolute;bottom:0;left:0;font-size:11px;color:#595959">'
            "no watermark yet</div>"
        )
    return (
        f'<div class="streamlab-watermark" data-watermark="{batch.watermark}" '
        f'style="position:absolute;top:0;bottom:0;left:{axis.at(watermark):.2f}%;'
        f'border-left:2px solid {WATERMARK_COLOUR}">'
        f'<span style="position:absolute;bottom:0;left:3px;font-size:11px;'
        f'white-space:nowrap;color:{WATERMARK_COLOUR}">'
        f"watermark {_clock(watermark)}</span></div>"
    )


#: Steps between the axis's ticks, in seconds: the first that gives at most :data:`_TICKS`.
_TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
_TICKS = 7


def _ticks(axis: _Axis) -> list[int]:
    """Round moments (ms) inside the axis, a whole step apart, away from its two ends."""
    span = axis.high - axis.low
    step = 1000 * next((s for s in _TICK_STEPS if span / (1000 * s) <= _TICKS), _TICK_STEPS[-1])
    first = -(-axis.low // step) * step
    return [t for t in range(first, axis.high, step) if 8 < axis.at(t) < 92]


def _axis_labels(axis: _Axis) -> str:
    """The axis above the batches' lines: its two ends and round moments between, as times of
    day (the date is in the heading)."""
    ticks = "".join(
        f'<span class="streamlab-axis-tick" data-time="{_iso(t)}" style="position:absolute;'
        f"left:{axis.at(t):.2f}%;transform:translateX(-50%);border-left:1px solid #bbb;"
        f'padding-left:2px;white-space:nowrap">{_clock(t)}</span>'
        for t in _ticks(axis)
    )
    return (
        '<div style="display:flex;font-size:11px;color:#555">'
        '<div style="width:6em"></div><div style="flex:1;position:relative;height:15px;'
        'margin-right:6em">'
        f'<span class="streamlab-axis-start" data-time="{_iso(axis.low)}" '
        f'style="position:absolute;left:0">{_clock(axis.low)}</span>{ticks}'
        f'<span class="streamlab-axis-end" data-time="{_iso(axis.high)}" '
        f'style="position:absolute;right:0">{_clock(axis.high)}</span>'
        "</div></div>"
    )


_LEGEND = (
    '<div style="font-size:11px;color:#555">'
    f'<span style="background:{EVENTS_COLOUR}">&nbsp;&nbsp;&nbsp;</span> event times read '
    f'&nbsp; <span style="border-left:2px solid {WATERMARK_COLOUR}">&nbsp;</span>watermark '
    "the batch ran with &nbsp; "
    f'<span style="border:1px solid {OPEN_COLOUR}">open</span> window in state after it '
    f'&nbsp; <span style="border:1px dashed {CLOSED_COLOUR}">closed</span> window it '
    "removed from state (one it opened and closed itself included, read from the state's "
    "changelog)</div>"
)

#: The style of a number's cell in the table.
_CELL = "style='padding:1px 8px;text-align:right;white-space:nowrap'"


def _table(batches: list[TimeBatch]) -> str:
    if not batches:
        return ""
    operators: list[str] = []
    for batch in batches:
        for op in batch.operators:
            if op.name not in operators:
                operators.append(op.name)
    windowed = any(b.open_windows is not None for b in batches)
    rows = "".join(_table_row(batch, operators, windowed) for batch in batches)
    return (
        "<table style='border-collapse:collapse;font-size:12px;line-height:1.3'>"
        "<caption style='text-align:left'>Each micro-batch's numbers, from its progress report"
        "</caption>"
        f"<thead><tr>{_table_head(operators, windowed)}</tr></thead><tbody>{rows}</tbody></table>"
    )


def _table_head(operators: list[str], windowed: bool) -> str:
    """The column headers: one "state rows" column per stateful operator, windows if read."""
    return (
        "<th scope='col'>batch</th><th scope='col'>watermark it ran with</th>"
        "<th scope='col'>event times read</th><th scope='col'>input rows</th>"
        "<th scope='col'>dropped by watermark</th>"
        + "".join(f"<th scope='col'>state rows: {html.escape(name)}</th>" for name in operators)
        + "<th scope='col'>output rows</th>"
        + ("<th scope='col'>windows</th>" if windowed else "")
    )


def _table_row(batch: TimeBatch, operators: list[str], windowed: bool) -> str:
    """One batch's row of numbers."""
    dropped = batch.dropped_by_watermark
    dropped_text = f"{dropped} late" if dropped else "0"
    dropped_style = "color:#c62828;font-weight:bold;" if dropped else ""
    state_cells = "".join(_state_cell(batch, name) for name in operators)
    output = "-" if batch.output_rows is None else str(batch.output_rows)
    first, last = to_ms(batch.events_min), to_ms(batch.events_max)
    events = f"{_clock(first)} to {_clock(last)}" if batch.events_min is not None else "none"
    watermark_ms = batch.watermark_ms
    watermark = (
        _clock(watermark_ms)
        if watermark_ms is not None and watermark_ms != NO_WATERMARK_MS
        else "none yet"
    )
    windows = _windows_cell(batch) if windowed else ""
    return (
        f"<tr class='streamlab-time-row' data-batch='{batch.batch_id}'>"
        f"<td {_CELL} class='streamlab-batch-id'>{batch.batch_id}</td>"
        f"<td {_CELL} class='streamlab-watermark' data-watermark='{batch.watermark or ''}'>"
        f"{watermark}</td>"
        f"<td {_CELL} class='streamlab-event-times'>{events}</td>"
        f"<td {_CELL} class='streamlab-input-rows'>{batch.input_rows}</td>"
        f"<td style='padding:1px 8px;text-align:right;white-space:nowrap;{dropped_style}' "
        f"class='streamlab-dropped' data-dropped='{dropped}'>{dropped_text}</td>"
        + state_cells
        + f"<td {_CELL} class='streamlab-output-rows'>{output}</td>{windows}</tr>"
    )


def _state_cell(batch: TimeBatch, name: str) -> str:
    """Operator ``name``'s state rows after the batch; ``-`` when the batch did not run it."""
    op = next((o for o in batch.operators if o.name == name), None)
    if op is None:
        return f"<td {_CELL}>-</td>"
    return (
        f"<td {_CELL} class='streamlab-state' data-operator='{html.escape(name)}'>"
        f"<span class='streamlab-state-rows'>{op.rows_total}</span>"
        f" <small>(<span class='streamlab-state-updated'>{op.rows_updated}</span> "
        f"updated, <span class='streamlab-state-removed'>{op.rows_removed}</span> "
        "removed)</small></td>"
    )


def _windows_cell(batch: TimeBatch) -> str:
    """How many windows are open after the batch and how many it closed, on one line; the
    windows themselves, one a line, when the learner opens it."""
    groups = (("open", batch.open_windows or ()), ("closed", batch.closed_windows or ()))
    listed = [
        f"<span class='streamlab-window-{state}'>{state} {html.escape(w.label)}</span>"
        for state, group in groups
        for w in group
    ]
    said = ", ".join(f"{len(group)} {state}" for state, group in groups)
    return (
        "<td style='padding:1px 8px;white-space:nowrap' class='streamlab-windows'>"
        f"<details><summary>{said}</summary>{'<br>'.join(listed)}</details></td>"
    )
