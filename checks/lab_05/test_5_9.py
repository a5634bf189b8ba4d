"""Checks of exercise 5.9 · Predict: what a checkpoint pins.

The predictions against restarts Spark runs with other settings or another state.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from story_05 import (
    _lab04_beats,
    _reference_changes,
    _run_to_batches,
    _write,
)

from streamlab.kit import (
    SHUFFLE_PARTITIONS,
    STATE_ENCODING,
    STATE_PROVIDER,
    CheckFailed,
    ReferenceHeartbeatProcessor,
    exercise,
    expect_equal,
    session_conf,
    spark_facts,
)
from streamlab.session import HDFS_PROVIDER


class _SiteField:
    """A value state seen with one more field, `site`, that the processor leaves empty."""

    def __init__(self, state):
        self.state = state

    def get(self):
        value = self.state.get()
        return None if value is None else tuple(value)[:2]

    def update(self, value: tuple) -> None:
        self.state.update((*value, None))

    def clear(self) -> None:
        self.state.clear()


def _with_site(timeout_ms: int):
    class WithSiteInState(ReferenceHeartbeatProcessor):
        def init(self, handle):
            self.handle = handle
            self.machine = _SiteField(
                handle.getValueState("machine", "status STRING, last_seen_ms LONG, site STRING")
            )

    return WithSiteInState(timeout_ms)


def _life_with(spark, settings: dict, changes, checkpoint: Path, output: Path) -> dict:
    with session_conf(spark, settings):
        try:
            _run_to_batches(spark, changes, checkpoint, output)
        except Exception as error:
            names = re.findall(r"\[([A-Z][A-Z_]{5,})\]", str(error))
            return {"starts": False, "error": names[-1] if names else type(error).__name__}
    return {"starts": True, "error": None}


def _prediction(value, name: str) -> dict:
    if not isinstance(value, dict) or "starts" not in value:
        raise CheckFailed(
            f"{name} should be a dict with at least the key 'starts'.",
            expected="{'starts': ..., ...}",
            actual=repr(value),
        )
    return value


def _other_then_field(spark, tmp_path: Path) -> list:
    """A life, then one with other settings (as Spark pinned them, if it starts), then one with
    a field more in the state: [what the second showed, what the third showed]."""
    incoming, checkpoint, output = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "out"
    _write(incoming, "a", _lab04_beats(["m1", "m2"]))
    _run_to_batches(spark, _reference_changes(spark, incoming, 60_000), checkpoint, output)

    _write(incoming, "b", _lab04_beats(["m3"]))
    other = _life_with(
        spark,
        {SHUFFLE_PARTITIONS: "4", STATE_PROVIDER: HDFS_PROVIDER},
        _reference_changes(spark, incoming, 60_000),
        checkpoint,
        output,
    )
    if other["starts"]:
        newest = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
        meta = json.loads((checkpoint / "offsets" / str(newest)).read_text().splitlines()[1])
        other = {
            "starts": True,
            "state_partitions": spark.read.format("state-metadata")
            .load(str(checkpoint))
            .first()
            .numPartitions,
            "provider": meta["conf"][STATE_PROVIDER].rsplit(".", 1)[-1],
        }

    _write(incoming, "c", _lab04_beats(["m1"]))
    field = _life_with(
        spark,
        {},
        _reference_changes(spark, incoming, 60_000, _with_site(60_000)),
        checkpoint,
        output,
    )
    return [other, field]


def _field_on_avro(spark, tmp_path: Path) -> dict:
    """A life on the avro encoding, then one with a field more in the state: what it showed."""
    avro_in, avro = tmp_path / "avro-in", tmp_path / "avro"
    _write(avro_in, "a", _lab04_beats(["m1", "m2"]))
    _life_with(
        spark,
        {STATE_ENCODING: "avro"},
        _reference_changes(spark, avro_in, 60_000),
        avro / "checkpoint",
        avro / "out",
    )
    _write(avro_in, "b", _lab04_beats(["m1"]))
    field_avro = _life_with(
        spark,
        {},
        _reference_changes(spark, avro_in, 60_000, _with_site(60_000)),
        avro / "checkpoint",
        avro / "out",
    )
    shutil.rmtree(avro, ignore_errors=True)
    return field_avro


@exercise("5.9", timeout=400)
def test_what_a_checkpoint_pins(nb, spark, tmp_path):
    predicted = [
        _prediction(nb.OTHER_SETTINGS, "OTHER_SETTINGS"),
        _prediction(nb.ONE_MORE_FIELD, "ONE_MORE_FIELD"),
        _prediction(nb.ONE_MORE_FIELD_AVRO, "ONE_MORE_FIELD_AVRO"),
    ]

    def measure() -> list:
        return [*_other_then_field(spark, tmp_path), _field_on_avro(spark, tmp_path)]

    expect_equal(
        predicted,
        spark_facts("5.9 what a checkpoint pins", measure, check=__file__),
        "[OTHER_SETTINGS, ONE_MORE_FIELD, ONE_MORE_FIELD_AVRO], as Spark ran the three restarts "
        "with the course's lab 04 processor.",
        hint="What offsets/N records wins over the session, without an error. The state's schema "
        "is checked against the recorded one at every start; how strictly depends on the "
        "encoding the checkpoint pinned.",
    )
