"""Heartbeats per second through the heartbeat state machine, four designs side by side.

Input: one parquet file per round; in each round every machine sends one heartbeat, a
second after the previous round (event time). Each query reads one file per micro-batch
(``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``) into the ``noop`` sink:

- round 1 makes every machine Initializing, round 2 Healthy, rounds 3 and later change
  nothing: that is the steady state of a running fleet, and the figure reported;
- (r) the reference monitor's processor, lab 05's ``CatchUpProcessor`` (``transformWithState``,
  row API, RocksDB, a key and a state value per event hub partition). Its rounds are what the
  ``eventhubs`` source hands it: machine ``i`` in partition ``i % 4`` (the hub's default
  partition count), an enqueue-like event time that grows with the sequence number of each
  partition, and the partition's newest sequence number, so each batch reads every partition
  to its end;
- (a) lab 04's ``LeanHeartbeatProcessor`` (a key per machine), the teaching step before it;
- (b) the seed's design, lab 03's ``applyInPandasWithState`` with an event-time timeout;
- (c) a JVM-only ceiling with no Python: ``session_window`` with a 5 s gap per machine.

``bench/state_calls.py`` measures what each state call of a processor costs on the same input.

The processor's timeout is 60 s here, so that no machine times out while a slow batch runs
(in a live fleet, heartbeats arrive every second and no timer fires in the steady state).

    python bench/state_machine.py [--machines 10000 50000 100000] [--rounds 3] [--designs r a b c]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

DESIGNS = {
    "r": "transformWithState (lab 05, the reference)",
    "a": "transformWithState (lab 04, row API)",
    "b": "applyInPandasWithState (the seed, lab 03)",
    "c": "session_window, JVM only (ceiling)",
}


def query(design: str, heartbeats, lab03, lab04):
    from pyspark.sql import functions as F

    if design == "a":
        return lab04.status_changes(heartbeats, lab04.LeanHeartbeatProcessor(timeout_ms=60_000))
    if design == "b":
        return lab03.seed_status(heartbeats, lab03.heartbeat_state_transition)
    return (
        heartbeats.withWatermark("event_time", "2 seconds")
        .groupBy("machine_name", F.session_window("event_time", "5 seconds"))
        .count()
    )


def measure(
    spark, design: str, folder: Path, machines: int, rounds: int, lab03, lab04, lab05
) -> dict:
    if design == "r":
        # Written just before it is read, two minutes ahead of the wall clock: no deadline
        # passes while the rounds are read.
        hub_folder = folder.with_name(folder.name + "-hub")
        bench.write_hub_rounds(spark, hub_folder, machines, rounds, start_s=time.time() + 120)
        out = lab05.catch_up_changes(
            bench.hub_rounds_stream(spark, hub_folder), lab05.CatchUpProcessor(timeout_ms=60_000)
        )
        return {"design": design, "machines": machines, **bench.steady_state(out, rounds)}
    out = query(design, bench.heartbeat_rounds_stream(spark, folder), lab03, lab04)
    return {
        "design": design,
        "machines": machines,
        **bench.steady_state(out, rounds, "append" if design != "b" else "update"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--machines", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    args = parser.parse_args()

    from streamlab.monitor import lab04_solution, reference_solution

    lab04 = lab04_solution()
    lab05 = reference_solution()
    lab03 = bench.solution("03")
    spark = bench.spark()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-sm-input-") as tmp:
        warm = Path(tmp) / "warm"
        bench.write_heartbeat_rounds(spark, warm, 1_000, 3)
        for design in args.designs:  # start the Python workers and the JIT before measuring
            measure(spark, design, warm, 1_000, 3, lab03, lab04, lab05)
        for machines in args.machines:
            folder = Path(tmp) / f"m{machines}"
            bench.write_heartbeat_rounds(spark, folder, machines, args.rounds)
            for design in args.designs:
                result = measure(spark, design, folder, machines, args.rounds, lab03, lab04, lab05)
                results.append(result)
                print(
                    f"  {machines:>7,} machines  ({design}) {DESIGNS[design]:<42} "
                    f"{result['steady_events_per_second']:>9,} heartbeats/s",
                    flush=True,
                )

    def rate(design: str, machines: int) -> int:
        return next(
            r["steady_events_per_second"]
            for r in results
            if r["design"] == design and r["machines"] == machines
        )

    ratios = {
        m: {
            f"{x}_over_{d}": round(rate(x, m) / rate(d, m), 2)
            for x in ("r", "a")
            if x in args.designs
            for d in args.designs
            if d not in ("r", x)
        }
        for m in args.machines
    }
    largest = max(args.machines)
    charts = [
        bench.bar_chart(
            "state_machine",
            f"Heartbeats per second in the steady state, {largest:,} machines",
            [(DESIGNS[d].split(" (")[0] + f" ({d})", rate(d, largest)) for d in args.designs],
            "heartbeats/s",
            note="2 cores, local[2], RocksDB state store, noop sink; (r) the reference "
            "monitor's (lab 05), (a) lab 04, (b) the seed's design, (c) JVM-only ceiling",
        )
    ]
    targets = []
    for m, ratio in ratios.items():
        if "r_over_b" in ratio:
            targets.append(
                bench.target(
                    f"(r) / (b) at {m:,} machines",
                    ratio["r_over_b"],
                    "x",
                    ">= 3",
                    ratio["r_over_b"] >= 3,
                )
            )
    for m, ratio in ratios.items():
        targets += [
            bench.target(f"({key[0]}) / ({key[-1]}) at {m:,} machines", value, "x", "report", None)
            for key, value in ratio.items()
            if key != "r_over_b"
        ]
    targets += [
        bench.target(f"({d}) heartbeats/s at {m:,} machines", rate(d, m), "ev/s", "report", None)
        for d in args.designs
        for m in args.machines
    ]
    bench.write_result(
        "state_machine",
        "State machine throughput",
        {
            "rounds": args.rounds,
            "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
            "timeout_ms": 60_000,
            "designs": {d: DESIGNS[d] for d in args.designs},
        },
        {"runs": results, "ratios": ratios},
        targets,
        charts,
    )


if __name__ == "__main__":
    main()
