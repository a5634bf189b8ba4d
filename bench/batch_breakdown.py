"""Where a heartbeat's milliseconds go on the real path, and what each lead takes off.

The path of ``bench/latency.py`` (100 SDK producers at 1 Hz -> the emulator in its own process
-> the ``eventhubs`` source -> lab 05's ``CatchUpProcessor`` on RocksDB -> the reference
monitor's sink), one configuration at a time, each in a fresh process (a Spark session of its
own), side by side in one run. For each it records:

- per heartbeat: the producer's stamp (``machine_time``) to the hub's enqueue time; the
  enqueue time to the moment the source's receiver got it (the receivers' receive log,
  ``STREAMLAB_EVENTHUBS_RECEIVE_LOG``); the receipt to the start of the micro-batch that read
  it (the wait for the trigger);
- per micro-batch with data: the parts of ``durationMs`` (latestOffset, getBatch,
  queryPlanning, walCommit, addBatch, commitOffsets, the rest of triggerExecution), the state
  store's commit and update times, and the sink's call (which runs the batch's plan, since
  the sink is where the batch is computed);
- the figures of ``bench/latency.py``: enqueue to visible row p50 / p99 and detection p99.

The first configuration is the reference monitor as it was before these leads ("before"):
a 500 ms trigger, two shuffle partitions, ``df.write.parquet``, a task per hub partition,
the SDK's 0.2 s socket timeout. Each lead changes one thing;
the last rows combine what helped, on ``local[2]`` and on ``local[1]`` (the slope per core).

    python bench/batch_breakdown.py [--producers 100] [--cycle-seconds 20] [--only NAME ...]

The default run takes about 14 minutes (10 configurations of about 85 s each).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

#: The state store settings that skip RocksDB's row counting (a read before every write).
NO_ROW_COUNT = {"spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false"}

BEFORE = {
    "master": "local[2]",
    "shuffle": 2,
    "trigger_ms": 500,
    "writer": "spark",
    "conf": {},
    "socket_timeout": 0.2,
    "source": {"eventsPerTask": "0"},
}
#: The reference monitor's defaults now (``streamlab.monitor``, ``receivers.SOCKET_TIMEOUT_S``).
BEST = {
    "master": "local[2]",
    "shuffle": 1,
    "trigger_ms": 250,
    "writer": "arrow",
    "conf": {},
    "socket_timeout": 0.01,
    "source": {},
}

#: (name, what it changes, job): the baseline first, then one lead each, then the best combined.
CONFIGURATIONS: list[tuple[str, str, dict]] = [
    (
        "before",
        "trigger 500 ms, 2 shuffle partitions, Spark parquet write, SDK socket timeout 0.2 s",
        BEFORE,
    ),
    ("receiver", "receive loop socket timeout 0.01 s", {**BEFORE, "socket_timeout": 0.01}),
    ("shuffle-1", "one shuffle partition", {**BEFORE, "shuffle": 1}),
    ("trigger-0", "next batch as soon as the last ends", {**BEFORE, "trigger_ms": 0}),
    ("arrow-sink", "sink writes toArrow() with pyarrow", {**BEFORE, "writer": "arrow"}),
    (
        "one-task",
        "a small batch read by one task, not one per hub partition",
        {**BEFORE, "source": {}},
    ),
    ("no-row-count", "RocksDB without row counting", {**BEFORE, "conf": NO_ROW_COUNT}),
    (
        "after",
        "the monitor's defaults now: receiver, shuffle-1, arrow-sink, one-task, trigger 250 ms",
        BEST,
    ),
    ("after-trigger-0", "the same with trigger 0", {**BEST, "trigger_ms": 0}),
    ("after-1-core", "the same on local[1]", {**BEST, "master": "local[1]"}),
]

#: The stacked chart's segments, in the order a heartbeat meets them.
PATH_PARTS = ("producer to hub", "hub to receiver", "wait for the trigger")


def _instant(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _offsets(value) -> dict[str, int]:
    import json

    if isinstance(value, str):
        value = json.loads(value)
    return {str(p): int(s) for p, s in (value or {}).items()}


def _receipts(log: Path) -> dict[tuple[str, int], float]:
    """(partition, sequence number) -> when the source's receiver first got it."""
    first: dict[tuple[str, int], float] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            partition, sequence, _, received = line.split()
            key = (partition, int(sequence))
            first[key] = min(first.get(key, float("inf")), float(received))
    return first


