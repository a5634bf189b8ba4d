"""``receiveOn=driver`` against ``receiveOn=executors``: the ``eventhubs`` source on a cluster.

The method of ``eventhubs_ingest.py``, once per master and mode, each in a driver process of
its own: a Spark standalone cluster on this machine (``streamlab.cluster.LocalCluster``, two
workers of one core each) and, for comparison in the same run, ``local[2]``.

1. Throughput: N heartbeat events are sent to the emulator first, then one
   ``trigger(availableNow=True)`` query reads them all into the ``noop`` sink, without and
   with ``maxEventsPerTrigger`` = N / 5; events/s = N / wall time of the query. Each driver's
   first read also starts its Python workers, as in ``eventhubs_ingest``.
2. Latency: a fleet of producers at 1 Hz and a query with a 500 ms trigger; for each
   micro-batch, its duration, and for each event the delay from its enqueue time to the end
   of the batch that read it.

    python bench/cluster_ingest.py [--events 10000] [--producers 100] [--seconds 15]
                                   [--no-local]

Writes ``build/bench/cluster_ingest.json``; the cluster's logs go to
``build/bench/cluster_ingest-logs/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench
from eventhubs_ingest import latency, read_all

from streamlab.cluster import LocalCluster
from streamlab.hub import Hub

MODES = ("driver", "executors")


def worker(job: dict) -> dict:
    """One driver: both throughput reads and the latency run, on ``job["master"]``."""
    from streamlab.session import spark_session

    bench.quiet()
    spark = spark_session(job["master"], app_name=f"streamlab-bench-{job['receive_on']}")
    mode = job["receive_on"]
    options = {"receiveOn": mode}
    reads = [
        read_all(spark, job["filled_hub"], job["events"], None, options),
        read_all(spark, job["filled_hub"], job["events"], job["events"] // 5, options),
    ]
    live = latency(spark, job["live_hub"], job["producers"], job["seconds"], options)
    spark.stop()
    return {"read": reads, "latency": live}


def _label(master: str) -> str:
    return "cluster" if master.startswith("spark://") else master


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--producers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument(
        "--no-local", action="store_true", help="measure the cluster only, not local[2] beside it"
    )
    args = parser.parse_args()
    from eventhubs_ingest import _send  # the same events as the single-machine benchmark

    runs: list[dict] = []
    cluster = LocalCluster(
        workers=2, cores=1, memory="2g", log_dir=bench.OUT / "cluster_ingest-logs"
    )
    # One hub holds the N events every throughput read reads; the producers of the latency
    # runs send to another, so that N stays what there is to read.
    with Hub(port=0) as hub, Hub(port=0) as live:
        sent = _send(hub.connection_string, args.events)
        send = {"events": args.events, "events_per_second": round(args.events / sent)}

        def measure(master: str) -> None:
            for mode in MODES:
                print(f"  {_label(master)}, receiveOn={mode} ...", flush=True)
                figures = bench.run_worker(
                    Path(__file__),
                    {
                        "master": master,
                        "receive_on": mode,
                        "filled_hub": hub.connection_string,
                        "live_hub": live.connection_string,
                        "events": args.events,
                        "producers": args.producers,
                        "seconds": args.seconds,
                    },
                    timeout=600,
                )
                runs.append({"master": _label(master), "receiveOn": mode, **figures})

        with cluster:
            measure(cluster.master_url)
        if not args.no_local:  # the cluster stopped: local[2] has the machine to itself
            measure("local[2]")
    _publish(args, send, runs)


def _publish(args: argparse.Namespace, send: dict, runs: list[dict]) -> None:
    """Print the figures side by side; write the result and its charts."""
    for run in runs:
        name = f"{run['master']}, receiveOn={run['receiveOn']}"
        unlimited, limited = run["read"]
        lag = run["latency"]["enqueue_to_batch_end_ms"]
        print(
            f"  {name:<30} read {unlimited['events_per_second']:>6,} events/s "
            f"({limited['events_per_second']:,} with maxEventsPerTrigger={args.events // 5:,}); "
            f"enqueue -> batch end p50 {lag['p50']} ms, p99 {lag['p99']} ms; "
            f"batch median {run['latency']['batch_duration_ms']['median']} ms"
        )
    note = (
        f"{args.events:,} events, availableNow, noop sink, limit: maxEventsPerTrigger="
        f"{args.events // 5:,}; cluster: 2 workers x 1 core on the machine of the hub"
    )
    charts = [
        bench.bar_chart(
            "cluster_ingest",
            "Reading the emulator into Spark: receiveOn=driver / executors",
            [
                (
                    f"{r['master']}, {r['receiveOn']}{', limit' if read['maxEventsPerTrigger'] else ''}",
                    read["events_per_second"],
                )
                for r in runs
                for read in r["read"]
            ],
            "events/s",
            note=note,
        ),
        bench.bar_chart(
            "cluster_ingest_latency",
            "Enqueue to end of micro-batch, p50 (500 ms trigger)",
            [
                (f"{r['master']}, {r['receiveOn']}", r["latency"]["enqueue_to_batch_end_ms"]["p50"])
                for r in runs
            ],
            "ms",
            note=f"{args.producers} producers at 1 Hz for {args.seconds:g} s",
        ),
    ]
    targets = []
    for run in runs:
        name = f"{run['master']}, receiveOn={run['receiveOn']}"
        targets += [
            bench.target(
                f"events/s into Spark, {name}",
                run["read"][0]["events_per_second"],
                "ev/s",
                "report",
                None,
            ),
            bench.target(
                f"events/s into Spark, {name}, limit",
                run["read"][1]["events_per_second"],
                "ev/s",
                "report",
                None,
                note=f"maxEventsPerTrigger={args.events // 5}",
            ),
            bench.target(
                f"enqueue to batch end p50, {name}",
                run["latency"]["enqueue_to_batch_end_ms"]["p50"],
                "ms",
                "report",
                None,
            ),
            bench.target(
                f"micro-batch duration median, {name}",
                run["latency"]["batch_duration_ms"]["median"],
                "ms",
                "report",
                None,
            ),
        ]
    bench.write_result(
        "cluster_ingest",
        "The eventhubs source on a standalone cluster: receiveOn",
        {
            "events": args.events,
            "producers": args.producers,
            "seconds": args.seconds,
            "maxEventsPerTrigger_of_second_read": args.events // 5,
            "cluster": "2 workers x 1 core, 2g",
            "trigger_for_latency": "500 milliseconds",
            "hub_partitions": 4,
        },
        {"send": send, "runs": runs},
        targets,
        charts,
    )


if __name__ == "__main__":
    bench.main_or_worker(main, worker)
