"""The reference processor's machine table, one value per partition against a MapState.

Lab 05's ``CatchUpProcessor`` (the reference monitor's) keeps all of an event hub partition's
machines in one state value, read and written whole once per micro-batch; lab 10's
``MapCatchUpProcessor`` runs the same handlers on a ``MapState`` with one entry per machine,
read with one iteration and written entry by entry, only where an entry changed. Side by side,
in one run, on the rounds ``bench/state_machine.py`` gives the reference processor (what the
``eventhubs`` source hands it: 4 partitions, enqueue times ahead of the wall clock, so that no
deadline passes while a run reads them):

- **heartbeats per second** in the steady state at each fleet size, as ``state_machine``
  measures (round 1 makes every machine Initializing, round 2 Healthy, the later rounds change
  nothing and are the figure), with every machine sending in every micro-batch;
- **changelog bytes per micro-batch**: what the steady batches add to the checkpoint's
  ``state/0/*/N.changelog`` files, with every machine in every batch, and with a quarter of the
  machines per batch (the monitor's live shape: a 250 ms trigger and one heartbeat a second);
  the quarter rounds' heartbeats per second are reported too;
- **restart after kill -9** with ``--restart-machines`` machines in state: the time from the
  launch of a new process to its first completed batch, as ``restart_recovery`` measures it,
  in a process of its own with the reference monitor's session and trigger.

    python bench/mapstate.py [--machines 10000 50000 100000] [--restart-machines 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench
import restart_recovery

DESIGNS = {
    "value": "one value per partition (lab 05, the reference)",
    "map": "a MapState entry per machine (lab 10)",
}
#: Full rounds (every machine once) and quarter rounds (a quarter of the machines each).
ROUNDS, QUARTERS = 4, 4


def processor(design: str, lab05, lab10, timeout_ms: int):
    if design == "value":
        return lab05.CatchUpProcessor(timeout_ms=timeout_ms)
    return lab10.MapCatchUpProcessor(timeout_ms=timeout_ms)


def write_quarter_rounds(spark, folder: Path, machines: int, start_s: float) -> None:
    """Two full rounds (every machine Initializing, then Healthy), then ``QUARTERS`` rounds of
    a quarter of the fleet each, a quarter of every hub partition's machines (machine ``i`` is in
    partition ``i % 4``, and in round ``r`` when ``i // 4 % 4 == r % 4``), with the sequence
    numbers and enqueue times ``bench.write_hub_rounds`` gives the full rounds."""
    from pyspark.sql import functions as F

    bench.write_hub_rounds(spark, folder, machines, 2, start_s=start_s)
    staging = folder.with_name(folder.name + "-full")
    bench.write_hub_rounds(spark, staging, machines, QUARTERS, first=2, start_s=start_s)
    for r in range(2, 2 + QUARTERS):
        number = F.substring("machine_name", 9, 6).cast("int")
        (
            spark.read.parquet(str(staging / f"round-{r:03d}"))
            .where(F.floor(number / 4) % 4 == r % 4)
            .coalesce(1)
            .write.parquet(str(folder / f"round-{r:03d}"))
        )


def changelog_bytes(checkpoint: Path, batch_id: int) -> int:
    """Bytes of the changelog files of the state version ``batch_id`` wrote, every partition."""
    return sum(p.stat().st_size for p in checkpoint.glob(f"state/0/*/{batch_id + 1}.changelog"))


def steady(stream, proc, rounds: int) -> dict:
    """Run ``stream`` (``rounds`` rounds) through ``proc`` into the ``noop`` sink; figures of the
    steady batches, every batch after the first two."""
    spark = stream.sparkSession
    checkpoint = Path(tempfile.mkdtemp(prefix="bench-mapstate-"))
    from streamlab.solutions import load_solution

    transitions = load_solution("05").catch_up_changes(stream, proc)
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        run = bench.run_offline(
            lambda: (
                transitions.writeStream.format("noop")
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
        )
    finally:
        spark.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    batches = [p for p in run["progress"] if p["numInputRows"]]
    assert len(batches) == rounds, [p["numInputRows"] for p in run["progress"]]
    steady_batches = batches[2:]
    ms = sum(p["durationMs"]["triggerExecution"] for p in steady_batches)
    rows = sum(p["numInputRows"] for p in steady_batches)
    sizes = [changelog_bytes(checkpoint, p["batchId"]) for p in steady_batches]
    return {
        "steady_events_per_second": round(rows / (ms / 1000)),
        "steady_batch_ms": [p["durationMs"]["triggerExecution"] for p in steady_batches],
        "rows_per_steady_batch": round(rows / len(steady_batches)),
        "changelog_bytes_per_batch": round(sum(sizes) / len(sizes)),
        "first_batch_ms": batches[0]["durationMs"]["triggerExecution"],
        "total_seconds": round(run["seconds"], 1),
    }


# -- restart after kill -9 ----------------------------------------------------------------------
# restart_recovery.py measures the reference design; its measure() and worker() run here as they
# are, the worker started from this script so that the map design can stand in for lab 05's
# processor.


def worker(job: dict) -> dict:
    if job.get("table") == "map":
        import streamlab.monitor as monitor
        from streamlab.solutions import load_solution

        def lab_with_a_map_table():
            # What restart_recovery's worker takes from lab 05, with lab 10's processor.
            lab10 = load_solution("10")
            return SimpleNamespace(
                CatchUpProcessor=lab10.MapCatchUpProcessor,
                catch_up_changes=lab10.LAB05.catch_up_changes,
            )

        monitor.reference_solution = lab_with_a_map_table
    return restart_recovery.worker(job)


def restart(spark, table: str, machines: int) -> dict:
    """restart_recovery's measure() of the reference design, with the machine table ``table``."""

    def launch(job: dict, log: Path):
        launched = time.time()
        process = subprocess.Popen(
            [sys.executable, __file__, bench.WORKER_FLAG, json.dumps({**job, "table": table})],
            cwd=bench.ROOT,
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "STREAMLAB_SPARK_MASTER": "local[2]"},
        )
        return process, launched

    restart_recovery.launch = launch
    result = restart_recovery.measure(spark, "reference", machines)
    return {"design": table, **result["seconds"], "parts_seconds": result["parts_seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--machines", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--restart-machines", type=int, default=100_000)
    args = parser.parse_args()

    from streamlab.solutions import load_solution

    lab05, lab10 = load_solution("05"), load_solution("10")
    spark = bench.spark()
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-mapstate-input-") as tmp:
        warm = Path(tmp) / "warm"
        bench.write_hub_rounds(spark, warm, 1_000, ROUNDS, start_s=time.time() + 600)
        for design in DESIGNS:  # start the Python workers and the JIT before measuring
            steady(
                bench.hub_rounds_stream(spark, warm),
                processor(design, lab05, lab10, 60_000),
                ROUNDS,
            )
        for machines in args.machines:
            full, quarter = Path(tmp) / f"full-{machines}", Path(tmp) / f"quarter-{machines}"
            # Written just before they are read, ahead of the wall clock: no deadline passes.
            start_s = time.time() + 1_200
            bench.write_hub_rounds(spark, full, machines, ROUNDS, start_s=start_s)
            write_quarter_rounds(spark, quarter, machines, start_s)
            for shape, folder, rounds in (
                ("every", full, ROUNDS),
                ("quarter", quarter, 2 + QUARTERS),
            ):
                for design in DESIGNS:
                    figures = steady(
                        bench.hub_rounds_stream(spark, folder),
                        processor(design, lab05, lab10, 60_000),
                        rounds,
                    )
                    runs.append({"design": design, "machines": machines, "shape": shape, **figures})
                    print(
                        f"  {machines:>7,} machines, {shape:<7} ({design:<5}) "
                        f"{figures['steady_events_per_second']:>8,} heartbeats/s  "
                        f"{figures['changelog_bytes_per_batch'] / 1024:>9,.0f} KiB changelog per batch",
                        flush=True,
                    )
    restarts = []
    for design in DESIGNS:
        result = restart(spark, design, args.restart_machines)
        restarts.append(result)
        print(
            f"  restart ({design:<5}) launch -> first batch {result['launch_to_first_batch']} s; "
            + ", ".join(f"{part} {value} s" for part, value in result["parts_seconds"].items()),
            flush=True,
        )
    publish(args, runs, restarts)


def publish(args, runs: list[dict], restarts: list[dict]) -> None:
    def figure(design: str, machines: int, shape: str, key: str):
        return next(
            r[key]
            for r in runs
            if r["design"] == design and r["machines"] == machines and r["shape"] == shape
        )

    largest = max(args.machines)
    charts = [
        bench.bar_chart(
            "mapstate",
            "Heartbeats per second in the steady state, every machine in every batch",
            [
                (f"{d}: {m:,} machines", figure(d, m, "every", "steady_events_per_second"))
                for m in args.machines
                for d in DESIGNS
            ],
            "heartbeats/s",
            note="2 cores, local[2], RocksDB; value: lab 05's one value per partition, "
            "map: lab 10's MapState entry per machine",
        ),
        bench.bar_chart(
            "mapstate_changelog",
            f"Changelog per micro-batch, {largest:,} machines",
            [
                (f"{d}: {label}", figure(d, largest, shape, "changelog_bytes_per_batch") / 1024)
                for shape, label in (("every", "every machine"), ("quarter", "a quarter"))
                for d in DESIGNS
            ],
            "KiB",
            note="the .changelog files a steady batch adds, all state partitions",
        ),
        bench.bar_chart(
            "mapstate_restart",
            f"Restart after kill -9, {args.restart_machines:,} machines in state",
            [
                bar
                for r in restarts
                for bar in [(f"{r['design']}: launch to first batch", r["launch_to_first_batch"])]
                + [(f"{r['design']}: {part}", value) for part, value in r["parts_seconds"].items()]
            ],
            "s",
            reference=("target 15 s", 15.0),
            note="a new process and JVM, the monitor's session and trigger; 2 cores",
        ),
    ]

    def report(what: str, value, unit: str) -> dict:
        return bench.target(what, value, unit, "report", None)

    targets = []
    for m in args.machines:
        for shape in ("every", "quarter"):
            rates = {d: figure(d, m, shape, "steady_events_per_second") for d in DESIGNS}
            sizes = {d: figure(d, m, shape, "changelog_bytes_per_batch") for d in DESIGNS}
            where = f"{m:,} machines, {'all' if shape == 'every' else 'a quarter'} per batch"
            targets += [report(f"{d} heartbeats/s, {where}", rates[d], "ev/s") for d in DESIGNS]
            targets.append(
                report(
                    f"value / map heartbeats/s, {where}",
                    round(rates["value"] / rates["map"], 2),
                    "x",
                )
            )
            targets += [
                report(f"{d} changelog per batch, {where}", round(sizes[d] / 1024), "KiB")
                for d in DESIGNS
            ]
            targets.append(
                report(
                    f"value / map changelog bytes, {where}",
                    round(sizes["value"] / sizes["map"], 2),
                    "x",
                )
            )
    for r in restarts:
        seconds = r["launch_to_first_batch"]
        targets.append(
            bench.target(
                f"restart to first batch, {r['design']}, {args.restart_machines:,} machines",
                seconds,
                "s",
                "<= 15",
                seconds <= 15,
            )
        )
        targets += [
            report(f"of which: {part}, {r['design']}", value, "s")
            for part, value in r["parts_seconds"].items()
        ]
    bench.write_result(
        "mapstate",
        "MapState against one value per partition",
        {
            "rounds": ROUNDS,
            "quarter_rounds": QUARTERS,
            "timeout_ms": 60_000,
            "restart_machines": args.restart_machines,
            "designs": DESIGNS,
        },
        {"runs": runs, "restarts": restarts},
        targets,
        charts,
    )


if __name__ == "__main__":
    bench.main_or_worker(main, worker)
