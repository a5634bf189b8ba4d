"""Checks of exercise 1.4 · Same key, same partition.

The partition a machine's key lands in, as the hub gives it
(``streamlab.hub.partition_for_key``).
"""

from story_01 import (
    PARTITIONS,
    HubFiles,
    body,
)

from streamlab.hub import partition_for_key
from streamlab.kit import (
    exercise,
    expect_dataframe,
    expect_equal,
    expect_that,
)


def _spread(nb, events) -> dict:
    result = expect_dataframe(nb.partitions_per_key(events), "partitions_per_key")
    expect_that(
        sorted(result.columns) == ["partitionKey", "partitions"],
        "partitions_per_key() should return the columns partitionKey and partitions.",
        expected="partitionKey and partitions, in any order",
        actual=result.columns,
    )
    rows = result.collect()
    keys = [r["partitionKey"] for r in rows]
    expect_that(
        len(keys) == len(set(keys)),
        "partitions_per_key() should return one row per partitionKey; these keys have repeats.",
        expected="each partitionKey once",
        actual=keys,
    )
    return {r["partitionKey"]: r["partitions"] for r in rows}


@exercise("1.4", timeout=90)
def test_each_key_lands_on_one_partition(nb, spark):
    hub = HubFiles()
    for s in range(4):
        for machine in ("Producer 1", "Producer 2", "Producer 3", "Producer 4"):
            hub.send(machine, body(machine, s), s)
    got = _spread(nb, hub.batch(spark))
    expected = {
        m: [str(partition_for_key(m, PARTITIONS))]
        for m in ("Producer 1", "Producer 2", "Producer 3", "Producer 4")
    }
    expect_equal(
        got, expected, "Each producer's 4 events were stored on the partition its key hashes to."
    )


@exercise("1.4", timeout=90)
def test_a_key_on_several_partitions_shows_them_all(nb, spark):
    hub = HubFiles()
    for s, partition in enumerate(["3", "1", "3", "0"]):  # no key guarantee: spread around
        hub.send("rogue", body("rogue", s), s, partition=partition)
    got = _spread(nb, hub.batch(spark))
    expect_equal(
        got,
        {"rogue": ["0", "1", "3"]},
        "Events of one key stored on partitions 3, 1, 3 and 0 should give the sorted distinct "
        "partitions.",
    )
