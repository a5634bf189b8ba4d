"""The floor under a micro-batch: the same fleet through ever more of the monitor's path.

100 SDK producers send a heartbeat a second to the emulator the whole time; four queries run
one after another in one Spark session with the reference monitor's settings (one shuffle
partition, its trigger, its Arrow parquet writer), each for ``--seconds`` after a warm-up:

- ``jvm``: Spark's ``rate`` source at 100 rows/s into the ``noop`` sink: a stateless
  micro-batch with no Python at all (planning, the offset and commit logs);
- ``source``: the ``eventhubs`` source, parsed, into the monitor's sink: adds the Python data
  source's read and the ``foreachBatch`` call;
- ``no-op state``: the same grouped by hub partition through a ``transformWithState``
  processor that does nothing (no state call, no row out): adds the shuffle, the Python
  stateful operator and its RocksDB commit;
- ``reference``: lab 05's ``CatchUpProcessor``, the monitor itself.

The difference between two rows is what that step costs per batch; the first three rows are
Spark's (and PySpark's) share, which no processor can take away.

    python bench/batch_floor.py [--producers 100] [--seconds 25]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

STEPS = {
    "jvm": "rate source -> noop sink (no Python)",
    "source": "eventhubs source -> monitor's sink",
    "no-op state": "+ transformWithState doing nothing",
    "reference": "+ lab 05's CatchUpProcessor (the monitor)",
}


def _noop_processor():
    from pyspark.sql.streaming import StatefulProcessor

    class NoOp(StatefulProcessor):
        def init(self, handle) -> None:
            pass

        def handleInputRows(self, key, rows, timerValues):
            for _ in rows:
                pass
            return iter(())

    return NoOp()


def _query(spark, step: str, lab, connection_string: str, work: Path):
    from streamlab.monitor import DEFAULT_TRIGGER, batch_writer, reference_transitions

    checkpoint = str(work / step.replace(" ", "-") / "checkpoint")
    if step == "jvm":
        stream = spark.readStream.format("rate").option("rowsPerSecond", 100).load()
        writer = stream.writeStream.format("noop")
    else:
        if step == "reference":
            rows = reference_transitions(spark, connection_string, lab=lab)
        else:
            rows = lab.parse_heartbeats(
                spark.readStream.format("eventhubs")
                .option("connectionString", connection_string)
                .option("eventHubName", "heartbeats")
                .option("startingPosition", "latest")
                .option("systemProperties", "true")
                .load()
            )
            if step == "no-op state":
                rows = rows.groupBy("partition").transformWithState(
                    statefulProcessor=_noop_processor(),
                    outputStructType=lab.TRANSITION_SCHEMA,
                    outputMode="Append",
                    timeMode="ProcessingTime",
                )
        out = work / step.replace(" ", "-") / "out"
        out.mkdir(parents=True)
        writer = rows.writeStream.foreachBatch(batch_writer(out))
    return (
        writer.option("checkpointLocation", checkpoint)
        .trigger(processingTime=DEFAULT_TRIGGER)
        .start()
    )


def measure(spark, step: str, lab, connection_string: str, work: Path, seconds: float) -> dict:
    from streamlab.benchmarks import batch_parts

    query = _query(spark, step, lab, connection_string, work)
    try:
        time.sleep(8)  # Python workers started, the first batches (the backlog) done
        begin = len(query.recentProgress)
        time.sleep(seconds)
        progress = list(query.recentProgress)[begin:]
    finally:
        query.stop()
    batches = [p for p in progress if p["numInputRows"]]
    parts = [batch_parts(p) for p in batches]
    return {
        "step": step,
        "batches": len(batches),
        "batch_ms": bench.median(p["durationMs"]["triggerExecution"] for p in batches),
        "parts_ms": {
            name: bench.median(p[name] for p in parts) for name in (parts[0] if parts else {})
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--producers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=25)
    args = parser.parse_args()
    from streamlab.fleet import Fleet
    from streamlab.hub import start_subprocess
    from streamlab.monitor import SESSION_CONF, reference_solution

    lab = reference_solution()
    spark = bench.spark({**SESSION_CONF, "spark.sql.streaming.numRecentProgressUpdates": "10000"})
    work = Path(tempfile.mkdtemp(prefix="bench-floor-"))
    results = []
    with (
        start_subprocess(data_dir=work / "hub") as hub,
        Fleet(hub.connection_string, name_format="machine-{n:03d}") as fleet,
    ):
        for _ in range(args.producers):
            fleet.add()
        for step in STEPS:
            result = measure(spark, step, lab, hub.connection_string, work, args.seconds)
            results.append(result)
            print(
                f"  {step:<12} {STEPS[step]:<44} batch median {result['batch_ms']:>6.0f} ms, "
                f"addBatch {result['parts_ms'].get('addBatch', float('nan')):>6.0f} ms "
                f"({result['batches']} batches)",
                flush=True,
            )
    chart = bench.stacked_chart(
        "batch_floor",
        f"A micro-batch, step by step, {args.producers} producers at 1 Hz",
        [
            (
                f"{r['step']}: {STEPS[r['step']]}",
                [(name, value) for name, value in r["parts_ms"].items() if value],
            )
            for r in results
        ],
        "ms",
        note="medians of the durationMs parts of the batches with data; the monitor's "
        "session (1 shuffle partition) and trigger; 2 cores, emulator, RocksDB",
    )
    by_step = {r["step"]: r["batch_ms"] for r in results}
    targets = [
        bench.target(f"batch median, {step}: {STEPS[step]}", by_step[step], "ms", "report", None)
        for step in STEPS
    ]
    targets.append(
        bench.target(
            "share of the monitor's batch that is Spark's floor (no-op state / reference)",
            round(by_step["no-op state"] / by_step["reference"], 2),
            "x",
            "report",
            None,
        )
    )
    bench.write_result(
        "batch_floor",
        "The floor under a micro-batch",
        {
            "producers": args.producers,
            "seconds": args.seconds,
            "session": SESSION_CONF,
            "steps": STEPS,
        },
        {"runs": results},
        targets,
        [chart],
    )


if __name__ == "__main__":
    main()
