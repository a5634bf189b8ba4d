"""Checks for lab 03 · Arbitrary state, first try.

Unit checks first: each state function is called like Spark calls it, with a ``GroupState``
the check builds (its watermark and processing time set by the check, not read from a
clock). Then Spark, on JSON files the check writes:

- 3.2 runs the learner's query around a reference seed function: another machine's
  traffic times a silent machine out, and once every event has been processed the watermark
  stands still and nothing more happens;
- 3.3 runs the check's own seed on the notebook's three steps and compares what it emits
  with the learner's prediction;
- 3.4 first compares the learner's diagnosis with what Spark shows of the check's own seed
  run on the same steps (the progress reports' watermarks, the state reader's timeouts),
  then runs the learner's fixed query with a 1 ms processing-time timeout: the no-data
  micro-batch that follows the data marks every machine Unhealthy.
"""

import contextlib
import io
import re
import sys
import warnings
from datetime import timedelta
from pathlib import Path

import pandas as pd
from pyspark import cloudpickle
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
    UNHEALTHY,
    CheckFailed,
    Field,
    deliver_file,
    exercise,
    expect_answer,
    expect_dataframe,
    expect_equal,
    expect_keys,
    expect_that,
    is_int,
    spark_facts,
)

# Spark's Python workers cannot import this file: send the reference function by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

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
    expect_that(
        outputs is not None,
        f"{name}() returned None: it should yield its output DataFrames (`yield "
        "transitions_frame(...)`) or return an iterator of them.",
        expected="an iterator of pandas DataFrames",
        actual="None",
    )
    frames_out = [f for f in outputs]
    wrong = [type(f).__name__ for f in frames_out if not isinstance(f, pd.DataFrame)]
    expect_that(
        not wrong,
        f"{name}() should yield pandas DataFrames. transitions_frame(machine_name, changes) "
        "builds one.",
        expected="pandas DataFrames",
        actual=", ".join(wrong),
    )
    rows = []
    for frame in frames_out:
        missing = {"machine_name", "status", "previous_status", "last_status_change_time"} - set(
            frame.columns
        )
        if missing:
            raise CheckFailed(
                f"{name}() yielded a DataFrame without the column(s) {sorted(missing)}.",
                expected="machine_name, status, previous_status, last_status_change_time",
                actual=", ".join(str(c) for c in frame.columns),
            )
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


@exercise("3.1")
def test_first_heartbeat_initializes_a_machine(nb):
    state = group_state(conf=EVENT)
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, heartbeats("m1", 0)
    )
    expect_equal(
        rows,
        [("m1", INITIALIZING, None, at(0))],
        "The first heartbeat of an unknown machine, at 10:00:00, initializes it.",
        show=show,
    )
    expect_equal(
        stored(state),
        (INITIALIZING, at(0)),
        "After it the state holds the status and the heartbeat's event time in ms.",
    )
    expect_equal(
        timeout_of(state),
        clock(at(5)),
        "With the default arm (arm_event_time), the timeout is the heartbeat's time plus "
        "timeout_ms.",
        hint="Arm the timeout with arm(state, last_seen_ms, timeout_ms) after every call with "
        "heartbeats.",
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
    expect_equal(
        rows,
        [("m1", INITIALIZING, None, at(0)), ("m1", HEALTHY, INITIALIZING, at(1.5))],
        "Heartbeats at 10:00:00, 10:00:01.5 and 10:00:03 of a new machine, in two "
        "DataFrames and not in order: one row per change, none for the third.",
        show=show,
        hint="Gather the event times of every DataFrame and sort them before the replay.",
    )
    expect_equal(stored(state), (HEALTHY, at(3)), "The state keeps the latest heartbeat.")
    expect_equal(timeout_of(state), clock(at(8)), "The timeout follows the latest heartbeat.")


@exercise("3.1")
def test_healthy_machine_emits_nothing_on_a_heartbeat(nb):
    state = group_state((HEALTHY, at(3)), conf=EVENT)
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, heartbeats("m1", 4)
    )
    expect_equal(rows, [], "A heartbeat of a Healthy machine changes nothing.", show=show)
    expect_equal(
        (stored(state), timeout_of(state)),
        ((HEALTHY, at(4)), clock(at(9))),
        "The state and the timeout follow the new heartbeat.",
    )


