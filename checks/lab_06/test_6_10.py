"""Checks of exercise 6.10 · State that only grows.

The alert rule provoked on hand-made rows, then on the rows of a real query whose
dropDuplicates keeps every heartbeat, against the course's own rule on the same reports.
"""

from __future__ import annotations

import json
from pathlib import Path

from story_06 import (
    _expected,
    _noop_writer,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    HEARTBEAT_DDL,
    CheckFailed,
    exercise,
    expect_equal,
    write_heartbeats,
)


def _row(query, operator, batch, total, input_rows=1):
    return {
        "query": query,
        "batch_id": batch,
        "input_rows": input_rows,
        "batch_duration_ms": 100,
        "operator": operator,
        "rows_total": total,
        "rows_updated": 1,
        "memory_used_bytes": 1000,
        "commit_time_ms": 10,
    }


def _growing(nb, rows, batches, what):
    alerts = nb.growing_state([dict(r) for r in rows], batches)
    if not isinstance(alerts, list):
        raise CheckFailed(
            f"growing_state() should return a list of Alerts; here on {what}.",
            expected="a list of Alerts",
            actual=type(alerts).__name__,
        )
    got = []
    for alert in alerts:
        if not hasattr(alert, "rule") or not hasattr(alert, "message"):
            raise CheckFailed(
                f"growing_state() should return Alerts (streamlab.alerts.Alert); here on {what}.",
                expected="an Alert in each item of the list",
                actual=f"{type(alert).__name__}: {alert!r}",
            )
        if not isinstance(alert.message, str) or not alert.message.strip():
            raise CheckFailed(
                f"Each alert needs a message for the person on call; here on {what}.",
                expected="a message: a str that is not blank",
                actual=repr(alert.message),
            )
        got.append((alert.rule, alert.query, alert.batch_id, alert.value, alert.limit, alert.at))
    return got


def _alert(query, batch, value):
    return ("state_growing", query, batch, float(value), 0.0, "")


def _expect_alerts(nb, rows, batches, expected, why, hint=None):
    shown = ", ".join(
        f"({r['query']}, {r['operator']}, batch {r['batch_id']}, {r['rows_total']} rows"
        f"{', read nothing' if r['input_rows'] == 0 else ''})"
        for r in rows
    )
    expect_equal(
        _growing(nb, rows, batches, f"rows {shown}"),
        expected,
        f"growing_state(rows, batches={batches}) on rows {shown}: {why} "
        "(rule, query, batch_id, value, limit, at) of each alert.",
        hint=hint,
    )


def _totals(totals, query="q", operator="dedupe", start=0):
    return [_row(query, operator, start + b, t) for b, t in enumerate(totals)]


@exercise("6.10")
def test_growing_state_in_each_of_the_last_batches(nb):
    _expect_alerts(
        nb,
        _totals([10, 20, 30, 40]),
        3,
        [_alert("q", 3, 30)],
        "three rises in a row: one alert, for the newest batch, by how much the state rose.",
    )
    _expect_alerts(
        nb,
        _totals([10, 20, 30]),
        2,
        [_alert("q", 2, 20)],
        "two rises in three batches are enough for batches=2.",
    )


@exercise("6.10")
def test_a_batch_without_a_rise_is_no_alert(nb):
    _expect_alerts(
        nb, _totals([10, 20, 20, 40]), 3, [], "batch 2 kept 20 rows: not a rise, no alert."
    )
    _expect_alerts(nb, _totals([10, 20, 15, 40]), 3, [], "batch 2 fell: no alert.")


@exercise("6.10")
def test_rises_need_one_batch_more_than_batches(nb):
    _expect_alerts(
        nb,
        _totals([20, 30, 40]),
        3,
        [],
        "three rows hold two rises: batches=3 needs four rows.",
    )


@exercise("6.10")
def test_only_the_last_batches_count(nb):
    _expect_alerts(
        nb,
        _totals([50, 10, 20, 30, 40]),
        3,
        [_alert("q", 4, 30)],
        "the fall from 50 to 10 is older than the last three batches: it does not count, and "
        "the value is the rise over those three.",
    )
    _expect_alerts(
        nb,
        _totals([10, 20, 30, 40, 40]),
        3,
        [],
        "the newest batch kept 40 rows: the state stopped growing, no alert.",
    )


@exercise("6.10")
def test_batches_that_read_nothing_are_left_out(nb):
    rows = (
        _totals([10, 20]) + [_row("q", "dedupe", 2, 20, input_rows=0)] + _totals([30, 40], start=3)
    )
    _expect_alerts(
        nb,
        rows,
        3,
        [_alert("q", 4, 30)],
        "batch 2 read nothing: neither a rise nor a break, and not one of the last three.",
        hint="Keep only the rows with input_rows above 0 before you look at the last batches.",
    )
    quiet = _totals([10, 20, 30]) + [_row("q", "dedupe", 3, 40, input_rows=0)]
    _expect_alerts(
        nb, quiet, 3, [], "the last batch read nothing: three rows that read input, no alert."
    )


@exercise("6.10")
def test_each_query_and_operator_on_its_own(nb):
    rows = []
    for batch, (dedupe, count, other) in enumerate([(4, 4, 1), (8, 4, 2), (12, 4, 3), (16, 4, 4)]):
        rows += [
            _row("beats", "stateStoreSave", batch, count),
            _row("beats", "dedupe", batch, dedupe),
            _row("other", "dedupe", batch, other),
        ]
    _expect_alerts(
        nb,
        rows,
        3,
        [_alert("beats", 3, 12), _alert("other", 3, 3)],
        "per (query, operator): the dedupe of both queries grows, the count does not; in the "
        "order each pair first appears.",
    )


def _dedupe_then_count(spark, folder: Path, checkpoint, name: str) -> list[dict]:
    """Five files of the same four machines at a new second each, one file per batch,
    through dropDuplicates and a count per machine; the progress reports, oldest first."""
    from pyspark.sql import functions as F

    for second in range(5):
        beats = [(f"m{m}", f"2026-11-22T10:00:0{second}Z") for m in range(4)]
        write_heartbeats(folder, str(second), beats, order=second)
    counts = (
        spark.readStream.schema(HEARTBEAT_DDL)
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .dropDuplicates(["machine_name", "machine_time"])
        .groupBy("machine_name")
        .agg(F.count("*").alias("heartbeats"))
    )
    query = _noop_writer(counts, name, checkpoint).start()
    finish(query, within=240, what="the check's deduplicating count to read its input")
    return [json.loads(p.json) for p in query.recentProgress]


@exercise("6.10", timeout=150)
def test_growing_state_provoked_on_a_real_query(nb, spark, tmp_path, checkpoint_dir):
    from streamlab.kit import state_growing

    reports = _dedupe_then_count(spark, tmp_path / "incoming", checkpoint_dir, "never_forgets")
    rows = [row for report in reports for row in _expected(report, ())]
    for batches in (3, 4, 5):
        # The course's own rule, on the same reports, says which operator grows and by how much.
        fired = state_growing(reports, batches)
        expected = [] if fired is None else [_alert(fired.query, fired.batch_id, fired.value)]
        _expect_alerts(
            nb,
            rows,
            batches,
            expected,
            "the rows a StateMetricsListener collects from a query whose dropDuplicates keeps "
            "every (machine, time) pair while its count stays at four machines",
        )
    expect_equal(expected, [], "A course bug: five batches cannot rise five times.")
