"""Checks of exercise 2.6 · Fix the de-duplication.

The diagnosis against a run here of the first version the notebook gives, on its two
deliveries; then the fix: replays dropped, and the state forgets a heartbeat once past the delay.
"""

from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from story_02 import (
    beat,
    clock_rows,
    hhmmss,
    ran,
    stream,
    string_tuples,
)

from streamlab.deadlines import drain
from streamlab.kit import (
    CheckFailed,
    Field,
    deliver_file,
    exercise,
    expect_answer,
    expect_dataframe,
    expect_equal,
    expect_spark_shows,
    expect_that,
    is_int,
)

#: What a failed fix of 2.6 is about.
REPLAY_FIX_HINT = (
    "Set a replay beside the heartbeat it repeats: which of their columns tell them apart? Then "
    "read, in the documentation of section 5's two operators, when each forgets a key."
)


def _dedup_rows(spark, table: str) -> list[tuple]:
    rows = spark.table(table).select(
        "machine_name", F.col("machine_time").cast("string"), F.col("event_time").cast("string")
    )
    return sorted(tuple(r) for r in rows.collect())


def _beats(rows) -> str:
    return "\n".join(f"{m} sent {t[11:]} stored {e[11:]}" for m, t, e in rows) or "nothing"


def _start_dedup(nb, spark, folder, delay, name, checkpoint_dir) -> StreamingQuery:
    unique = expect_dataframe(
        nb.drop_replays(stream(spark, folder, maxFilesPerTrigger=1), delay), "drop_replays"
    )
    expect_equal(
        unique.columns,
        ["machine_name", "machine_time", "event_time"],
        "drop_replays() should keep the heartbeats' columns.",
    )
    try:
        return (
            unique.writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", checkpoint_dir)
            .start()
        )
    except AnalysisException as error:
        raise CheckFailed(
            "Spark refused the query drop_replays() builds. "
            f"(Spark said: {str(error).splitlines()[0][:200]})"
        ) from None


#: The notebook's replays: two deliveries of (machine, second sent, second stored), read in
#: one micro-batch; the second holds a replay of Producer 1's first heartbeat.
REPLAY_STORY = [
    [("Producer 1", 1, 1), ("Producer 2", 1, 1)],
    [("Producer 1", 1, 3), ("Producer 1", 2, 4)],
]


def drop_replays_first_try(heartbeats: DataFrame, delay: str = "30 seconds") -> DataFrame:
    """The de-duplication's first version, as the notebook gives it."""
    return heartbeats.withWatermark("event_time", delay).dropDuplicates(
        ["machine_name", "event_time"]
    )


#: The shape of DIAGNOSIS_2_6.
REPLAY_FIELDS = {
    "dropped": Field(is_int, "the number of rows dropped as repeats, an int"),
    "through": Field(
        string_tuples(3), "a list of (machine_name, machine_time, event_time) tuples of strings"
    ),
    "state_rows": Field(is_int, "the number of keys in the state, an int"),
}


def _replay_diagnosis(answer) -> dict:
    diagnosis = expect_answer(answer, "DIAGNOSIS_2_6", REPLAY_FIELDS)
    return {**diagnosis, "through": sorted(map(tuple, diagnosis["through"]))}


def _replays_in_spark(spark, folder: Path, checkpoint_dir: str) -> dict:
    """The notebook's first version on its two deliveries, and what Spark shows of the run."""
    for number, beats in enumerate(REPLAY_STORY):
        deliver_file(folder, str(number), [beat(m, s, e) for m, s, e in beats], order=number)
    query = (
        drop_replays_first_try(stream(spark, folder))
        .writeStream.format("memory")
        .queryName("check_2_6_first_try")
        .option("checkpointLocation", checkpoint_dir)
        .start()
    )
    drain(query, within=240, what="the check's run of the first version to process its files")
    query.stop()
    table = sorted(clock_rows(spark.table("check_2_6_first_try")), key=lambda r: (r[2], r[0], r[1]))
    through = [row for i, row in enumerate(table) if any(seen[:2] == row[:2] for seen in table[:i])]
    return {
        "dropped": sum(
            op.get("customMetrics", {}).get("numDroppedDuplicateRows", 0)
            for p in ran(query)
            for op in p.get("stateOperators", [])
        ),
        "through": sorted(through),
        "state_rows": spark.read.format("statestore").load(checkpoint_dir).count(),
    }


