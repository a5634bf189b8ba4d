"""Checks of exercise 10.7 · Debug: a migration that misses a machine.

The migration's ``handleInitialState`` on ``TwsTester``, then the notebook's first migration,
whose state and timers after its batch, read with the state reader, grade the diagnosis.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester
from story_10 import (
    DAY_MS,
    HUB_PARTITIONS,
    LAB05,
    LAB05_NOTEBOOK,
    _facts,
    _fleet,
    _source,
    _spark_batch,
    _write,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START_MS,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_equal,
    expect_keys,
    expect_spark_shows,
)
from streamlab.restart_trials import (
    run_available_now,
)
from streamlab.tws_batches import pending_timers, spark_initial_state


def _after_start(rows) -> list[tuple]:
    """_facts with the times in ms after START."""
    return [
        (m, was, now, at - START_MS, noticed - START_MS)
        for m, was, now, at, noticed in _facts(rows)
    ]


def _initial(partition, machine, status, last_s) -> Row:
    return Row(
        partition=partition,
        machine_name=machine,
        status=status,
        last_heartbeat_ms=START_MS + last_s * 1000,
    )


def _migrated(nb, at_s: int, rows: list[Row]) -> TwsTester:
    processor = nb.MigratingCatchUpProcessor(timeout_ms=5_000)
    if not isinstance(processor, LAB05.CatchUpProcessor):
        raise CheckFailed("MigratingCatchUpProcessor should subclass LAB05.CatchUpProcessor.")
    tester = TwsTester(processor, timeMode="ProcessingTime")
    returned = spark_initial_state(tester, START_MS + at_s * 1000, [(r.partition, r) for r in rows])
    if any(result is not None for result in returned):
        raise CheckFailed(
            "handleInitialState should return None: it sets up state and emits nothing "
            "(a `yield` makes it a generator that Spark never runs)."
        )
    return tester


def _timers(tester: TwsTester, key: str) -> list[int]:
    return [t - START_MS for t in pending_timers(tester, key)]


OLD = [
    _initial("0", "p1", HEALTHY, 99),
    _initial("0", "p2", HEALTHY, 98),
    _initial("1", "p3", HEALTHY, 97),
]


class _HastyMigration(LAB05.CatchUpProcessor):
    """The notebook's first migration, as it shows it: the machine in, the timer as it was."""

    def handleInitialState(self, key, initialState, timerValues) -> None:
        machines, timer_ms = self.load()
        machines[initialState.machine_name] = (initialState.status, initialState.last_heartbeat_ms)
        self.save(machines, timer_ms)


#: The notebook's story on Spark: the machines lab 04 handed over (partition, machine, last
#: heartbeat in s after START), and the migration's batch, Producer 1's heartbeat at 100 s.
HANDOVER = [("0", "Producer 1", 99), ("0", "Producer 2", 98), ("1", "Producer 3", 97)]


DIAGNOSIS_KEYS = ("machines", "timers")


def _diagnosis(answer) -> dict:
    """DIAGNOSIS_10_7, checked for its shape, with each list of machines sorted."""
    expect_keys(answer, "DIAGNOSIS_10_7", DIAGNOSIS_KEYS)
    for name in DIAGNOSIS_KEYS:
        per_partition = answer[name]
        if not isinstance(per_partition, dict) or sorted(map(str, per_partition)) != list(
            HUB_PARTITIONS
        ):
            raise CheckFailed(
                f"DIAGNOSIS_10_7[{name!r}] should be a dict keyed by the hub partitions '0' and "
                "'1' (strings, as key.partition).",
                expected="{'0': ..., '1': ...}",
                actual=repr(per_partition),
            )
    for partition, machines in answer["machines"].items():
        if not (isinstance(machines, list | tuple) and all(isinstance(m, str) for m in machines)):
            raise CheckFailed(
                f"DIAGNOSIS_10_7['machines'][{partition!r}] should be a list of machine names.",
                expected="a list of strings, e.g. ['Producer 9']",
                actual=repr(machines),
            )
    for partition, count in answer["timers"].items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise CheckFailed(
                f"DIAGNOSIS_10_7['timers'][{partition!r}] should be how many timers Spark holds "
                "for the partition: a whole number, 0 when none.",
                expected="an int",
                actual=repr(count),
            )
    return {
        "machines": {str(p): sorted(m) for p, m in answer["machines"].items()},
        "timers": {str(p): n for p, n in answer["timers"].items()},
    }


def _hasty_migration_on_spark(spark, root: Path) -> dict:
    """What Spark holds after the first migration's batch, read with the state reader: per hub
    partition, the machines its value state holds and the timers registered for it."""
    _write(root / "incoming", [100], {"Producer 1": "0"})
    handover = spark.createDataFrame(
        [(p, m, HEALTHY, START_MS + s * 1000) for p, m, s in HANDOVER],
        "partition STRING, machine_name STRING, status STRING, last_heartbeat_ms LONG",
    )
    migration = (
        _source(spark, root / "incoming")
        .groupBy("partition")
        .transformWithState(
            _HastyMigration(timeout_ms=5_000),
            LAB05.TRANSITION_SCHEMA,
            "Append",
            "ProcessingTime",
            initialState=handover.groupBy("partition"),
        )
    )
    checkpoint = root / "checkpoint"
    run_available_now(migration, checkpoint, root / "output")
    held = (
        spark.read.format("statestore")
        .option("stateVarName", "partition")
        .load(str(checkpoint))
        .collect()
    )
    armed = [
        row.key.partition
        for row in spark.read.format("statestore")
        .option("readRegisteredTimers", "true")
        .load(str(checkpoint))
        .collect()
    ]
    machines = {p: [] for p in HUB_PARTITIONS}
    for row in held:
        machines[row.key.partition] = sorted(row.value.names)
    return {"machines": machines, "timers": {p: armed.count(p) for p in HUB_PARTITIONS}}


