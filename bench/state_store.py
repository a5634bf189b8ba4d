"""A million keys of state: RocksDB against the HDFS-backed provider, changelog on and off.

One stateful aggregation both providers support, ``groupBy("key").agg(count, sum)`` in
update mode, reads one parquet file per micro-batch: the first file holds every key once
(1,000,000 keys of state after batch 0), each later file updates 200,000 of them. Each
configuration runs in a JVM of its own (a worker process, 4 GiB heap), side by side:

- ``hdfs``: the default HDFS-backed provider, state in hash maps on the JVM heap;
- ``rocksdb``: the course's RocksDB provider with changelog checkpointing (the default);
- ``rocksdb-snapshots``: RocksDB with changelog checkpointing off (a snapshot per commit).

Figures: JVM heap used after a full GC while the query holds its state (and its peak),
GC time, batch durations, and the state store's commit time per batch. Writes
``build/bench/state_providers.json`` (benchmark 4) and ``build/bench/changelog.json`` (5).

    python bench/state_store.py [--keys 1000000] [--updates 200000] [--batches 6]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

from streamlab.deadlines import drain

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
CONFIGS = {
    "hdfs": {"provider": HDFS, "changelog": "false"},
    "rocksdb": {"provider": ROCKSDB, "changelog": "true"},
    "rocksdb-snapshots": {"provider": ROCKSDB, "changelog": "false"},
}
LABELS = {
    "hdfs": "HDFS-backed (heap)",
    "rocksdb": "RocksDB, changelog",
    "rocksdb-snapshots": "RocksDB, snapshots",
}


def worker(job: dict) -> dict:
    from pyspark.sql import functions as F

    config = CONFIGS[job["config"]]
    spark = bench.spark(
        {
            "spark.sql.streaming.stateStore.providerClass": config["provider"],
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": config[
                "changelog"
            ],
            "spark.driver.memory": job["heap"],
        }
    )
    jvm = bench.Jvm(spark)
    work = Path(tempfile.mkdtemp(prefix="bench-state-"))
    keys, updates = job["keys"], job["updates"]
    for b in range(job["batches"]):
        ids = (
            spark.range(keys)
            if b == 0
            else spark.range(updates).select(
                ((F.col("id") * 7919 + b * 104_729) % keys).alias("id")
            )
        )
        (
            ids.select(F.col("id").alias("key"), (F.col("id") % 97).alias("value"))
            .coalesce(1)
            .write.parquet(str(work / "in" / f"batch-{b:03d}"))
        )
    source = (
        spark.readStream.schema("key LONG, value LONG")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(work / "in" / "batch-*"))
    )
    counts = source.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("total"))

    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], jvm.heap_used())
            done.wait(0.2)

    heap_before = jvm.heap_after_gc()
    gc_before = jvm.gc_ms()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    drain(query, within=1800, what="the benchmark's query to process its input")
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    gc_ms = jvm.gc_ms() - gc_before
    heap_with_state = jvm.heap_after_gc()  # the query is still running: its state is loaded
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    query.stop()
    batches = [
        {
            "batch": p["batchId"],
            "input_rows": p["numInputRows"],
            "duration_ms": p["durationMs"]["triggerExecution"],
            "commit_ms": p["stateOperators"][0]["commitTimeMs"],
            "rows_total": p["stateOperators"][0]["numRowsTotal"],
            "state_memory_bytes": p["stateOperators"][0]["memoryUsedBytes"],
        }
        for p in progress
    ]
    assert batches[0]["rows_total"] == keys, batches[0]
    return {
        "config": job["config"],
        "seconds": round(seconds, 1),
        "gc_ms": gc_ms,
        "heap_before_mb": round(heap_before / 2**20, 1),
        "heap_with_state_mb": round(heap_with_state / 2**20, 1),
        "heap_peak_mb": round(peak[0] / 2**20, 1),
        "batches": batches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--heap", default="4g")
    args = parser.parse_args()
    runs = {}
    for config in CONFIGS:
        runs[config] = bench.run_worker(
            Path(__file__),
            {
                "config": config,
                "keys": args.keys,
                "updates": args.updates,
                "batches": args.batches,
                "heap": args.heap,
            },
        )
        r = runs[config]
        print(
            f"  {LABELS[config]:<22} heap with state {r['heap_with_state_mb']:>8,.0f} MB, "
            f"peak {r['heap_peak_mb']:>6,.0f} MB, GC {r['gc_ms']:>6,} ms, {r['seconds']} s"
        )
    settings = {
        "keys": args.keys,
        "updates_per_batch": args.updates,
        "batches": args.batches,
        "driver_heap": args.heap,
        "query": "groupBy(key).agg(count, sum), update mode, noop sink",
    }

    def later(config: str, field: str) -> list[float]:
        return [b[field] for b in runs[config]["batches"][1:]]

    hdfs, rocks = runs["hdfs"], runs["rocksdb"]
    heap_ratio = round(rocks["heap_with_state_mb"] / hdfs["heap_with_state_mb"], 2)
    summary = {
        c: {
            "heap_before_mb": runs[c]["heap_before_mb"],
            "heap_with_state_mb": runs[c]["heap_with_state_mb"],
            "heap_peak_mb": runs[c]["heap_peak_mb"],
            "gc_ms": runs[c]["gc_ms"],
            "median_update_batch_ms": bench.median(later(c, "duration_ms")),
            "first_batch_ms": runs[c]["batches"][0]["duration_ms"],
        }
        for c in ("hdfs", "rocksdb")
    }
    charts = [
        bench.bar_chart(
            "state_providers_heap",
            f"JVM heap holding {args.keys:,} keys of state (after a full GC)",
            [(LABELS[c], runs[c]["heap_with_state_mb"]) for c in ("hdfs", "rocksdb")],
            "MB",
            note="RocksDB keeps its state off the heap, in native memory; 2 cores, 4 GiB heap",
        ),
        bench.bar_chart(
            "state_providers_batch",
            f"Median batch duration, {args.updates:,} updates to {args.keys:,} keys",
            [(LABELS[c], summary[c]["median_update_batch_ms"]) for c in ("hdfs", "rocksdb")],
            "ms",
        ),
    ]
    bench.write_result(
        "state_providers",
        "RocksDB against the HDFS-backed provider",
        settings,
        {"summary": summary, "runs": {c: runs[c] for c in ("hdfs", "rocksdb")}},
        [
            bench.target(
                f"RocksDB heap / HDFS-backed heap, {args.keys:,} keys",
                heap_ratio,
                "x",
                "<= 0.33",
                heap_ratio <= 0.33,
            ),
            bench.target(
                "heap before the query starts (both)", hdfs["heap_before_mb"], "MB", "report", None
            ),
            bench.target(
                "HDFS-backed: heap with state", hdfs["heap_with_state_mb"], "MB", "report", None
            ),
            bench.target(
                "RocksDB: heap with state", rocks["heap_with_state_mb"], "MB", "report", None
            ),
            bench.target(
                "GC time, HDFS-backed / RocksDB",
                round(hdfs["gc_ms"] / max(rocks["gc_ms"], 1), 2),
                "x",
                "report",
                None,
            ),
            bench.target(
                "median batch, HDFS-backed",
                summary["hdfs"]["median_update_batch_ms"],
                "ms",
                "report",
                None,
            ),
            bench.target(
                "median batch, RocksDB",
                summary["rocksdb"]["median_update_batch_ms"],
                "ms",
                "report",
                None,
            ),
        ],
        charts,
    )

    on = bench.median(later("rocksdb", "commit_ms"))
    off = bench.median(later("rocksdb-snapshots", "commit_ms"))
    ratio = round(off / max(on, 1), 2)
    chart = bench.bar_chart(
        "changelog",
        f"RocksDB commit time per batch, {args.updates:,} updates to {args.keys:,} keys",
        [("changelog checkpointing", on), ("snapshot every commit", off)],
        "ms",
        note="median commitTimeMs of the batches after the first; 2 cores",
    )
    bench.write_result(
        "changelog",
        "Changelog checkpointing on and off",
        settings,
        {
            "commit_ms": {
                "changelog": later("rocksdb", "commit_ms"),
                "snapshots": later("rocksdb-snapshots", "commit_ms"),
            },
            "batch_ms": {
                "changelog": later("rocksdb", "duration_ms"),
                "snapshots": later("rocksdb-snapshots", "duration_ms"),
            },
            "runs": {c: runs[c] for c in ("rocksdb", "rocksdb-snapshots")},
        },
        [
            bench.target("median commit, changelog on", on, "ms", "report", None),
            bench.target("median commit, changelog off", off, "ms", "report", None),
            bench.target("commit time, off / on", ratio, "x", "report", None),
        ],
        [chart],
    )


if __name__ == "__main__":
    bench.main_or_worker(main, worker)
