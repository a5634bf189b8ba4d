"""Checks of exercise 10.2 · The last gaps between a machine's heartbeats.

The gaps processor on ``TwsTester``; no Spark.
"""

from __future__ import annotations

from pyspark.sql.streaming.tws_tester import TwsTester
from story_10 import (
    _declared,
    _emitted,
    _no_empty_lists,
    _row,
    _Writes,
)

from streamlab.kit import (
    START_MS,
    exercise,
    expect_equal,
)


def _gaps(row) -> tuple:
    """(machine, heartbeats, gaps) of an emitted row, checked on the way."""
    row = _emitted(
        row,
        "GapsProcessor",
        "GAPS_V1",
        ["machine_name", "heartbeats", "gaps"],
        hint="Row(machine_name=..., heartbeats=..., gaps=...) keeps the order you give.",
    )
    return row.machine_name, row.heartbeats, list(row.gaps)


def _gaps_tester(nb, keep=2, ttl_ms=3_000) -> TwsTester:
    processor = nb.GapsProcessor(keep=keep, ttl_ms=ttl_ms)
    return _no_empty_lists(TwsTester(processor, timeMode="ProcessingTime"), "GapsProcessor")


@exercise("10.2", hint="State variables live in init; each takes its TTL as its last argument.")
def test_gaps_declares_three_variables_with_the_ttl(nb):
    recorder = _declared(nb.GapsProcessor(keep=4, ttl_ms=7_000))
    expect_equal(
        recorder.declared,
        {
            "last": ("value", "at_ms bigint", 7_000),
            "gaps": ("list", "gap_ms int", 7_000),
            "count": ("value", "heartbeats int", 7_000),
        },
        "GapsProcessor(keep=4, ttl_ms=7_000).init should declare three state variables, as "
        "(kind, schema, TTL): the last heartbeat, the list of gaps and the count.",
    )


@exercise("10.2")
def test_gaps_of_the_worked_example(nb):
    tester = _gaps_tester(nb)
    first = [_gaps(r) for r in tester.test("m1", [_row("m1", s) for s in (2.0, 1.0, 3.5)])]
    second = [_gaps(r) for r in tester.test("m1", [_row("m1", s) for s in (3.5, 4.0)])]
    expect_equal(
        (first, second),
        ([("m1", 3, [1000, 1500])], [("m1", 4, [1500, 500])]),
        "keep=2: heartbeats at 2.0 s, 1.0 s and 3.5 s in one batch (take them in event-time "
        "order), then 3.5 s again and 4.0 s. Shown: (first batch's rows, second batch's rows).",
        hint="A repeated heartbeat is not after the newest one counted: it adds no gap and no "
        "count. Only the newest `keep` gaps stay.",
    )
    expect_equal(
        (
            tester.peekValueState("last", "m1"),
            tester.peekListState("gaps", "m1"),
            tester.peekValueState("count", "m1"),
        ),
        ((START_MS + 4_000,), [(1500,), (500,)], (4,)),
        "After the two batches, the state of m1 as (last, gaps, count).",
    )


@exercise("10.2")
def test_gaps_first_heartbeat_and_late_ones(nb):
    tester = _gaps_tester(nb, keep=5)
    alone = [_gaps(r) for r in tester.test("m2", [_row("m2", 10.0)])]
    late = [_gaps(r) for r in tester.test("m2", [_row("m2", 9.0), _row("m2", 10.0)])]
    then = [_gaps(r) for r in tester.test("m2", [_row("m2", 12.0)])]
    expect_equal(
        (alone, late, then),
        ([("m2", 1, [])], [("m2", 1, [])], [("m2", 2, [2000])]),
        "m2's first heartbeat (10 s) has no gap; a batch of a late (9 s) and a repeated (10 s) "
        "heartbeat changes nothing; one at 12 s adds a gap of 2000 ms. Shown: each batch's rows.",
        hint="The newest counted heartbeat survives from batch to batch in `last`; compare with "
        "it before counting.",
    )
    expect_equal(
        tester.peekListState("gaps", "m2"),
        [(2000,)],
        "m2's stored gaps after the three batches.",
    )
    writes = _Writes(tester)
    tester.test("m2", [_row("m2", 11.0), _row("m2", 12.0)])
    expect_equal(
        sorted(writes.written),
        [],
        "A batch of m2's late (11 s) and repeated (12 s) heartbeats counts nothing, so it writes "
        "nothing: not even the same values again, which would restart their TTL. Written:",
        hint="Write the state only when a heartbeat counted.",
    )


@exercise("10.2")
def test_gaps_keeps_machines_apart_and_trims(nb):
    tester = _gaps_tester(nb, keep=3)
    rows = []
    for batch in range(3):
        rows += [
            _gaps(r)
            for r in tester.test("a", [_row("a", batch * 10 + s) for s in (0, 1, 3)])
            + tester.test("b", [_row("b", batch * 10 + 5)])
        ]
    expect_equal(
        rows[-2:],
        [("a", 9, [7000, 1000, 2000]), ("b", 3, [10_000, 10_000])],
        "keep=3: machine a sends at 0, 1, 3 s, then 10, 11, 13 s, then 20, 21, 23 s; machine b at "
        "5, 15, 25 s. Shown: the rows of the third batch.",
        hint="Trim to the newest `keep` gaps after adding the batch's ones, and keep each "
        "machine's state to itself.",
    )
