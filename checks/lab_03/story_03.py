"""What lab 03's checks share: a state function called as Spark calls it, and the seed run.

Each state function is called like Spark calls it, with a ``GroupState`` the check builds (its
watermark and processing time set by the check, not read from a clock). The Spark half writes
JSON files, runs the reference seed function (sent to Spark's workers by value) and reads back
what it emitted, batch by batch.
"""

import contextlib
import io
import warnings
from datetime import timedelta
from pathlib import Path

import pandas as pd
from pyspark.errors import AnalysisException, PySparkRuntimeError
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from streamlab.deadlines import drain
from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    START_MS,
    TRANSITION_DDL,
    TRANSITION_FIELDS,
    UNHEALTHY,
    CheckFailed,
    deliver_file,
    expect_dataframe,
    expect_equal,
    expect_that,
)

STATE_SCHEMA = "status STRING, last_seen_ms LONG"
SCHEMA = "machine_name STRING, machine_time TIMESTAMP, event_time TIMESTAMP"


def at(second: float) -> int:
    return START_MS + int(second * 1000)


def clock(ms: int) -> str:
    return (START + timedelta(milliseconds=ms - START_MS)).strftime("%H:%M:%S.%f")[:-3]


def show(rows) -> str:
    """Transitions the way a person reads them: `m1 None->Initializing at 10:00:00.000`."""
    return "; ".join(f"{m} {p}->{s} at {clock(t)}" for m, s, p, t in rows) or "no transition"


# --- calling a state function as Spark does -----------------------------------------------


def group_state(
    value=None,
    *,
    conf,
    timed_out=False,
    watermark_ms=START_MS - 10_000,
    processing_ms=START_MS + 60_000,
) -> GroupState:
    return GroupState(
        optionalValue=Row(*value) if value is not None else None,
        batchProcessingTimeMs=processing_ms,
        eventTimeWatermarkMs=watermark_ms,
        timeoutConf=conf,
        hasTimedOut=timed_out,
        watermarkPresent=True,
        defined=value is not None,
        updated=False,
        removed=False,
        timeoutTimestamp=-1,
        keyAsUnsafe=b"",
        valueSchema=None,
    )


def heartbeats(machine: str, *seconds: float) -> pd.DataFrame:
    # As Spark hands them over: naive timestamps in the session time zone (UTC).
    times = [pd.Timestamp(at(s), unit="ms") for s in seconds]
    return pd.DataFrame(
        {"machine_name": [machine] * len(times), "machine_time": times, "event_time": times}
    )


def _none(value):
    return None if value is None or (isinstance(value, float) and value != value) else value


def call(
    fn, name: str, state: GroupState, *frames: pd.DataFrame, machine="m1", timeout_ms=5_000
) -> list[tuple]:
    """Call ``fn`` like Spark does and return its rows as (machine, status, previous, ms)."""
    outputs = _outputs(fn, name, state, frames, machine, timeout_ms)
    expect_that(
        outputs is not None,
        f"{name}() returned None: it should yield its output DataFrames (`yield "
        "transitions_frame(...)`) or return an iterator of them.",
        expected="an iterator of pandas DataFrames",
        actual="None",
    )
    frames_out = [f for f in outputs or []]
    wrong = [type(f).__name__ for f in frames_out if not isinstance(f, pd.DataFrame)]
    expect_that(
        not wrong,
        f"{name}() should yield pandas DataFrames. transitions_frame(machine_name, changes) "
        "builds one.",
        expected="pandas DataFrames",
        actual=", ".join(wrong),
    )
    return [row for frame in frames_out for row in _rows(name, frame)]


def _outputs(fn, name: str, state: GroupState, frames, machine, timeout_ms) -> list | None:
    """What ``fn`` yields for one key, as a list (None when it returned None)."""
    try:
        result = fn((machine,), iter(frames), state, timeout_ms=timeout_ms)
        return list(result) if result is not None else None
    except PySparkRuntimeError as error:
        if "set timeout duration" in str(error):
            wanted = (
                "setTimeoutTimestamp"
                if state._timeout_conf == "EventTimeTimeout"
                else "setTimeoutDuration"
            )
            raise CheckFailed(
                f"{name}() set the wrong kind of timeout: with "
                f"GroupStateTimeout.{state._timeout_conf} use state.{wanted}(...).",
                expected=f"state.{wanted}(...)",
                actual=f"Spark said: {str(error).splitlines()[0][:200]}",
            ) from None
        raise
    except TypeError as error:
        if "not iterable" in str(error):
            raise CheckFailed(
                f"{name}() should yield pandas DataFrames (use `yield`, or return a list of "
                "them); it returned something that is not iterable.",
                expected="an iterator of pandas DataFrames",
                actual=str(error),
            ) from None
        raise


