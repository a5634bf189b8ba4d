"""``python -m streamlab.monitor``: the reference heartbeat pipeline, headless.

Reads heartbeats from an event hub, runs lab 04's solution (the ``LeanHeartbeatProcessor``
of ``solutions/04-transform-with-state``, loaded the way the grader loads it: one source,
no second copy) on the RocksDB state store, and appends each micro-batch's transitions as
parquet under ``--output/batch_id=N``. It runs until SIGTERM or Ctrl-C.

Exactly once across restarts, kill -9 included: a batch's folder is written under a
temporary name and renamed into place, replacing whatever an earlier attempt at the same
batch left. Spark replays an uncommitted batch with the same input and the state of the
batch before it, so the folder of every batch id holds one attempt's transitions, never two.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
import uuid
from pathlib import Path
from types import ModuleType

from streamlab.paths import REPO_ROOT

REFERENCE_LAB = REPO_ROOT / "solutions" / "04-transform-with-state" / "04-transform-with-state.ipynb"


def reference_solution() -> ModuleType:
    """Lab 04's graded cells, solved: ``LeanHeartbeatProcessor``, ``status_changes``, schemas."""
    from streamlab.grading.loader import load_notebook

    loaded = load_notebook(REFERENCE_LAB, module_name="streamlab_reference_lab04")
    if loaded.problems:
        raise RuntimeError(f"the reference solution does not load: {loaded.problems[0].sentence()}")
    return loaded.module


def parse_heartbeats(events, schema):
    """Typed heartbeats from ``eventhubs`` rows; malformed bodies are left out."""
    from pyspark.sql import functions as F

    parsed = events.select(F.from_json(F.col("body").cast("string"), schema).alias("h"))
    return parsed.select("h.*").where(F.col("machine_name").isNotNull())


def batch_writer(output: Path):
    """A foreachBatch function writing each batch to ``output/batch_id=N``, replace on retry."""

    def write(df, batch_id: int) -> None:
        final = output / f"batch_id={batch_id}"
        staging = output / f"_staging-{batch_id}-{uuid.uuid4().hex}"
        df.write.parquet(str(staging))
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)

    return write


def read_transitions(output: str | Path) -> list[dict]:
    """Every transition written so far, in batch order, without starting Spark."""
    import pyarrow.dataset as ds

    root = Path(output)
    if not root.exists() or not any(root.glob("batch_id=*")):
        return []
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    rows = table.to_pylist()
    rows.sort(key=lambda r: (r["batch_id"], r["last_status_change_time"], r["machine_name"]))
    return rows


def start(spark, connection_string: str, checkpoint: str, output: str, *,
          eventhub: str = "heartbeats", timeout_seconds: float = 5.0,
          trigger: str = "500 milliseconds", retire_after_seconds: float = 3600.0):
    """Start the reference monitor query in ``spark``; return the StreamingQuery."""
    lab = reference_solution()
    events = (spark.readStream.format("eventhubs")
              .option("connectionString", connection_string)
              .option("eventHubName", eventhub)
              .option("startingPosition", "earliest")
              .load())
    processor = lab.LeanHeartbeatProcessor(timeout_ms=int(timeout_seconds * 1000),
                                           retire_after_ms=int(retire_after_seconds * 1000))
    transitions = lab.status_changes(parse_heartbeats(events, lab.HEARTBEAT_SCHEMA), processor)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    return (transitions.writeStream.queryName("heartbeat_monitor")
            .foreachBatch(batch_writer(out))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=trigger)
            .start())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamlab.monitor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connection-string", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--eventhub", default="heartbeats")
    parser.add_argument("--timeout-seconds", type=float, default=5.0)
    parser.add_argument("--trigger", default="500 milliseconds")
    args = parser.parse_args(argv)

    from streamlab.session import spark_session

    spark = spark_session(app_name="streamlab-monitor")
    query = start(spark, args.connection_string, args.checkpoint, args.output,
                  eventhub=args.eventhub, timeout_seconds=args.timeout_seconds,
                  trigger=args.trigger)
    stopping = threading.Event()

    def _stop(signum, frame):
        stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"monitor running: transitions in {args.output}", flush=True)
    while not stopping.is_set() and query.isActive:
        stopping.wait(0.5)
    if query.isActive:
        query.stop()
        print("monitor stopped", flush=True)
        return 0
    error = query.exception()
    print(f"monitor failed: {error.desc if error else 'the query ended'}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
