"""Checks for lab 03 · Arbitrary state, first try.

Unit checks first: each state function is called like Spark calls it, with a ``GroupState``
the check builds (its watermark and processing time set by the check, not read from a
clock). Then Spark, on JSON files the check writes:

- 3.2 runs the learner's query around a reference seed function: another machine's
  traffic times a silent machine out; and **the flaw**: once every event has been
  processed, the watermark stands still and nothing times out, even with a 1 ms timeout.
- 3.3 runs the learner's fixed query on the same input with a 1 ms processing-time timeout:
  the no-data micro-batch that follows the data marks every machine Unhealthy.
"""

import json
import os
import sys
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
from pyspark import cloudpickle
from pyspark.errors import AnalysisException, PySparkRuntimeError
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from streamlab.grading import exercise

# Spark's Python workers cannot import this file: send the reference function by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

INITIALIZING, HEALTHY, UNHEALTHY = "Initializing", "Healthy", "Unhealthy"
OUTPUT_SCHEMA = (
    "machine_name STRING, status STRING, previous_status STRING, last_status_change_time TIMESTAMP"
)
STATE_SCHEMA = "status STRING, last_seen_ms LONG"
SCHEMA = "machine_name STRING, machine_time TIMESTAMP, event_time TIMESTAMP"
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
T0 = int(START.timestamp() * 1000)  # START in epoch milliseconds


def at(second: float) -> int:
    return T0 + int(second * 1000)


def clock(ms: int) -> str:
    return (START + timedelta(milliseconds=ms - T0)).strftime("%H:%M:%S.%f")[:-3]


def show(rows) -> str:
    """Transitions the way a person reads them: `m1 None->Initializing at 10:00:00.000`."""
    return "; ".join(f"{m} {p}->{s} at {clock(t)}" for m, s, p, t in rows) or "no transition"


# --- calling a state function as Spark does -----------------------------------------------


def group_state(
    value=None, *, conf, timed_out=False, watermark_ms=T0 - 10_000, processing_ms=T0 + 60_000
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
    try:
        result = fn((machine,), iter(frames), state, timeout_ms=timeout_ms)
        outputs = list(result) if result is not None else None
    except PySparkRuntimeError as error:
        if "set timeout duration" in str(error):
            wanted = (
                "setTimeoutTimestamp"
                if state._timeout_conf == "EventTimeTimeout"
                else "setTimeoutDuration"
            )
            raise AssertionError(
                f"{name}() set the wrong kind of timeout: with "
                f"GroupStateTimeout.{state._timeout_conf} use state.{wanted}(...)."
            ) from None
        raise
    except TypeError as error:
        if "not iterable" in str(error):
            raise AssertionError(
                f"{name}() should yield pandas DataFrames (use `yield`, or return a list of "
                f"them); it returned something that is not iterable: {error}."
            ) from None
        raise
    assert outputs is not None, (
        f"{name}() returned None: it should yield its output DataFrames (`yield "
        "transitions_frame(...)`) or return an iterator of them."
    )
    frames_out = [f for f in outputs]
    wrong = [type(f).__name__ for f in frames_out if not isinstance(f, pd.DataFrame)]
    assert not wrong, (
        f"{name}() should yield pandas DataFrames; it yielded {', '.join(wrong)}. "
        "transitions_frame(machine_name, changes) builds one."
    )
    rows = []
    for frame in frames_out:
        missing = {"machine_name", "status", "previous_status", "last_status_change_time"} - set(
            frame.columns
        )
        assert not missing, f"{name}() yielded a DataFrame without the column(s) {sorted(missing)}."
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


@exercise("3.1")
def test_first_heartbeat_initializes_a_machine(nb):
    state = group_state(conf=EVENT)
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, heartbeats("m1", 0)
    )
    expected = [("m1", INITIALIZING, None, at(0))]
    assert rows == expected, (
        f"The first heartbeat of an unknown machine at 10:00:00 should give {show(expected)}; "
        f"got {show(rows)}."
    )
    assert stored(state) == (INITIALIZING, at(0)), (
        f'After it the state should hold ("Initializing", {at(0)}), the status and the '
        f"heartbeat's time in ms; it holds {stored(state)}."
    )
    assert state._timeout_timestamp == at(5), (
        f"The timeout should be set to the heartbeat's time plus timeout_ms "
        f"({clock(at(5))}) with state.setTimeoutTimestamp; it is "
        f"{'not set' if state._timeout_timestamp < 0 else clock(state._timeout_timestamp)}."
    )


