"""Checks of exercise 5.8 · How far a range is known to be read.

The learner's read_until with the course's handlers on ``TwsTester``; then the diagnosis
against this file's own run of 5.7's reader on Spark over the notebook's backlog in three
ranges (the false alarms in its output, and the batches whose rows stop short of their
partition's end), and the fix on Spark over a skewed backlog read with ``maxFilesPerTrigger``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Row
from story_05 import (
    FACTS,
    PARTITION_OF,
    PartitionLogs,
    _after_start,
    _by_time,
    _facts,
    _reference,
    _run_to_batches,
    _run_to_parquet,
    _story,
    _under_test,
    _write,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    START_MS,
    UNHEALTHY,
    CheckFailed,
    Field,
    exercise,
    expect_answer,
    expect_equal,
    expect_spark_shows,
    is_int,
    is_not_done,
    is_str,
    list_of,
    query_cause,
)


def _read_until_under_test(nb):
    """5.8: the learner's read_until, the course's handlers."""
    return _under_test(nb.CatchUpProcessor, "handleInputRows", "handleExpiredTimer")


def _until(nb, rows: list, now_s: float) -> float:
    processor = nb.CatchUpProcessor(timeout_ms=5_000)
    return (processor.read_until(rows, START_MS + round(now_s * 1000)) - START_MS) / 1000


def _r(second: float, sequence, end, machine: str = "m1") -> Row:
    return PartitionLogs._row("0", machine, round(second * 1000), sequence, end)


#: What a failed fix of 5.8 is about, whatever the diagnosis said.
FIX_HINT_5_8 = (
    "read_until must say how far the partition is known to be read, and a range reached the "
    "partition's end only when its rows say so."
)


@exercise("5.8", part="fix", hint=FIX_HINT_5_8)
def test_how_far_a_range_is_known_to_be_read(nb):
    cases = [
        ("read to its end", [_r(10, 7, 9), _r(11, 8, 9), _r(12, 9, 9)], 13, 13),
        ("cut short", [_r(10, 7, 15), _r(11, 8, 15), _r(12, 9, 15)], 13, 12),
        ("without sequence numbers", [_r(10, None, None), _r(12, None, None)], 13, 12),
        ("one row without the end", [_r(10, 7, 8), _r(12, 8, None)], 13, 12),
        ("the hub's clock ahead", [_r(10, 7, 8), _r(14, 8, 8)], 13, 14),
        ("a row without its number", [_r(10, 7, 9), _r(12, None, 9)], 13, 12),
        ("a repeated row newest, cut", [_r(10, 7, 12), _r(12.5, 3, 12, "m2")], 13, 12.5),
        ("a late row newest", [_r(10, 7, 12), _r(12.5, None, None, "m2")], 13, 12.5),
        ("ends that differ", [_r(10, 7, 8), _r(11, 9, 9)], 13, 13),
    ]
    expect_equal(
        [(what, _until(nb, rows, now)) for what, rows, now, _ in cases],
        [(what, expected) for what, _, _, expected in cases],
        "read_until(rows, now) for each case, as (case, answer in seconds after the start); the "
        "rows are (event time, sequence_number, last_enqueued_sequence_number): "
        + "; ".join(
            f"{what}: {[(_after_start(r.event_time) / 1000, r.sequence_number, r.last_enqueued_sequence_number) for r in rows]}, now {now}"
            for what, rows, now, _ in cases
        ),
    )


@exercise("5.8", part="fix", hint=FIX_HINT_5_8)
def test_a_backlog_read_in_many_batches_gives_the_same_answers(nb):
    live = _story(_read_until_under_test(nb))
    limited = _story(_read_until_under_test(nb), down=(10_000, 130_000), limit=3)
    expect_equal(
        _facts(limited),
        _facts(live),
        f"After 120 s of downtime the backlog is read three heartbeats per partition per batch "
        f"(maxEventsPerTrigger), against the same story without downtime. {FACTS}",
        hint="The answers change when the backlog is read a few heartbeats at a time: ask "
        "what read_until may claim about a partition for a range that stopped before the "
        "partition's end.",
    )


HEARTBEAT_SCHEMA = (
    "partition STRING, machine_name STRING, event_time TIMESTAMP, "
    "sequence_number LONG, last_enqueued_sequence_number LONG"
)
SPARK_MACHINES = ["m1", "m2", "m3", "m4"]


def _hub_rows(machine: str, seconds) -> list[dict]:
    return [
        {
            "partition": PARTITION_OF[machine],
            "machine_name": machine,
            "event_time": datetime.fromtimestamp(START.timestamp() + s, tz=UTC).isoformat(),
        }
        for s in seconds
    ]


# The notebook's backlog for 5.8's diagnosis: every machine once a second from 1 s to 12 s, the
# fourth of them silent from 5 s to 10 s; three ranges of event time, one file (and micro-batch)
# each; the partitions' machines as the notebook's PARTITION_OF puts them.
BACKLOG_PARTITIONS = {"Producer 1": "0", "Producer 2": "0", "Producer 3": "1", "Producer 4": "1"}
BACKLOG_SILENT = {"Producer 4": range(5, 11)}
BACKLOG_RANGES = [(1, 4), (5, 8), (9, 12)]


def _backlog_files(incoming: Path) -> None:
    log = defaultdict(list)  # partition -> [(sequence number, second, machine)]
    for second in range(1, 13):
        for machine, partition in BACKLOG_PARTITIONS.items():
            if second not in BACKLOG_SILENT.get(machine, ()):
                log[partition].append((len(log[partition]), second, machine))
    for batch, (first, last) in enumerate(BACKLOG_RANGES):
        _write(
            incoming,
            f"range-{batch}",
            [
                {
                    "partition": partition,
                    "machine_name": machine,
                    "event_time": datetime.fromtimestamp(
                        START.timestamp() + second, tz=UTC
                    ).isoformat(),
                    "sequence_number": sequence,
                    "last_enqueued_sequence_number": entries[-1][0],
                }
                for partition, entries in sorted(log.items())
                for sequence, second, machine in entries
                if first <= second <= last
            ],
        )


#: DIAGNOSIS_5_8's keys and the shape of each.
DIAGNOSIS_5_8_FIELDS = {
    "false_alarms": Field(
        list_of(is_str, (list, tuple, set)),
        "a list of machine names.",
        expected="a list of strings",
    ),
    "alarm_batches": Field(list_of(is_int), "a list of batch ids.", expected="a list of ints"),
    "cut_short": Field(list_of(is_int), "a list of batch ids.", expected="a list of ints"),
}


def _diagnosis_5_8(answer) -> dict:
    answer = expect_answer(answer, "DIAGNOSIS_5_8", DIAGNOSIS_5_8_FIELDS)
    return {key: sorted(value) for key, value in answer.items()}


def _found_reader_shows(spark, folder: Path) -> dict:
    """The course's CatchUpReader (every range taken as read to its end) on Spark over the
    notebook's backlog, as Spark shows it: the transitions its sink holds per batch, and the
    rows of the file each batch read, as the checkpoint's sources/0/N names it."""
    incoming, checkpoint, output = folder / "incoming", folder / "checkpoint", folder / "out"
    _backlog_files(incoming)
    ref = _reference()
    reader = spark.readStream.schema(HEARTBEAT_SCHEMA).option("maxFilesPerTrigger", 1)
    changes = ref.catch_up_changes(reader.json(str(incoming)), ref.CatchUpReader(timeout_ms=5_000))
    _run_to_batches(spark, changes, checkpoint, output)
    beats: dict[str, list[int]] = defaultdict(list)
    cut_short = set()
    for entry in (checkpoint / "sources" / "0").iterdir():
        if not entry.name.isdigit():
            continue
        batch = int(entry.name)
        for line in entry.read_text().splitlines()[1:]:
            rows = spark.read.schema(HEARTBEAT_SCHEMA).json(json.loads(line)["path"]).collect()
            ends = defaultdict(lambda: [-1, -1])  # partition -> [greatest read, greatest end]
            for row in rows:
                beats[row.machine_name].append(_after_start(row.event_time))
                ends[row.partition][0] = max(ends[row.partition][0], row.sequence_number)
                ends[row.partition][1] = max(
                    ends[row.partition][1], row.last_enqueued_sequence_number
                )
            if any(read < end for read, end in ends.values()):
                cut_short.add(batch)
    false = [
        (r.machine_name, r.batch_id)
        for r in spark.read.parquet(str(output)).collect()
        if r.status == UNHEALTHY
        and any(
            _after_start(r.last_status_change_time) - 5_000
            < beat
            <= _after_start(r.last_status_change_time)
            for beat in beats[r.machine_name]
        )
    ]
    return {
        "false_alarms": sorted({machine for machine, _ in false}),
        "alarm_batches": sorted({batch for _, batch in false}),
        "cut_short": sorted(cut_short),
    }