@exercise("2.6", timeout=180, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_first_version(nb, spark, tmp_path):
    expect_spark_shows(
        _replay_diagnosis(nb.DIAGNOSIS_2_6),
        "2.6 the first version",
        lambda: _replays_in_spark(spark, tmp_path / "replays", str(tmp_path / "first-try")),
        "DIAGNOSIS_2_6 against a run of the first version over the notebook's two deliveries: "
        "the rows its progress reports count as dropped repeats (numDroppedDuplicateRows), the "
        "rows of its table that repeat an earlier row's machine_name and machine_time, and the "
        "keys its state holds after the run (the state reader).",
        hint="Read first_try.recentProgress, the table replays_first_try and the state reader "
        "on its checkpoint, rather than reasoning from the code alone.",
        check=__file__,
    )


@exercise("2.6", timeout=180, part="fix", hint=REPLAY_FIX_HINT)
def test_replayed_heartbeats_are_dropped(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    replay = beat("m1", 1, enqueued=3)
    # m3's clock runs a minute behind the hub's: its heartbeat is no replay, and on time. It
    # comes a batch after the others, which ran with the watermark they moved.
    behind = beat("m3", -50, enqueued=5)
    deliver_file(folder, "a", [beat("m1", 1), beat("m2", 1)], order=0)
    deliver_file(folder, "b", [replay, beat("m1", 2, enqueued=4)], order=1)
    deliver_file(folder, "c", [behind], order=2)
    query = _start_dedup(nb, spark, folder, "30 seconds", "check_2_6", checkpoint_dir)
    drain(query, within=240, what="the check's query to process the files written so far")
    got = _dedup_rows(spark, "check_2_6")
    expected = [("m1", hhmmss(1), hhmmss(1)), ("m2", hhmmss(1), hhmmss(1))]
    expected += [("m1", hhmmss(2), hhmmss(4)), ("m3", hhmmss(-50), hhmmss(5))]
    expect_equal(
        got,
        sorted(expected),
        "The replay of m1's 10:00:01 heartbeat (same body, stored again at 10:00:03) is "
        "dropped; every other heartbeat stays, m3's too, whose clock runs a minute behind.",
        show=_beats,
        hint=(
            "The replay went through: set it beside the heartbeat it repeats, and ask which of "
            "their columns your de-duplication compares."
            if ("m1", hhmmss(1), hhmmss(3)) in got
            else "m3's heartbeat is no replay, and the hub stored it on time; only its "
            "machine's clock runs behind."
            if ("m3", hhmmss(-50), hhmmss(5)) not in got
            else ""
        ),
    )


@exercise("2.6", timeout=120, part="fix", hint=REPLAY_FIX_HINT)
def test_the_state_forgets_a_heartbeat_once_past_the_delay(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    # With a delay of 2 s, m2's heartbeat stored at 10:00:10 takes the stream's event time 8 s
    # past the heartbeats stored at 10:00:01 plus the delay: no replay of them can come within
    # the delay any more, and the batches after it may hold only the two latest.
    deliver_file(folder, "a", [beat("m1", 1), beat("m2", 1)], order=0)
    deliver_file(folder, "b", [beat("m2", 10)], order=1)
    deliver_file(folder, "c", [beat("m2", 11)], order=2)
    query = _start_dedup(nb, spark, folder, "2 seconds", "check_2_6_delay", checkpoint_dir)
    drain(query, within=240, what="the check's query to process the files written so far")
    reports = ran(query)
    held = sum(op.get("numRowsTotal", 0) for op in reports[-1].get("stateOperators", []))
    expect_that(
        held <= 2,
        "With a delay of 2 seconds, once m2's heartbeat stored at 10:00:10 has been read, the "
        "heartbeats stored at 10:00:01 can have no replay within the delay: the state, after "
        "the last batch, should hold no more than the two heartbeats stored since 10:00:10.",
        expected="at most 2 rows in the state (numRowsTotal over the state operators)",
        actual=f"{held} rows",
        hint="Does the query forget by event time, with the delay argument as its delay?",
    )