@exercise("3.1")
def test_heartbeats_in_order_within_one_batch(nb):
    state = group_state(conf=EVENT)
    # Two frames, the later heartbeat first: the function must order them by event time.
    rows = call(
        nb.heartbeat_state_transition,
        "heartbeat_state_transition",
        state,
        heartbeats("m1", 1.5),
        heartbeats("m1", 0, 3),
    )
    expected = [("m1", INITIALIZING, None, at(0)), ("m1", HEALTHY, INITIALIZING, at(1.5))]
    assert rows == expected, (
        f"Heartbeats at 10:00:00, 10:00:01.5 and 10:00:03 (in two DataFrames, not in order) of "
        f"a new machine should give {show(expected)}: one row per change, none for the third; "
        f"got {show(rows)}."
    )
    assert stored(state) == (HEALTHY, at(3)), (
        f'The state should keep the latest heartbeat, ("Healthy", {at(3)}); it holds '
        f"{stored(state)}."
    )
    assert state._timeout_timestamp == at(8), (
        f"The timeout should follow the latest heartbeat: {clock(at(8))}."
    )


@exercise("3.1")
def test_healthy_machine_emits_nothing_on_a_heartbeat(nb):
    state = group_state((HEALTHY, at(3)), conf=EVENT)
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, heartbeats("m1", 4)
    )
    assert rows == [], (
        f"A heartbeat from a Healthy machine changes nothing, so nothing should be emitted; "
        f"got {show(rows)}."
    )
    assert stored(state) == (HEALTHY, at(4)) and state._timeout_timestamp == at(9), (
        f'The state should become ("Healthy", {at(4)}) and the timeout {clock(at(9))}; they '
        f"are {stored(state)} and {state._timeout_timestamp}."
    )


@exercise("3.1")
def test_timeout_makes_a_machine_unhealthy(nb):
    state = group_state((HEALTHY, at(4)), conf=EVENT, timed_out=True, watermark_ms=at(10))
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, timeout_ms=2_000
    )
    expected = [("m1", UNHEALTHY, HEALTHY, at(6))]
    assert rows == expected, (
        f"A timed-out Healthy machine last seen at 10:00:04, with timeout_ms=2000, should give "
        f"{show(expected)} (last seen + timeout_ms); got {show(rows)}."
    )
    assert stored(state) == (UNHEALTHY, at(4)), (
        f'The state should become ("Unhealthy", {at(4)}): the time of the last heartbeat '
        f"does not change; it holds {stored(state)}."
    )


@exercise("3.1")
def test_unhealthy_machine_recovers_on_a_heartbeat(nb):
    state = group_state((UNHEALTHY, at(4)), conf=EVENT, watermark_ms=at(10))
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, heartbeats("m1", 20)
    )
    expected = [("m1", HEALTHY, UNHEALTHY, at(20))]
    assert rows == expected, (
        f"A heartbeat from an Unhealthy machine should give {show(expected)}; got {show(rows)}."
    )


# --- pure Python: 3.3 ---------------------------------------------------------------------


@exercise("3.3")
def test_fixed_transition_sets_a_processing_time_timeout(nb):
    state = group_state(conf=PROCESSING, processing_ms=T0 + 42_000)
    rows = call(
        nb.heartbeat_processing_time_transition,
        "heartbeat_processing_time_transition",
        state,
        heartbeats("m1", 0, 1),
    )
    expected = [("m1", INITIALIZING, None, at(0)), ("m1", HEALTHY, INITIALIZING, at(1))]
    assert rows == expected, (
        f"Two heartbeats of a new machine should give {show(expected)}, as in 3.1; "
        f"got {show(rows)}."
    )
    assert stored(state) == (HEALTHY, at(1)), (
        f'The state should hold ("Healthy", {at(1)}); it holds {stored(state)}.'
    )
    assert state._timeout_timestamp == T0 + 42_000 + 5_000, (
        "The timeout should be timeout_ms after the batch's processing time, set with "
        "state.setTimeoutDuration(timeout_ms)."
    )


