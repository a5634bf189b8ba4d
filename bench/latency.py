"""End-to-end latency through the real path, and how fast a silent machine is reported.

Producers (``streamlab.fleet``, the real azure-eventhub SDK) -> the emulator (its own
process) -> the ``eventhubs`` source -> the reference processor, lab 05's
``CatchUpProcessor`` (RocksDB), exactly as ``python -m streamlab.monitor`` runs it -> the
reference monitor's parquet sink. 100 producers send a heartbeat a second. Then:

- every second two producers are paused for 7 s and resumed: each goes Unhealthy, then
  Healthy again;
- at the end every producer is paused at once, and all must go Unhealthy.

Latency of a transition a heartbeat causes (a new machine's Initializing, a recovery's
Healthy): from the enqueue time of that heartbeat (as the hub stamped it, read back through
the source) to the moment the sink's write of the batch holding the row returned.
Detection delay of an Unhealthy: from the enqueue time of the machine's last heartbeat to
the same moment, reported for one producer stopping and for every producer stopping at once;
the timeout is 5 s, so the target is 6 s (timeout + 1 s) at the 99th percentile.

The monitor runs with its own defaults (``streamlab.monitor``: session settings, sink writer);
``bench/batch_breakdown.py`` measures where the time goes and what each of them changed.

    python bench/latency.py [--producers 100] [--triggers 500 250] [--cycle-seconds 50]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

from streamlab.deadlines import finish

TIMEOUT_S = 5.0
PAUSE_S = 7.0


def _monitor(
    spark,
    lab,
    connection_string: str,
    trigger_ms: int,
    work: Path,
    seen: list,
    writer: str,
    sink_calls: dict,
    source_options: dict | None = None,
):
    """The reference monitor's query (its sink, its writer) on ``work``; a trigger of 0 ms starts
    each batch as soon as the last ends. Each row written is read back from its batch's folder
    and recorded in ``seen`` with the moment the write returned; ``sink_calls`` gets each
    batch's (sink called, write returned) times."""
    import pyarrow.parquet as pq

    from streamlab.monitor import batch_writer, reference_transitions

    transitions = reference_transitions(
        spark, connection_string, timeout_seconds=TIMEOUT_S, lab=lab, source_options=source_options
    )
    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    write = batch_writer(out, writer)

    def sink(df, batch_id):
        called = time.time()
        write(df, batch_id)
        visible = time.time()
        sink_calls[batch_id] = (called, visible)
        rows = pq.read_table(out / f"batch_id={batch_id}").to_pylist()
        seen.extend((r["machine_name"], r["status"], r["previous_status"], visible) for r in rows)

    return (
        transitions.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime=f"{trigger_ms} milliseconds")
        .start()
    )


def _events(spark, connection_string: str, work: Path) -> list[tuple]:
    """Every heartbeat read back through the source: (machine, partition, sequence number,
    enqueue time, the producer's ``machine_time``), times in epoch seconds."""
    from pyspark.sql import functions as F

    events: list[tuple] = []

    def collect(df, batch_id):
        events.extend(tuple(row) for row in df.collect())

    body = F.col("body").cast("string")
    read = (
        spark.readStream.format("eventhubs")
        .option("connectionString", connection_string)
        .option("eventHubName", "heartbeats")
        .option("startingPosition", "earliest")
        .load()
    )
    query = (
        read.select(
            F.get_json_object(body, "$.machine_name").alias("machine_name"),
            "partition",
            F.col("sequenceNumber").cast("long").alias("sequence"),
            F.col("enqueuedTime").cast("double").alias("t"),
            F.to_timestamp(F.get_json_object(body, "$.machine_time"))
            .cast("double")
            .alias("machine_time"),
        )
        .writeStream.foreachBatch(collect)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(work / "read-back"))
        .start()
    )
    finish(query, within=1800, what="the read-back query to read the status hub")
    return events


def _enqueue_times(events: list[tuple]) -> dict[str, list[float]]:
    """Every heartbeat's enqueue time, per machine, in order."""
    times: dict[str, list[float]] = defaultdict(list)
    for machine, _, _, enqueued, _ in events:
        times[machine].append(enqueued)
    return {m: sorted(ts) for m, ts in times.items()}


def _gaps(times: list[float]) -> list[tuple[float, float | None]]:
    """Silences longer than the timeout: (last heartbeat before, first after or None)."""
    gaps = [(a, b) for a, b in zip(times, times[1:]) if b - a > TIMEOUT_S]
    return gaps + ([(times[-1], None)] if times else [])


