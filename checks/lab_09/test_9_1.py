"""Checks of exercise 9.1 · Join the transitions with the registry.

The registry join on fixed rows and on a stream.
"""

from datetime import timedelta

from pyspark.sql import DataFrame
from story_09 import (
    REGISTRY_DDL,
    REGISTRY_ROWS,
    at,
    per_batch,
    run,
)

from streamlab.deliveries import read_deliveries, write_deliveries
from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    TRANSITION_DDL,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
)

WITH_REGISTRY = TRANSITION_DDL.split(", ")


@exercise("9.1", timeout=120)
def test_every_transition_gets_its_site_and_owner(nb, spark):
    transitions = spark.createDataFrame(
        [
            ("m1", INITIALIZING, None, START, START),
            ("m1", HEALTHY, INITIALIZING, START + timedelta(seconds=1), START),
            ("m2", UNHEALTHY, HEALTHY, START + timedelta(seconds=2), START),
            ("m4", INITIALIZING, None, START + timedelta(seconds=3), START),
        ],
        TRANSITION_DDL + ", noticed_time TIMESTAMP",
    )
    registry = spark.createDataFrame(REGISTRY_ROWS, REGISTRY_DDL)
    columns = [c.split()[0] for c in WITH_REGISTRY] + ["noticed_time", "site", "owner"]
    df = expect_dataframe(nb.with_registry(transitions, registry), "with_registry", columns)
    got = sorted(
        (r.machine_name, r.status, r.site, r.owner)
        for r in df.select("machine_name", "status", "site", "owner").collect()
    )
    expect_equal(
        got,
        [
            ("m1", HEALTHY, "Lyon", "ops-lyon"),
            ("m1", INITIALIZING, "Lyon", "ops-lyon"),
            ("m2", UNHEALTHY, "Oslo", None),
            ("m4", INITIALIZING, nb.UNREGISTERED, None),
        ],
        "Four transitions (m1 twice, m2 with no owner in the registry, m4 not in it) should come "
        "out once each as (machine, status, site, owner); the registry's m9 has no transition.",
        hint="Every transition stays, matched or not; a machine the registry lacks gets the site "
        "UNREGISTERED and a null owner.",
    )


@exercise("9.1", timeout=180)
def test_with_registry_runs_on_a_stream(nb, spark, tmp_path):
    write_deliveries(
        tmp_path / "transitions",
        [
            [{"machine_name": "m2", "status": UNHEALTHY, "last_status_change_time": at(1)}],
            [{"machine_name": "m7", "status": INITIALIZING, "last_status_change_time": at(2)}],
        ],
    )
    stream = read_deliveries(spark, tmp_path / "transitions", TRANSITION_DDL)
    df = nb.with_registry(stream, spark.createDataFrame(REGISTRY_ROWS, REGISTRY_DDL))
    if not isinstance(df, DataFrame) or not df.isStreaming:
        raise CheckFailed(
            "with_registry() on a stream should return a streaming DataFrame: use only "
            "transformations (a join, a select), never collect()."
        )
    got = per_batch(run(df, tmp_path / "checkpoint"), lambda r: (r["machine_name"], r["site"]))
    expect_equal(
        got,
        {0: [("m2", "Oslo")], 1: [("m7", nb.UNREGISTERED)]},
        "Two micro-batches of transitions joined with a registry, as {batch: [(machine, site)]}.",
    )