@exercise("3.3")
def test_fixed_transition_on_timeout(nb):
    state = group_state((INITIALIZING, at(1)), conf=PROCESSING, timed_out=True)
    rows = call(
        nb.heartbeat_processing_time_transition,
        "heartbeat_processing_time_transition",
        state,
        timeout_ms=5_000,
    )
    expected = [("m1", UNHEALTHY, INITIALIZING, at(6))]
    assert rows == expected, (
        f"A timed-out Initializing machine last seen at 10:00:01 should give {show(expected)}; "
        f"got {show(rows)}."
    )
    assert stored(state) == (UNHEALTHY, at(1)), (
        f'The state should become ("Unhealthy", {at(1)}); it holds {stored(state)}.'
    )


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


def reference_transition(key, pdfs, state, timeout_ms=5_000):
    """The seed's state function, as 3.1 asks for it (the kind of timeout is the state's)."""
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
        if state._timeout_conf == GroupStateTimeout.EventTimeTimeout:
            state.setTimeoutTimestamp(last_seen_ms + timeout_ms)
        else:
            state.setTimeoutDuration(timeout_ms)
    if changes:
        yield _frame(machine_name, changes)


def deliver(folder: Path, name: str, machines, seconds) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {
                "machine_name": m,
                "machine_time": (START + timedelta(seconds=s)).isoformat(),
                "event_time": (START + timedelta(seconds=s)).isoformat(),
            }
        )
        for s in seconds
        for m in machines
    ]
    hidden = folder / f".{name}.tmp"
    hidden.write_text("\n".join(lines) + "\n")
    os.replace(hidden, folder / f"{name}.json")


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
    try:
        return df._jdf.queryExecution().logical().toString()
    except Exception:  # not a classic DataFrame: skip the plan checks
        return ""


def start(df, name: str, checkpoint_dir: str, fn_name: str, timeout: str, **trigger):
    assert isinstance(df, DataFrame), (
        f"{fn_name}() should return a DataFrame; it returned {type(df).__name__}. Build the "
        "query and return it without starting it."
    )
    assert df.isStreaming, f"{fn_name}() should return the streaming DataFrame it built."
    plan = plan_of(df)
    if plan:
        line = next((ln for ln in plan.splitlines() if "FlatMapGroupsInPandasWithState" in ln), "")
        assert line, f"{fn_name}() should group by machine_name and call applyInPandasWithState."
        used = next(
            (
                t
                for t in ("EventTimeTimeout", "ProcessingTimeTimeout", "NoTimeout")
                if line.rstrip().endswith(t)
            ),
            "?",
        )
        why = (
            "the seed's design, whose flaw the next check shows; the fix is exercise 3.3"
            if timeout == "EventTimeTimeout"
            else "the fix"
        )
        assert used == timeout, (
            f"{fn_name}() uses GroupStateTimeout.{used}; it should use "
            f"GroupStateTimeout.{timeout}: {why}."
        )
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
            raise AssertionError(
                f"Spark refused {fn_name}(): an event-time timeout needs a watermark. Call "
                f'.withWatermark("event_time", WATERMARK_DELAY) before the groupBy. (Spark '
                f"said: {first})"
            ) from None
        if "output mode" in text.lower() or "outputmode" in text.lower():
            raise AssertionError(
                f'Spark refused {fn_name}() in update mode: pass "update" as '
                f"applyInPandasWithState's output mode. (Spark said: {first})"
            ) from None
        raise AssertionError(f"Starting the query of {fn_name}() failed: {first}") from None


SEED_FIRST = [
    ("m1", INITIALIZING, None, at(0)),
    ("m2", INITIALIZING, None, at(0)),
    ("m1", HEALTHY, INITIALIZING, at(1)),
    ("m2", HEALTHY, INITIALIZING, at(1)),
]


@exercise("3.2", timeout=120)
def test_seed_times_out_a_machine_when_others_move_the_watermark(
    nb, spark, tmp_path, checkpoint_dir
):
    folder = tmp_path / "in"
    folder.mkdir()
    status = nb.seed_status(
        spark.readStream.schema(SCHEMA).json(str(folder)), reference_transition, 5_000
    )
    query = start(status, "check_3_2_traffic", checkpoint_dir, "seed_status", EVENT)
    deliver(folder, "a", ["m1", "m2"], [0, 1])
    query.processAllAvailable()
    rows = status_rows(spark, "check_3_2_traffic")
    assert rows == SEED_FIRST, (
        f"After heartbeats of m1 and m2 at 10:00:00 and 10:00:01 the query should emit "
        f"{show(SEED_FIRST)}; it emitted {show(rows)}. Is the transition function called with "
        "functools.partial(transition, timeout_ms=timeout_ms)?"
    )
    deliver(folder, "b", ["m2"], [10])
    query.processAllAvailable()
    rows = status_rows(spark, "check_3_2_traffic")
    expected = SEED_FIRST + [("m1", UNHEALTHY, HEALTHY, at(6))]
    assert rows == expected, (
        f"m2's heartbeat at 10:00:10 moves a 2-second watermark to 10:00:08, past m1's timeout "
        f"(10:00:01 + 5 s): m1 should turn Unhealthy. Expected {show(expected)}; got "
        f"{show(rows)}. Is the watermark WATERMARK_DELAY on event_time, and the timeout "
        "GroupStateTimeout.EventTimeTimeout?"
    )