@exercise("5.8", timeout=400, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_reader(nb, spark, tmp_path):
    expect_spark_shows(
        _diagnosis_5_8(nb.DIAGNOSIS_5_8),
        "5.8 the found reader",
        lambda: _found_reader_shows(spark, tmp_path),
        "DIAGNOSIS_5_8 against a run of 5.7's CatchUpReader on Spark over the notebook's backlog "
        "in three ranges: the machines with a false alarm (an Unhealthy row whose machine sent a "
        "heartbeat in the 5 s up to its last_status_change_time), the batches that wrote one, "
        "and the batches whose rows stop short of their partition's end (sequence_number below "
        "last_enqueued_sequence_number).",
        hint="Read the output with its batch_id, and the file each batch read "
        "(range-N.json for batch N) with its sequence numbers, rather than reasoning from the "
        "code.",
        check=__file__,
    )


@exercise("5.8", timeout=400, part="fix", hint=FIX_HINT_5_8)
def test_catch_up_on_spark_over_a_skewed_backlog(nb, spark, tmp_path):
    incoming, checkpoint, output = tmp_path / "incoming", tmp_path / "checkpoint", tmp_path / "out"
    processor_class = _read_until_under_test(nb)

    def changes(max_files: int | None = None):
        reader = spark.readStream.schema(HEARTBEAT_SCHEMA)
        if max_files:
            reader = reader.option("maxFilesPerTrigger", max_files)
        return nb.catch_up_changes(reader.json(str(incoming)), processor_class(timeout_ms=5_000))

    _write(incoming, "live", sum((_hub_rows(m, range(0, 10)) for m in SPARK_MACHINES), []))
    try:
        _run_to_parquet(spark, changes(), checkpoint, output)
        for k in range(5):
            p0, p1 = range(10 + 8 * k, 18 + 8 * k), range(10 + 4 * k, 14 + 4 * k)
            _write(
                incoming,
                f"backlog-{k:02d}",
                _hub_rows("m1", p0)
                + _hub_rows("m2", [s for s in p0 if s <= 20])
                + _hub_rows("m3", p1)
                + _hub_rows("m4", [s for s in p1 if not 14 < s < 22]),
            )
        _run_to_parquet(spark, changes(max_files=1), checkpoint, output)
    except Exception as error:
        if is_not_done(error):
            raise
        raise CheckFailed(
            "The catch-up query failed.",
            expected="the catch-up query to read its backlog and end",
            actual=query_cause(error),
        ) from None
    rows = [
        (r.machine_name, r.previous_status, r.status, _after_start(r.last_status_change_time))
        for r in spark.read.parquet(str(output)).collect()
    ]
    expect_equal(
        sorted(rows, key=_by_time),
        sorted(
            [(m, None, INITIALIZING, 0) for m in SPARK_MACHINES]
            + [(m, INITIALIZING, HEALTHY, 1_000) for m in SPARK_MACHINES]
            + [
                ("m4", HEALTHY, UNHEALTHY, 19_000),
                ("m4", UNHEALTHY, HEALTHY, 22_000),
                ("m2", HEALTHY, UNHEALTHY, 25_000),
            ],
            key=_by_time,
        ),
        f"On Spark, from files without sequence numbers: ten seconds of live traffic, then a "
        f"backlog in five micro-batches, partition 0 eight seconds of event time per batch, "
        f"partition 1 four; m2 stopped after 20 s, m4 paused from 14 s to 22 s. {FACTS}",
        hint="Rows without sequence numbers are not known to reach the partition's end.",
    )
