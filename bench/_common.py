"""What every benchmark shares: the machine's description, results files, charts, workers.

A benchmark writes ``build/bench/NAME.json``::

    {"name": ..., "title": ..., "machine": {...}, "settings": {...}, "figures": {...},
     "targets": [{"figure": ..., "value": ..., "unit": ..., "target": "<= 500", "met": true}]}

and one or more SVG charts next to it, drawn from chart data the result keeps
(``streamlab.benchmarks.charts``). ``bench/_report.py`` reads them all, prints the table of
targets and copies charts and figures into ``site/benchmarks/`` for the website
(``streamlab.benchmarks``).

Measurements that need a JVM of their own (heap and GC figures, a kill -9) run in a worker
process: the benchmark runs this same script with ``--worker JSON`` and reads the worker's
last line of output, a JSON object.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

from streamlab.deadlines import finish

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OUT = ROOT / "build" / "bench"
WORKER_FLAG = "--worker"
RESULT_PREFIX = "BENCH-RESULT "


def machine() -> dict[str, Any]:
    """Cores, memory and versions of what is measured."""
    memory_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kb = int(line.split()[1])
    except OSError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    versions = {
        name: metadata.version(name) for name in ("pyspark", "azure-eventhub", "pandas", "pyarrow")
    }
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kb / 2**20, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "java": java.splitlines()[0] if java else "unknown",
        **versions,
    }


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0..100), nearest rank; NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def spread(values: Iterable[float], scale: float = 1.0, digits: int | None = None) -> dict:
    """Sample count, p50 and p99 of ``values``, each times ``scale``, rounded to ``digits``."""
    values = list(values)
    return {
        "samples": len(values),
        **{f"p{q}": round(percentile(values, q) * scale, digits) for q in (50, 99)},
    }


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def target(
    figure: str, value: float | None, unit: str, goal: str, met: bool | None, note: str = ""
) -> dict[str, Any]:
    """One row of the targets table. ``goal`` is what was asked, e.g. ``"<= 500"``."""
    return {
        "figure": figure,
        "value": value,
        "unit": unit,
        "target": goal,
        "met": met,
        "note": note,
    }


#: A chart drawn into ``OUT``: its file name and the data it was drawn from.
Drawn = tuple[str, dict[str, Any]]


def write_result(
    name: str, title: str, settings: dict, figures: dict, targets: list[dict], charts: list[Drawn]
) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(
        json.dumps(
            {
                "name": name,
                "script": Path(sys.argv[0]).stem,
                "title": title,
                "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "machine": machine(),
                "settings": settings,
                "figures": figures,
                "targets": targets,
                "charts": [file for file, _ in charts],
                "chart_data": dict(charts),
            },
            indent=2,
        )
        + "\n"
    )
    from streamlab.benchmarks.results import value_text, verdict

    for row in targets:
        print(
            f"  {row['figure']:<58} {value_text(row):>12} {row['unit']:<6} "
            f"target {row['target']:<10} {verdict(row)}"
        )
    print(f"  written to {path.relative_to(ROOT)}")
    return path


# -- charts -----------------------------------------------------------------------------------


def bar_chart(
    name: str,
    title: str,
    bars: list[tuple[str, float]],
    unit: str,
    *,
    reference: tuple[str, float] | None = None,
    note: str = "",
) -> Drawn:
    """A horizontal bar chart drawn as ``build/bench/NAME.svg``.

    ``reference`` draws a dashed vertical line (a target, or a ceiling) with its label; the
    drawing is :mod:`streamlab.benchmarks.charts`.
    """
    from streamlab.benchmarks import charts

    return _drawn(name, charts.bar(title, bars, unit, reference=reference, note=note))


def stacked_chart(
    name: str,
    title: str,
    bars: list[tuple[str, list[tuple[str, float]]]],
    unit: str,
    *,
    reference: tuple[str, float] | None = None,
    note: str = "",
) -> Drawn:
    """A stacked horizontal bar chart drawn as ``build/bench/NAME.svg``."""
    from streamlab.benchmarks import charts

    return _drawn(name, charts.stacked(title, bars, unit, reference=reference, note=note))


def _drawn(name: str, chart: dict[str, Any]) -> Drawn:
    from streamlab.benchmarks import charts

    charts.draw(chart, OUT / f"{name}.svg")
    return f"{name}.svg", chart


# -- Spark -------------------------------------------------------------------------------------


def quiet() -> None:
    logging.getLogger("azure").setLevel(logging.ERROR)
    logging.getLogger("py4j").setLevel(logging.ERROR)


def spark(conf: dict[str, str] | None = None):
    """The course's session on ``local[2]``, as the tests and a 2-core laptop run it."""
    from streamlab.session import spark_session

    quiet()
    return spark_session("local[2]", app_name="streamlab-bench", conf=conf)


