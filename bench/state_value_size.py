"""What one state value per hub partition costs against small buckets: bytes per batch.

Lab 05's ``CatchUpProcessor`` keeps every machine of an event hub partition in one state
value; lab 06's ``BucketedHeartbeatProcessor`` keeps about 40 machines per value; lab 04's
``LeanHeartbeatProcessor`` one machine per value. A value is rewritten whole whenever one of
its machines sends a heartbeat, in RocksDB and in the checkpoint's changelog. This measures,
per micro-batch, for fleets of several sizes:

- the bytes the batch wrote into the checkpoint (the ``.changelog`` files of its version,
  every state partition, compressed as Spark writes them);
- the bytes it put into RocksDB (``rocksdbTotalBytesWritten``: keys and values, uncompressed,
  timers included) and the state values it wrote (the change feed of the state variable), so
  the size of one value;
- the batch's duration.

Two input shapes, one round of heartbeats per micro-batch (``trigger(availableNow=True)``,
``maxFilesPerTrigger=1``): **every machine** beats in every round, as a healthy fleet does at
one heartbeat a second; **1 in 101** beats per round, a different set each time (a fleet that
reports rarely, or the batches of a trigger much shorter than the heartbeat interval). Two warm-up rounds of every machine
come first (Initializing, then Healthy); the figures are the mean of the three rounds after.
Machine ``i`` is in hub partition ``i % 4``; the rounds' event times lie an hour ahead of the
clock and the timeouts are 60 s, so no machine times out during the run.

    python bench/state_value_size.py [--machines 1000 10000 40000] [--designs partition bucket machine]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

DESIGNS = {
    "partition": "a value per hub partition (lab 05)",
    "bucket": "a value per bucket of about 40 (lab 06)",
    "machine": "a value per machine (lab 04)",
}
STATE_VARIABLE = {"partition": "partition", "bucket": "bucket", "machine": "machine"}
SHAPES = {"every": "every machine beats", "sparse": "1 in 101 beats"}
HUB_PARTITIONS = 4
PER_BUCKET = 40
WARM_UP, MEASURED = 2, 3
TIMEOUT_MS = 60_000
#: Lab 04's processor pays the Python per-key floor per machine: beyond this fleet its steady
#: batches take longer than the rest of this benchmark together.
MACHINE_DESIGN_UP_TO = 10_000


def write_rounds(folder: Path, machines: int, shape: str) -> None:
    """One parquet file per round, as the ``eventhubs`` source hands them to lab 05."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    start_ms = (int(time.time()) + 3_600) * 1000
    sequence = [0] * HUB_PARTITIONS
    folder.mkdir(parents=True)
    for r in range(WARM_UP + MEASURED):
        if r < WARM_UP or shape == "every":
            beating = range(machines)
        else:
            beating = range(r, machines, 101)
        rows = {
            "partition": [],
            "machine_name": [],
            "event_time": [],
            "sequence_number": [],
            "last_enqueued_sequence_number": [],
        }
        for n, i in enumerate(beating):
            p = i % HUB_PARTITIONS
            rows["partition"].append(str(p))
            rows["machine_name"].append(f"machine-{i:06d}")
            rows["event_time"].append(start_ms + r * 1000 + n * 1000 // machines)
            rows["sequence_number"].append(sequence[p])
            sequence[p] += 1
        rows["last_enqueued_sequence_number"] = [sequence[int(p)] - 1 for p in rows["partition"]]
        table = pa.table(
            {
                **rows,
                "event_time": pa.array(rows["event_time"], pa.timestamp("ms", tz="UTC")),
            }
        )
        pq.write_table(table, folder / f"round-{r:03d}.parquet")
        stamp = 1_700_000_000 + r  # the file source reads the rounds in this order
        os.utime(folder / f"round-{r:03d}.parquet", (stamp, stamp))


def transitions(design: str, heartbeats, labs: dict, machines: int):
    if design == "partition":
        lab = labs["05"]
        return lab.catch_up_changes(heartbeats, lab.CatchUpProcessor(timeout_ms=TIMEOUT_MS))
    if design == "bucket":
        lab = labs["06"]
        return lab.bucketed_status_changes(
            heartbeats,
            lab.BucketedHeartbeatProcessor(timeout_ms=TIMEOUT_MS),
            buckets=math.ceil(machines / PER_BUCKET),
        )
    lab = labs["04"]
    return lab.status_changes(heartbeats, lab.LeanHeartbeatProcessor(timeout_ms=TIMEOUT_MS))


def changelog_bytes(checkpoint: Path, version: int) -> int:
    return sum(
        path.stat().st_size for path in (checkpoint / "state" / "0").glob(f"*/{version}.changelog")
    )


def measure(spark, labs: dict, design: str, machines: int, shape: str) -> dict:
    from pyspark.sql import functions as F

    work = Path(tempfile.mkdtemp(prefix="bench-value-size-"))
    write_rounds(work / "rounds", machines, shape)
    heartbeats = (
        spark.readStream.schema(
            "partition STRING, machine_name STRING, event_time TIMESTAMP, "
            "sequence_number LONG, last_enqueued_sequence_number LONG"
        )
        .option("maxFilesPerTrigger", 1)
        .parquet(str(work / "rounds"))
    )
    checkpoint = work / "checkpoint"
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        run = bench.run_offline(
            lambda: (
                transitions(design, heartbeats, labs, machines)
                .writeStream.format("noop")
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
        )
    finally:
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    progress = [p for p in run["progress"] if p["numInputRows"]]
    assert len(progress) == WARM_UP + MEASURED, [p["numInputRows"] for p in run["progress"]]
    written = {
        row.batch_id: row.values
        for row in spark.read.format("statestore")
        .option("stateVarName", STATE_VARIABLE[design])
        .option("readChangeFeed", "true")
        .option("changeStartBatchId", 0)
        .load(str(checkpoint))
        .groupBy("batch_id")
        .agg(F.count("*").alias("values"))
        .collect()
    }
    steady = progress[WARM_UP:]
    per_batch = []
    for p in steady:
        op = p["stateOperators"][0]
        per_batch.append(
            {
                "heartbeats": p["numInputRows"],
                "changelog_bytes": changelog_bytes(checkpoint, p["batchId"] + 1),
                "rocksdb_bytes": op["customMetrics"]["rocksdbTotalBytesWritten"],
                "values_written": written.get(p["batchId"], 0),
                "batch_ms": p["durationMs"]["triggerExecution"],
            }
        )

    def mean(key: str) -> float:
        return sum(b[key] for b in per_batch) / len(per_batch)

    values = mean("values_written")
    return {
        "design": design,
        "machines": machines,
        "shape": shape,
        "heartbeats_per_batch": round(mean("heartbeats")),
        "values_per_batch": round(values),
        "changelog_bytes_per_batch": round(mean("changelog_bytes")),
        "rocksdb_bytes_per_batch": round(mean("rocksdb_bytes")),
        "bytes_per_value": round(mean("rocksdb_bytes") / values) if values else None,
        "changelog_bytes_per_heartbeat": round(mean("changelog_bytes") / mean("heartbeats"), 1),
        "batch_ms": round(mean("batch_ms")),
        "state_values": progress[-1]["stateOperators"][0]["numRowsTotal"],
    }


def kib(n: float) -> str:
    return f"{n / 1024:,.1f} KiB" if n >= 1024 else f"{n:,.0f} B"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, nargs="+", default=[1_000, 10_000, 40_000])
    parser.add_argument("--designs", nargs="+", choices=list(DESIGNS), default=list(DESIGNS))
    args = parser.parse_args()

    spark = bench.spark()
    labs = {lab: bench.solution(lab) for lab in ("04", "05", "06")}
    results = []
    for machines in args.machines:
        for shape in SHAPES:
            for design in args.designs:
                if design == "machine" and machines > MACHINE_DESIGN_UP_TO:
                    continue
                started = time.monotonic()
                row = measure(spark, labs, design, machines, shape)
                results.append(row)
                print(
                    f"{machines:>7,} machines, {SHAPES[shape]:<20} {DESIGNS[design]:<40} "
                    f"{row['values_per_batch']:>6,} values of {kib(row['bytes_per_value'] or 0):>10}"
                    f" -> changelog {kib(row['changelog_bytes_per_batch']):>10} a batch "
                    f"({row['changelog_bytes_per_heartbeat']:,.1f} B a heartbeat), "
                    f"batch {row['batch_ms']:,} ms   [{time.monotonic() - started:.0f} s]",
                    flush=True,
                )

    def pick(design: str, machines: int, shape: str) -> dict | None:
        return next(
            (
                r
                for r in results
                if (r["design"], r["machines"], r["shape"]) == (design, machines, shape)
            ),
            None,
        )

    biggest = max(args.machines)
    bars = []
    for shape in SHAPES:
        for design in ("partition", "bucket"):
            row = pick(design, biggest, shape)
            if row:
                bars.append(
                    (
                        f"{SHAPES[shape]}, {DESIGNS[design]}",
                        row["changelog_bytes_per_batch"] / 1024,
                    )
                )
    charts = [
        bench.bar_chart(
            "state_value_size",
            f"Changelog written per micro-batch, {biggest:,} machines",
            bars,
            "KiB",
            note="One round of heartbeats per batch; the mean of three batches.",
        )
    ]
    figures = {f"{r['design']}_{r['machines']}_{r['shape']}": r for r in results}
    targets = []
    for shape in SHAPES:
        part, bucket = pick("partition", biggest, shape), pick("bucket", biggest, shape)
        if part and bucket:
            ratio = part["changelog_bytes_per_batch"] / max(bucket["changelog_bytes_per_batch"], 1)
            targets.append(
                bench.target(
                    f"changelog per batch, value per partition / per bucket ({SHAPES[shape]})",
                    round(ratio, 1),
                    "x",
                    "report",
                    None,
                )
            )
    bench.write_result(
        "state_value_size",
        "State value size: a value per hub partition against small buckets",
        {
            "machines": args.machines,
            "designs": args.designs,
            "rounds": f"{WARM_UP} warm-up + {MEASURED} measured",
            "hub_partitions": HUB_PARTITIONS,
            "machines_per_bucket": PER_BUCKET,
        },
        figures,
        targets,
        charts,
    )


if __name__ == "__main__":
    main()
