"""Checks of exercise 3.4 · Fix the monitor.

The arm function on processing time, without Spark; then the learner's diagnosis against what
Spark shows of the check's own seed run on the same steps (the progress reports' watermarks,
the state reader's timeouts), and the learner's fixed query with a 1 ms processing-time
timeout: the no-data micro-batch that follows the data marks every machine Unhealthy.
"""

import re
from pathlib import Path

from story_03 import (
    PROCESSING,
    SCHEMA,
    SEED_FIRST,
    at,
    call,
    clock,
    deliver,
    group_state,
    heartbeats,
    ran,
    reference_transition,
    run_batches,
    seed_run,
    show,
    start,
    status_rows,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START_MS,
    UNHEALTHY,
    Field,
    exercise,
    expect_answer,
    expect_equal,
    expect_spark_shows,
    is_int,
)

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
    _, query, silent = seed_run(spark, tmp_path / "seed", checkpoint_dir, "check_3_4_seed")
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
    expect_spark_shows(
        _diagnosis(nb.DIAGNOSIS_3_4),
        "3.4 the seed",
        lambda: _silence_shown_by_spark(spark, tmp_path),
        "DIAGNOSIS_3_4 against a run of the seed over the notebook's steps: each machine's "
        "timeout in the state after the last micro-batch before Producer 1 came back (the state "
        "reader), the watermark the batch that read its return ran with (its progress report), "
        "and the batch in which Producer 2's timeout fired.",
        hint="Read seed.recentProgress batch by batch, and the state reader with a batchId, "
        "rather than reasoning from the code alone.",
        check=__file__,
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
