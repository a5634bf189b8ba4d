"""Checks for lab 10 · Change it while it runs.

Pure Python first, on ``TwsTester``: the gaps processors (10.2, 10.3), the MapState machine
table against lab 05's processor in Spark's order of a micro-batch (10.4), the migration's
``handleInitialState`` (10.7), and the position a migration resumes from, on checkpoint folders
built here (10.6). Then Spark, each run with ``trigger(availableNow=True)`` over files written
here: the seven restarts whose outcomes 10.1 predicts, the repartition 10.5 predicts, the upgrade
of a checkpoint from version 1 of the gaps processor to the learner's version 2 with Avro (10.3),
lab 04's state read back for a migration (10.6), and the first migration of the notebook,
whose state and timers after its batch, read with the state reader, grade the diagnosis of
10.7. Predictions and diagnoses are graded against what Spark
does here and now, never against a copy of the answer. No check sleeps or reads the wall clock.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from pyspark import cloudpickle
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester
from pyspark.sql.types import ArrayType, StringType, StructField, StructType

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    IGNORED,
    INITIALIZING,
    NO_DATA_BATCHES,
    REFUSED,
    REPO_ROOT,
    RUNS,
    START,
    START_MS,
    UNHEALTHY,
    CheckFailed,
    Meter,
    ReferenceHeartbeatProcessor,
    SparkChanged,
    deliver_file,
    exercise,
    expect_equal,
    expect_keys,
    handler_must_yield,
    pinned_settings,
    query_cause,
    registry,
    session_conf,
    spark_facts,
)
from streamlab.restart_trials import (
    batches,
    error_class,
    run_available_now,
    try_restart,
)
from streamlab.solutions import load_solution
from streamlab.spark_private import repartition_state
from streamlab.tws_batches import pending_timers, spark_batch, spark_initial_state

# Spark's Python workers cannot import this file: what it defines goes to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: Lab 05's default retire_after_ms: an Unhealthy machine silent that long leaves the state.
DAY_MS = 24 * 3_600_000
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
LAB05 = load_solution("05")
#: The notebook LAB05 comes from: the facts measured with it depend on it.
LAB05_NOTEBOOK = registry.lab("05").notebook(REPO_ROOT / "solutions")


def _row(machine: str, second: float, partition: str = "0") -> Row:
    """One row of lab 05's HEARTBEAT_SCHEMA, ``second`` seconds after START."""
    return Row(
        partition=partition,
        machine_name=machine,
        event_time=datetime.fromtimestamp(START.timestamp() + second, tz=UTC),
        sequence_number=None,
        last_enqueued_sequence_number=None,
    )


def _spark_batch(tester: TwsTester, now: int, rows_by_key: dict) -> list:
    """One micro-batch at processing time ``now`` in Spark's order: every key's rows, then the
    timers that are due; a handler that returns None gets a sentence, not a TypeError."""
    with handler_must_yield("handleInputRows or handleExpiredTimer", "a Row"):
        return spark_batch(tester, now, rows_by_key)


class _Recorder:
    """A stand-in handle that writes down what a processor's ``init`` declares and deletes."""

    def __init__(self):
        self.declared: dict[str, tuple] = {}
        self.deleted: list[str] = []

    def getValueState(self, name, schema, ttlDurationMs=None):
        self.declared[name] = ("value", _ddl(schema), ttlDurationMs)

    def getListState(self, name, schema, ttlDurationMs=None):
        self.declared[name] = ("list", _ddl(schema), ttlDurationMs)

    def getMapState(self, name, key_schema, value_schema, ttlDurationMs=None):
        self.declared[name] = ("map", (_ddl(key_schema), _ddl(value_schema)), ttlDurationMs)

    def deleteIfExists(self, name):
        self.deleted.append(name)

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _ddl(schema) -> str:
    """A schema as ``name type, ...`` in lower case, however it was given."""
    if isinstance(schema, StructType):
        return ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields)
    parts = [p.strip().split() for p in str(schema).split(",")]
    aliases = {"long": "bigint", "int": "int", "integer": "int", "string": "string"}
    return ", ".join(f"{n} {aliases.get(t.lower(), t.lower())}" for n, t in parts)


def _declared(processor) -> _Recorder:
    recorder = _Recorder()
    processor.init(recorder)
    return recorder


class _Writes:
    """Which state variables a processor writes, on a TwsTester (by variable name)."""

    WRITES = ("update", "put", "appendValue", "appendList", "updateValue")

    def __init__(self, tester: TwsTester):
        self.written: set[str] = set()
        for group in (
            tester.handle.value_states,
            tester.handle.list_states,
            tester.handle.map_states,
        ):
            for name, state in group.items():
                for method in self.WRITES:
                    if hasattr(state, method):
                        setattr(state, method, self._noting(name, getattr(state, method)))

    def _noting(self, name, method):
        def noted(*args, **kwargs):
            self.written.add(name)
            return method(*args, **kwargs)

        return noted


