"""What lab 06's checks share: the listener's rows as a progress report calls for them (6.2,
6.10); the bucketed processor on a ``TwsTester`` whose clock the check sets, one handler the
learner's and the other the course's, so that 6.5 and 6.6 are graded each on its own, against
lab 04's processor; and the Spark plumbing of 6.1, 6.2, 6.3, 6.7, 6.10 and 6.11: heartbeat
files, a count per machine on RocksDB run with ``trigger(availableNow=True)``, the files a
state store commits, and a prediction's shape. No check sleeps, and every verdict depends on
the data, the checkpoint and the progress reports, never on timings.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from streamlab.deadlines import finish
from streamlab.kit import (
    ROCKSDB_PROVIDER,
    STATE_PROVIDER,
    CheckFailed,
    Meter,
    ProcessorStory,
    ReferenceHeartbeatProcessor,
    expect_equal,
    load_solution,
    session_conf,
    spark_facts,
    status_tuples,
    write_heartbeats,
)

CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
#: This module: the Spark facts a prediction is compared with are computed with its plumbing.
STORY = Path(__file__)


def _expected(report, custom):
    return [
        {
            "query": report["name"],
            "batch_id": report["batchId"],
            "input_rows": report["numInputRows"],
            "batch_duration_ms": report["batchDuration"],
            "operator": op["operatorName"],
            "rows_total": op["numRowsTotal"],
            "rows_updated": op["numRowsUpdated"],
            "memory_used_bytes": op["memoryUsedBytes"],
            "commit_time_ms": op["commitTimeMs"],
            **{name: op["customMetrics"].get(name) for name in custom},
        }
        for op in report["stateOperators"]
    ]


def _strings(value) -> set[str]:
    """Every string inside a state value, however the processor nests it."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()


def _with_the_courses(yours, method: str):
    """``yours`` with the course's ``method``: one handler graded at a time."""
    return type(
        yours.__name__,
        (yours,),
        {method: getattr(load_solution("06").BucketedHeartbeatProcessor, method)},
    )


def yours_inputs(nb):
    """Your handleInputRows (6.5), with the course's handleExpiredTimer."""
    return _with_the_courses(nb.BucketedHeartbeats, "handleExpiredTimer")


def yours_timer(nb):
    """Your handleExpiredTimer (6.6), with the course's handleInputRows."""
    return _with_the_courses(nb.BucketedHeartbeatProcessor, "handleInputRows")


class Buckets(ProcessorStory):
    """A bucketed processor on a TwsTester: buckets of machines, a clock set by the check."""

    def __init__(self, processor_class, timeout_ms: int = 5_000, retire_after_ms: int = 3_600_000):
        super().__init__(
            processor_class(timeout_ms=timeout_ms, retire_after_ms=retire_after_ms),
            processor_class.__name__,
        )

    def beat(self, *machines: str, bucket: int = 0) -> list[tuple]:
        """One micro-batch of ``bucket`` at the current time: one heartbeat per name given."""
        rows = [
            Row(machine_name=m, machine_time=datetime(2026, 11, 22, tzinfo=UTC)) for m in machines
        ]
        return sorted(self.batch(bucket, rows), key=lambda r: (r[0], r[3], r[1]))

    def at(self, ms: int) -> list[tuple]:
        return sorted(super().at(ms), key=lambda r: (r[0], r[3], r[1]))

    def expect(self, rows: list[tuple], expected: list[tuple], message: str, **more) -> None:
        """``rows`` the processor emitted against ``expected``, each shown as a person reads it."""
        expect_equal(rows, expected, message, show=_said, **more)

    def play(self, beats: dict[int, tuple[str, ...]]) -> list[tuple]:
        """At each time of ``beats``, in order, the timers due, then one micro-batch of bucket
        0 with a heartbeat of each machine named: what the processor emitted."""
        emitted = []
        for ms, machines in beats.items():
            emitted += self.at(ms)
            emitted += self.beat(*machines)
        return emitted

    def machines(self, bucket: int = 0) -> set[str]:
        """The machine names the state of ``bucket`` holds."""
        handle = self.tester.handle
        found = set()
        for group in (handle.value_states, handle.list_states, handle.map_states):
            for state in group.values():
                found |= _strings(state.state.get(bucket))
        return found

    def has_state(self, bucket: int = 0) -> bool:
        return super().has_state(bucket)

    def timers(self, bucket: int = 0) -> list[int]:
        return super().timers(bucket)


def _said(rows: list[tuple]) -> str:
    if not rows:
        return "nothing"
    return "; ".join(f"{m}: {p} -> {s} at {t} ms" for m, s, p, t in rows)


def _all_unhealthy(processor_class, retire_after_ms: int = 3_600_000) -> Buckets:
    fleet = Buckets(processor_class, retire_after_ms=retire_after_ms)
    fleet.play({1_000: ("m1", "m2"), 2_000: ("m1", "m2")})
    fleet.at(7_000)  # both Unhealthy: the bucket's timer is now a retirement
    return fleet