def breakdown(details: dict, receipts: dict[tuple[str, int], float]) -> dict:
    """Medians of every part a heartbeat meets, from a run's ``details`` (see ``latency.run``)."""
    from streamlab.benchmarks import batch_parts, state_times

    warm_from, stopped = details["warm_from"], details["stopped"]
    data = [p for p in details["progress"] if p["numInputRows"]]
    start_of: dict[tuple[str, int], float] = {}
    for progress in data:
        source = progress["sources"][0]
        begun, ended = _offsets(source.get("startOffset")), _offsets(source["endOffset"])
        for partition, end in ended.items():
            for sequence in range(begun.get(partition, 0), end):
                start_of[(partition, sequence)] = _instant(progress["timestamp"])
    to_hub, to_receiver, waiting = [], [], []
    for _, partition, sequence, enqueued, stamped in details["events"]:
        if not warm_from <= enqueued <= stopped:
            continue
        if stamped is not None:
            to_hub.append(enqueued - stamped)
        received = receipts.get((partition, sequence))
        if received is not None:
            to_receiver.append(received - enqueued)
            if (partition, sequence) in start_of:
                waiting.append(max(0.0, start_of[(partition, sequence)] - received))
    steady = [p for p in data if warm_from <= _instant(p["timestamp"]) <= stopped]
    parts = [batch_parts(p) for p in steady]
    names = list(dict.fromkeys(name for part in parts for name in part))
    sink = [
        details["sink_calls"][p["batchId"]] for p in steady if p["batchId"] in details["sink_calls"]
    ]
    states = [state_times(p) for p in steady]
    seconds = max(1e-9, stopped - warm_from)
    in_window = [p for p in details["progress"] if warm_from <= _instant(p["timestamp"]) <= stopped]
    return {
        "path_ms": {
            "producer to hub": round(bench.median(to_hub) * 1000, 1),
            "hub to receiver": round(bench.median(to_receiver) * 1000, 1),
            "wait for the trigger": round(bench.median(waiting) * 1000, 1),
        },
        "path_p99_ms": {
            "producer to hub": round(bench.percentile(to_hub, 99) * 1000, 1),
            "hub to receiver": round(bench.percentile(to_receiver, 99) * 1000, 1),
            "wait for the trigger": round(bench.percentile(waiting, 99) * 1000, 1),
        },
        "batch_parts_ms": {n: bench.median(part[n] for part in parts) for n in names},
        "state_ms": {
            n: bench.median(s[n] for s in states)
            for n in ("commitTimeMs", "allUpdatesTimeMs", "allRemovalsTimeMs")
        },
        "sink_call_ms": round(bench.median((b - a) * 1000 for a, b in sink), 1),
        "batches_with_data": len(steady),
        "batches_per_second": round(len(in_window) / seconds, 2),
        "rows_per_batch": bench.median(p["numInputRows"] for p in steady),
        "heartbeats_timed": len(to_receiver),
    }


def worker(job: dict) -> dict:
    """One configuration in this fresh process: the latency run, then its breakdown."""
    import latency

    from streamlab.monitor import reference_solution
    from streamlab.session import spark_session

    bench.quiet()
    conf = {
        "spark.sql.shuffle.partitions": str(job["shuffle"]),
        # Every progress report of the run, not the last 100.
        "spark.sql.streaming.numRecentProgressUpdates": "10000",
        **job["conf"],
    }
    spark = spark_session(job["master"], app_name="streamlab-bench-breakdown", conf=conf)
    details: dict = {}
    result = latency.run(
        spark,
        reference_solution(),
        job["producers"],
        job["trigger_ms"],
        job["cycle_seconds"],
        writer=job["writer"],
        details=details,
        source_options=job["source"],
    )
    return {**result, **breakdown(details, _receipts(Path(job["receive_log"])))}


def _stack(run: dict) -> list[tuple[str, float]]:
    return [(name, run["path_ms"][name]) for name in PATH_PARTS] + [
        (name, value) for name, value in run["batch_parts_ms"].items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--producers", type=int, default=100)
    parser.add_argument("--cycle-seconds", type=float, default=20)
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        help="configurations to run (default: all): "
        + ", ".join(name for name, _, _ in CONFIGURATIONS),
    )
    args = parser.parse_args()
    from streamlab.eventhubs.receivers import RECEIVE_LOG, SOCKET_TIMEOUT_ENV

    chosen = [c for c in CONFIGURATIONS if args.only is None or c[0] in args.only]
    runs = []
    for name, change, job in chosen:
        log = Path(tempfile.mkdtemp(prefix="bench-breakdown-")) / "received.log"
        result = bench.run_worker(
            Path(__file__),
            {
                **job,
                "producers": args.producers,
                "cycle_seconds": args.cycle_seconds,
                "receive_log": str(log),
            },
            env={RECEIVE_LOG: str(log), SOCKET_TIMEOUT_ENV: str(job["socket_timeout"])},
        )
        runs.append({"name": name, "change": change, **job, **result})
        parts = ", ".join(f"{k} {v:g}" for k, v in _stack(runs[-1]))
        print(
            f"  {name} ({change}): latency p50 {result['latency_ms']['p50']} ms, "
            f"p99 {result['latency_ms']['p99']} ms, detection p99 "
            f"{result['detection_s']['p99']} s, batch median {result['batch_ms']['median']} ms, "
            f"{result['batches_per_second']} batches/s; medians: {parts}",
            flush=True,
        )
    charts = [
        bench.stacked_chart(
            "batch_breakdown",
            f"Where a heartbeat's milliseconds go, {args.producers} producers at 1 Hz",
            [(f"{r['name']}: {r['change']} ({r['master']})", _stack(r)) for r in runs],
            "ms",
            note="each segment is the median of its part while the fleet ran, the bar its sum: per "
            "heartbeat (producer to hub, hub to receiver, wait for the trigger), then per "
            "micro-batch with data (durationMs); the latency figure ends where addBatch's sink "
            "write returns. 2 cores, emulator, RocksDB",
        ),
        bench.bar_chart(
            "batch_breakdown_latency",
            "Heartbeat to transition row, per configuration",
            [(f"p{q}, {r['name']}", r["latency_ms"][f"p{q}"]) for r in runs for q in (50, 99)],
            "ms",
            reference=("target p50 500 ms", 500),
        ),
    ]
    targets = [
        bench.target(f"batch median, {r['name']}", r["batch_ms"]["median"], "ms", "reported", None)
        for r in runs
    ]
    targets += [
        bench.target(
            f"latency p50 / p99, {r['name']}",
            r["latency_ms"]["p50"],
            "ms",
            "reported",
            None,
            note=f"p99 {r['latency_ms']['p99']} ms",
        )
        for r in runs
    ]
    bench.write_result(
        "batch_breakdown",
        "Where a heartbeat's milliseconds go",
        {
            "producers": args.producers,
            "cycle_seconds": args.cycle_seconds,
            "configurations": [c[0] for c in chosen],
        },
        {"runs": runs},
        targets,
        charts,
    )


if __name__ == "__main__":
    bench.main_or_worker(main, worker)