def solution(lab_id: str):
    """Lab ``lab_id``'s graded cells from its solution notebook, loaded as the grader loads them."""
    from streamlab.solutions import load_solution

    return load_solution(lab_id)


class Jvm:
    """Heap and garbage-collection figures of the driver JVM (the executor, in local mode)."""

    def __init__(self, session) -> None:
        self._jvm = session.sparkContext._jvm
        self._mx = self._jvm.java.lang.management.ManagementFactory

    def heap_used(self) -> int:
        return int(self._mx.getMemoryMXBean().getHeapMemoryUsage().getUsed())

    def heap_after_gc(self) -> int:
        for _ in range(2):
            self._jvm.java.lang.System.gc()
            time.sleep(0.3)
        return self.heap_used()

    def gc_ms(self) -> int:
        return int(sum(bean.getCollectionTime() for bean in self._mx.getGarbageCollectorMXBeans()))


#: Event time of the first round of generated heartbeats.
ROUNDS_START = datetime(2026, 1, 1, tzinfo=UTC)


def write_heartbeat_rounds(spark, folder: Path, machines: int, rounds: int, first: int = 0) -> None:
    """One parquet folder per round, ``folder/round-NNN``: every machine's heartbeat of second
    NNN (``machine-000000`` ...), with ``machine_time`` and ``event_time`` that second."""
    from pyspark.sql import functions as F

    names = spark.range(machines).select(
        F.format_string("machine-%06d", F.col("id")).alias("machine_name")
    )
    for r in range(first, first + rounds):
        at = ROUNDS_START + timedelta(seconds=r)
        (
            names.select(
                "machine_name", F.lit(at).alias("machine_time"), F.lit(at).alias("event_time")
            )
            .coalesce(1)
            .write.parquet(str(folder / f"round-{r:03d}"))
        )


#: Event hub partitions of the generated hub rounds: the hub's default count.
HUB_PARTITIONS = 4


def write_hub_rounds(
    spark, folder: Path, machines: int, rounds: int, *, first: int = 0, start_s: float
) -> None:
    """Rounds as the ``eventhubs`` source delivers them to lab 05's ``CatchUpProcessor``
    (its ``HEARTBEAT_SCHEMA``), one parquet folder per round, ``folder/round-NNN``: machine
    ``i`` (``machine-000000`` ...) in partition ``i % HUB_PARTITIONS``; round ``r``'s heartbeats
    enqueued across second ``start_s + r`` in sequence-number order; each row carries the
    partition's newest sequence number of that round, so a batch of one round reads every
    partition to its end.

    The processor judges a partition read to its end up to the batch's processing time: with
    ``start_s`` ahead of the wall clock by more than the run takes, no deadline passes while
    the rounds are read, as in a live fleet whose machines all keep sending."""
    from pyspark.sql import functions as F

    i = F.col("id")
    partition = i % HUB_PARTITIONS
    # Partition p holds machines p, p + 4, ...: `count` of them, machine i at position i // 4.
    count = F.floor((F.lit(machines - 1) - partition) / HUB_PARTITIONS) + 1
    ids = spark.range(machines)
    for r in range(first, first + rounds):
        enqueued = F.lit(round((start_s + r) * 1000)) + F.floor(i * 1000 / machines)
        (
            ids.select(
                partition.cast("string").alias("partition"),
                F.format_string("machine-%06d", i).alias("machine_name"),
                F.timestamp_millis(enqueued).alias("event_time"),
                (count * r + F.floor(i / HUB_PARTITIONS)).cast("long").alias("sequence_number"),
                (count * (r + 1) - 1).cast("long").alias("last_enqueued_sequence_number"),
            )
            .coalesce(1)
            .write.parquet(str(folder / f"round-{r:03d}"))
        )