# --- 10.2 · the last gaps between a machine's heartbeats ----------------------------------------


def _gaps(row) -> tuple:
    """(machine, heartbeats, gaps) of an emitted row, checked on the way."""
    if not isinstance(row, Row):
        raise CheckFailed(f"GapsProcessor should yield Row objects; it yielded {row!r}.")
    fields = list(row.asDict())
    expect_equal(
        fields,
        ["machine_name", "heartbeats", "gaps"],
        "GapsProcessor's rows should have the fields of GAPS_V1, in order.",
        hint="Row(machine_name=..., heartbeats=..., gaps=...) keeps the order you give.",
    )
    return row.machine_name, row.heartbeats, list(row.gaps)


def _no_empty_lists(tester: TwsTester, who: str) -> TwsTester:
    """Make an empty ``put`` or ``appendList`` fail, as it fails on Spark (TwsTester takes it)."""
    for name, state in tester.handle.list_states.items():
        for method in ("put", "appendList"):
            original = getattr(state, method)

            def guarded(values, _original=original, _method=method, _name=name):
                if not list(values):
                    raise CheckFailed(
                        f"{who} called {_method}([]) on the list state {_name!r}. Spark refuses "
                        f"to store an empty list (ILLEGAL_STATE_STORE_VALUE.EMPTY_LIST_VALUE), "
                        f"although TwsTester takes it.",
                        hint="Write the list only when it has something in it.",
                    )
                return _original(values)

            setattr(state, method, guarded)
    return tester


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


# --- 10.3 · the gaps, a year later -------------------------------------------------------------


def _gaps_v2(row) -> tuple:
    if not isinstance(row, Row):
        raise CheckFailed(f"GapsProcessorV2 should yield Row objects; it yielded {row!r}.")
    expect_equal(
        list(row.asDict()),
        ["machine_name", "heartbeats", "gaps", "longest"],
        "GapsProcessorV2's rows should have the fields of GAPS_V2, in order.",
    )
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


# --- 10.4 · the machine table as a MapState ------------------------------------------------------


def _facts(rows) -> list[tuple]:
    return sorted(
        (
            r.machine_name,
            r.previous_status or "",
            r.status,
            round(r.last_status_change_time.timestamp() * 1000),
            round(r.noticed_time.timestamp() * 1000),
        )
        for r in rows
    )


def _after_start(rows) -> list[tuple]:
    """_facts with the times in ms after START."""
    return [
        (m, was, now, at - START_MS, noticed - START_MS)
        for m, was, now, at, noticed in _facts(rows)
    ]


def _story(processor, batches_: list[tuple[int, dict]]) -> tuple[TwsTester, Meter, list]:
    tester = TwsTester(processor, timeMode="ProcessingTime")
    meter = Meter(tester)
    out = []
    for now, rows_by_key in batches_:
        out.append(_spark_batch(tester, now, rows_by_key))
    return tester, meter, out


def _fleet(names, second: int, partition: str = "0") -> list[Row]:
    return [_row(n, second, partition) for n in names]


def _silence_story():
    """Partition 0: m1 sends every second, m2 stops after 3 s; partition 1: m3 and m4 stop after
    4 s and nothing arrives there any more. A batch every second at +0.5 s, up to 15 s."""
    out = []
    for s in range(1, 16):
        rows = {"0": _fleet(["m1"] + (["m2"] if s <= 3 else []), s)}
        if s <= 4:
            rows["1"] = _fleet(["m3", "m4"], s, "1")
        out.append((START_MS + s * 1000 + 500, rows))
    return out


def _map_processor(nb):
    processor = nb.MapCatchUpProcessor(timeout_ms=5_000)
    if not isinstance(processor, LAB05.CatchUpProcessor):
        raise CheckFailed(
            f"MapCatchUpProcessor should subclass LAB05.CatchUpProcessor (its handlers are lab "
            f"05's); it is a {type(processor).__mro__[1].__name__} subclass."
        )
    return processor


@exercise("10.4", hint="The handlers are lab 05's: only init, load and save change.")
def test_map_table_emits_what_lab_05_emits(nb):
    _, _, expected = _story(LAB05.CatchUpProcessor(timeout_ms=5_000), _silence_story())
    tester, _, got = _story(_map_processor(nb), _silence_story())
    expect_equal(
        [_facts(batch) for batch in got],
        [_facts(batch) for batch in expected],
        "Partition 0: m1 sends every second, m2 stops after 3 s; partition 1: m3 and m4 stop "
        "after 4 s and nothing more arrives there. Each batch's transitions as (machine, "
        "previous, status, changed at ms, noticed at ms), as lab 05's processor emits them:",
        hint="A quiet partition's timer must survive from batch to batch: save it, and load it "
        "back as lab 05's load does (None when there is none).",
    )
    expect_equal(
        tester.peekMapState("machines", "1"),
        {("m3",): (UNHEALTHY, START_MS + 4_000), ("m4",): (UNHEALTHY, START_MS + 4_000)},
        "Partition 1's map state `machines` after the story: one entry per machine, "
        "(status, last heartbeat ms).",
    )
    expect_equal(
        tester.peekValueState("timer", "1"),
        (START_MS + 4_000 + DAY_MS,),
        "Every machine of partition 1 is Unhealthy: its `timer` is their retirement, 4 s + "
        "retire_after_ms (a day, the default).",
        hint="Build the Machines as lab 05's load does, with the processor's retire_after_ms: "
        "an Unhealthy machine's deadline is its retirement.",
    )
    expect_equal(
        tester.peekValueState("timer", "0"),
        (START_MS + 20_000,),
        "Partition 0's `timer` after the story: m1's deadline, 15 s + 5 s.",
    )


