"""Checks of exercise 10.4 · The machine table as a MapState.

The MapState machine table against lab 05's processor, in Spark's order of a micro-batch, on
``TwsTester``.
"""

from __future__ import annotations

from pyspark.sql.streaming.tws_tester import TwsTester
from story_10 import (
    DAY_MS,
    HUB_PARTITIONS,
    LAB05,
    _facts,
    _fleet,
    _spark_batch,
)

from streamlab.kit import (
    HEALTHY,
    START_MS,
    UNHEALTHY,
    CheckFailed,
    Meter,
    exercise,
    expect_equal,
)


def _story(processor, batches_: list[tuple[int, dict]]) -> tuple[TwsTester, Meter, list]:
    tester = TwsTester(processor, timeMode="ProcessingTime")
    meter = Meter(tester)
    out = []
    for now, rows_by_key in batches_:
        out.append(_spark_batch(tester, now, rows_by_key))
    return tester, meter, out


def _beside_lab05(nb, batches_: list[tuple[int, dict]]) -> tuple[TwsTester, list, list]:
    """The learner's MapCatchUpProcessor's tester, then each batch's transitions (``_facts``)
    from it and from lab 05's processor, on the same batches."""
    _, _, expected = _story(LAB05.CatchUpProcessor(timeout_ms=5_000), batches_)
    tester, _, got = _story(_map_processor(nb), batches_)
    return tester, [_facts(b) for b in got], [_facts(b) for b in expected]


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
    tester, got, expected = _beside_lab05(nb, _silence_story())
    expect_equal(
        got,
        expected,
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
    _, got, expected = _beside_lab05(nb, story)
    expect_equal(
        got,
        expected,
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