def hub_rounds_stream(spark, folder: Path):
    """The rounds of :func:`write_hub_rounds` as a stream, one round per micro-batch."""
    return (
        spark.readStream.schema(
            "partition STRING, machine_name STRING, event_time TIMESTAMP, "
            "sequence_number LONG, last_enqueued_sequence_number LONG"
        )
        .option("maxFilesPerTrigger", 1)
        .parquet(str(folder / "round-*"))
    )


def heartbeat_rounds_stream(spark, folder: Path):
    """The rounds of :func:`write_heartbeat_rounds` as a stream, one round per micro-batch."""
    return (
        spark.readStream.schema("machine_name STRING, machine_time TIMESTAMP, event_time TIMESTAMP")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(folder / "round-*"))
    )


def steady_state(dataframe, rounds: int, output_mode: str = "append") -> dict:
    """Run ``dataframe`` over the rounds into the ``noop`` sink; figures of the steady rounds.

    Round 1 makes every machine Initializing and round 2 Healthy; rounds 3 and later change
    nothing, the steady state of a running fleet. No-data batches are off while the query
    starts, so that processing-time timers cannot keep an ``availableNow`` run alive.
    """
    import tempfile

    spark = dataframe.sparkSession
    checkpoint = tempfile.mkdtemp(prefix="bench-steady-")
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        run = run_offline(
            lambda: (
                dataframe.writeStream.format("noop")
                .outputMode(output_mode)
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
        )
    finally:
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    batches = [p for p in run["progress"] if p["numInputRows"]]
    assert len(batches) == rounds, [p["numInputRows"] for p in run["progress"]]
    steady = batches[2:]
    steady_ms = sum(p["durationMs"]["triggerExecution"] for p in steady)
    rows = sum(p["numInputRows"] for p in steady)
    return {
        "steady_events_per_second": round(rows / (steady_ms / 1000)),
        "first_batch_ms": batches[0]["durationMs"]["triggerExecution"],
        "steady_batch_ms": [p["durationMs"]["triggerExecution"] for p in steady],
        "total_seconds": round(run["seconds"], 1),
    }


def run_offline(query_builder: Callable[[], Any]) -> dict:
    """Start the query ``query_builder()`` returns and wait for it; wall time and progress."""
    start = time.perf_counter()
    query = query_builder()
    finish(query, within=1800, what="the benchmark's query to read its input")
    seconds = time.perf_counter() - start
    if query.exception():
        raise RuntimeError(str(query.exception()))
    return {"seconds": seconds, "progress": list(query.recentProgress)}


# -- workers -----------------------------------------------------------------------------------


def run_worker(script: Path, job: dict, *, timeout: float = 900, env: dict | None = None) -> dict:
    """Run ``script --worker JOB`` in a fresh process; its result line, as a dict."""
    process = subprocess.run(
        [sys.executable, str(script), WORKER_FLAG, json.dumps(job)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    for line in reversed(process.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    raise RuntimeError(
        f"{script.name} worker {job} failed (exit {process.returncode}):\n"
        f"{process.stdout[-2000:]}\n{process.stderr[-4000:]}"
    )


def worker_job(argv: list[str]) -> dict | None:
    """The job of a worker process, or None when the script runs as the benchmark."""
    if len(argv) >= 3 and argv[1] == WORKER_FLAG:
        return json.loads(argv[2])
    return None


def worker_result(result: dict) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def main_or_worker(main, worker) -> None:
    """A script's entry point: ``main()`` as the benchmark, ``worker(job)`` as its worker."""
    job = worker_job(sys.argv)
    if job is None:
        main()
    else:
        worker_result(worker(job))