@exercise("3.1")
def test_last_seen_never_goes_backwards(nb):
    state = group_state((HEALTHY, at(10)), conf=EVENT)
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, heartbeats("m1", 8)
    )
    expect_equal(rows, [], "A late heartbeat of a Healthy machine changes nothing.", show=show)
    expect_equal(
        (stored(state), timeout_of(state)),
        ((HEALTHY, at(10)), clock(at(15))),
        "A heartbeat older than the last one seen (10:00:08 after 10:00:10) leaves "
        "last_seen_ms, and so the timeout, where they were.",
        hint="Keep the larger of the stored time and the new heartbeat's.",
    )


@exercise("3.1")
def test_timeout_makes_a_machine_unhealthy(nb):
    state = group_state((HEALTHY, at(4)), conf=EVENT, timed_out=True, watermark_ms=at(10))
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, timeout_ms=2_000
    )
    expect_equal(
        rows,
        [("m1", UNHEALTHY, HEALTHY, at(6))],
        "A timed-out Healthy machine last seen at 10:00:04, with timeout_ms=2000, turns "
        "Unhealthy, stamped last seen + timeout_ms.",
        show=show,
    )
    expect_equal(
        (stored(state), timeout_of(state)),
        ((UNHEALTHY, at(4)), "not set"),
        "After a timeout the state holds Unhealthy with the same last heartbeat, and no new "
        "timeout is armed.",
    )


@exercise("3.1")
def test_unhealthy_machine_recovers_on_a_heartbeat(nb):
    state = group_state((UNHEALTHY, at(4)), conf=EVENT, watermark_ms=at(10))
    rows = call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, heartbeats("m1", 20)
    )
    expect_equal(
        rows,
        [("m1", HEALTHY, UNHEALTHY, at(20))],
        "A heartbeat of an Unhealthy machine makes it Healthy again.",
        show=show,
    )


