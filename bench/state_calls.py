"""What a state call costs: heartbeats per second against state calls per heartbeat.

The same input as ``bench/state_machine.py`` (parquet rounds, one heartbeat per machine per
round, one round per micro-batch, steady state measured), through ``transformWithState``
with a processor that makes exactly 0, 1, 2 or 3 state calls per machine per batch and emits
nothing: ``get``; ``get`` and ``update``; ``get``, ``update`` and ``exists``. Zero calls is the
floor of the Python API: the framework still makes a round trip per grouping key to set it
in the JVM. Lab 04's section on the cost of a state call quotes these figures.

    python bench/state_calls.py [--machines 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench
from pyspark.sql.streaming import StatefulProcessor

CALLS = (0, 1, 2, 3)


class Calls(StatefulProcessor):
    """Makes ``calls`` state calls per machine per batch and emits nothing."""

    def __init__(self, calls: int):
        self.calls = calls

    def init(self, handle) -> None:
        self.state = handle.getValueState("machine", "last_seen_ms LONG")

    def handleInputRows(self, key, rows, timerValues):
        for _ in rows:
            pass
        if self.calls >= 1:
            self.state.get()
        if self.calls >= 2:
            self.state.update((timerValues.getCurrentProcessingTimeInMs(),))
        if self.calls >= 3:
            self.state.exists()
        return iter([])

    def close(self) -> None:
        pass


def measure(heartbeats, calls: int, rounds: int) -> dict:
    from streamlab.monitor import lab04_solution

    out = heartbeats.groupBy("machine_name").transformWithState(
        Calls(calls), lab04_solution().STATUS_SCHEMA, "Append", "ProcessingTime"
    )
    return {"calls": calls, **bench.steady_state(out, rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--machines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spark = bench.spark()
    with tempfile.TemporaryDirectory(prefix="bench-calls-") as tmp:
        warm, folder = Path(tmp) / "warm", Path(tmp) / "rounds"
        bench.write_heartbeat_rounds(spark, warm, 1_000, 3)
        bench.write_heartbeat_rounds(spark, folder, args.machines, args.rounds)
        measure(bench.heartbeat_rounds_stream(spark, warm), 2, 3)  # Python workers, JIT
        runs = []
        for calls in CALLS:
            result = measure(bench.heartbeat_rounds_stream(spark, folder), calls, args.rounds)
            runs.append(result)
            print(
                f"  {calls} state call(s) per heartbeat: "
                f"{result['steady_events_per_second']:>7,} heartbeats/s",
                flush=True,
            )
    rate = {r["calls"]: r["steady_events_per_second"] for r in runs}
    chart = bench.bar_chart(
        "state_calls",
        f"Heartbeats per second by state calls per heartbeat, {args.machines:,} machines",
        [(f"{c} state call{'s' if c != 1 else ''}", rate[c]) for c in CALLS],
        "heartbeats/s",
        note="transformWithState, row API, RocksDB, steady state; 2 cores, local[2]",
    )
    bench.write_result(
        "state_calls",
        "What a state call costs",
        {
            "machines": args.machines,
            "rounds": args.rounds,
            "calls": {0: "none", 1: "get", 2: "get, update", 3: "get, update, exists"},
        },
        {"runs": runs},
        [
            bench.target(
                f"heartbeats/s with {c} state call(s) per heartbeat",
                rate[c],
                "ev/s",
                "report",
                None,
            )
            for c in CALLS
        ],
        [chart],
    )


if __name__ == "__main__":
    main()
