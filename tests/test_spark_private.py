"""The private members of PySpark the course relies on: present, and a sentence when gone."""

from __future__ import annotations

import pytest

from streamlab import spark_private
from streamlab.spark_private import (
    NeedsClassicSession,
    SparkChanged,
    repartition_state,
    writer_setting,
)


def test_a_missing_member_is_named_in_a_sentence():
    with pytest.raises(SparkChanged, match=r"offline repartitioning through _streamingCheckpoint"):
        repartition_state(object(), "/nowhere", 4)


def test_a_missing_field_of_the_writer_is_named_in_a_sentence(spark):
    writer = spark.readStream.format("rate").load().writeStream.trigger(processingTime="5 seconds")
    assert "5000" in writer_setting(writer, "trigger").toString()
    with pytest.raises(SparkChanged, match=r"'no_such_field'"):
        writer_setting(writer, "no_such_field")


def test_the_course_reaches_them_only_through_this_module():
    from streamlab.paths import REPO_ROOT

    reached = []
    for folder in ("streamlab", "checks", "tests", "solutions", "labs"):
        for path in (REPO_ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".ipynb") or path == REPO_ROOT / spark_private.__file__:
                continue
            text = path.read_text(encoding="utf-8")
            if path.name == "test_spark_private.py":
                continue
            for member in ("._streamingCheckpointManager", "getDeclaredField("):
                if member in text:
                    reached.append(f"{path.relative_to(REPO_ROOT)}: {member}")
    assert not [r for r in reached if "spark_private.py" not in r], "\n".join(reached)


def _connect_session():
    # A Spark Connect client's session object, without a server: what the course checks is
    # the kind of session, never a call to it.
    from pyspark.sql.connect.session import SparkSession

    return object.__new__(SparkSession)


def test_over_spark_connect_the_sentence_says_a_classic_session_is_needed_not_a_release():
    with pytest.raises(NeedsClassicSession) as raised:
        repartition_state(_connect_session(), "/nowhere", 4)
    said = str(raised.value)
    assert said.startswith("Offline repartitioning needs a classic Spark session"), said
    assert "STREAMLAB_SPARK_REMOTE" in said
    assert "does not have it" not in said


def test_lab05_prints_one_of_the_two_readings_the_connect_run_accepts():
    import json
    import re

    from streamlab.course.registry import lab
    from streamlab.paths import REPO_ROOT
    from streamlab.tooling.connect_notebooks import DIFFERENCES

    notebook = json.loads(lab("05").notebook(REPO_ROOT / "solutions").read_text())
    recorded = "".join(
        "".join(output.get("text", ""))
        for cell in notebook["cells"]
        if "repartition_state(spark, copy, 4)" in "".join(cell["source"])
        for output in cell.get("outputs", [])
    )
    classic = next(line for line in recorded.splitlines() if "Repartitioned offline" in line)
    with pytest.raises(NeedsClassicSession) as raised:
        repartition_state(_connect_session(), "/nowhere", 4)
    over_connect = f"   Repartitioned offline:    not over Spark Connect: {raised.value}"
    pairs = re.findall(r"^regex: (.*)\n^replace: (.*)$", DIFFERENCES.read_text(), re.MULTILINE)
    read = [
        next((re.sub(rx, to, line) for rx, to in pairs if re.search(rx, line)), line)
        for line in (classic, over_connect)
    ]
    assert read[0] == read[1] != classic, read
