"""Restart after a kill -9 with 100,000 machines in state: time to the first completed batch.

The query is the reference monitor's (its session: RocksDB with changelog checkpointing, one
shuffle partition; its replace-on-retry parquet sink and trigger; 5 s timeout), reading one file of heartbeats
per micro-batch, one heartbeat per machine per file, with one of three processors:
``reference``, lab 05's ``CatchUpProcessor``, the reference monitor's (a key, a state value
and a timer per event hub partition; its files are what the ``eventhubs`` source hands it,
4 partitions, each read to its end, enqueue times ahead of the wall clock so that no deadline
passes during the run: the fleet keeps sending, as in a restart that is quick); ``lean``, lab
04's ``LeanHeartbeatProcessor`` (a grouping key per machine); or ``bucketed``, lab 06's
``BucketedHeartbeatProcessor`` (a key per bucket of machines, 256 buckets). It runs in a
process of its own:

1. the first process reads three rounds (every machine Initializing, then Healthy), and is
   killed with SIGKILL as soon as a fourth round lands in its input folder;
2. a second process starts on the same checkpoint. Measured from the moment it is launched
   (a new JVM, as after a crash): the Spark session is up, the query has started, and its
   first batch (the fourth round, replayed or new, against 100,000 machines of state
   restored from the checkpoint) has completed.

The restart is reported in parts, so that the largest is visible: the new process's start
and imports, the Spark session (a new JVM; the lab's processor loads from its solution
notebook beside it, as ``streamlab.monitor.session_and_lab`` does), starting the query, the wait for its first batch (restoring
the state stores, the Python workers) and that first batch itself.

    python bench/restart_recovery.py [--machines 100000] [--designs reference lean bucketed]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

BUCKETS = 256
TIMEOUT_MS = 5_000
#: The reference design's enqueue times start this far ahead of the wall clock: more than
#: the first life and the restart take, so that no deadline passes while they run.
AHEAD_S = 600
DESIGNS = {
    "reference": "lab 05 CatchUpProcessor, a key per hub partition",
    "lean": "lab 04 LeanHeartbeatProcessor, a key per machine",
    "bucketed": f"lab 06 BucketedHeartbeatProcessor, {BUCKETS} buckets",
}


def say(event: str, **data) -> None:
    print(json.dumps({"event": event, "at": time.time(), **data}), flush=True)


def worker(job: dict) -> dict:
    say("launched")
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    from streamlab.monitor import (
        DEFAULT_TRIGGER,
        batch_writer,
        lab04_solution,
        reference_solution,
        session_and_lab,
    )

    design = job["design"]
    bench.quiet()
    # As python -m streamlab.monitor starts: the lab loads while the JVM starts.
    spark, lab = session_and_lab(
        {
            "reference": reference_solution,
            "lean": lab04_solution,
            "bucketed": lambda: bench.solution("06"),
        }[design],
        app_name="streamlab-bench-restart",
    )
    say("session")
    output = Path(job["output"])
    output.mkdir(parents=True, exist_ok=True)
    if design == "reference":
        heartbeats = bench.hub_rounds_stream(spark, Path(job["input"]))
        transitions = lab.catch_up_changes(heartbeats, lab.CatchUpProcessor(timeout_ms=TIMEOUT_MS))
    else:
        schema = StructType(
            [
                StructField("machine_name", StringType()),
                StructField("machine_time", TimestampType()),
            ]
        )
        heartbeats = (
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(Path(job["input"]) / "round-*"))
        )
        if design == "bucketed":
            transitions = lab.bucketed_status_changes(
                heartbeats, lab.BucketedHeartbeatProcessor(timeout_ms=TIMEOUT_MS), buckets=BUCKETS
            )
        else:
            transitions = lab.status_changes(
                heartbeats, lab.LeanHeartbeatProcessor(timeout_ms=TIMEOUT_MS)
            )
    query = (
        transitions.writeStream.foreachBatch(batch_writer(output))
        .option("checkpointLocation", job["checkpoint"])
        .trigger(processingTime=DEFAULT_TRIGGER)
        .start()
    )
    say("started")
    seen = set()
    while query.isActive:
        for p in query.recentProgress:
            if p["batchId"] in seen:
                continue
            seen.add(p["batchId"])
            op = p["stateOperators"][0]
            say(
                "batch",
                batch=p["batchId"],
                rows=p["numInputRows"],
                duration_ms=p["durationMs"]["triggerExecution"],
                rows_total=op["numRowsTotal"],
                output_rows=op.get("numRowsUpdated"),
            )
            if job.get("exit_after_first") and p["numInputRows"]:
                query.stop()
                return {"batches": len(seen)}
        time.sleep(0.05)
    raise RuntimeError(str(query.exception()))


def launch(job: dict, log: Path) -> tuple[subprocess.Popen, float]:
    launched = time.time()
    process = subprocess.Popen(
        [sys.executable, __file__, bench.WORKER_FLAG, json.dumps(job)],
        cwd=bench.ROOT,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "STREAMLAB_SPARK_MASTER": "local[2]"},
    )
    return process, launched


def events(log: Path) -> list[dict]:
    found = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return found


def wait_for(process: subprocess.Popen, log: Path, test, what: str, timeout: float = 600) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        for event in events(log):
            if test(event):
                return event
        if process.poll() is not None:
            raise RuntimeError(f"the query process ended before {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)
    raise TimeoutError(what)


def measure(spark, design: str, machines: int) -> dict:
    """Run, kill -9 and restart one design's monitor; its figures."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-restart-{design}-"))
    job = {
        "input": str(work / "in"),
        "output": str(work / "out"),
        "checkpoint": str(work / "checkpoint"),
        "design": design,
    }
    start_s = time.time() + AHEAD_S

    def write(folder: Path, rounds: int, first: int = 0) -> None:
        if design == "reference":
            bench.write_hub_rounds(spark, folder, machines, rounds, first=first, start_s=start_s)
        else:
            bench.write_heartbeat_rounds(spark, folder, machines, rounds, first=first)

    write(work / "in", 3)

    first, _ = launch(job, work / "first.log")
    wait_for(
        first,
        work / "first.log",
        lambda e: e["event"] == "batch" and e["batch"] >= 2,
        "three batches",
    )
    write(work / "staging", 1, first=3)
    (work / "staging" / "round-003").rename(work / "in" / "round-003")
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = [e for e in events(work / "first.log") if e["event"] == "batch"]

    second, launched = launch({**job, "exit_after_first": True}, work / "second.log")
    data = wait_for(
        second,
        work / "second.log",
        lambda e: e["event"] == "batch" and e["rows"],
        "the first batch with input",
    )
    second.wait(120)
    batch = next(e for e in events(work / "second.log") if e["event"] == "batch")
    marks = {e["event"]: e["at"] for e in events(work / "second.log")}
    first_batch_s = batch["duration_ms"] / 1000
    return {
        "design": design,
        "first_life_batches": before,
        "restart_batches": [e for e in events(work / "second.log") if e["event"] == "batch"],
        "parts_seconds": {
            "process start and imports": round(marks["launched"] - launched, 2),
            "Spark session (JVM), the lab loading beside it": round(
                marks["session"] - marks["launched"], 2
            ),
            "query start": round(marks["started"] - marks["session"], 2),
            "wait for the first batch": round(batch["at"] - marks["started"] - first_batch_s, 2),
            "first batch": round(first_batch_s, 2),
        },
        "seconds": {
            "launch_to_session": round(marks["session"] - launched, 2),
            "launch_to_started": round(marks["started"] - launched, 2),
            "started_to_first_batch": round(batch["at"] - marks["started"], 2),
            "launch_to_first_batch": round(batch["at"] - launched, 2),
            "launch_to_first_batch_with_input": round(data["at"] - launched, 2),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--machines", type=int, default=100_000)
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    args = parser.parse_args()
    spark = bench.spark()
    runs = []
    for design in args.designs:
        result = measure(spark, design, args.machines)
        runs.append(result)
        s = result["seconds"]
        print(
            f"  {design:<9} launch -> session {s['launch_to_session']} s, query started "
            f"{s['launch_to_started']} s, first batch {s['launch_to_first_batch']} s, "
            f"first batch with input {s['launch_to_first_batch_with_input']} s",
            flush=True,
        )
        print(
            "            parts: "
            + ", ".join(f"{part} {value} s" for part, value in result["parts_seconds"].items()),
            flush=True,
        )
    chart = bench.bar_chart(
        "restart_recovery",
        f"Restart after kill -9, {args.machines:,} machines in state",
        [
            bar
            for r in runs
            for bar in (
                [(f"{r['design']}: {part}", value) for part, value in r["parts_seconds"].items()]
                + [(f"{r['design']}: launch to first batch", r["seconds"]["launch_to_first_batch"])]
            )
        ],
        "s",
        reference=("target 15 s", 15.0),
        note="from the launch of a new process: new JVM and "
        "Python workers, RocksDB state from the checkpoint; 2 cores",
    )
    targets = []
    for r in runs:
        s, name = r["seconds"], DESIGNS[r["design"]]
        targets += [
            bench.target(
                f"restart to first completed batch, {name}",
                s["launch_to_first_batch"],
                "s",
                "<= 15",
                s["launch_to_first_batch"] <= 15,
            ),
            bench.target(
                f"of which: query start to first batch, {name}",
                s["started_to_first_batch"],
                "s",
                "report",
                None,
            ),
            bench.target(
                f"restart to first batch with input, {name}",
                s["launch_to_first_batch_with_input"],
                "s",
                "report",
                None,
            ),
        ]
        targets += [
            bench.target(f"of which: {part}, {name}", value, "s", "report", None)
            for part, value in r["parts_seconds"].items()
        ]
    bench.write_result(
        "restart_recovery",
        "Restart recovery after kill -9",
        {
            "machines": args.machines,
            "trigger": "500 ms",
            "buckets": BUCKETS,
            "timeout_ms": TIMEOUT_MS,
            "designs": {d: DESIGNS[d] for d in args.designs},
            "state_store": "RocksDB, changelog checkpointing",
        },
        {"machines": args.machines, "runs": runs},
        targets,
        [chart],
    )


if __name__ == "__main__":
    bench.main_or_worker(main, worker)
