"""What writing a checkpoint costs a micro-batch: Hadoop's FileSystem against its FileContext.

Every micro-batch of a stateful query writes files into its checkpoint: an entry of the offset
log before it runs, an entry of the commit log after, and a changelog for each state store it
changed (a stream-stream join has four stores a shuffle partition), each through a
``CheckpointFileManager``. Spark's default for a local folder goes through Hadoop's
``FileContext``, which, without Hadoop's native library (PySpark from pip has none), starts two
``readlink`` processes for every file it writes; the course's sessions use the ``FileSystem``
one (``streamlab.session.CHECKPOINT_FILE_MANAGER``), which starts none.

Two queries of lab 09's shape, each over the same deliveries (one file per micro-batch, run to
the end with ``availableNow``): a stream-stream join of status changes and maintenance windows
with watermarks on both sides, and a count per machine. Each configuration runs in a fresh
process of its own, alternating, ``--runs`` times; a warm-up query runs first in each. Per
micro-batch after the first: the batch's duration, the state stores' commit, and the offset
log, commit log and source listing (``walCommit``, ``commitOffsets``, ``latestOffset``).

    python bench/checkpoint_files.py [--deliveries 8] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench

MANAGERS = {
    "filesystem": "org.apache.spark.sql.execution.streaming.checkpointing."
    "FileSystemBasedCheckpointFileManager",
    "filecontext": "org.apache.spark.sql.execution.streaming.checkpointing."
    "FileContextBasedCheckpointFileManager",
}
LABELS = {
    "filesystem": "FileSystem (the course's)",
    "filecontext": "FileContext (Spark's default)",
}
QUERIES = ("join", "count")
CHANGE_DDL = "machine_name STRING, status STRING, changed_at TIMESTAMP"
WINDOW_DDL = "window_machine STRING, window_start TIMESTAMP, window_end TIMESTAMP"


def _deliveries(folder: Path, count: int) -> tuple[Path, Path]:
    from streamlab.deliveries import write_deliveries

    def at(second: int) -> str:
        return f"2026-01-01 00:{second // 60:02d}:{second % 60:02d}"

    changes, windows = folder / "changes", folder / "windows"
    write_deliveries(
        changes,
        [
            [
                {"machine_name": f"m{m}", "status": "Unhealthy", "changed_at": at(n * 20 + m)}
                for m in range(6)
            ]
            for n in range(count)
        ],
    )
    write_deliveries(
        windows,
        [
            [
                {
                    "window_machine": f"m{m}",
                    "window_start": at(n * 20 + m),
                    "window_end": at(n * 20 + m + 5),
                }
                for m in range(0, 6, 2)
            ]
            for n in range(count)
        ],
    )
    return changes, windows


def _query(spark, name: str, changes: Path, windows: Path):
    from pyspark.sql import functions as F

    from streamlab.deliveries import read_deliveries

    status = read_deliveries(spark, changes, CHANGE_DDL).withWatermark("changed_at", "10 seconds")
    if name == "count":
        return status.groupBy("machine_name").count(), "update"
    maintenance = read_deliveries(spark, windows, WINDOW_DDL).withWatermark(
        "window_start", "30 seconds"
    )
    joined = status.join(
        maintenance,
        (F.col("machine_name") == F.col("window_machine"))
        & F.col("changed_at").between(F.col("window_start"), F.col("window_end")),
        "leftOuter",
    )
    return joined.where(F.col("window_machine").isNull()), "append"


def worker(job: dict) -> dict:
    from streamlab.deliveries import run_deliveries

    spark = bench.spark(
        {"spark.sql.streaming.checkpointFileManagerClass": MANAGERS[job["manager"]]}
    )
    figures = {}
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
        work = Path(tmp)
        warm = _deliveries(work / "warm", 3)
        measured = _deliveries(work / "in", job["deliveries"])
        for name in ("warm-up", *QUERIES):
            changes, windows = warm if name == "warm-up" else measured
            df, mode = _query(spark, "join" if name == "warm-up" else name, changes, windows)
            batches = run_deliveries(df, work / name / "checkpoint", output_mode=mode)
            if name == "warm-up":
                continue
            later = [b.progress for b in batches[1:] if b.input_rows]
            durations = [p["durationMs"] for p in later]
            figures[name] = {
                "batches": len(later),
                "batch_ms": bench.median(d.get("triggerExecution", 0) for d in durations),
                "commit_ms": bench.median(
                    sum(op.get("commitTimeMs", 0) for op in p["stateOperators"]) for p in later
                ),
                "logs_ms": bench.median(
                    d.get("walCommit", 0) + d.get("commitOffsets", 0) + d.get("latestOffset", 0)
                    for d in durations
                ),
            }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    got: dict[str, list[dict]] = {manager: [] for manager in MANAGERS}
    for run in range(args.runs):
        for manager in MANAGERS:
            figures = bench.run_worker(
                Path(__file__), {"manager": manager, "deliveries": args.deliveries}
            )
            got[manager].append(figures)
            print(
                f"  run {run + 1}, {LABELS[manager]}: "
                + "; ".join(
                    f"{q} {figures[q]['batch_ms']:.0f} ms a batch "
                    f"(commit {figures[q]['commit_ms']:.0f}, logs {figures[q]['logs_ms']:.0f})"
                    for q in QUERIES
                ),
                flush=True,
            )

    def median(manager: str, query: str, key: str) -> float:
        return bench.median(f[query][key] for f in got[manager])

    figures = {
        query: {
            manager: {
                key: bench.spread([f[query][key] for f in got[manager]])
                for key in ("batch_ms", "commit_ms", "logs_ms")
            }
            for manager in MANAGERS
        }
        for query in QUERIES
    }
    targets = []
    for query in QUERIES:
        ours, spark_default = (median(m, query, "batch_ms") for m in MANAGERS)
        for manager in MANAGERS:
            for key, what in (("batch_ms", "a micro-batch"), ("commit_ms", "its state commit")):
                targets.append(
                    bench.target(
                        f"{query}: {what}, {LABELS[manager]}",
                        median(manager, query, key),
                        "ms",
                        "report",
                        None,
                    )
                )
        targets.append(
            bench.target(
                f"{query}: a micro-batch, FileSystem / FileContext",
                round(ours / spark_default, 2) if spark_default else None,
                "ratio",
                "< 1",
                ours < spark_default,
            )
        )
    chart = bench.stacked_chart(
        "checkpoint_files",
        "A micro-batch after the first, by how its checkpoint files are written (median)",
        [
            (
                f"{query}, {LABELS[manager]}",
                [
                    ("state commit", median(manager, query, "commit_ms")),
                    ("offset and commit logs, listing", median(manager, query, "logs_ms")),
                    (
                        "the rest",
                        max(
                            0.0,
                            median(manager, query, "batch_ms")
                            - median(manager, query, "commit_ms")
                            - median(manager, query, "logs_ms"),
                        ),
                    ),
                ],
            )
            for query in QUERIES
            for manager in MANAGERS
        ],
        "ms",
        note=f"{args.deliveries} deliveries, a fresh process per run, {args.runs} runs; "
        "2 cores, local[2], RocksDB with changelog checkpointing",
    )
    bench.write_result(
        "checkpoint_files",
        "What writing a checkpoint costs a micro-batch",
        {"deliveries": args.deliveries, "runs": args.runs, "managers": MANAGERS},
        figures,
        targets,
        [chart],
    )


if __name__ == "__main__":
    bench.main_or_worker(main, worker)