class Arms:
    """An arm function that records its calls and arms nothing."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __call__(self, state, last_seen_ms, timeout_ms):
        self.calls.append((stored(state), last_seen_ms, timeout_ms))


@exercise("3.1")
def test_the_timeout_is_armed_by_the_arm_argument(nb):
    arms = Arms()
    state = group_state((HEALTHY, at(1)), conf=EVENT)
    result = nb.heartbeat_state_transition(
        ("m1",), iter([heartbeats("m1", 2, 3)]), state, timeout_ms=4_000, arm=arms
    )
    list(result or [])
    expect_equal(
        arms.calls,
        [((HEALTHY, at(3)), at(3), 4_000)],
        "After a call with heartbeats, arm is called once, after the state is stored, with "
        "(state, last_seen_ms, timeout_ms).",
        hint="Call the arm argument instead of setting a timeout yourself.",
    )
    timed_out = group_state((HEALTHY, at(3)), conf=EVENT, timed_out=True)
    list(nb.heartbeat_state_transition(("m1",), iter([]), timed_out, arm=arms) or [])
    expect_equal(len(arms.calls), 1, "A timeout call arms nothing.")


# --- pure Python: 3.4 ---------------------------------------------------------------------


#: What a failed fix of 3.4 is about, whatever the diagnosis said.
FIX_HINT_3_4 = (
    "The fix times silence on Spark's clock: arm a duration counted from the batch's "
    "processing time, and run the query with the kind of timeout that matches that arm."
)


@exercise("3.4", part="fix", hint=FIX_HINT_3_4)
def test_arm_processing_time_counts_from_the_batch(nb):
    state = group_state((HEALTHY, at(1)), conf=PROCESSING, processing_ms=START_MS + 42_000)
    nb.arm_processing_time(state, at(1), 5_000)
    expect_equal(
        state._timeout_timestamp,
        START_MS + 42_000 + 5_000,
        "A processing-time timeout fires timeout_ms after the current batch's processing "
        "time (here 10:00:42), whatever the heartbeat's event time.",
    )


@exercise("3.4", part="fix", hint=FIX_HINT_3_4)
def test_the_seed_transition_with_processing_time_arming(nb):
    state = group_state(conf=PROCESSING, processing_ms=START_MS + 42_000)
    rows = call(
        lambda *a, **k: nb.heartbeat_state_transition(*a, **k, arm=nb.arm_processing_time),
        "heartbeat_state_transition",
        state,
        heartbeats("m1", 0, 1),
    )
    expect_equal(
        rows,
        [("m1", INITIALIZING, None, at(0)), ("m1", HEALTHY, INITIALIZING, at(1))],
        "Two heartbeats of a new machine, as in 3.1.",
        show=show,
    )
    expect_equal(state._timeout_timestamp, START_MS + 47_000, "The timeout counts from the batch.")


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


@exercise("3.2", timeout=150)
def test_seed_times_out_only_when_others_move_the_watermark(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    folder.mkdir()
    status = nb.seed_status(
        spark.readStream.schema(SCHEMA).json(str(folder)), reference_transition, 5_000
    )
    query = start(status, "check_3_2", checkpoint_dir, "seed_status", "EventTimeTimeout")
    deliver(folder, "a", ["m1", "m2"], [0, 1])
    drain(
        query, within=240, what="the check's query over your processor to process what it was given"
    )
    expect_equal(
        status_rows(spark, "check_3_2"),
        SEED_FIRST,
        "After heartbeats of m1 and m2 at 10:00:00 and 10:00:01.",
        show=show,
        hint="Is the transition given its timeout_ms through functools.partial?",
    )
    expect_equal(
        [p["eventTime"].get("watermark") for p in ran(query)][-1:],
        ["2026-11-22T09:59:59.000Z"],
        "The watermark the last batch ran with: the newest event time minus WATERMARK_DELAY.",
        hint="The watermark goes on event_time, with WATERMARK_DELAY as its delay.",
    )
    deliver(folder, "b", ["m2"], [10])
    drain(
        query, within=240, what="the check's query over your processor to process what it was given"
    )
    expected = SEED_FIRST + [("m1", UNHEALTHY, HEALTHY, at(6))]
    expect_equal(
        status_rows(spark, "check_3_2"),
        expected,
        "m2's heartbeat at 10:00:10 moves a 2-second watermark to 10:00:08, past m1's timeout "
        "(10:00:01 + 5 s): m1 turns Unhealthy.",
        show=show,
    )
    batches = len(ran(query))
    # Silence: nothing arrived, the watermark did not move: Spark runs no micro-batch, and a
    # timeout (m2's, at 10:00:15) fires only in one.
    drain(
        query, within=240, what="the check's query over your processor to process what it was given"
    )
    expect_equal(
        (len(ran(query)) - batches, status_rows(spark, "check_3_2")),
        (0, expected),
        "Without new events the seed runs no further micro-batch and emits nothing more: "
        "(batches run, rows).",
    )


#: Exercise 3.3's steps after the fleet's first three seconds: (name, deliveries).
STEPS = [
    ("Producer 1 stops", [(["Producer 2", "Producer 3"], range(3, 11))]),
    ("everyone stops", []),
    ("Producer 1 comes back", [(["Producer 1"], [30])]),
]


def _silence_in_spark(spark, folder: Path, checkpoint_dir: str) -> dict:
    said, _, _ = _seed_run(spark, folder, checkpoint_dir)
    return said


def _seed_run(spark, folder: Path, checkpoint_dir: str, name: str = "check_3_3"):
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


@exercise("3.3", timeout=150)
def test_silence_prediction_matches_spark(nb, spark, tmp_path, checkpoint_dir):
    steps = [step for step, _ in STEPS]
    predicted = expect_keys(
        nb.SILENCE, "SILENCE", sorted(steps), hint="Each key's value is a list of rows."
    )
    answer = {step: sorted(tuple(r) for r in predicted[step]) for step in steps}
    spark_says = spark_facts(
        "3.3 silence",
        lambda: _silence_in_spark(spark, tmp_path / "in", checkpoint_dir),
        check=__file__,
    )
    spark_says = {
        step: sorted(rows, key=lambda r: (r[3], r[0])) for step, rows in spark_says.items()
    }
    answer = {step: sorted(rows, key=lambda r: (r[3], r[0])) for step, rows in answer.items()}
    hint = ""
    if answer["everyone stops"]:
        hint = (
            "An event-time timeout fires only in a micro-batch whose watermark has passed it, "
            "and the watermark moves only when events arrive."
        )
    elif answer["Producer 1 comes back"] != spark_says["Producer 1 comes back"]:
        hint = (
            "Producer 1's heartbeat moves the watermark too: which timeouts does it pass, and "
            "with what time is each Unhealthy row stamped?"
        )
    expect_equal(
        answer,
        spark_says,
        "Your prediction against what the seed emitted at each step.",
        hint=hint,
    )


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


# --- 3.4 · the diagnosis ---------------------------------------------------------------------


_CLOCK = re.compile(r"^\d\d:\d\d:\d\d$")


def _is_clock(value) -> bool:
    return isinstance(value, str) and bool(_CLOCK.match(value))


#: DIAGNOSIS_3_4's keys and their shapes.
DIAGNOSIS_FIELDS = {
    "timeouts": Field(
        lambda timeouts: (
            isinstance(timeouts, dict)
            and all(isinstance(m, str) and (t is None or _is_clock(t)) for m, t in timeouts.items())
        ),
        'a dict from machine name to the time its timeout was set to, as "HH:MM:SS", or None',
    ),
    "watermark": Field(_is_clock, 'a time as "HH:MM:SS"'),
    "fired_in_batch": Field(is_int, "a batch id, an int"),
}


def _diagnosis(answer) -> dict:
    answer = expect_answer(answer, "DIAGNOSIS_3_4", DIAGNOSIS_FIELDS)
    return {
        "timeouts": dict(answer["timeouts"]),
        "watermark": answer["watermark"],
        "fired_in_batch": answer["fired_in_batch"],
    }


def _state_after(spark, checkpoint_dir: str, batch: int) -> dict:
    """The seed's state after ``batch``, per the state reader: machine -> (status, timeout ms)."""
    rows = spark.read.format("statestore").option("batchId", batch).load(checkpoint_dir).collect()
    return {r.key.machine_name: (r.value.groupState.status, r.value.timeoutTimestamp) for r in rows}