def _analyse(seen: list, sent: dict[str, list[float]], warm_from: float) -> dict:
    """Match each transition row to the heartbeat (or the silence) that caused it.

    A row can only be caused by what reached the hub before the row was written, and an
    Unhealthy no earlier than the timeout after the machine's last heartbeat; the match is
    the latest such heartbeat or silence, so a pipeline that lags behind is measured as late,
    not matched to newer heartbeats. The Initializing rows of the fleet that is there when
    the query starts (the first micro-batches also start the Python workers) are reported
    apart, as ``startup``; machines that join later count with the rest.
    """
    caused, startup, detection, detection_all = [], [], [], []
    for machine, status, previous, visible in seen:
        times = sent.get(machine, [])
        if not times or times[0] > visible:
            continue
        gaps = _gaps(times)
        if status == "Initializing":
            (caused if times[0] >= warm_from else startup).append(visible - times[0])
        elif status == "Healthy" and previous == "Unhealthy":
            ends = [after for _, after in gaps if after is not None and after <= visible]
            if ends:
                caused.append(visible - ends[-1])
        elif status == "Unhealthy":
            silences = [(before, after) for before, after in gaps if before + TIMEOUT_S <= visible]
            if silences:
                before, after = silences[-1]
                (detection_all if after is None else detection).append(visible - before)
    return {
        "caused": caused,
        "startup": startup,
        "detection": detection,
        "detection_all_stopped": detection_all,
    }


