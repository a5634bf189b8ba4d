"""The private members of PySpark the course relies on: present, and a sentence when gone."""

from __future__ import annotations

import pytest

from streamlab import spark_private
from streamlab.spark_private import SparkChanged, repartition_state, writer_setting


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
