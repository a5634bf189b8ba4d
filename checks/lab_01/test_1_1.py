"""Checks of exercise 1.1 · Predict what the parser makes of odd bodies.

The learner's prediction against what ``from_json`` makes of the notebook's odd bodies, on
Spark.
"""

from pyspark.sql import functions as F

from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
    spark_facts,
)


def _parsed_by_spark(spark, bodies: list[bytes]) -> list[tuple]:
    parsed = F.from_json(
        F.col("body").cast("string"), "machine_name STRING, machine_time TIMESTAMP"
    )
    rows = (
        spark.createDataFrame([(i, b) for i, b in enumerate(bodies)], "i INT, body BINARY")
        .select("i", parsed["machine_name"], parsed["machine_time"].cast("string"))
        .orderBy("i")
        .collect()
    )
    return [(name, time) for _, name, time in rows]


@exercise("1.1", timeout=120)
def test_parse_prediction_matches_spark(nb, spark):
    bodies, predicted = nb.ODD_BODIES, nb.PARSED
    if not isinstance(predicted, list | tuple) or len(predicted) != len(bodies):
        raise CheckFailed(
            f"PARSED should be a list of {len(bodies)} pairs (machine_name, machine_time), one "
            f"per body of ODD_BODIES; it is {predicted!r}."
        )
    answer = [tuple(pair) for pair in predicted]
    spark_says = spark_facts(
        "1.1 parsed",
        lambda: _parsed_by_spark(spark, list(bodies)),
        check=__file__,
        given=list(bodies),
    )
    wrong = [i for i, (a, b) in enumerate(zip(answer, spark_says)) if a != b]
    hint = ""
    if any(bodies[i].startswith(b"{") and answer[i][1] is None for i in wrong):
        hint = (
            "You wrote null for a time Spark reads: a timestamp field takes more than one form "
            "of value. For each such body, ask what the schema's type can make of the value "
            "before you write null."
        )
    elif wrong:
        hint = (
            "For each wrong body, ask how strictly the schema's field names are compared with "
            "the body's, and what the schema's type makes of a value of another JSON type."
        )
    expect_equal(
        answer,
        spark_says,
        "Your prediction against what F.from_json with HEARTBEAT_BODY_SCHEMA gives for each "
        f"body of ODD_BODIES (wrong: {', '.join(f'body {i}' for i in wrong) or 'none'}).",
        hint=hint,
    )
