"""The Delta sink's cost per micro-batch against the parquet ``foreachBatch`` writer.

Both are the course's idempotent ``foreachBatch`` functions, called the way a query calls them,
with the same DataFrame, side by side in one Spark (``local[2]``):

- ``parquet``: ``streamlab.monitor.batch_writer``, one folder per batch id, written by Spark's
  parquet writer under a temporary name and renamed into place (replace on retry);
- ``delta``: ``streamlab.delta.delta_writer``, the batch collected as Arrow, written as one
  parquet file and committed with its transaction identifier (skip on retry).

Each batch size gets a DataFrame of transition rows (the monitor's shape), in two partitions
and cached, so the figures are the writers' own cost, not the computation of the batch. The
two writers alternate, batch by batch, so load from other work on the machine hits both alike,
and the first batches of each size (warm-up: code paths the JVM has not compiled yet) are not
counted.
Also measured: a replayed batch that the Delta table already holds (read the log, skip).
Writes ``build/bench/delta_sink.json`` and a chart.

    python bench/delta_sink.py [--sizes 100,1000,10000] [--batches 20] [--warmup 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

WRITERS = ("parquet", "delta")
LABELS = {"parquet": "parquet folder per batch", "delta": "Delta table, transaction id"}


def transitions(spark, rows: int):
    """``rows`` transition rows in two partitions, cached and counted."""
    from pyspark.sql import functions as F

    frame = spark.range(rows, numPartitions=2).select(
        F.format_string("machine-%06d", F.col("id")).alias("machine_name"),
        F.when(F.col("id") % 3 == 0, "Unhealthy").otherwise("Healthy").alias("status"),
        F.lit("Initializing").alias("previous_status"),
        F.timestamp_seconds(F.lit(int(bench.ROUNDS_START.timestamp())) + F.col("id") % 60).alias(
            "last_status_change_time"
        ),
    )
    frame.cache().count()
    return frame


def measure(spark, rows: int, batches: int, warmup: int, work: Path) -> dict:
    from streamlab.delta import delta_writer
    from streamlab.monitor import batch_writer

    frame = transitions(spark, rows)
    (work / "parquet").mkdir(parents=True)
    write = {
        "parquet": batch_writer(work / "parquet"),
        "delta": delta_writer(work / "delta", app_id="bench"),
    }
    ms = {name: [] for name in WRITERS}
    for batch_id in range(warmup + batches):
        for name in WRITERS if batch_id % 2 == 0 else reversed(WRITERS):
            start = time.perf_counter()
            write[name](frame, batch_id)
            if batch_id >= warmup:
                ms[name].append((time.perf_counter() - start) * 1000)
    replay = []
    for batch_id in range(warmup, warmup + batches):
        start = time.perf_counter()
        write["delta"](frame, batch_id)
        replay.append((time.perf_counter() - start) * 1000)
    frame.unpersist()
    from streamlab.delta import read_table

    assert read_table(work / "delta").num_rows == rows * (warmup + batches)
    return {
        "rows": rows,
        "batch_ms": {name: [round(v, 1) for v in ms[name]] for name in WRITERS},
        "replay_skip_ms": [round(v, 1) for v in replay],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000", help="rows per batch, comma-separated")
    parser.add_argument("--batches", type=int, default=20, help="batches per writer and size")
    parser.add_argument("--warmup", type=int, default=3, help="batches not counted, per size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    spark = bench.spark()
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as scratch:
        for rows in sizes:
            run = measure(spark, rows, args.batches, args.warmup, Path(scratch) / f"rows-{rows}")
            runs.append(run)
            medians = {name: bench.median(run["batch_ms"][name]) for name in WRITERS}
            print(
                f"  {rows:>7,} rows: parquet {medians['parquet']:7.1f} ms, Delta "
                f"{medians['delta']:7.1f} ms per batch (median of {args.batches}); "
                f"replay skipped in {bench.median(run['replay_skip_ms']):.1f} ms"
            )
    summary = {
        str(run["rows"]): {
            **{f"{name}_ms": bench.spread(run["batch_ms"][name], digits=1) for name in WRITERS},
            "replay_skip_ms": bench.spread(run["replay_skip_ms"], digits=1),
        }
        for run in runs
    }
    targets = []
    for run in runs:
        rows = f"{run['rows']:,} rows"
        parquet = bench.median(run["batch_ms"]["parquet"])
        delta = bench.median(run["batch_ms"]["delta"])
        targets += [
            bench.target(
                f"parquet writer, median per batch, {rows}", round(parquet, 1), "ms", "report", None
            ),
            bench.target(
                f"Delta writer, median per batch, {rows}", round(delta, 1), "ms", "report", None
            ),
            bench.target(
                f"Delta / parquet, {rows}", round(delta / parquet, 2), "x", "report", None
            ),
            bench.target(
                f"Delta, replayed batch skipped, {rows}",
                round(bench.median(run["replay_skip_ms"]), 1),
                "ms",
                "report",
                None,
            ),
        ]
    chart = bench.bar_chart(
        "delta_sink",
        "foreachBatch writers: median time per micro-batch",
        [
            (f"{LABELS[name]}, {run['rows']:,} rows", bench.median(run["batch_ms"][name]))
            for run in runs
            for name in WRITERS
        ],
        "ms",
        note=f"median of {args.batches} batches per writer and size; local[2], 2 cores",
    )
    bench.write_result(
        "delta_sink",
        "The Delta sink against the parquet foreachBatch writer",
        {
            "sizes": sizes,
            "batches": args.batches,
            "warmup": args.warmup,
            "partitions": 2,
            "rows": "transition rows (machine_name, status, previous_status, last_status_change_time)",
        },
        {"summary": summary, "runs": runs},
        targets,
        [chart],
    )


if __name__ == "__main__":
    main()