def run(
    spark,
    lab,
    producers: int,
    trigger_ms: int,
    cycle_seconds: float,
    writer: str | None = None,
    details: dict | None = None,
    source_options: dict | None = None,
) -> dict:
    """One run of the real path (``source_options`` are extra options of the ``eventhubs``
    source); ``details``, when given, gets what a breakdown needs: every
    progress report, the sink's call times per batch and every heartbeat read back."""
    from streamlab.fleet import Fleet
    from streamlab.hub import start_subprocess
    from streamlab.monitor import DEFAULT_WRITER

    work = Path(tempfile.mkdtemp(prefix=f"bench-latency-{trigger_ms}-"))
    seen: list = []
    sink_calls: dict = {}
    with start_subprocess(data_dir=work / "hub") as hub:
        query = _monitor(
            spark,
            lab,
            hub.connection_string,
            trigger_ms,
            work,
            seen,
            writer or DEFAULT_WRITER,
            sink_calls,
            source_options,
        )
        while not query.recentProgress:
            time.sleep(0.1)
        with Fleet(hub.connection_string, name_format="machine-{n:03d}") as fleet:
            names = [fleet.add().name for _ in range(producers)]
            started = time.time()
            time.sleep(10)  # every machine Initializing, then Healthy
            warm_from = time.time()
            resume_at: list[tuple[float, str]] = []
            step = 0
            cycle_end = time.time() + cycle_seconds
            while time.time() < cycle_end:
                for name in (names[step % producers], names[(step + producers // 2) % producers]):
                    fleet.pause(name)
                    resume_at.append((time.time() + PAUSE_S, name))
                step += 1
                if step % 5 == 0:  # a new machine joins every 5 s
                    fleet.add()
                deadline = time.time() + 1.0
                while time.time() < deadline:
                    for due in [r for r in resume_at if r[0] <= time.time()]:
                        fleet.resume(due[1])
                        resume_at.remove(due)
                    time.sleep(0.05)
            while resume_at:
                when, name = resume_at.pop(0)
                time.sleep(max(0.0, when - time.time()))
                fleet.resume(name)
            time.sleep(3)
            names = [machine.name for machine in fleet.machines]
            for name in names:  # every producer stops at once
                fleet.pause(name)
            stopped = time.time()
            sent_total = fleet.events_sent
            send_rate = sent_total / (stopped - started)
            while time.time() < stopped + TIMEOUT_S + 8:
                time.sleep(0.2)
        query.stop()
        progress = list(query.recentProgress)
        durations = [p["durationMs"]["triggerExecution"] for p in progress if p["numInputRows"]]
        events = _events(spark, hub.connection_string, work)
    sent = _enqueue_times(events)
    if details is not None:
        details.update(
            progress=progress,
            sink_calls=sink_calls,
            events=events,
            warm_from=warm_from,
            stopped=stopped,
        )
    figures = _analyse(seen, sent, warm_from)
    stuck = [
        n
        for n in names
        if not any(s[0] == n and s[1] == "Unhealthy" and s[3] > stopped for s in seen)
    ]
    return {
        "trigger_ms": trigger_ms,
        "producers": producers,
        "heartbeats_per_second_sent": round(send_rate, 1),
        "latency_ms": bench.spread(figures["caused"], scale=1000),
        "startup_ms": bench.spread(figures["startup"], scale=1000),
        "detection_s": bench.spread(figures["detection"], digits=2),
        "detection_all_stopped_s": {
            **bench.spread(figures["detection_all_stopped"], digits=2),
            "never_reported": len(stuck),
        },
        "batch_ms": {"median": bench.median(durations), "p99": bench.percentile(durations, 99)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--producers", type=int, default=100)
    parser.add_argument("--triggers", type=int, nargs="+", default=[500, 250])
    parser.add_argument("--cycle-seconds", type=float, default=50)
    args = parser.parse_args()
    from streamlab.monitor import SESSION_CONF, reference_solution

    spark = bench.spark(SESSION_CONF)  # the reference monitor's own session settings
    lab = reference_solution()
    runs = []
    for trigger_ms in args.triggers:
        result = run(spark, lab, args.producers, trigger_ms, args.cycle_seconds)
        runs.append(result)
        print(
            f"  trigger {trigger_ms} ms: latency p50 {result['latency_ms']['p50']} ms, "
            f"p99 {result['latency_ms']['p99']} ms (first rows after the start: "
            f"p99 {result['startup_ms']['p99']} ms); "
            f"detection p99 {result['detection_s']['p99']} s, "
            f"all stopped p99 {result['detection_all_stopped_s']['p99']} s; "
            f"batches median {result['batch_ms']['median']} ms"
        )
    best = min(runs, key=lambda r: r["latency_ms"]["p50"])
    charts = [
        bench.bar_chart(
            "latency",
            f"Heartbeat to transition row, {args.producers} producers at 1 Hz",
            [
                (f"p{q}, trigger {r['trigger_ms']} ms", r["latency_ms"][f"p{q}"])
                for r in runs
                for q in (50, 99)
            ],
            "ms",
            reference=("target p50 500 ms", 500),
            note="enqueue time at the hub to the sink's write returning; 2 cores, emulator, RocksDB",
        ),
        bench.bar_chart(
            "detection",
            "Last heartbeat to Unhealthy row (timeout 5 s)",
            [
                (f"{label}, trigger {r['trigger_ms']} ms", r[key]["p99"])
                for r in runs
                for label, key in (
                    ("p99 one stops", "detection_s"),
                    ("p99 all stop", "detection_all_stopped_s"),
                )
            ],
            "s",
            reference=("target 6 s", TIMEOUT_S + 1),
        ),
    ]
    targets = []
    for r in runs:
        t = f"trigger {r['trigger_ms']} ms"
        targets += [
            bench.target(
                f"latency p50, {t}",
                r["latency_ms"]["p50"],
                "ms",
                "<= 500",
                r["latency_ms"]["p50"] <= 500,
            ),
            bench.target(
                f"latency p99, {t}",
                r["latency_ms"]["p99"],
                "ms",
                "<= 1000",
                r["latency_ms"]["p99"] <= 1000,
            ),
            bench.target(
                f"detection p99, one producer stops, {t}",
                r["detection_s"]["p99"],
                "s",
                "<= 6",
                r["detection_s"]["p99"] <= TIMEOUT_S + 1,
            ),
            bench.target(
                f"detection p99, every producer stops, {t}",
                r["detection_all_stopped_s"]["p99"],
                "s",
                "<= 6",
                r["detection_all_stopped_s"]["p99"] <= TIMEOUT_S + 1
                and r["detection_all_stopped_s"]["never_reported"] == 0,
            ),
        ]
    bench.write_result(
        "latency",
        "End-to-end latency and detection delay",
        {
            "producers": args.producers,
            "triggers_ms": args.triggers,
            "timeout_s": TIMEOUT_S,
            "pause_s": PAUSE_S,
            "cycle_seconds": args.cycle_seconds,
            "best_trigger_ms": best["trigger_ms"],
        },
        {"runs": runs},
        targets,
        charts,
    )


if __name__ == "__main__":
    main()
