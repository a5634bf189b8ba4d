"""Checks of exercise 9.5 · Diagnose the report.

The learner's diagnosis against this file's own run of the notebook's found report on the
notebook's story: each side of the join's state read after every batch, and the inputs that
carry a watermark in the query's schema.
"""

from pathlib import Path

from pyspark.sql import DataFrame
from story_09 import (
    _join_settings,
    _maintenance_join,
    join_state,
    run,
    streams,
)

from streamlab.deliveries import write_deliveries
from streamlab.kit import (
    exercise,
    expect_equal,
    expect_keys,
    expect_that,
    spark_facts,
)

GROWS, BOUNDED = "grows", "bounded"


#: The join's inputs, the state reader's side of each, and the column of each that a watermark
#: would be on.
INPUTS = {"changes": ("left", "last_status_change_time"), "windows": ("right", "maintenance_start")}


def found_report(nb, changes: DataFrame, windows: DataFrame) -> DataFrame:
    """The in-maintenance report as the notebook's section 3 gives it, with the notebook's delays."""
    left, right, condition = _maintenance_join(nb, changes, windows)
    return left.join(right, condition).select(
        "c.machine_name", "c.last_status_change_time", "w.maintenance_start", "w.maintenance_end"
    )


def _diagnosis(answer) -> dict:
    expect_keys(answer, "DIAGNOSIS", sorted([*INPUTS, "watermarked"]))
    for name in INPUTS:
        expect_that(
            answer[name] in (GROWS, BOUNDED),
            f"DIAGNOSIS[{name!r}] should be GROWS or BOUNDED (the strings {GROWS!r} and "
            f"{BOUNDED!r}).",
            expected=f"{GROWS!r} or {BOUNDED!r}",
            actual=answer[name],
        )
    inputs = answer["watermarked"]
    if isinstance(inputs, str):
        inputs = [inputs]
    expect_that(
        isinstance(inputs, list | tuple | set) and set(inputs) <= set(INPUTS),
        "DIAGNOSIS['watermarked'] should be a list of the inputs that carry a watermark.",
        expected="a list of 'changes', 'windows', both or neither",
        actual=answer["watermarked"],
    )
    return {**{name: answer[name] for name in INPUTS}, "watermarked": sorted(set(inputs))}


def _found_report_shows(nb, spark, tmp_path: Path) -> dict:
    """The found report over DEBUG_STORY: whether each side of its state ever shrank, and the
    inputs whose column carries a watermark."""
    write_deliveries(tmp_path / "story", nb.DEBUG_STORY)
    report = found_report(nb, *streams(spark, tmp_path / "story"))
    batches = run(report, tmp_path / "checkpoint")
    spark_shows: dict[str, object] = {}
    for name, (side, _) in INPUTS.items():
        held = [set(join_state(spark, tmp_path / "checkpoint", side, b.batch_id)) for b in batches]
        removed = any(before - after for before, after in zip(held, held[1:]))
        spark_shows[name] = BOUNDED if removed else GROWS
    spark_shows["watermarked"] = sorted(
        name
        for name, (_, column) in INPUTS.items()
        if "spark.watermarkDelayMs" in report.schema[column].metadata
    )
    return spark_shows


@exercise("9.5", timeout=240)
def test_the_diagnosis_is_what_spark_shows_of_the_found_report(nb, spark, tmp_path):
    diagnosis = _diagnosis(nb.DIAGNOSIS)
    spark_shows = spark_facts(
        "9.5 the found report",
        lambda: _found_report_shows(nb, spark, tmp_path),
        check=__file__,
        given=_join_settings(nb, nb.DEBUG_STORY),
    )
    expect_equal(
        diagnosis,
        spark_shows,
        "DIAGNOSIS against a run of the found report over DEBUG_STORY: for each side of the "
        "join's state, GROWS if no row ever left it from one batch to a later one, BOUNDED if "
        "some did (the state reader, after every batch); and the inputs whose column in the "
        "query's schema carries a watermark.",
        hint="Read each side with the state reader after every batch of the found run "
        "(joinSide, batchId), rather than reasoning from the code alone.",
    )
