"""The largest fleet at one heartbeat a second that the monitor keeps up with, three designs.

Spark's ``rate`` source stands in for the producers: it emits ``rowsPerSecond = N`` rows a
second in real time, and row ``value`` is machine ``value % N``'s heartbeat, so each of the N
machines sends one heartbeat a second. Everything after the source is the reference monitor:
a processor on RocksDB (5 s timeout) and the replace-on-retry parquet sink, with one of

- ``reference``: lab 05's ``CatchUpProcessor``, the reference monitor's, keyed by event hub
  partition (machine ``m`` in partition ``m % 4``, the hub's default count) and judging
  silence by the heartbeat's time (the rate source's ``timestamp``, as the hub's enqueue
  time). The rate source reads to its end in every batch: each row carries its own
  ``value`` as both its sequence number and the partition's newest. It runs at a 500 ms
  trigger (the monitor's own is 250 ms, where batches run back to back and "kept up", batches
  shorter than the trigger, does not apply): a stopped machine is reported at its deadline
  (5 s) plus the wait for the next batch and that batch's duration, which must stay within 1 s;
- ``lean``: lab 04's ``LeanHeartbeatProcessor``, one grouping key per machine (the teaching
  step before it);
- ``bucketed``: lab 06's ``BucketedHeartbeatProcessor``, one grouping key and one state value
  per bucket of machines, which pays Python's per-key cost once per bucket, not per machine.

After ``STOP_AFTER_S`` seconds, 1 % of the machines stop. The monitor keeps up with N
machines when, after the first 10 s, its batches take less than the trigger interval on
average (a longer batch delays the next; the backlog grows only when the mean is above
it), every stopped machine is reported Unhealthy, and no other is. It also meets the
detection target when the stopped machines are reported within 6 s (timeout + 1 s) of their
last heartbeat at the 99th percentile. Both are reported: fleet
sizes double while the monitor keeps up (halve while it does not), then the midpoint of the
last two is tried. The sink is the reference monitor's: a parquet folder per batch, read
back after the run; a batch's rows count as visible when its folder is written.

The emulator is not in this path: a single Python process, its ceiling is measured by
``bench/hub_throughput.py`` and bounds a local fleet, not the Spark side.

    python bench/fleet_capacity.py [--designs reference lean bucketed] [--trigger-ms MS] [--buckets 256]

``--trigger-ms`` sets one trigger for every design; without it the reference runs at 500 ms and
the others at 1000 ms.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

STOP_AFTER_S = 20
TIMEOUT_S = 5.0
DESIGNS = {
    "reference": "lab 05 CatchUpProcessor, a key per hub partition",
    "lean": "lab 04 LeanHeartbeatProcessor, a key per machine",
    "bucketed": "lab 06 BucketedHeartbeatProcessor, a key per bucket",
}
STARTS = {"reference": 10_000, "lean": 250, "bucketed": 2_500}
TRIGGERS_MS = {"reference": 500, "lean": 1_000, "bucketed": 1_000}
SMALLEST = 50


def transitions(design: str, heartbeats, labs: dict, buckets: int):
    if design == "reference":
        lab = labs["05"]
        return lab.catch_up_changes(
            heartbeats, lab.CatchUpProcessor(timeout_ms=int(TIMEOUT_S * 1000))
        )
    if design == "lean":
        lab = labs["04"]
        return lab.status_changes(
            heartbeats, lab.LeanHeartbeatProcessor(timeout_ms=int(TIMEOUT_S * 1000))
        )
    lab = labs["06"]
    return lab.bucketed_status_changes(
        heartbeats,
        lab.BucketedHeartbeatProcessor(timeout_ms=int(TIMEOUT_S * 1000)),
        buckets=buckets,
    )


def run(spark, design: str, labs: dict, machines: int, trigger_ms: int, buckets: int) -> dict:
    from pyspark.sql import functions as F

    from streamlab.monitor import batch_writer, read_transitions

    work = Path(tempfile.mkdtemp(prefix=f"bench-capacity-{design}-{machines}-"))
    stopping = max(1, machines // 100)
    rate = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", machines)
        .option("numPartitions", 2)
        .load()
    )
    rate = rate.observe(
        "start",
        F.min(F.when(F.col("value") == 0, F.col("timestamp").cast("double"))).alias("start"),
    )
    stopped = (F.col("value") % machines < stopping) & (F.col("value") >= STOP_AFTER_S * machines)
    machine = F.col("value") % machines
    if design == "reference":
        heartbeats = rate.where(~stopped).select(
            (machine % bench.HUB_PARTITIONS).cast("string").alias("partition"),
            F.format_string("machine-%07d", machine).alias("machine_name"),
            F.col("timestamp").alias("event_time"),
            F.col("value").alias("sequence_number"),
            F.col("value").alias("last_enqueued_sequence_number"),
        )
    else:
        heartbeats = rate.where(~stopped).select(
            F.format_string("machine-%07d", machine).alias("machine_name"),
            F.col("timestamp").alias("machine_time"),
        )
    write = batch_writer(work / "out")
    (work / "out").mkdir(parents=True)
    visible_at: dict[int, float] = {}

    def sink(df, batch_id):
        write(df, batch_id)  # the reference monitor's sink: one parquet folder per batch
        visible_at[batch_id] = time.time()

    query = (
        transitions(design, heartbeats, labs, buckets)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime=f"{trigger_ms} milliseconds")
        .start()
    )
    start = None
    try:
        while start is None or time.time() < start + STOP_AFTER_S + TIMEOUT_S + 4:
            if not query.isActive:
                raise RuntimeError(str(query.exception()))
            for p in query.recentProgress:
                observed = (p["observedMetrics"] or {}).get("start")
                value = observed["start"] if observed is not None else None
                if value is not None and start is None:
                    start = float(value)
            time.sleep(0.2)
    finally:
        query.stop()
    progress = list(query.recentProgress)
    unhealthy = [
        (row["machine_name"], visible_at[row["batch_id"]])
        for row in read_transitions(work / "out")
        if row["status"] == "Unhealthy"
    ]
    steady = [p for p in progress if start + 10 < _epoch(p["timestamp"]) < start + STOP_AFTER_S]
    durations = [p["durationMs"]["triggerExecution"] for p in steady]
    # Machine m's heartbeat of second s has timestamp start + s + m / N; the stopped ones'
    # last heartbeat is in second STOP_AFTER_S - 1.
    reported = {}
    for name, visible in unhealthy:
        m = int(name.split("-")[1])
        last = start + STOP_AFTER_S - 1 + m / machines
        if m < stopping and visible > last and name not in reported:
            reported[name] = visible - last
    delays = list(reported.values())
    false_alarms = sorted({name for name, _ in unhealthy if int(name.split("-")[1]) >= stopping})
    median_ms, p95_ms = bench.median(durations), bench.percentile(durations, 95)
    p99_detection = bench.percentile(delays, 99) if len(delays) == stopping else float("inf")
    # A batch longer than the trigger makes the next one start late; the query keeps up as
    # long as its batches take less than the trigger on average (the backlog does not grow).
    mean_ms = sum(durations) / len(durations) if durations else float("inf")
    kept_up = mean_ms < trigger_ms and len(delays) == stopping and not false_alarms
    return {
        "design": design,
        "machines": machines,
        "trigger_ms": trigger_ms,
        "kept_up": kept_up,
        "detected_in_time": kept_up and p99_detection <= TIMEOUT_S + 1,
        "batch_ms": {
            "mean": round(mean_ms),
            "median": median_ms,
            "p95": p95_ms,
            "max": max(durations, default=None),
        },
        "rows_per_batch_median": bench.median(p["numInputRows"] for p in steady),
        "stopped": stopping,
        "reported": len(delays),
        "detection_s": {
            "p50": round(bench.percentile(delays, 50), 2),
            "p99": round(p99_detection, 2),
        },
        "false_alarms": len(false_alarms),
    }


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def capacity(spark, design: str, labs: dict, args) -> list[dict]:
    """Double from the design's start until a fleet fails (halve when the start fails),
    then try the midpoint between the largest that kept up and the smallest that did not."""
    runs: list[dict] = []
    trigger_ms = args.trigger_ms or TRIGGERS_MS[design]

    def attempt(machines: int) -> bool:
        result = run(spark, design, labs, machines, trigger_ms, args.buckets)
        runs.append(result)
        print(
            f"  {design:<9} {machines:>7,} machines: batches mean {result['batch_ms']['mean']:,.0f} ms, "
            f"median {result['batch_ms']['median']:,.0f} ms, "
            f"p95 {result['batch_ms']['p95']:,.0f} ms; detection p99 {result['detection_s']['p99']} s "
            f"({result['reported']}/{result['stopped']} reported, {result['false_alarms']} false); "
            f"{'kept up' if result['kept_up'] else 'fell behind'}"
            f"{', detection within 6 s' if result['detected_in_time'] else ''}",
            flush=True,
        )
        return result["kept_up"]

    machines = STARTS[design]
    if not attempt(machines):
        # Too many for this machine: halve until a fleet keeps up.
        while machines > SMALLEST and not attempt(machines := machines // 2):
            pass
        failed = [r["machines"] for r in runs if not r["kept_up"]]
        passed = [r["machines"] for r in runs if r["kept_up"]]
        if passed:
            attempt((max(passed) + min(failed)) // 2)
        return runs
    machines *= 2
    while machines <= args.largest and attempt(machines):
        machines *= 2
    passed = [r["machines"] for r in runs if r["kept_up"]]
    if passed and machines <= args.largest:
        attempt((max(passed) + machines) // 2)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    parser.add_argument("--largest", type=int, default=80_000)
    parser.add_argument("--trigger-ms", type=int, default=None)
    parser.add_argument("--buckets", type=int, default=256)
    args = parser.parse_args()
    from streamlab.monitor import lab04_solution, reference_solution

    labs = {"04": lab04_solution(), "05": reference_solution()}
    if "bucketed" in args.designs:
        labs["06"] = bench.solution("06")
    spark = bench.spark()
    runs = {design: capacity(spark, design, labs, args) for design in args.designs}
    triggers = {d: args.trigger_ms or TRIGGERS_MS[d] for d in args.designs}
    largest = {
        design: max((r["machines"] for r in found if r["kept_up"]), default=0)
        for design, found in runs.items()
    }
    in_time = {
        design: max((r["machines"] for r in found if r["detected_in_time"]), default=0)
        for design, found in runs.items()
    }
    chart = bench.bar_chart(
        "fleet_capacity",
        "Largest fleet kept up with at 1 heartbeat/s",
        [
            (f"{DESIGNS[d].split(',')[0]} ({triggers[d]} ms){label}", found[d])
            for d in args.designs
            for label, found in (
                (", batches keep up", largest),
                (", and detection <= 6 s", in_time),
            )
        ],
        "machines",
        reference=("target 10,000", 10_000),
        note=f"rate source -> processor on RocksDB -> parquet sink; {args.buckets} buckets; 2 cores",
    )
    bench.write_result(
        "fleet_capacity",
        "Fleet capacity of the monitor",
        {
            "trigger_ms": triggers,
            "timeout_s": TIMEOUT_S,
            "stop_after_s": STOP_AFTER_S,
            "buckets": args.buckets,
            "source": "rate (rowsPerSecond = machines)",
            "designs": {d: DESIGNS[d] for d in args.designs},
        },
        {
            "runs": [r for found in runs.values() for r in found],
            "capacity_machines": largest,
            "capacity_with_detection_machines": in_time,
        },
        [
            row
            for d in args.designs
            for row in (
                bench.target(
                    f"largest fleet, batches within the trigger, {DESIGNS[d]}",
                    largest[d],
                    "machines",
                    "report",
                    None,
                ),
                bench.target(
                    f"largest fleet, also detection p99 <= 6 s, {DESIGNS[d]}",
                    in_time[d],
                    "machines",
                    ">= 10,000",
                    in_time[d] >= 10_000,
                ),
            )
        ],
        [chart],
    )


if __name__ == "__main__":
    main()