def _rows(name: str, frame: pd.DataFrame) -> list[tuple]:
    """A yielded DataFrame's transitions as (machine, status, previous, ms)."""
    missing = set(TRANSITION_FIELDS) - set(frame.columns)
    if missing:
        raise CheckFailed(
            f"{name}() yielded a DataFrame without the column(s) {sorted(missing)}.",
            expected="machine_name, status, previous_status, last_status_change_time",
            actual=", ".join(str(c) for c in frame.columns),
        )
    rows = []
    for r in frame.itertuples(index=False):
        stamp = pd.Timestamp(r.last_status_change_time)
        rows.append(
            (r.machine_name, r.status, _none(r.previous_status), int(stamp.value // 1_000_000))
        )
    return rows


def stored(state: GroupState):
    return state.getOption


# --- pure Python: 3.1 ---------------------------------------------------------------------

EVENT = GroupStateTimeout.EventTimeTimeout
PROCESSING = GroupStateTimeout.ProcessingTimeTimeout


def timeout_of(state: GroupState) -> str:
    return "not set" if state._timeout_timestamp < 0 else clock(state._timeout_timestamp)


# --- Spark ----------------------------------------------------------------------------------


def _frame(machine_name, changes):
    warnings.filterwarnings(
        "ignore", category=FutureWarning, message="The behavior of DataFrame concatenation"
    )
    return pd.DataFrame(
        {
            "machine_name": [machine_name] * len(changes),
            "status": [c[0] for c in changes],
            "previous_status": [c[1] for c in changes],
            "last_status_change_time": [pd.Timestamp(c[2], unit="ms", tz="UTC") for c in changes],
        }
    )


def _arm_event_time(state, last_seen_ms, timeout_ms):
    state.setTimeoutTimestamp(last_seen_ms + timeout_ms)


def reference_transition(key, pdfs, state, timeout_ms=5_000, arm=_arm_event_time):
    """The seed's state function, as 3.1 asks for it."""
    (machine_name,) = key
    status, last_seen_ms = state.getOption or (None, None)
    changes = []
    if state.hasTimedOut:
        changes.append((UNHEALTHY, status, last_seen_ms + timeout_ms))
        state.update((UNHEALTHY, last_seen_ms))
    else:
        for t in sorted(
            int(pd.Timestamp(t).value // 1_000_000) for pdf in pdfs for t in pdf["event_time"]
        ):
            new = INITIALIZING if status is None else HEALTHY
            if new != status:
                changes.append((new, status, t))
                status = new
            last_seen_ms = t if last_seen_ms is None else max(last_seen_ms, t)
        state.update((status, last_seen_ms))
        arm(state, last_seen_ms, timeout_ms)
    if changes:
        yield _frame(machine_name, changes)


def deliver(folder: Path, name: str, machines, seconds) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "machine_name": m,
            "machine_time": (START + timedelta(seconds=s)).isoformat(),
            "event_time": (START + timedelta(seconds=s)).isoformat(),
        }
        for s in seconds
        for m in machines
    ]
    deliver_file(folder, name, lines, order=None)


def status_rows(spark, table: str) -> list[tuple]:
    rows = (
        spark.table(table)
        .select(
            "machine_name",
            "status",
            "previous_status",
            (F.unix_micros("last_status_change_time") / 1000).cast("long").alias("ms"),
        )
        .collect()
    )
    return sorted((tuple(r) for r in rows), key=lambda r: (r[3], r[0], r[1]))


def plan_of(df: DataFrame) -> str:
    """The query's plans as ``explain`` prints them, on a classic session or Spark Connect."""
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        df.explain(mode="extended")
    return shown.getvalue()


def start(df, name: str, checkpoint_dir: str, fn_name: str, timeout: str, **trigger):
    expect_dataframe(df, fn_name)
    if not df.isStreaming:
        raise CheckFailed(f"{fn_name}() should return the streaming DataFrame it built.")
    plan = plan_of(df)
    line = next((ln for ln in plan.splitlines() if "FlatMapGroupsInPandasWithState" in ln), "")
    if not line:
        raise CheckFailed(
            f"{fn_name}() should group by machine_name and call applyInPandasWithState."
        )
    used = next(
        (
            t
            for t in ("EventTimeTimeout", "ProcessingTimeTimeout", "NoTimeout")
            if line.rstrip().endswith(t)
        ),
        "?",
    )
    why = (
        "the seed's design, whose flaw exercise 3.3 shows; the fix is exercise 3.4"
        if timeout == "EventTimeTimeout"
        else "the fix: Spark's clock, not the events', decides when a machine is silent"
    )
    expect_equal(used, timeout, f"The kind of timeout {fn_name}() uses: {why}.")
    writer = (
        df.writeStream.format("memory")
        .queryName(name)
        .outputMode("update")
        .option("checkpointLocation", checkpoint_dir)
    )
    if trigger:
        writer = writer.trigger(**trigger)
    try:
        return writer.start()
    except AnalysisException as error:
        text = str(error)
        first = text.splitlines()[0][:220]
        if "watermark" in text.lower():
            raise CheckFailed(
                f"Spark refused {fn_name}(): an event-time timeout needs a watermark on the "
                f"heartbeats. (Spark said: {first})"
            ) from None
        if "output mode" in text.lower() or "outputmode" in text.lower():
            raise CheckFailed(
                f"Spark refused {fn_name}() in update mode: its applyInPandasWithState should "
                f"run in update output mode. (Spark said: {first})"
            ) from None
        raise CheckFailed(f"Starting the query of {fn_name}() failed: {first}") from None


SEED_FIRST = [
    ("m1", INITIALIZING, None, at(0)),
    ("m2", INITIALIZING, None, at(0)),
    ("m1", HEALTHY, INITIALIZING, at(1)),
    ("m2", HEALTHY, INITIALIZING, at(1)),
]


def ran(query) -> list[dict]:
    """The progress reports of micro-batches that ran (not of triggers that found nothing)."""
    return [p for p in query.recentProgress if "addBatch" in p.get("durationMs", {})]


#: Exercise 3.3's steps after the fleet's first three seconds: (name, deliveries).
STEPS = [
    ("Producer 1 stops", [(["Producer 2", "Producer 3"], range(3, 11))]),
    ("everyone stops", []),
    ("Producer 1 comes back", [(["Producer 1"], [30])]),
]


def seed_run(spark, folder: Path, checkpoint_dir: str, name: str = "check_3_3"):
    """The notebook's seed run: the fleet's first three seconds, then STEPS. Returns the rows
    emitted at each step, the stopped query, and the id of the last micro-batch before the last
    step's deliveries."""
    folder.mkdir()
    status = (
        spark.readStream.schema(SCHEMA)
        .json(str(folder))
        .withWatermark("event_time", "2 seconds")
        .groupBy("machine_name")
        .applyInPandasWithState(
            reference_transition,
            TRANSITION_DDL,
            STATE_SCHEMA,
            "update",
            GroupStateTimeout.EventTimeTimeout,
        )
    )
    query = (
        status.writeStream.format("memory")
        .queryName(name)
        .outputMode("update")
        .option("checkpointLocation", checkpoint_dir)
        .start()
    )
    deliver(folder, "0", ["Producer 1", "Producer 2", "Producer 3"], range(0, 3))
    drain(
        query, within=240, what="the check's query over your processor to process what it was given"
    )
    seen, said = len(status_rows(spark, name)), {}
    for number, (step, deliveries) in enumerate(STEPS, 1):
        before = ran(query)[-1]["batchId"]
        for machines, seconds in deliveries:
            deliver(folder, str(number), machines, seconds)
        drain(
            query,
            within=240,
            what="the check's query over your processor to process what it was given",
        )
        rows = status_rows(spark, name)
        said[step] = [(m, s, p, clock(t)[:8]) for m, s, p, t in rows[seen:]]
        seen = len(rows)
    query.stop()
    return said, query, before


def run_batches(query, count: int) -> None:
    """Wait until ``count`` micro-batches have completed; bounded by the check's time limit."""
    while query.lastProgress is None or query.lastProgress["batchId"] < count - 1:
        if query.awaitTermination(0.1):
            error = query.exception()
            raise CheckFailed(
                f"The query stopped: {str(error)[:300]}"
                if error
                else "The query stopped on its own: a monitor runs until it is stopped."
            )