@exercise("10.4", hint="Compare each machine with what load read; write only the differences.")
def test_map_table_writes_only_what_changed(nb):
    fleet = [f"m{i:04d}" for i in range(1_000)]
    batches_ = [(START_MS + s * 1000, {"0": _fleet(fleet, s)}) for s in (1, 2)]
    batches_ += [(START_MS + 3_000, {"0": _fleet(fleet[:250], 3)})]
    batches_ += [(START_MS + 3_500, {"0": _fleet(fleet[:10], 3)})]  # repeats: nothing new
    processor = _map_processor(nb)
    tester = TwsTester(processor, timeMode="ProcessingTime")
    meter = Meter(tester)
    calls = []
    for now, rows in batches_:
        meter.take()
        _spark_batch(tester, now, rows)
        calls.append(meter.take())
    quarter, repeats = dict(calls[2]), dict(calls[3])
    expect_equal(
        {k: quarter.get(k, 0) for k in ("iterator", "get", "updateValue", "getValue", "update")},
        {"iterator": 1, "get": 1, "updateValue": 250, "getValue": 0, "update": 0},
        "1,000 Healthy machines in one partition, 250 of which send a heartbeat: the state calls "
        "of that batch (the earliest deadline does not move, so neither does the timer).",
        hint="One iterator() and one get() to load, one updateValue per changed machine, and the "
        "timer only when it moved.",
    )
    expect_equal(
        repeats.get("updateValue", 0) + repeats.get("update", 0),
        0,
        "A batch of 10 repeated heartbeats changes no machine: writes in that batch "
        "(updateValue + update).",
    )


@exercise("10.4")
def test_map_table_after_a_downtime(nb):
    names = ["m1", "m2", "m3"]
    story = [(START_MS + s * 1000, {"0": _fleet(names, s)}) for s in range(1, 5)]
    story += [(START_MS + 60_000, {"0": _fleet(names[:2], 30)})]
    _, _, expected = _story(LAB05.CatchUpProcessor(timeout_ms=5_000), story)
    _, _, got = _story(_map_processor(nb), story)
    expect_equal(
        [_facts(b) for b in got],
        [_facts(b) for b in expected],
        "Three machines send from 1 s to 4 s; after a downtime, the batch at 60 s holds "
        "heartbeats of m1 and m2 at 30 s. Each batch's transitions, as lab 05's processor emits "
        "them:",
    )


def _retirement_story():
    """m1 and m2 in partition 0, m3 in partition 1, send from 1 s to 3 s and turn Unhealthy at
    8 s. A day later m1 sends again (Unhealthy -> Healthy); at 1 day + 3 s m2 and m3 retire, m2
    with a heartbeat of m1 in its partition's batch, m3 by its partition's timer."""
    day_s = DAY_MS // 1000
    story = [
        (START_MS + s * 1000 + 500, {"0": _fleet(["m1", "m2"], s), "1": _fleet(["m3"], s, "1")})
        for s in (1, 2, 3)
    ]
    story += [(START_MS + 10_500, {})]
    story += [(START_MS + DAY_MS + 500, {"0": _fleet(["m1"], day_s)})]
    story += [(START_MS + DAY_MS + 3_500, {"0": _fleet(["m1"], day_s + 3)})]
    return story


