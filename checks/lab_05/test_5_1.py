"""Checks of exercise 5.1 · What a restart will do.

The restart plan on checkpoint folders built here, laid out as Spark 4.3 lays them out; no Spark.
"""

from __future__ import annotations

import json
from pathlib import Path

from streamlab.kit import (
    ROCKSDB_PROVIDER,
    SHUFFLE_PARTITIONS,
    STATE_PROVIDER,
    CheckFailed,
    exercise,
    expect_equal,
)


def _conf(partitions: int = 2) -> dict:
    return {
        STATE_PROVIDER: ROCKSDB_PROVIDER,
        SHUFFLE_PARTITIONS: str(partitions),
        "spark.sql.streaming.stateStore.compression.codec": "lz4",
    }


def _file(path: Path, text: str, crc: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if crc:
        (path.parent / f".{path.name}.crc").write_bytes(b"crc")


def _stamp(batch: int) -> int:
    return 1_795_000_000_000 + 1_000 * batch


def _fake_checkpoint(
    root: Path, planned: int, committed: int, partitions_by_batch: dict | None = None
) -> Path:
    """A checkpoint folder laid out as Spark 4.3 lays it out, with its clutter."""
    _file(root / "metadata", json.dumps({"id": "5f0c1d2e-0000-4000-8000-000000000005"}))
    for batch in range(planned):
        conf = _conf((partitions_by_batch or {}).get(batch, 2))
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": _stamp(batch), "conf": conf}
        _file(
            root / "offsets" / str(batch),
            "v1\n" + json.dumps(meta) + "\n" + json.dumps({"logOffset": batch}),
        )
        _file(root / "sources" / "0" / str(batch), "v1\n" + json.dumps({"path": f"f{batch}.json"}))
    if planned:
        # A temporary file of a write that never finished.
        _file(root / "offsets" / f".{planned}.6c1f0e4a.tmp", "v1\n", crc=False)
    for batch in range(committed):
        _file(root / "commits" / str(batch), 'v1\n{"nextBatchWatermarkMs":0}')
    for partition in range(2):
        _file(root / "state" / "0" / str(partition) / "1.changelog", "changes")
    return root


def _plan(nb, root: Path) -> dict:
    plan = nb.restart_plan(str(root))
    keys = {"next_batch", "replays", "batch_timestamp_ms", "pinned"}
    if not isinstance(plan, dict) or set(plan) != keys:
        raise CheckFailed(
            "restart_plan() should return a dict with exactly these keys.",
            expected=sorted(keys),
            actual=sorted(plan) if isinstance(plan, dict) else repr(plan),
        )
    return plan


@exercise("5.1")
def test_every_planned_batch_committed(nb, tmp_path):
    expect_equal(
        _plan(nb, _fake_checkpoint(tmp_path / "ckpt", planned=3, committed=3)),
        {"next_batch": 3, "replays": False, "batch_timestamp_ms": None, "pinned": _conf()},
        "offsets/ and commits/ both hold batches 0, 1 and 2 (beside .crc and .tmp files): a "
        "restart plans a new batch, 3.",
    )


@exercise("5.1")
def test_an_uncommitted_batch_is_replayed_with_its_timestamp(nb, tmp_path):
    expect_equal(
        _plan(nb, _fake_checkpoint(tmp_path / "ckpt", planned=5, committed=4)),
        {"next_batch": 4, "replays": True, "batch_timestamp_ms": _stamp(4), "pinned": _conf()},
        "Batch 4 is in offsets/ but not in commits/: the query died while running it.",
        hint="A replayed batch runs again with everything recorded for it, its batch timestamp "
        "included: read it from that batch's offsets file.",
    )


@exercise("5.1")
def test_a_first_batch_that_never_committed(nb, tmp_path):
    root = _fake_checkpoint(tmp_path / "ckpt", planned=1, committed=0)
    expect_equal(
        _plan(nb, root),
        {"next_batch": 0, "replays": True, "batch_timestamp_ms": _stamp(0), "pinned": _conf()},
        "offsets/0 was written but the query died before any commit (there is no commits/ folder).",
    )


@exercise("5.1")
def test_a_checkpoint_that_never_ran_a_batch(nb, tmp_path):
    expect_equal(
        _plan(nb, _fake_checkpoint(tmp_path / "ckpt", planned=0, committed=0)),
        {"next_batch": 0, "replays": False, "batch_timestamp_ms": None, "pinned": {}},
        "A query that started but never planned a batch leaves only its metadata: no offsets/ "
        "or commits/ folder.",
    )
    (tmp_path / "empty").mkdir()
    expect_equal(
        _plan(nb, tmp_path / "empty"),
        {"next_batch": 0, "replays": False, "batch_timestamp_ms": None, "pinned": {}},
        "An empty checkpoint folder.",
    )


@exercise("5.1")
def test_pinned_comes_from_the_newest_plan(nb, tmp_path):
    root = _fake_checkpoint(
        tmp_path / "ckpt", planned=12, committed=12, partitions_by_batch={9: 5, 11: 7}
    )
    expect_equal(
        _plan(nb, root),
        {"next_batch": 12, "replays": False, "batch_timestamp_ms": None, "pinned": _conf(7)},
        "Batches 0 to 11 planned and committed; offsets/11, the newest (after offsets/9: compare "
        "the numbers as numbers), pins 7 shuffle partitions.",
    )