def _same_story_as_lab_04(processor_class):
    # Twelve machines in three buckets for five minutes: they come, go silent, recover and
    # retire at random (a fixed seed), with batches 0.5 to 7 s apart.
    timeout_ms, retire_after_ms = 5_000, 20_000
    rng = random.Random(606)
    machines = [f"m{i:02d}" for i in range(12)]
    bucket_of = {m: i % 3 for i, m in enumerate(machines)}
    talking = {m: rng.random() < 0.6 for m in machines}
    reference = TwsTester(
        ReferenceHeartbeatProcessor(timeout_ms, retire_after_ms), timeMode="ProcessingTime"
    )
    fleet = Buckets(processor_class, timeout_ms=timeout_ms, retire_after_ms=retire_after_ms)
    history, now = [], 0

    def in_time_order(rows):
        return sorted(rows, key=lambda r: (r[0], r[3], r[1]))

    def expect_lab_04(got, want, step: str) -> None:
        expect_equal(
            _said(got),
            _said(want),
            f"The bucketed processor should emit what lab 04's processor emits for the same "
            f"heartbeats. After {'; '.join(history[-4:]) or 'the start'}, {step} (expected: "
            f"what lab 04 emits).",
        )

    while now < 300_000:
        now += rng.choice([500, 1_000, 1_000, 1_000, 2_000, 3_000, 7_000])
        want = in_time_order(
            status_tuples(
                reference.setProcessingTime(now), "LeanHeartbeatProcessor", "handleExpiredTimer"
            )
        )
        expect_lab_04(fleet.at(now), want, f"the timers due at {now} ms")
        for m in machines:
            if rng.random() < 0.08:
                talking[m] = not talking[m]
        beating = [m for m in machines if talking[m] and rng.random() < 0.9]
        want, got = [], []
        for m in beating:
            want += reference.test(
                m, [Row(machine_name=m, machine_time=None)] * rng.choice([1, 1, 2])
            )
        for bucket in range(3):
            names = [
                m for m in beating if bucket_of[m] == bucket for _ in range(rng.choice([1, 2]))
            ]
            rng.shuffle(names)
            if names:
                got += fleet.beat(*names, bucket=bucket)
        want = in_time_order(status_tuples(want, "LeanHeartbeatProcessor", "handleInputRows"))
        step = f"heartbeats of {', '.join(beating) or 'no machine'} at {now} ms"
        expect_lab_04(in_time_order(got), want, step)
        history.append(step)


FOUR = ("m1", "m2", "m3", "m4")


def _steady_bucket(processor_class) -> tuple[Buckets, Meter]:
    fleet = Buckets(processor_class)
    fleet.play({1_000: FOUR, 2_000: FOUR})
    return fleet, Meter(fleet.tester)


def _heartbeats(folder: Path, name: str, machines: list[str], order: int | None = None) -> None:
    """One JSON file of heartbeats; ``order`` fixes the order the file source reads files in."""
    write_heartbeats(folder, name, [(m, "2026-11-22T10:00:00Z") for m in machines], order)


def _noop_writer(df, name: str, checkpoint, mode: str = "update"):
    """``df`` to the noop sink with ``availableNow``: what the source holds now, then stop."""
    return (
        df.writeStream.format("noop")
        .queryName(name)
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )


def _cause(error: BaseException) -> str:
    """The JVM exception behind a failed query, e.g. a setting Spark refused."""
    text = str(error)
    jvm = re.search(r"(?:java|scala|org)\.[\w.$]+(?:Exception|Error): [^\n]+", text)
    if jvm:
        return jvm.group(0)[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:300]


def _run(
    spark,
    incoming: Path,
    checkpoint,
    name: str,
    conf: dict | None = None,
    what: str = "the query",
):
    """Count heartbeats per machine over ``incoming``, one file per batch; return the query."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    schema = StructType(
        [StructField("machine_name", StringType()), StructField("machine_time", TimestampType())]
    )
    counts = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(incoming))
        .groupBy("machine_name")
        .agg(F.count("*").alias("heartbeats"))
    )
    writer = _noop_writer(counts, name, checkpoint)
    expect_equal(
        spark.conf.get(STATE_PROVIDER),
        ROCKSDB_PROVIDER,
        "The session should use the RocksDB provider (a course bug if it does not).",
    )
    with session_conf(spark, conf or {}):
        query = writer.start()
    try:
        finish(query, within=240, what="the check's query to read its input")
    except Exception as error:
        raise CheckFailed(
            f"{what} failed.", expected="the query to read its input and stop", actual=_cause(error)
        ) from None
    return query


def _listing(checkpoint, operator: int = 0, partition: int = 0) -> list[tuple[int, str]]:
    folder = Path(checkpoint) / "state" / str(operator) / str(partition)
    kinds = {".changelog": "changelog", ".zip": "snapshot"}
    return sorted(
        (int(p.stem), kinds[p.suffix])
        for p in folder.iterdir()
        if p.is_file() and p.suffix in kinds and p.stem.isdigit()
    )


def _prediction(value, name: str, keys, what: str):
    """The learner's prediction, checked for shape before it is compared with Spark."""
    if not isinstance(value, dict) or sorted(value) != sorted(keys):
        raise CheckFailed(
            f"{name} should be a dict with the keys {sorted(keys)!r}, {what}.",
            expected=f"a dict with the keys {sorted(keys)!r}",
            actual=value,
        )
    return {key: [tuple(item) for item in value[key]] for key in keys}


def _as_spark_did(predicted, fact: str, compute, check: str, message: str, *, hint: str) -> None:
    """A prediction against what Spark did on the same input: ``compute()``, run once on this
    machine and kept (``spark_facts``) for the check file ``check`` and this story."""
    actual = spark_facts(fact, compute, check=check, inputs=(STORY,))
    expect_equal(predicted, actual, message, hint=hint)
