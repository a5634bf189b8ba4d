"""Checks of exercise 10.3 · The gaps, a year later.

Version 2 of the gaps processor on ``TwsTester``, then the upgrade of a checkpoint from version
1 to the learner's version 2 with Avro, on Spark.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester
from story_10 import (
    _declared,
    _emitted,
    _no_empty_lists,
    _row,
    _source,
    _write,
    _Writes,
)

from streamlab.kit import (
    START_MS,
    STATE_ENCODING,
    CheckFailed,
    exercise,
    expect_equal,
    query_cause,
    session_conf,
)
from streamlab.restart_trials import (
    run_available_now,
)


def _gaps_v2(row) -> tuple:
    fields = ["machine_name", "heartbeats", "gaps", "longest"]
    row = _emitted(row, "GapsProcessorV2", "GAPS_V2", fields)
    return row.machine_name, row.heartbeats, list(row.gaps), row.longest


def _upgraded(nb, keep=5, ttl_ms=3_000) -> TwsTester:
    """A GapsProcessorV2 on a TwsTester whose m1 carries what version 1 left: last at 3.5 s with
    no count (read through the new schema), gaps [1000, 1500]."""
    tester = TwsTester(nb.GapsProcessorV2(keep=keep, ttl_ms=ttl_ms), timeMode="ProcessingTime")
    _no_empty_lists(tester, "GapsProcessorV2")
    for name in ("last", "gaps", "longest"):
        if name not in {**tester.handle.value_states, **tester.handle.list_states}:
            raise CheckFailed(
                f"GapsProcessorV2.init should declare the state variable {name!r}; it declares "
                f"{sorted({**tester.handle.value_states, **tester.handle.list_states})}."
            )
    tester.updateValueState("last", "m1", (START_MS + 3_500, None))
    tester.updateListState("gaps", "m1", [(1000,), (1500,)])
    return tester


@exercise("10.3", hint="The Avro encoding reads old values in the new shapes; the rest is init.")
def test_v2_declares_the_new_shapes_and_deletes_count(nb):
    recorder = _declared(nb.GapsProcessorV2(keep=5, ttl_ms=9_000))
    expect_equal(
        (recorder.declared, recorder.deleted),
        (
            {
                "last": ("value", "at_ms bigint, heartbeats bigint", 9_000),
                "gaps": ("list", "gap_ms bigint", 9_000),
                "longest": ("value", "gap_ms bigint", 9_000),
            },
            ["count"],
        ),
        "GapsProcessorV2(keep=5, ttl_ms=9_000).init: the variables it declares, as (kind, "
        "schema, TTL), and the ones it deletes with deleteIfExists.",
        hint="A variable that is only no longer declared stays in the store; deleteIfExists "
        "removes it.",
    )


@exercise("10.3")
def test_v2_carries_on_from_version_1(nb):
    tester = _upgraded(nb)
    rows = [_gaps_v2(r) for r in tester.test("m1", [_row("m1", 4.0), _row("m1", 6.0)])]
    expect_equal(
        rows,
        [("m1", 2, [1000, 1500, 500, 2000], 2000)],
        "Version 1 left m1 with its last heartbeat at 3.5 s and the gaps [1000, 1500] (its count "
        "was deleted). Version 2 reads heartbeats at 4.0 s and 6.0 s.",
        hint="`heartbeats` is None for a machine version 1 knew: count on from 0.",
    )
    expect_equal(
        (tester.peekValueState("last", "m1"), tester.peekValueState("longest", "m1")),
        ((START_MS + 6_000, 2), (2000,)),
        "m1's `last` and `longest` after the batch.",
    )


@exercise("10.3")
def test_v2_longest_and_new_machines(nb):
    tester = _upgraded(nb, keep=2)
    rows = [_gaps_v2(r) for r in tester.test("m1", [_row("m1", 4.0)])]
    rows += [_gaps_v2(r) for r in tester.test("m1", [_row("m1", 5.0)])]
    rows += [_gaps_v2(r) for r in tester.test("m9", [_row("m9", 1.0)])]
    rows += [_gaps_v2(r) for r in tester.test("m9", [_row("m9", 1.0)])]
    rows += [_gaps_v2(r) for r in tester.test("m9", [_row("m9", 3.0)])]
    expect_equal(
        rows,
        [
            ("m1", 1, [1500, 500], 1500),
            ("m1", 2, [500, 1000], 1500),
            ("m9", 1, [], None),
            ("m9", 1, [], None),
            ("m9", 2, [2000], 2000),
        ],
        "keep=2. m1 (version 1 left gaps [1000, 1500]) sends at 4.0 s, then at 5.0 s; m9, new, "
        "sends at 1.0 s, then the same heartbeat again, then one at 3.0 s.",
        hint="`longest` is the largest of the stored `longest` and the kept gaps: a gap trimmed "
        "from the list still counts once it was stored.",
    )


@exercise("10.3")
def test_v2_keeps_every_variable_alive_together(nb):
    tester = _upgraded(nb)
    writes = _Writes(tester)
    tester.test("m1", [_row("m1", 4.0)])
    expect_equal(
        sorted(writes.written),
        ["gaps", "last", "longest"],
        "A batch that counts a heartbeat of m1 should write each of its variables that has a "
        "value, so that all of them live `ttl_ms` from now. The variables written:",
        hint="A TTL counts from each variable's own last write: one left unwritten expires "
        "while the machine is alive.",
    )
    writes.written.clear()
    tester.test("m1", [_row("m1", 4.0)])
    expect_equal(
        sorted(writes.written),
        [],
        "A batch with only a repeated heartbeat counts nothing and changes nothing. Written:",
    )
    tester.test("m8", [_row("m8", 1.0)])
    expect_equal(
        sorted(writes.written),
        ["last"],
        "A new machine's first heartbeat: it has no gap and no longest gap yet, so only `last` "
        "has a value to write. Written:",
        hint="A value of None fields is still a value: write `longest` only once there is one.",
    )


class _GapsV1(StatefulProcessor):
    """Version 1 of the gaps processor, as exercise 10.2 defines it."""

    def __init__(self, keep=5, ttl_ms=3_600_000):
        self.keep, self.ttl_ms = keep, ttl_ms

    def init(self, handle):
        self.last = handle.getValueState("last", "at_ms LONG", self.ttl_ms)
        self.gaps = handle.getListState("gaps", "gap_ms INT", self.ttl_ms)
        self.count = handle.getValueState("count", "heartbeats INT", self.ttl_ms)

    def handleInputRows(self, key, rows, timerValues):
        last, count = self.last.get(), self.count.get()
        at, counted = (last[0] if last else None), (count[0] if count else 0)
        gaps = [g for (g,) in self.gaps.get()]
        for beat in sorted(round(r.event_time.timestamp() * 1000) for r in rows):
            if at is not None and beat <= at:
                continue
            if at is not None:
                gaps.append(beat - at)
            at, counted = beat, counted + 1
        gaps = gaps[-self.keep :]
        self.last.update((at,))
        self.count.update((counted,))
        if gaps:
            self.gaps.put([(g,) for g in gaps])
        yield Row(machine_name=key[0], heartbeats=counted, gaps=gaps)


def _read(spark, checkpoint: Path, variable: str) -> list[tuple]:
    rows = spark.read.format("statestore").option("stateVarName", variable).load(str(checkpoint))
    column = "list_element" if "list_element" in rows.columns else "value"
    return sorted((r.key.machine_name, *r[column].value) for r in rows.collect())


@exercise("10.3", timeout=300)
def test_v2_upgrades_a_checkpoint_on_spark(nb, spark, tmp_path):
    incoming, checkpoint, output = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "out"

    def gaps(processor, schema):
        return (
            _source(spark, incoming)
            .groupBy("machine_name")
            .transformWithState(processor, schema, "Append", "ProcessingTime")
        )

    _write(incoming, [0, 1, 2.5], {"m1": "0", "m2": "0"})
    with session_conf(spark, {STATE_ENCODING: "avro"}):
        run_available_now(gaps(_GapsV1(), nb.GAPS_V1), checkpoint, output)
    _write(incoming, [3, 5], {"m1": "0"})
    try:
        run_available_now(gaps(nb.GapsProcessorV2(), nb.GAPS_V2), checkpoint, output)
    except Exception as error:
        raise CheckFailed(
            f"Restarting version 1's checkpoint with GapsProcessorV2 failed: {query_cause(error)}",
            hint="With Avro, every field must stay nullable and a type may only widen.",
        ) from None
    emitted = sorted(
        (r.machine_name, r.heartbeats, list(r.gaps), r.longest)
        for r in spark.read.parquet(str(output / "batch_id=1")).collect()
    )
    expect_equal(
        emitted,
        [("m1", 2, [1000, 1500, 500, 2000], 2000)],
        "Version 1 saw m1 and m2 at 0, 1 and 2.5 s; version 2, restarted on its checkpoint with "
        "Avro, sees m1 at 3 and 5 s. What version 2 emitted:",
    )
    operator = spark.read.format("state-metadata").load(str(checkpoint)).first()
    variables = sorted(
        v["stateName"]
        for v in json.loads(operator.operatorProperties)["stateVariables"]
        if not v["stateName"].startswith("$")
    )
    expect_equal(variables, ["gaps", "last", "longest"], "The state variables after the upgrade.")
    expect_equal(
        [(m, at - START_MS, beats) for m, at, beats in _read(spark, checkpoint, "last")],
        [("m1", 5_000, 2), ("m2", 2_500, None)],
        "`last` after the upgrade as (machine, at ms after START, heartbeats): m2, untouched by "
        "version 2, keeps what version 1 wrote, read in the new shape.",
    )
    expect_equal(
        _read(spark, checkpoint, "gaps"),
        [("m1", 500), ("m1", 1000), ("m1", 1500), ("m1", 2000), ("m2", 1000), ("m2", 1500)],
        "`gaps` after the upgrade, one row per element, sorted.",
    )
