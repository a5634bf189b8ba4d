"""What writing a checkpoint costs a micro-batch: how the course writes it against Spark's default.

Every micro-batch of a stateful query writes files into its checkpoint: an entry of the offset
log before it runs, an entry of the commit log after, and a changelog for each state store it
changed (a stream-stream join has four stores a shuffle partition), each through a
``CheckpointFileManager``, each with a ``.crc`` beside it. Without Hadoop's native library
(PySpark from pip has none), Hadoop starts processes for them:

- Spark's default writer for a local folder goes through Hadoop's ``FileContext``, which starts
  two ``readlink`` processes for every file it writes; the course's sessions use the
  ``FileSystem`` one (``streamlab.session.CHECKPOINT_FILE_MANAGER``), which starts none;
- Hadoop's local file system starts a ``chmod`` process for every file and folder it creates;
  the course's (``streamlab.local_files``) sets permissions in Java.

Three configurations: the course's; the ``FileSystem`` writer with Hadoop's own local file
system; and Spark's default.

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
#: Each configuration: its checkpoint writer, and whether the course's local file system
#: (streamlab.local_files) sets permissions.
CONFIGS = {
    "course": ("filesystem", True),
    "chmod": ("filesystem", False),
    "default": ("filecontext", False),
}
LABELS = {
    "course": "FileSystem, permissions set by Java (the course's)",
    "chmod": "FileSystem, a chmod process per file",
    "default": "FileContext, chmod and readlink processes (Spark's default)",
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
    from streamlab import local_files
    from streamlab.deliveries import run_deliveries

    manager, java_permissions = CONFIGS[job["config"]]
    if java_permissions and not local_files.conf():
        raise RuntimeError(
            f"no local file system jar at {local_files.jar()}: "
            "python -m streamlab.tooling.build_jvm_archive builds it"
        )
    spark = bench.spark({"spark.sql.streaming.checkpointFileManagerClass": MANAGERS[manager]})
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
    from streamlab import local_files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    got: dict[str, list[dict]] = {config: [] for config in CONFIGS}
    for run in range(args.runs):
        for config, (_manager, java_permissions) in CONFIGS.items():
            figures = bench.run_worker(
                Path(__file__),
                {"config": config, "deliveries": args.deliveries},
                env={} if java_permissions else {local_files.ENABLE_ENV: "0"},
            )
            got[config].append(figures)
            print(
                f"  run {run + 1}, {LABELS[config]}: "
                + "; ".join(
                    f"{q} {figures[q]['batch_ms']:.0f} ms a batch "
                    f"(commit {figures[q]['commit_ms']:.0f}, logs {figures[q]['logs_ms']:.0f})"
                    for q in QUERIES
                ),
                flush=True,
            )

    def median(config: str, query: str, key: str) -> float:
        return bench.median(f[query][key] for f in got[config])

    figures = {
        query: {
            config: {
                key: bench.spread([f[query][key] for f in got[config]])
                for key in ("batch_ms", "commit_ms", "logs_ms")
            }
            for config in CONFIGS
        }
        for query in QUERIES
    }
    targets = []
    for query in QUERIES:
        for config in CONFIGS:
            for key, what in (("batch_ms", "a micro-batch"), ("commit_ms", "its state commit")):
                targets.append(
                    bench.target(
                        f"{query}: {what}, {LABELS[config]}",
                        median(config, query, key),
                        "ms",
                        "report",
                        None,
                    )
                )
        ours = median("course", query, "batch_ms")
        for other, what in (("chmod", "chmod processes"), ("default", "Spark's default")):
            theirs = median(other, query, "batch_ms")
            targets.append(
                bench.target(
                    f"{query}: a micro-batch, the course's / {what}",
                    round(ours / theirs, 2) if theirs else None,
                    "ratio",
                    "< 1",
                    ours < theirs,
                )
            )
    chart = bench.stacked_chart(
        "checkpoint_files",
        "A micro-batch after the first, by how its checkpoint files are written (median)",
        [
            (
                f"{query}, {LABELS[config]}",
                [
                    ("state commit", median(config, query, "commit_ms")),
                    ("offset and commit logs, listing", median(config, query, "logs_ms")),
                    (
                        "the rest",
                        max(
                            0.0,
                            median(config, query, "batch_ms")
                            - median(config, query, "commit_ms")
                            - median(config, query, "logs_ms"),
                        ),
                    ),
                ],
            )
            for query in QUERIES
            for config in CONFIGS
        ],
        "ms",
        note=f"{args.deliveries} deliveries, a fresh process per run, {args.runs} runs; "
        "2 cores, local[2], RocksDB with changelog checkpointing",
    )
    bench.write_result(
        "checkpoint_files",
        "What writing a checkpoint costs a micro-batch",
        {
            "deliveries": args.deliveries,
            "runs": args.runs,
            "configurations": {
                config: {"writer": MANAGERS[manager], "permissions_set_by_java": java}
                for config, (manager, java) in CONFIGS.items()
            },
        },
        figures,
        targets,
        [chart],
    )


if __name__ == "__main__":
    bench.main_or_worker(main, worker)
