"""Checks of exercise 2.7 · Find the state stores.

The checkpoint walker on folder trees the check builds, then on the checkpoint of a real query.
"""

from pathlib import Path

from pyspark.sql import functions as F
from story_02 import (
    beat,
    stream,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    CheckFailed,
    deliver_file,
    exercise,
    expect_equal,
)


def _tree(root: Path, *paths: str) -> None:
    for path in paths:
        target = root / path
        if path.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x")


@exercise("2.7")
def test_state_store_dirs_in_a_checkpoint_tree(nb, tmp_path):
    _tree(
        tmp_path,
        "offsets/0",
        "commits/0",
        "metadata",
        "sources/0/0",
        "state/0/_metadata/metadata",
        "state/0/0/1.changelog",
        "state/0/0/_metadata/schema",
        "state/0/1/1.changelog",
        "state/0/1/2.zip",
        "state/0/1/SSTs/000008.sst",
        "state/1/_metadata/metadata",
        "state/1/0/1.changelog",
        "state/1/1/",
        "state/1/.1.crc",
    )
    found = nb.state_store_dirs(str(tmp_path))
    if not isinstance(found, list):
        raise CheckFailed(
            f"state_store_dirs() should return a list of strings; it returned "
            f"{type(found).__name__}."
        )
    expect_equal(
        found,
        ["state/0/0", "state/0/1", "state/1/0", "state/1/1"],
        "A checkpoint with two operators of two partitions each has these stores: "
        "'state/<operator>/<partition>' with forward slashes, _metadata, SSTs and files left out.",
    )


@exercise("2.7")
def test_state_stores_are_ordered_as_numbers(nb, tmp_path):
    _tree(
        tmp_path,
        "state/0/_metadata/metadata",
        "state/0/2/",
        "state/0/10/",
        "state/0/notes/",
        "state/0/7",  # a file, not a folder
        "state/5",  # a file too
        "state/2/1/",
        "state/10/0/",
        "state/_stateSchema/default/",
    )
    expect_equal(
        nb.state_store_dirs(str(tmp_path)),
        ["state/0/2", "state/0/10", "state/2/1", "state/10/0"],
        "Stores are ordered by operator number, then partition number, as numbers; only "
        "numbered folders are stores.",
        hint="Sorting the strings puts 'state/0/10' before 'state/0/2': sort by the two numbers.",
    )


@exercise("2.7")
def test_state_store_dirs_of_a_stateless_query(nb, tmp_path):
    _tree(tmp_path, "offsets/0", "commits/0", "metadata", "sources/0/0")
    expect_equal(
        nb.state_store_dirs(str(tmp_path)),
        [],
        "A checkpoint without a state/ folder has no state stores.",
    )


@exercise("2.7", timeout=90)
def test_state_store_dirs_of_a_real_query(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "a", [beat("m1", 1), beat("m2", 2), beat("m1", 1, enqueued=2)])
    # Two stateful operators: a de-duplication, then a windowed count.
    counts = (
        stream(spark, folder)
        .withWatermark("event_time", "10 seconds")
        .dropDuplicatesWithinWatermark(["machine_name", "machine_time"])
        .groupBy(F.window("event_time", "10 seconds"), "machine_name")
        .count()
    )
    query = (
        counts.writeStream.format("memory")
        .queryName("check_2_7")
        .outputMode("update")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's query over your deduplication to read its input")
    expect_equal(
        nb.state_store_dirs(checkpoint_dir),
        ["state/0/0", "state/0/1", "state/1/0", "state/1/1"],
        "A query with two stateful operators and 2 shuffle partitions has four state stores.",
    )