@exercise("10.4", hint="A machine that expire retired is in what load read, not in machines.")
def test_map_table_forgets_retired_machines(nb):
    story = _retirement_story()
    come_back = (START_MS + DAY_MS + 5_500, {"0": _fleet(["m2"], DAY_MS // 1000 + 5)})
    _, _, expected = _story(LAB05.CatchUpProcessor(timeout_ms=5_000), story + [come_back])
    tester, meter, got = _story(_map_processor(nb), story)
    retiring = meter.take()
    expect_equal(
        {p: tester.peekMapState("machines", p) for p in HUB_PARTITIONS},
        {"0": {("m1",): (HEALTHY, START_MS + DAY_MS + 3_000)}, "1": {}},
        "m1 and m2 (partition 0) and m3 (partition 1) send from 1 s to 3 s; a day later only m1 "
        "sends again. After the batch at 1 day + 3.5 s, m2 and m3 have been silent for "
        "retire_after_ms (a day) and are retired: the map state `machines` per partition.",
        hint="Remove the entry of every machine that load read and that is no longer in "
        "`machines`, so that the map holds exactly the partition's machines.",
    )
    expect_equal(
        (tester.peekValueState("timer", "1"), retiring.get("removeKey", 0)),
        (None, 2),
        "Partition 1 has no machine left: its `timer` value, and the removeKey calls of the "
        "story (one per machine retired).",
        hint="When the timer becomes None, clear the value state.",
    )
    got.append(_spark_batch(tester, *come_back))
    expect_equal(
        [_facts(b) for b in got],
        [_facts(b) for b in expected],
        "The same story, then m2 sends again at 1 day + 5 s (a retired machine comes back as a "
        "new one). Each batch's transitions, as lab 05's processor emits them:",
    )


# --- 10.6 · the old query's position -------------------------------------------------------------


def _file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    (path.parent / f".{path.name}.crc").write_bytes(b"crc")


def _offsets_checkpoint(root: Path, planned: int, committed: int) -> Path:
    for batch in range(planned):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_795_000_000_000 + batch, "conf": {}}
        ends = {"0": 10 * (batch + 1), "1": 7 * (batch + 1)}
        _file(root / "offsets" / str(batch), f"v1\n{json.dumps(meta)}\n{json.dumps(ends)}")
    for batch in range(committed):
        _file(root / "commits" / str(batch), 'v1\n{"nextBatchWatermarkMs":0}')
    _file(root / "offsets" / f".{planned}.6c1f0e4a.tmp", "v1\n")
    return root


@exercise("10.6", hint="The newest committed batch is the newest digit-named file in commits/.")
def test_resume_position_is_where_the_newest_commit_ended(nb, tmp_path):
    root = _offsets_checkpoint(tmp_path / "ckpt", planned=3, committed=2)
    position = nb.resume_position(str(root))
    expect_equal(
        json.loads(position) if isinstance(position, str) else position,
        {"0": 20, "1": 14},
        "offsets/0 to offsets/2 and commits/0, commits/1: batch 2 was planned and never "
        "committed, so the new query starts where batch 1 ended (offsets/1's source line).",
        hint="A planned batch without a commit is not part of the old query's history.",
    )
    expect_equal(
        isinstance(position, str),
        True,
        "resume_position should return the JSON text, as startingPosition takes it.",
    )
    root = _offsets_checkpoint(tmp_path / "twelve", planned=12, committed=12)
    expect_equal(
        json.loads(nb.resume_position(str(root))),
        {"0": 120, "1": 84},
        "With batches 0 to 11 all committed, the newest is 11 (compare batch ids as numbers).",
    )


@exercise("10.6")
def test_resume_position_without_a_commit_says_so(nb, tmp_path):
    root = _offsets_checkpoint(tmp_path / "ckpt", planned=1, committed=0)
    for folder in (root, tmp_path / "empty"):
        folder.mkdir(exist_ok=True)
        try:
            nb.resume_position(str(folder))
        except ValueError:
            continue
        except Exception as error:
            raise CheckFailed(
                f"A checkpoint without a committed batch should raise ValueError; "
                f"resume_position raised {type(error).__name__}: {error}"
            ) from None
        raise CheckFailed(
            "A checkpoint without a committed batch has no position to resume from: "
            "resume_position should raise ValueError."
        )


# --- 10.7 · a migration that keeps its timers -----------------------------------------------------


def _initial(partition, machine, status, last_s) -> Row:
    return Row(
        partition=partition,
        machine_name=machine,
        status=status,
        last_heartbeat_ms=START_MS + last_s * 1000,
    )


def _migrated(nb, at_s: int, rows: list[Row]) -> TwsTester:
    processor = nb.MigratingCatchUpProcessor(timeout_ms=5_000)
    if not isinstance(processor, LAB05.CatchUpProcessor):
        raise CheckFailed("MigratingCatchUpProcessor should subclass LAB05.CatchUpProcessor.")
    tester = TwsTester(processor, timeMode="ProcessingTime")
    returned = spark_initial_state(tester, START_MS + at_s * 1000, [(r.partition, r) for r in rows])
    if any(result is not None for result in returned):
        raise CheckFailed(
            "handleInitialState should return None: it sets up state and emits nothing "
            "(a `yield` makes it a generator that Spark never runs)."
        )
    return tester


def _timers(tester: TwsTester, key: str) -> list[int]:
    return [t - START_MS for t in pending_timers(tester, key)]


OLD = [
    _initial("0", "p1", HEALTHY, 99),
    _initial("0", "p2", HEALTHY, 98),
    _initial("1", "p3", HEALTHY, 97),
]


class _HastyMigration(LAB05.CatchUpProcessor):
    """The notebook's first migration, as it shows it: the machine in, the timer as it was."""

    def handleInitialState(self, key, initialState, timerValues) -> None:
        machines, timer_ms = self.load()
        machines[initialState.machine_name] = (initialState.status, initialState.last_heartbeat_ms)
        self.save(machines, timer_ms)


#: The notebook's story on Spark: the machines lab 04 handed over (partition, machine, last
#: heartbeat in s after START), and the migration's batch, Producer 1's heartbeat at 100 s.
HANDOVER = [("0", "Producer 1", 99), ("0", "Producer 2", 98), ("1", "Producer 3", 97)]
HUB_PARTITIONS = ("0", "1")
DIAGNOSIS_KEYS = ("machines", "timers")


def _diagnosis(answer) -> dict:
    """DIAGNOSIS_10_7, checked for its shape, with each list of machines sorted."""
    expect_keys(answer, "DIAGNOSIS_10_7", DIAGNOSIS_KEYS)
    for name in DIAGNOSIS_KEYS:
        per_partition = answer[name]
        if not isinstance(per_partition, dict) or sorted(map(str, per_partition)) != list(
            HUB_PARTITIONS
        ):
            raise CheckFailed(
                f"DIAGNOSIS_10_7[{name!r}] should be a dict keyed by the hub partitions '0' and "
                "'1' (strings, as key.partition).",
                expected="{'0': ..., '1': ...}",
                actual=repr(per_partition),
            )
    for partition, machines in answer["machines"].items():
        if not (isinstance(machines, list | tuple) and all(isinstance(m, str) for m in machines)):
            raise CheckFailed(
                f"DIAGNOSIS_10_7['machines'][{partition!r}] should be a list of machine names.",
                expected="a list of strings, e.g. ['Producer 9']",
                actual=repr(machines),
            )
    for partition, count in answer["timers"].items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise CheckFailed(
                f"DIAGNOSIS_10_7['timers'][{partition!r}] should be how many timers Spark holds "
                "for the partition: a whole number, 0 when none.",
                expected="an int",
                actual=repr(count),
            )
    return {
        "machines": {str(p): sorted(m) for p, m in answer["machines"].items()},
        "timers": {str(p): n for p, n in answer["timers"].items()},
    }


def _hasty_migration_on_spark(spark, root: Path) -> dict:
    """What Spark holds after the first migration's batch, read with the state reader: per hub
    partition, the machines its value state holds and the timers registered for it."""
    _write(root / "incoming", [100], {"Producer 1": "0"})
    handover = spark.createDataFrame(
        [(p, m, HEALTHY, START_MS + s * 1000) for p, m, s in HANDOVER],
        "partition STRING, machine_name STRING, status STRING, last_heartbeat_ms LONG",
    )
    migration = (
        _source(spark, root / "incoming")
        .groupBy("partition")
        .transformWithState(
            _HastyMigration(timeout_ms=5_000),
            LAB05.TRANSITION_SCHEMA,
            "Append",
            "ProcessingTime",
            initialState=handover.groupBy("partition"),
        )
    )
    checkpoint = root / "checkpoint"
    run_available_now(migration, checkpoint, root / "output")
    held = (
        spark.read.format("statestore")
        .option("stateVarName", "partition")
        .load(str(checkpoint))
        .collect()
    )
    armed = [
        row.key.partition
        for row in spark.read.format("statestore")
        .option("readRegisteredTimers", "true")
        .load(str(checkpoint))
        .collect()
    ]
    machines = {p: [] for p in HUB_PARTITIONS}
    for row in held:
        machines[row.key.partition] = sorted(row.value.names)
    return {"machines": machines, "timers": {p: armed.count(p) for p in HUB_PARTITIONS}}


#: What a failed fix of 10.7 is about, whatever the diagnosis said.
FIX_HINT_10_7 = (
    "Ask which handlers ever run again for a partition that receives no rows: a partition that "
    "receives nothing runs only its timer."
)


@exercise("10.7", timeout=360, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_first_migration(nb, spark, tmp_path):
    diagnosis = _diagnosis(nb.DIAGNOSIS_10_7)
    expect_equal(
        diagnosis,
        spark_facts(
            "10.7 the first migration",
            lambda: _hasty_migration_on_spark(spark, tmp_path / "hasty"),
            check=__file__,
            inputs=[LAB05_NOTEBOOK],
        ),
        "DIAGNOSIS_10_7 against the first migration run on Spark here (Producers 1 and 2 handed "
        "over in hub partition '0', Producer 3 in '1'; the migration's batch holds Producer 1's "
        "heartbeat at 100 s): per hub partition, the machines its value state 'partition' holds "
        "after that batch, and how many timers Spark holds for it.",
        hint="Read hasty_checkpoint with spark.read.format('statestore'): stateVarName "
        "'partition' for the machines, readRegisteredTimers 'true' for the timers; key.partition "
        "is the hub partition.",
    )


@exercise(
    "10.7", timeout=360, part="fix", hint="A partition that receives nothing runs only its timer."
)
def test_migration_arms_every_partition(nb, spark, tmp_path):
    tester = _migrated(nb, 100, OLD)
    expect_equal(
        {"0": _timers(tester, "0"), "1": _timers(tester, "1")},
        {"0": [103_000], "1": [102_000]},
        "After the migration at 100 s (p1 last at 99 s, p2 at 98 s in partition 0; p3 at 97 s in "
        "partition 1; timeout 5 s), the pending timers per partition, in ms after START:",
        hint="Each partition needs its one timer at its earliest deadline right away: the first "
        "batch may have no rows for it.",
    )
    stored = tester.peekValueState("partition", "1")
    expect_equal(
        stored[3] - START_MS if stored else None,
        102_000,
        "The timer partition 1's state records (lab 05's PARTITION_SCHEMA `timer_ms`).",
        hint="Save the timer you registered: lab 05's handlers compare it with the one that fires.",
    )


@exercise("10.7", part="fix", hint=FIX_HINT_10_7)
def test_migration_reports_the_machines_that_stopped(nb):
    tester = _migrated(nb, 100, OLD)
    out = []
    for s in range(100, 121):
        out += _spark_batch(tester, START_MS + s * 1000 + 500, {"0": _fleet(["p1"], s)})
    expect_equal(
        _after_start(out),
        [
            ("p2", HEALTHY, UNHEALTHY, 103_000, 103_500),
            ("p3", HEALTHY, UNHEALTHY, 102_000, 102_500),
        ],
        "After the migration at 100 s, p1 sends every second in partition 0; p2 (last 98 s) and p3 "
        "(last 97 s, alone in partition 1) never send again. Transitions as (machine, previous, "
        "status, changed at ms, noticed at ms after START), one batch a second at +0.5 s:",
        hint="p3's partition receives no row after the migration: only a timer set during the "
        "migration can report it.",
    )


@exercise("10.7", part="fix", hint=FIX_HINT_10_7)
def test_migration_timer_is_never_in_the_past(nb):
    rows = [
        _initial("0", "late", HEALTHY, 90),
        _initial("0", "gone", UNHEALTHY, 50),
        _initial("1", "dead", UNHEALTHY, 40),
    ]
    tester = _migrated(nb, 100, rows)
    expect_equal(
        {"0": _timers(tester, "0"), "1": _timers(tester, "1")},
        {"0": [100_001], "1": [40_000 + DAY_MS]},
        "Migrated at 100 s: `late` (Healthy, last heartbeat 90 s) is past its deadline (95 s), "
        "`gone` (50 s) and `dead` (40 s) are Unhealthy and retire retire_after_ms (a day, the "
        "default) after their last heartbeat. The pending timers per partition, ms after START:",
        hint="Set each partition's pending timers beside what the statement asks of a "
        "partition after the first batch, for a deadline still ahead and for one already "
        "passed.",
    )
    out = _spark_batch(tester, START_MS + 100_500, {})
    expect_equal(
        _after_start(out),
        [("late", HEALTHY, UNHEALTHY, 95_000, 100_500)],
        "The next batch (100.5 s, no rows): transitions as (machine, previous, status, changed "
        "at, noticed at, ms after START).",
    )


@exercise("10.7", part="fix", hint=FIX_HINT_10_7)
def test_migration_announces_nobody_again(nb):
    rows = [
        _initial("0", "p1", HEALTHY, 99),
        _initial("0", "p4", INITIALIZING, 99),
        _initial("0", "p5", UNHEALTHY, 60),
    ]
    tester = _migrated(nb, 100, rows)
    out = _spark_batch(tester, START_MS + 100_500, {"0": _fleet(["p1", "p4", "p5"], 100)})
    expect_equal(
        [f[:3] for f in _facts(out)],
        [("p4", INITIALIZING, HEALTHY), ("p5", UNHEALTHY, HEALTHY)],
        "Migrated p1 (Healthy), p4 (Initializing) and p5 (Unhealthy); each then sends a "
        "heartbeat. The transitions (no machine is new: none may be Initializing again):",
    )


# --- Spark --------------------------------------------------------------------------------------


class _ExtraVariable(LAB05.CatchUpProcessor):
    def init(self, handle):
        super().init(handle)
        self.notes = handle.getValueState("notes", "note STRING")


class _ExtraField(LAB05.CatchUpProcessor):
    SCHEMA = StructType(
        LAB05.PARTITION_SCHEMA.fields + [StructField("sites", ArrayType(StringType()))]
    )

    def init(self, handle):
        self.handle = handle
        self.partition = handle.getValueState("partition", self.SCHEMA)

    def load(self):
        value = self.partition.get()
        if value is None:
            return LAB05.Machines(self.timeout_ms, retire_after_ms=self.retire_after_ms), None
        return LAB05.Machines(
            self.timeout_ms, *value[:3], retire_after_ms=self.retire_after_ms
        ), value[3]

    def save(self, machines, timer_ms):
        statuses, lasts = zip(*machines.values()) if machines else ((), ())
        self.partition.update((list(machines), list(statuses), list(lasts), timer_ms, None))


_mtime = [0]


def _write(folder: Path, seconds, machines: dict) -> None:
    """One JSON file of lab 05 heartbeat rows, dated after every file written before."""
    _mtime[0] += 1
    rows = [
        {
            "partition": partition,
            "machine_name": machine,
            "event_time": datetime.fromtimestamp(START.timestamp() + s, tz=UTC).isoformat(),
        }
        for s in seconds
        for machine, partition in machines.items()
    ]
    deliver_file(folder, f"{_mtime[0]:04d}", rows, order=_mtime[0])


def _source(spark, folder: Path):
    return spark.readStream.schema(LAB05.HEARTBEAT_SCHEMA).json(str(folder))


def _monitor(heartbeats, processor=None):
    return LAB05.catch_up_changes(heartbeats, processor or LAB05.CatchUpProcessor(60_000))


FLEET = {"m1": "0", "m2": "0", "m3": "1"}
CHANGES = (
    "filter",
    "dedup",
    "second_source",
    "partitions",
    "new_variable",
    "new_field",
    "avro_new_field",
)
_MEASURED: dict = {}


def _restarts(spark, root: Path) -> dict:
    """What a restart with each change does, measured on this Spark (once per process)."""
    if _MEASURED:
        return dict(_MEASURED)
    from pyspark.sql import functions as F

    incoming, other = root / "incoming", root / "other"
    _write(incoming, [0, 1], FLEET)
    run_available_now(_monitor(_source(spark, incoming)), root / "checkpoint", root / "output")
    more = str(2 * int(pinned_settings(root / "checkpoint")["spark.sql.shuffle.partitions"]))
    _write(incoming, [2], FLEET)
    _write(other, [2], {"m7": "1"})

    def source():
        return _source(spark, incoming)

    builds = {
        "filter": (lambda: _monitor(source().where(F.col("machine_name") != "test")), {}),
        "dedup": (lambda: _monitor(source().dropDuplicates(["machine_name", "event_time"])), {}),
        "second_source": (lambda: _monitor(source().unionByName(_source(spark, other))), {}),
        "partitions": (lambda: _monitor(source()), {"spark.sql.shuffle.partitions": more}),
        "new_variable": (lambda: _monitor(source(), _ExtraVariable(60_000)), {}),
        "new_field": (lambda: _monitor(source(), _ExtraField(60_000)), {}),
        "avro_new_field": (lambda: _monitor(source(), _ExtraField(60_000)), {ENCODING: "avro"}),
    }
    for change, (build, conf) in builds.items():
        trial = try_restart(
            change, build, root / "checkpoint", root / "output", root / "trials", conf=conf
        )
        _MEASURED[change] = trial.outcome
    return dict(_MEASURED)


def _predictions(nb, name: str, keys) -> dict:
    predicted = getattr(nb, name, None)
    if not isinstance(predicted, dict):
        raise CheckFailed(f"{name} should be a dict; it is {type(predicted).__name__}.")
    expect_equal(
        sorted(predicted),
        sorted(keys),
        f"{name} should have exactly these keys.",
    )
    return predicted


@exercise("10.1")
def test_predictions_use_the_three_outcomes(nb):
    predicted = _predictions(nb, "PREDICTED", CHANGES)
    odd = {k: v for k, v in predicted.items() if v not in (RUNS, IGNORED, REFUSED)}
    expect_equal(
        odd,
        {},
        "Each prediction should be one of RUNS, IGNORED or REFUSED; these are not:",
    )


_HINTS_10_1 = {
    "partitions": "A pinned setting changed in the session is not an error: the query runs with "
    "the checkpoint's value.",
    "new_variable": "A state variable the checkpoint has never seen is a new column family, "
    "empty; only the schemas of variables it knows are compared.",
    "avro_new_field": "The encoding format is one of the pinned settings.",
    "second_source": "Sources are matched by their position in the plan unless they are named.",
}


@exercise("10.1", timeout=420)
def test_predictions_match_what_spark_does(nb, spark, tmp_path_factory):
    predicted = _predictions(nb, "PREDICTED", CHANGES)
    measured = spark_facts(
        "10.1 restarts",
        lambda: _restarts(spark, tmp_path_factory.mktemp("lab10-restarts")),
        check=__file__,
        inputs=[LAB05_NOTEBOOK],
    )
    wrong = [change for change in CHANGES if predicted[change] != measured[change]]
    expect_equal(
        {change: predicted[change] for change in wrong},
        {change: measured[change] for change in wrong},
        f"Spark restarted the query with each change; {len(wrong)} of your {len(CHANGES)} "
        f"predictions differ from what it did. Shown: the changes you got wrong.",
        hint=" ".join(_HINTS_10_1[c] for c in wrong if c in _HINTS_10_1),
    )


_REPARTITION: dict = {}


def _repartition_facts(spark, root: Path) -> dict:
    """A file-sink query of the reference pipeline: two batches, a repartition to 4, a restart;
    what the checkpoint and the output say (once per process)."""
    if _REPARTITION:
        return dict(_REPARTITION)
    incoming, checkpoint, output = root / "incoming", root / "checkpoint", root / "output"
    machines = {f"m{n}": str(n % 4) for n in range(8)}

    def run():
        with session_conf(spark, {NO_DATA_BATCHES: "false"}):
            query = (
                _monitor(_source(spark, incoming))
                .writeStream.format("parquet")
                .option("path", str(output))
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
        finish(query, within=240, what="the check's query to read its heartbeats")

    for second in (0, 1):
        _write(incoming, [second], machines)
        run()
    try:
        repartition_state(spark, checkpoint, 2)
        same_count_raises = False
    except SparkChanged:
        raise
    except Exception:
        same_count_raises = True
    before = set(batches(checkpoint / "offsets"))
    repartition_state(spark, checkpoint, 4)
    (repartition_batch,) = set(batches(checkpoint / "offsets")) - before
    partitions = spark.read.format("state-metadata").load(str(checkpoint)).first().numPartitions
    before = set(batches(checkpoint / "offsets"))
    _write(incoming, [2], machines)
    run()
    first_after = min(set(batches(checkpoint / "offsets")) - before)
    try:
        spark.read.parquet(str(output)).count()
        readable = True
    except Exception:
        readable = False
    _REPARTITION.update(
        repartition_batch=repartition_batch,
        state_partitions=partitions,
        first_batch_after=first_after,
        same_count_raises=same_count_raises,
        file_sink_readable=readable,
    )
    return dict(_REPARTITION)


REPARTITION_KEYS = (
    "repartition_batch",
    "state_partitions",
    "first_batch_after",
    "same_count_raises",
    "file_sink_readable",
)


@exercise("10.5", timeout=420)
def test_repartition_predictions_match_what_spark_does(nb, spark, tmp_path_factory):
    predicted = _predictions(nb, "PREDICTED_REPARTITION", REPARTITION_KEYS)
    facts = spark_facts(
        "10.5 repartition",
        lambda: _repartition_facts(spark, tmp_path_factory.mktemp("lab10-repartition")),
        check=__file__,
        inputs=[LAB05_NOTEBOOK],
    )
    wrong = [k for k in REPARTITION_KEYS if predicted[k] != facts[k]]
    expect_equal(
        {k: predicted[k] for k in wrong},
        {k: facts[k] for k in wrong},
        f"Spark ran two batches (0 and 1), repartitioned to 4 and restarted; {len(wrong)} of "
        f"your {len(REPARTITION_KEYS)} predictions differ from what it did. Shown: those.",
        hint="A repartition is a batch of its own, after the newest committed one; the file "
        "sink's log has a file for every batch that wrote output.",
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
    with session_conf(spark, {ENCODING: "avro"}):
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


@exercise("10.6", timeout=300)
def test_initial_state_from_a_lab_04_checkpoint(nb, spark, tmp_path):
    incoming, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    schema = "machine_name STRING, machine_time TIMESTAMP"

    def run(machines):
        _write(incoming, [0], {m: "0" for m in machines})
        heartbeats = spark.readStream.schema(schema).json(str(incoming))
        changes = heartbeats.groupBy("machine_name").transformWithState(
            ReferenceHeartbeatProcessor(1),
            "machine_name STRING, status STRING, previous_status STRING, "
            "last_status_change_time TIMESTAMP",
            "Append",
            "ProcessingTime",
        )
        run_available_now(changes, checkpoint, tmp_path / "out")

    run(["m1", "m2", "m3"])
    run(["m1", "m4"])
    times = [
        json.loads((checkpoint / "offsets" / str(b)).read_text().splitlines()[1])[
            "batchTimestampMs"
        ]
        for b in (0, 1)
    ]
    placement = {"m1": "3", "m2": "0", "m3": "0", "m4": "1"}
    try:
        frame = nb.initial_state(spark, str(checkpoint), placement.get)
        columns, rows = frame.columns, sorted(tuple(r) for r in frame.collect())
    except Exception as error:
        if "is not done yet" in str(error):
            raise
        raise CheckFailed(f"initial_state failed: {error_class(error)}") from None
    expect_equal(
        columns,
        ["partition", "machine_name", "status", "last_heartbeat_ms"],
        "initial_state's columns, in order.",
    )
    expect_equal(
        rows,
        [
            ("0", "m2", UNHEALTHY, times[0]),
            ("0", "m3", UNHEALTHY, times[0]),
            ("1", "m4", INITIALIZING, times[1]),
            ("3", "m1", HEALTHY, times[1]),
        ],
        "Lab 04's query saw m1, m2, m3, then m1 and m4 (1 ms timeout: m2 and m3 timed out). "
        "initial_state's rows, sorted, with the partition from partition_of:",
        hint="last_heartbeat_ms is lab 04's last_seen_ms; the partition comes from partition_of.",
    )
