"""Checks of exercise 10.1 · Predict: what a restart does with a change.

The seven restarts whose outcomes the learner predicts, each run by Spark with
``trigger(availableNow=True)`` over files written here, against the prediction.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql.types import ArrayType, StringType, StructField, StructType
from story_10 import (
    LAB05,
    _monitor,
    _predictions,
    _source,
    _write,
    _wrong_predictions,
)

from streamlab.kit import (
    IGNORED,
    REFUSED,
    RUNS,
    SHUFFLE_PARTITIONS,
    STATE_ENCODING,
    exercise,
    expect_equal,
    pinned_settings,
)
from streamlab.restart_trials import (
    run_available_now,
    try_restart,
)


class _ExtraVariable(LAB05.CatchUpProcessor):
    def init(self, handle):
        super().init(handle)
        self.notes = handle.getValueState("notes", "note STRING")


class _ExtraField(LAB05.CatchUpProcessor):
    SCHEMA = StructType(
        LAB05.PARTITION_SCHEMA.fields + [StructField("sites", ArrayType(StringType()))]
    )

    def init(self, handle):
        self.handle = handle
        self.partition = handle.getValueState("partition", self.SCHEMA)

    def load(self):
        value = self.partition.get()
        if value is None:
            return LAB05.Machines(self.timeout_ms, retire_after_ms=self.retire_after_ms), None
        return LAB05.Machines(
            self.timeout_ms, *value[:3], retire_after_ms=self.retire_after_ms
        ), value[3]

    def save(self, machines, timer_ms):
        statuses, lasts = zip(*machines.values()) if machines else ((), ())
        self.partition.update((list(machines), list(statuses), list(lasts), timer_ms, None))


FLEET = {"m1": "0", "m2": "0", "m3": "1"}


CHANGES = (
    "filter",
    "dedup",
    "second_source",
    "partitions",
    "new_variable",
    "new_field",
    "avro_new_field",
)


_MEASURED: dict = {}


def _restarts(spark, root: Path) -> dict:
    """What a restart with each change does, measured on this Spark (once per process)."""
    if _MEASURED:
        return dict(_MEASURED)
    from pyspark.sql import functions as F

    incoming, other = root / "incoming", root / "other"
    _write(incoming, [0, 1], FLEET)
    run_available_now(_monitor(_source(spark, incoming)), root / "checkpoint", root / "output")
    more = str(2 * int(pinned_settings(root / "checkpoint")[SHUFFLE_PARTITIONS]))
    _write(incoming, [2], FLEET)
    _write(other, [2], {"m7": "1"})

    def source():
        return _source(spark, incoming)

    builds = {
        "filter": (lambda: _monitor(source().where(F.col("machine_name") != "test")), {}),
        "dedup": (lambda: _monitor(source().dropDuplicates(["machine_name", "event_time"])), {}),
        "second_source": (lambda: _monitor(source().unionByName(_source(spark, other))), {}),
        "partitions": (lambda: _monitor(source()), {SHUFFLE_PARTITIONS: more}),
        "new_variable": (lambda: _monitor(source(), _ExtraVariable(60_000)), {}),
        "new_field": (lambda: _monitor(source(), _ExtraField(60_000)), {}),
        "avro_new_field": (
            lambda: _monitor(source(), _ExtraField(60_000)),
            {STATE_ENCODING: "avro"},
        ),
    }
    for change, (build, conf) in builds.items():
        trial = try_restart(
            change, build, root / "checkpoint", root / "output", root / "trials", conf=conf
        )
        _MEASURED[change] = trial.outcome
    return dict(_MEASURED)


@exercise("10.1")
def test_predictions_use_the_three_outcomes(nb):
    predicted = _predictions(nb, "PREDICTED", CHANGES)
    odd = {k: v for k, v in predicted.items() if v not in (RUNS, IGNORED, REFUSED)}
    expect_equal(
        odd,
        {},
        "Each prediction should be one of RUNS, IGNORED or REFUSED; these are not:",
    )


_HINTS_10_1 = {
    "partitions": "A pinned setting changed in the session is not an error: the query runs with "
    "the checkpoint's value.",
    "new_variable": "A state variable the checkpoint has never seen is a new column family, "
    "empty; only the schemas of variables it knows are compared.",
    "avro_new_field": "The encoding format is one of the pinned settings.",
    "second_source": "Sources are matched by their position in the plan unless they are named.",
}


@exercise("10.1", timeout=420)
def test_predictions_match_what_spark_does(nb, spark, tmp_path_factory):
    wrong, spark_did = _wrong_predictions(
        nb,
        "PREDICTED",
        CHANGES,
        "10.1 restarts",
        lambda: _restarts(spark, tmp_path_factory.mktemp("lab10-restarts")),
        __file__,
    )
    expect_equal(
        wrong,
        spark_did,
        f"Spark restarted the query with each change; {len(wrong)} of your {len(CHANGES)} "
        f"predictions differ from what it did. Shown: the changes you got wrong.",
        hint=" ".join(_HINTS_10_1[c] for c in wrong if c in _HINTS_10_1),
    )
