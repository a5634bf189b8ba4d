"""Checks of exercise 10.6 · The old query's state and position.

The position a migration resumes from, on checkpoint folders built here, and lab 04's state
read back for a migration.
"""

from __future__ import annotations

import json
from pathlib import Path

from story_10 import (
    _write,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    CheckFailed,
    ReferenceHeartbeatProcessor,
    exercise,
    expect_equal,
)
from streamlab.restart_trials import (
    error_class,
    run_available_now,
)


def _file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    (path.parent / f".{path.name}.crc").write_bytes(b"crc")


def _offsets_checkpoint(root: Path, planned: int, committed: int) -> Path:
    for batch in range(planned):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_795_000_000_000 + batch, "conf": {}}
        ends = {"0": 10 * (batch + 1), "1": 7 * (batch + 1)}
        _file(root / "offsets" / str(batch), f"v1\n{json.dumps(meta)}\n{json.dumps(ends)}")
    for batch in range(committed):
        _file(root / "commits" / str(batch), 'v1\n{"nextBatchWatermarkMs":0}')
    _file(root / "offsets" / f".{planned}.6c1f0e4a.tmp", "v1\n")
    return root


@exercise("10.6", hint="The newest committed batch is the newest digit-named file in commits/.")
def test_resume_position_is_where_the_newest_commit_ended(nb, tmp_path):
    root = _offsets_checkpoint(tmp_path / "ckpt", planned=3, committed=2)
    position = nb.resume_position(str(root))
    expect_equal(
        json.loads(position) if isinstance(position, str) else position,
        {"0": 20, "1": 14},
        "offsets/0 to offsets/2 and commits/0, commits/1: batch 2 was planned and never "
        "committed, so the new query starts where batch 1 ended (offsets/1's source line).",
        hint="A planned batch without a commit is not part of the old query's history.",
    )
    expect_equal(
        isinstance(position, str),
        True,
        "resume_position should return the JSON text, as startingPosition takes it.",
    )
    root = _offsets_checkpoint(tmp_path / "twelve", planned=12, committed=12)
    expect_equal(
        json.loads(nb.resume_position(str(root))),
        {"0": 120, "1": 84},
        "With batches 0 to 11 all committed, the newest is 11 (compare batch ids as numbers).",
    )


@exercise("10.6")
def test_resume_position_without_a_commit_says_so(nb, tmp_path):
    root = _offsets_checkpoint(tmp_path / "ckpt", planned=1, committed=0)
    for folder in (root, tmp_path / "empty"):
        folder.mkdir(exist_ok=True)
        try:
            nb.resume_position(str(folder))
        except ValueError:
            continue
        except Exception as error:
            raise CheckFailed(
                f"A checkpoint without a committed batch should raise ValueError; "
                f"resume_position raised {type(error).__name__}: {error}"
            ) from None
        raise CheckFailed(
            "A checkpoint without a committed batch has no position to resume from: "
            "resume_position should raise ValueError."
        )


@exercise("10.6", timeout=300)
def test_initial_state_from_a_lab_04_checkpoint(nb, spark, tmp_path):
    incoming, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    schema = "machine_name STRING, machine_time TIMESTAMP"

    def run(machines):
        _write(incoming, [0], {m: "0" for m in machines})
        heartbeats = spark.readStream.schema(schema).json(str(incoming))
        changes = heartbeats.groupBy("machine_name").transformWithState(
            ReferenceHeartbeatProcessor(1),
            "machine_name STRING, status STRING, previous_status STRING, "
            "last_status_change_time TIMESTAMP",
            "Append",
            "ProcessingTime",
        )
        run_available_now(changes, checkpoint, tmp_path / "out")

    run(["m1", "m2", "m3"])
    run(["m1", "m4"])
    times = [
        json.loads((checkpoint / "offsets" / str(b)).read_text().splitlines()[1])[
            "batchTimestampMs"
        ]
        for b in (0, 1)
    ]
    placement = {"m1": "3", "m2": "0", "m3": "0", "m4": "1"}
    try:
        frame = nb.initial_state(spark, str(checkpoint), placement.get)
        columns, rows = frame.columns, sorted(tuple(r) for r in frame.collect())
    except Exception as error:
        if "is not done yet" in str(error):
            raise
        raise CheckFailed(f"initial_state failed: {error_class(error)}") from None
    expect_equal(
        columns,
        ["partition", "machine_name", "status", "last_heartbeat_ms"],
        "initial_state's columns, in order.",
    )
    expect_equal(
        rows,
        [
            ("0", "m2", UNHEALTHY, times[0]),
            ("0", "m3", UNHEALTHY, times[0]),
            ("1", "m4", INITIALIZING, times[1]),
            ("3", "m1", HEALTHY, times[1]),
        ],
        "Lab 04's query saw m1, m2, m3, then m1 and m4 (1 ms timeout: m2 and m3 timed out). "
        "initial_state's rows, sorted, with the partition from partition_of:",
        hint="last_heartbeat_ms is lab 04's last_seen_ms; the partition comes from partition_of.",
    )