def _silence_shown_by_spark(spark, tmp_path: Path) -> dict:
    """What Spark shows of the seed's run on the notebook's steps: the timeouts its state held
    after the last batch before Producer 1 came back, the watermark of the batch that read the
    return, and the batch whose state first holds Producer 2 Unhealthy after the silence."""
    checkpoint_dir = str(tmp_path / "seed-checkpoint")
    _, query, silent = _seed_run(spark, tmp_path / "seed", checkpoint_dir, "check_3_4_seed")
    after = [p for p in ran(query) if p["batchId"] > silent]
    returned = next(p for p in after if p["numInputRows"] > 0)
    fired = next(
        (
            p["batchId"]
            for p in after
            if _state_after(spark, checkpoint_dir, p["batchId"])["Producer 2"][0] == UNHEALTHY
        ),
        None,
    )
    return {
        "timeouts": {
            machine: clock(timeout)[:8] if timeout >= 0 else None
            for machine, (_, timeout) in _state_after(spark, checkpoint_dir, silent).items()
        },
        "watermark": returned["eventTime"]["watermark"][11:19],
        "fired_in_batch": fired,
    }


@exercise("3.4", timeout=300, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_seed(nb, spark, tmp_path):
    diagnosis = _diagnosis(nb.DIAGNOSIS_3_4)
    expect_equal(
        diagnosis,
        spark_facts(
            "3.4 the seed", lambda: _silence_shown_by_spark(spark, tmp_path), check=__file__
        ),
        "DIAGNOSIS_3_4 against a run of the seed over the notebook's steps: each machine's "
        "timeout in the state after the last micro-batch before Producer 1 came back (the state "
        "reader), the watermark the batch that read its return ran with (its progress report), "
        "and the batch in which Producer 2's timeout fired.",
        hint="Read seed.recentProgress batch by batch, and the state reader with a batchId, "
        "rather than reasoning from the code alone.",
    )


@exercise("3.4", timeout=300, part="fix", hint=FIX_HINT_3_4)
def test_fix_notices_silence_without_new_events(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    folder.mkdir()
    deliver(folder, "a", ["m1", "m2"], [0, 1])
    status = nb.fixed_status(
        spark.readStream.schema(SCHEMA).json(str(folder)), reference_transition, 1
    )
    query = start(
        status,
        "check_3_4",
        checkpoint_dir,
        "fixed_status",
        "ProcessingTimeTimeout",
        processingTime="500 milliseconds",
    )
    # Batch 0 reads the file; batch 1 has no data, and its clock is past the 1 ms timeouts.
    run_batches(query, 2)
    query.stop()
    expect_equal(
        status_rows(spark, "check_3_4"),
        SEED_FIRST
        + [
            ("m1", UNHEALTHY, HEALTHY, at(1) + 1),
            ("m2", UNHEALTHY, HEALTHY, at(1) + 1),
        ],
        "With a 1 ms processing-time timeout, the micro-batch after the data, which has no "
        "new events, turns both machines Unhealthy, stamped last seen + 1 ms.",
        show=show,
        hint="fixed_status should hand the transition arm_processing_time as its arm, and "
        "arm_processing_time should set a duration on Spark's clock.",
    )
