"""Checks of exercise 3.3 · Predict what the seed reports.

The check's own seed runs on the notebook's three steps; what it emits is compared with the
learner's prediction.
"""

from pathlib import Path

from story_03 import (
    STEPS,
    seed_run,
)

from streamlab.kit import (
    exercise,
    expect_equal,
    expect_keys,
    spark_facts,
)


def _silence_in_spark(spark, folder: Path, checkpoint_dir: str) -> dict:
    said, _, _ = seed_run(spark, folder, checkpoint_dir)
    return said


@exercise("3.3", timeout=150)
def test_silence_prediction_matches_spark(nb, spark, tmp_path, checkpoint_dir):
    steps = [step for step, _ in STEPS]
    predicted = expect_keys(
        nb.SILENCE, "SILENCE", sorted(steps), hint="Each key's value is a list of rows."
    )
    answer = {step: sorted(tuple(r) for r in predicted[step]) for step in steps}
    spark_says = spark_facts(
        "3.3 silence",
        lambda: _silence_in_spark(spark, tmp_path / "in", checkpoint_dir),
        check=__file__,
    )
    spark_says = {
        step: sorted(rows, key=lambda r: (r[3], r[0])) for step, rows in spark_says.items()
    }
    answer = {step: sorted(rows, key=lambda r: (r[3], r[0])) for step, rows in answer.items()}
    hint = ""
    if answer["everyone stops"]:
        hint = (
            "You have rows while everyone is silent: ask first whether Spark runs a micro-batch "
            "at all during that silence, and with which watermark, before you ask which "
            "deadlines it has passed."
        )
    elif answer["Producer 1 comes back"] != spark_says["Producer 1 comes back"]:
        hint = (
            "Producer 1's heartbeat moves the watermark too: which timeouts does it pass, and "
            "with what time is each Unhealthy row stamped?"
        )
    expect_equal(
        answer,
        spark_says,
        "Your prediction against what the seed emitted at each step.",
        hint=hint,
    )