#: What a failed fix of 10.7 is about, whatever the diagnosis said.
FIX_HINT_10_7 = (
    "Ask which handlers ever run again for a partition that receives no rows: a partition that "
    "receives nothing runs only its timer."
)


@exercise("10.7", timeout=360, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_first_migration(nb, spark, tmp_path):
    expect_spark_shows(
        _diagnosis(nb.DIAGNOSIS_10_7),
        "10.7 the first migration",
        lambda: _hasty_migration_on_spark(spark, tmp_path / "hasty"),
        "DIAGNOSIS_10_7 against the first migration run on Spark here (Producers 1 and 2 handed "
        "over in hub partition '0', Producer 3 in '1'; the migration's batch holds Producer 1's "
        "heartbeat at 100 s): per hub partition, the machines its value state 'partition' holds "
        "after that batch, and how many timers Spark holds for it.",
        hint="Read hasty_checkpoint with spark.read.format('statestore'): stateVarName "
        "'partition' for the machines, readRegisteredTimers 'true' for the timers; key.partition "
        "is the hub partition.",
        check=__file__,
        inputs=[LAB05_NOTEBOOK],
    )


@exercise(
    "10.7", timeout=360, part="fix", hint="A partition that receives nothing runs only its timer."
)
def test_migration_arms_every_partition(nb, spark, tmp_path):
    tester = _migrated(nb, 100, OLD)
    expect_equal(
        {"0": _timers(tester, "0"), "1": _timers(tester, "1")},
        {"0": [103_000], "1": [102_000]},
        "After the migration at 100 s (p1 last at 99 s, p2 at 98 s in partition 0; p3 at 97 s in "
        "partition 1; timeout 5 s), the pending timers per partition, in ms after START:",
        hint="Each partition needs its one timer at its earliest deadline right away: the first "
        "batch may have no rows for it.",
    )
    stored = tester.peekValueState("partition", "1")
    expect_equal(
        stored[3] - START_MS if stored else None,
        102_000,
        "The timer partition 1's state records (lab 05's PARTITION_SCHEMA `timer_ms`).",
        hint="Save the timer you registered: lab 05's handlers compare it with the one that fires.",
    )


@exercise("10.7", part="fix", hint=FIX_HINT_10_7)
def test_migration_reports_the_machines_that_stopped(nb):
    tester = _migrated(nb, 100, OLD)
    out = []
    for s in range(100, 121):
        out += _spark_batch(tester, START_MS + s * 1000 + 500, {"0": _fleet(["p1"], s)})
    expect_equal(
        _after_start(out),
        [
            ("p2", HEALTHY, UNHEALTHY, 103_000, 103_500),
            ("p3", HEALTHY, UNHEALTHY, 102_000, 102_500),
        ],
        "After the migration at 100 s, p1 sends every second in partition 0; p2 (last 98 s) and p3 "
        "(last 97 s, alone in partition 1) never send again. Transitions as (machine, previous, "
        "status, changed at ms, noticed at ms after START), one batch a second at +0.5 s:",
        hint="p3's partition receives no row after the migration: only a timer set during the "
        "migration can report it.",
    )


@exercise("10.7", part="fix", hint=FIX_HINT_10_7)
def test_migration_timer_is_never_in_the_past(nb):
    rows = [
        _initial("0", "late", HEALTHY, 90),
        _initial("0", "gone", UNHEALTHY, 50),
        _initial("1", "dead", UNHEALTHY, 40),
    ]
    tester = _migrated(nb, 100, rows)
    expect_equal(
        {"0": _timers(tester, "0"), "1": _timers(tester, "1")},
        {"0": [100_001], "1": [40_000 + DAY_MS]},
        "Migrated at 100 s: `late` (Healthy, last heartbeat 90 s) is past its deadline (95 s), "
        "`gone` (50 s) and `dead` (40 s) are Unhealthy and retire retire_after_ms (a day, the "
        "default) after their last heartbeat. The pending timers per partition, ms after START:",
        hint="Set each partition's pending timers beside what the statement asks of a "
        "partition after the first batch, for a deadline still ahead and for one already "
        "passed.",
    )
    out = _spark_batch(tester, START_MS + 100_500, {})
    expect_equal(
        _after_start(out),
        [("late", HEALTHY, UNHEALTHY, 95_000, 100_500)],
        "The next batch (100.5 s, no rows): transitions as (machine, previous, status, changed "
        "at, noticed at, ms after START).",
    )


@exercise("10.7", part="fix", hint=FIX_HINT_10_7)
def test_migration_announces_nobody_again(nb):
    rows = [
        _initial("0", "p1", HEALTHY, 99),
        _initial("0", "p4", INITIALIZING, 99),
        _initial("0", "p5", UNHEALTHY, 60),
    ]
    tester = _migrated(nb, 100, rows)
    out = _spark_batch(tester, START_MS + 100_500, {"0": _fleet(["p1", "p4", "p5"], 100)})
    expect_equal(
        [f[:3] for f in _facts(out)],
        [("p4", INITIALIZING, HEALTHY), ("p5", UNHEALTHY, HEALTHY)],
        "Migrated p1 (Healthy), p4 (Initializing) and p5 (Unhealthy); each then sends a "
        "heartbeat. The transitions (no machine is new: none may be Initializing again):",
    )