@exercise("3.2", timeout=120)
def test_the_flaw_silence_never_times_out(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    folder.mkdir()
    # Even with a 1 ms timeout: once the events stop, nothing can time out.
    status = nb.seed_status(
        spark.readStream.schema(SCHEMA).json(str(folder)), reference_transition, 1
    )
    query = start(status, "check_3_2_silence", checkpoint_dir, "seed_status", EVENT)
    deliver(folder, "a", ["m1", "m2"], [0, 1])
    query.processAllAvailable()  # returns once Spark has nothing left to do
    rows = status_rows(spark, "check_3_2_silence")
    assert not [r for r in rows if r[1] == UNHEALTHY], (
        f"With the seed's design no machine can turn Unhealthy while no events arrive, yet "
        f"this query emitted {show(rows)}. Exercise 3.2 reproduces the seed (watermark and "
        "GroupStateTimeout.EventTimeTimeout); the fix belongs in 3.3."
    )
    assert rows == SEED_FIRST, f"Expected {show(SEED_FIRST)}; got {show(rows)}."
    ran = [p for p in query.recentProgress if "addBatch" in p.get("durationMs", {})]
    watermarks = [p["eventTime"].get("watermark") for p in ran]
    assert watermarks and watermarks[-1] == "2026-11-22T09:59:59.000Z", (
        f"The watermark should end at the last event time minus 2 s, 09:59:59; the progress "
        f"reports show {watermarks}."
    )
    # Silence: ask Spark to process everything again. Nothing arrived, the watermark did
    # not move, so Spark runs no micro-batch at all, and a timeout only fires in one.
    query.processAllAvailable()
    more = [p for p in query.recentProgress if "addBatch" in p.get("durationMs", {})][len(ran) :]
    assert not more, (
        f"Without new events Spark should run no further micro-batch; it ran {len(more)}."
    )
    assert status_rows(spark, "check_3_2_silence") == SEED_FIRST, (
        "Without new events the seed's output should not change."
    )


def run_batches(query, count: int) -> None:
    """Wait until ``count`` micro-batches have completed; bounded by the check's time limit."""
    while query.lastProgress is None or query.lastProgress["batchId"] < count - 1:
        if query.awaitTermination(0.1):
            error = query.exception()
            raise (
                AssertionError(f"The query stopped: {error}")
                if error
                else AssertionError(
                    "The query stopped on its own: start it without trigger(availableNow=True)."
                )
            )


@exercise("3.3", timeout=120)
def test_fix_notices_silence_without_new_events(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    folder.mkdir()
    deliver(folder, "a", ["m1", "m2"], [0, 1])
    status = nb.fixed_status(
        spark.readStream.schema(SCHEMA).json(str(folder)),
        nb.heartbeat_processing_time_transition,
        1,
    )
    query = start(
        status,
        "check_3_3",
        checkpoint_dir,
        "fixed_status",
        PROCESSING,
        processingTime="500 milliseconds",
    )
    # Batch 0 reads the file; batch 1 has no data, and its clock is past the 1 ms timeouts.
    run_batches(query, 2)
    query.stop()
    rows = status_rows(spark, "check_3_3")
    expected = SEED_FIRST + [
        ("m1", UNHEALTHY, HEALTHY, at(1) + 1),
        ("m2", UNHEALTHY, HEALTHY, at(1) + 1),
    ]
    assert rows == expected, (
        f"With a 1 ms processing-time timeout, the micro-batch after the data (no new events) "
        f"should turn both machines Unhealthy: expected {show(expected)}; got {show(rows)}. "
        "Does fixed_status use GroupStateTimeout.ProcessingTimeTimeout, and the transition "
        "state.setTimeoutDuration(timeout_ms)?"
    )
