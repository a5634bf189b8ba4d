"""Heartbeats per second through the heartbeat state machine, three designs side by side.

Input: one parquet file per round; in each round every machine sends one heartbeat, a
second after the previous round (event time). Each query reads one file per micro-batch
(``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``) into the ``noop`` sink:

- round 1 makes every machine Initializing, round 2 Healthy, rounds 3 and later change
  nothing: that is the steady state of a running fleet, and the figure reported;
- (a) lab 04's ``LeanHeartbeatProcessor`` (``transformWithState``, row API, RocksDB);
- (b) the seed's design, lab 03's ``applyInPandasWithState`` with an event-time timeout;
- (c) a JVM-only ceiling with no Python: ``session_window`` with a 5 s gap per machine.

``bench/state_calls.py`` measures what each state call of a processor costs on the same input.

The processor's timeout is 60 s here, so that no machine times out while a slow batch runs
(in a live fleet, heartbeats arrive every second and no timer fires in the steady state).

    python bench/state_machine.py [--machines 10000 50000 100000] [--rounds 3] [--designs a b c]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench  # noqa: E402

DESIGNS = {
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
    return (heartbeats.withWatermark("event_time", "2 seconds")
            .groupBy("machine_name", F.session_window("event_time", "5 seconds")).count())


def measure(spark, design: str, folder: Path, machines: int, rounds: int, lab03, lab04) -> dict:
    out = query(design, bench.heartbeat_rounds_stream(spark, folder), lab03, lab04)
    return {"design": design, "machines": machines,
            **bench.steady_state(out, rounds, "append" if design != "b" else "update")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--machines", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--designs", nargs="+", default=["a", "b", "c"], choices=sorted(DESIGNS))
    args = parser.parse_args()

    from streamlab.monitor import lab04_solution

    lab04 = lab04_solution()
    lab03 = bench.solution("03")
    spark = bench.spark()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-sm-input-") as tmp:
        warm = Path(tmp) / "warm"
        bench.write_heartbeat_rounds(spark, warm, 1_000, 3)
        for design in args.designs:  # start the Python workers and the JIT before measuring
            measure(spark, design, warm, 1_000, 3, lab03, lab04)
        for machines in args.machines:
            folder = Path(tmp) / f"m{machines}"
            bench.write_heartbeat_rounds(spark, folder, machines, args.rounds)
            for design in args.designs:
                result = measure(spark, design, folder, machines, args.rounds, lab03, lab04)
                results.append(result)
                print(f"  {machines:>7,} machines  ({design}) {DESIGNS[design]:<42} "
                      f"{result['steady_events_per_second']:>9,} heartbeats/s", flush=True)

    def rate(design: str, machines: int) -> int:
        return next(r["steady_events_per_second"] for r in results
                    if r["design"] == design and r["machines"] == machines)

    ratios = {m: {f"a_over_{d}": round(rate("a", m) / rate(d, m), 2)
                  for d in args.designs if d != "a"} for m in args.machines} if "a" in args.designs else {}
    largest = max(args.machines)
    charts = [bench.bar_chart(
        "state_machine", f"Heartbeats per second in the steady state, {largest:,} machines",
        [(DESIGNS[d].split(" (")[0] + f" ({d})", rate(d, largest)) for d in args.designs],
        "heartbeats/s", note="2 cores, local[2], RocksDB state store, noop sink; "
                             "(a) lab 04, (b) the seed's design, (c) JVM-only ceiling")]
    targets = []
    for m, ratio in ratios.items():
        if "a_over_b" in ratio:
            targets.append(bench.target(f"(a) / (b) at {m:,} machines", ratio["a_over_b"], "x",
                                        ">= 3", ratio["a_over_b"] >= 3))
    if "c" in args.designs:
        targets += [bench.target(f"(a) / (c) at {m:,} machines", ratios[m]["a_over_c"], "x",
                                 "report", None) for m in args.machines]
    targets += [bench.target(f"({d}) heartbeats/s at {m:,} machines", rate(d, m), "ev/s", "report",
                             None) for d in args.designs for m in args.machines]
    bench.write_result("state_machine", "State machine throughput",
                       {"rounds": args.rounds, "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
                        "timeout_ms": 60_000, "designs": {d: DESIGNS[d] for d in args.designs}},
                       {"runs": results, "ratios": ratios}, targets, charts)


if __name__ == "__main__":
    main()
