"""Checks for lab 08 · Capstone: the heartbeat monitor.

Pure Python first: the consumer's decoder on real ``azure.eventhub.EventData`` objects (8.3)
and the runbook (8.5). Then Spark: the status events' encoding on fixed rows, in two session
time zones (8.1); what a replayed batch leaves in an in-process status hub, against the
learner's prediction (8.2); the pipeline, with lab 05's ``CatchUpProcessor``, over parquet
files in the eventhubs source's schema, one file per micro-batch, run with
``trigger(availableNow=True)`` (8.4); the wired query, looked at unstarted and then run to the
end of its input against an in-process hub, on heartbeats sent before it starts (8.6). The
diagnoses of the two debug exercises are graded against a trial of the code as found, run here
on an in-process hub as the notebook runs it: the runbook's source options read to the end of
what the hub holds, by its progress reports (8.5); the wiring's status events and its last
progress report (8.6). No check sleeps, and every verdict depends on the data only: the processor stamps each change with the heartbeats' enqueue
times, which the checks choose or read back from the hub.
"""

import functools
import json
import math
import os
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient
from pyspark import cloudpickle

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    HUB_ARROW_SCHEMA,
    HUB_SYSTEM_ARROW_SCHEMA,
    INITIALIZING,
    NO_DATA_BATCHES,
    REPO_ROOT,
    START,
    TRANSITION_DDL,
    TRANSITION_FIELDS,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
    expect_keys,
    expect_that,
    heartbeat_line,
    is_not_done,
    query_cause,
    registry,
    session_conf,
    spark_facts,
    writer_setting,
)
from streamlab.solutions import load_solution

# Spark's Python workers cannot import this file: send what it defines by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

HOUR_MS = 3_600_000


def _stamp(ms: int) -> str:
    """The contract's time format for ``ms`` milliseconds since the epoch."""
    at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@functools.cache
def _lab05():
    from streamlab.monitor import reference_solution

    return reference_solution()


#: The solutions the trials of 8.5 and 8.6 run: lab 05's processor, lab 08's pipeline.
TRIAL_NOTEBOOKS = [registry.lab(n).notebook(REPO_ROOT / "solutions") for n in ("05", "08")]


def _processor(timeout_ms: int):
    """Lab 05's CatchUpProcessor, the processor every check's pipeline runs."""
    return _lab05().CatchUpProcessor(timeout_ms=timeout_ms)


# --- 8.3 · the consumer's decoder ------------------------------------------------------------


def _body(
    machine="m1", status=HEALTHY, previous=INITIALIZING, at="2026-11-22T10:00:05.123Z", **extra
) -> str:
    fields = {
        "machine_name": machine,
        "status": status,
        "previous_status": previous,
        "last_status_change_time": at,
        **extra,
    }
    return json.dumps(fields)


def _decode(nb, events, seen=None):
    result = nb.decode_status(events, set() if seen is None else seen)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailed(
            "decode_status() should return a pair (transitions, quarantined).",
            expected="a tuple of two lists",
            actual=f"{type(result).__name__}: {result!r:.200}",
        )
    transitions, quarantined = result
    expect_that(
        isinstance(transitions, list) and isinstance(quarantined, list),
        "decode_status() should return two lists.",
        expected="list and list",
        actual=f"{type(transitions).__name__} and {type(quarantined).__name__}",
    )
    return transitions, quarantined


@exercise("8.3")
def test_good_events_become_transitions_in_order(nb):
    events = [
        EventData(_body("m1", INITIALIZING, None, "2026-11-22T10:00:00.000Z")),
        EventData(_body("m2", INITIALIZING, None, "2026-11-22T10:00:00.500Z")),
        EventData(_body("m1", HEALTHY, INITIALIZING, "2026-11-22T10:00:01.123Z")),
    ]
    transitions, quarantined = _decode(nb, events)
    if quarantined != []:
        raise CheckFailed(
            "Three well-formed status events should all decode.",
            expected="[] (nothing quarantined)",
            actual=f"quarantined with the reasons {[reason for _, reason in quarantined]}",
        )
    expect_equal(
        [list(t) for t in transitions],
        [TRANSITION_FIELDS] * 3,
        f"Each transition should be a dict with exactly the keys {TRANSITION_FIELDS}, in that order "
        "(shown: each transition's keys).",
    )
    got = [(t["machine_name"], t["previous_status"], t["status"]) for t in transitions]
    expect_equal(
        got,
        [
            ("m1", None, INITIALIZING),
            ("m2", None, INITIALIZING),
            ("m1", INITIALIZING, HEALTHY),
        ],
        "The transitions should come out in the order the events came in, with null "
        "previous_status as None (shown: machine_name, previous_status, status).",
    )
    times = [t["last_status_change_time"] for t in transitions]
    expected = [
        START,
        START + timedelta(milliseconds=500),
        START + timedelta(seconds=1, milliseconds=123),
    ]
    expect_that(
        all(isinstance(t, datetime) and t.tzinfo is not None for t in times) and times == expected,
        "last_status_change_time should be an aware datetime.",
        expected=expected,
        actual=times,
    )


@exercise("8.3")
def test_times_with_an_offset_come_out_in_utc(nb):
    transitions, _ = _decode(nb, [EventData(_body(at="2026-11-22T12:00:05.123+02:00"))])
    expect_that(
        len(transitions) == 1,
        "A time with an offset (+02:00) is ISO-8601 with a zone: decode it.",
        expected="1 transition",
        actual=f"{len(transitions)} transitions",
    )
    got = transitions[0]["last_status_change_time"]
    utc = START + timedelta(seconds=5, milliseconds=123)
    if not (got == utc and got.utcoffset() == timedelta(0)):
        raise CheckFailed(
            "2026-11-22T12:00:05.123+02:00 is 10:00:05.123 UTC: expected a datetime in UTC "
            "(utcoffset 0). Convert with .astimezone(timezone.utc).",
            expected=utc,
            actual=got,
        )


@exercise("8.3")
def test_extra_fields_are_ignored(nb):
    transitions, quarantined = _decode(nb, [EventData(_body(site="Lyon", version=2))])
    if not (quarantined == [] and [list(t) for t in transitions] == [TRANSITION_FIELDS]):
        raise CheckFailed(
            "A status event with two more fields (site, version) is still a transition: keep "
            "the four fields and ignore the rest.",
            expected=f"one transition with the keys {TRANSITION_FIELDS}, nothing quarantined",
            actual=f"the transitions {transitions!r:.200}, quarantined with the reasons "
            f"{[reason for _, reason in quarantined]}",
        )


BAD = [
    (b"\xff\xfe\x00", "not JSON", "bytes that are not UTF-8"),
    (b"", "not JSON", "an empty body"),
    ("{'machine_name': 'm1'}", "not JSON", "Python's repr instead of JSON"),
    ("[1, 2]", "not a transition", "a JSON array"),
    ("null", "not a transition", "JSON null"),
    (
        '{"machine_name": "m1", "status": "Healthy", "last_status_change_time": "2026-11-22T10:00:00Z"}',
        "not a transition",
        "an object without previous_status",
    ),
    (_body(machine=""), "not a transition", "an empty machine_name"),
    (_body(machine="   "), "not a transition", "a blank machine_name"),
    (_body(machine=7), "not a transition", "a machine_name that is a number"),
    (_body(status="Rebooting"), "not a transition", "status Rebooting"),
    (_body(status=None), "not a transition", "status null"),
    (_body(previous="Unknown"), "not a transition", "previous_status Unknown"),
    (_body(at="yesterday"), "not a transition", "a time that is not ISO-8601"),
    (_body(at="2026-11-22T10:00:05"), "not a transition", "a time without a zone"),
    (_body(at=1795000000000), "not a transition", "a time given as a number"),
    (_body(at=None), "not a transition", "a null time"),
]


@exercise("8.3")
@pytest.mark.parametrize("body, reason, what", BAD, ids=[what for _, _, what in BAD])
def test_a_bad_event_is_quarantined_with_its_reason(nb, body, reason, what):
    event = EventData(body)
    try:
        transitions, quarantined = _decode(nb, [event])
    except AssertionError:
        raise
    except Exception as error:
        raise CheckFailed(
            f"decode_status() raised an exception on {what}. A consumer must never crash on a "
            f"bad event: quarantine it with a reason.",
            expected=f"([], [(event, {reason!r})])",
            actual=f"{type(error).__name__}: {error}",
        ) from None
    expect_that(
        transitions == [] and len(quarantined) == 1,
        f"An event with {what} should be quarantined, not decoded.",
        expected="0 transitions and 1 quarantined",
        actual=f"{len(transitions)} transition(s) and {len(quarantined)} quarantined",
    )
    kept, got = quarantined[0]
    if kept is not event:
        raise CheckFailed(
            "Quarantine the event itself, as it came (the (event, reason) pair).",
            expected="the EventData object decode_status() was given",
            actual=f"{kept!r:.80}",
        )
    expect_equal(
        got, reason, f"An event with {what} should be quarantined as {reason!r}.", show=repr
    )


@exercise("8.3")
def test_bad_events_do_not_stop_the_good_ones(nb):
    good1, bad1, good2, bad2 = (
        EventData(_body("m1", INITIALIZING, None)),
        EventData(b"\xff"),
        EventData(_body("m2", INITIALIZING, None)),
        EventData("hello"),
    )
    transitions, quarantined = _decode(nb, iter([good1, bad1, good2, bad2]))
    expect_equal(
        [t["machine_name"] for t in transitions],
        ["m1", "m2"],
        "Between bad events, the good ones must still come through, in order. (The events may "
        "come as any iterable, here an iterator: go through them once.)",
    )
    kept = [(event is bad, reason) for (event, reason), bad in zip(quarantined, [bad1, bad2])]
    if not (len(quarantined) == 2 and kept == [(True, "not JSON")] * 2):
        raise CheckFailed(
            "Both bad events should be quarantined, themselves and in order, with the reason "
            "'not JSON'.",
            expected="the two bad events, each with the reason 'not JSON'",
            actual=f"{len(quarantined)} quarantined, with the reasons "
            f"{[reason for _, reason in quarantined]}",
        )
    expect_equal(
        _decode(nb, []), ([], []), "No events: decode_status([], seen) should return ([], [])."
    )


REPEAT_HINT = (
    "The sink is at least once: keep the (machine_name, status, last_status_change_time) of "
    "every good event in the set the caller passes, and skip an event whose triple is there."
)


@exercise("8.3", hint=REPEAT_HINT)
def test_a_repeated_change_comes_through_once(nb):
    first = EventData(_body("m1", HEALTHY, INITIALIZING, "2026-11-22T10:00:01.000Z"))
    again = EventData(_body("m1", HEALTHY, INITIALIZING, "2026-11-22T10:00:01.000Z"))
    later = EventData(_body("m1", UNHEALTHY, HEALTHY, "2026-11-22T10:00:06.000Z"))
    transitions, quarantined = _decode(nb, [first, again, later])
    expect_equal(
        [(t["machine_name"], t["status"]) for t in transitions],
        [("m1", HEALTHY), ("m1", UNHEALTHY)],
        "The same change delivered twice (a replayed batch) should come out once, and the "
        "changes after it as usual.",
    )
    expect_equal(quarantined, [], "A repeat is not a bad event: it is dropped, not quarantined.")


@exercise("8.3", hint=REPEAT_HINT)
def test_repeats_are_recognised_across_calls_and_time_zones(nb):
    seen: set = set()
    _decode(nb, [EventData(_body("m1", HEALTHY, INITIALIZING, "2026-11-22T10:00:05.123Z"))], seen)
    transitions, _ = _decode(
        nb,
        [
            EventData(_body("m1", HEALTHY, INITIALIZING, "2026-11-22T12:00:05.123+02:00")),
            EventData(_body("m2", HEALTHY, INITIALIZING, "2026-11-22T10:00:05.123Z")),
            EventData(_body("m1", HEALTHY, UNHEALTHY, "2026-11-22T10:00:09.000Z")),
        ],
        seen,
    )
    expect_equal(
        [(t["machine_name"], t["previous_status"], t["status"]) for t in transitions],
        [("m2", INITIALIZING, HEALTHY), ("m1", UNHEALTHY, HEALTHY)],
        "A second call with the same set: m1's change at 10:00:05.123 UTC, spelled with +02:00, "
        "was seen in the first call and is dropped; m2's change at the same time, and m1's "
        "later change, are news.",
    )


@exercise("8.3")
def test_a_bad_event_does_not_count_as_seen(nb):
    seen: set = set()
    bad = EventData(_body("m1", "Rebooting", None))
    good = EventData(_body("m1", INITIALIZING, None))
    first = _decode(nb, [bad], seen)
    second = _decode(nb, [bad, good], seen)
    expect_equal(
        ([r for _, r in first[1]], [r for _, r in second[1]], len(second[0])),
        (["not a transition"], ["not a transition"], 1),
        "A bad event is quarantined every time it comes (someone must find its sender), and a "
        "good one after it still comes through.",
    )


# --- 8.5 · the runbook ------------------------------------------------------------------------

CS = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=monitor;SharedAccessKey=c2VjcmV0"


def _settings(nb, *args, **kwargs) -> dict:
    settings = nb.monitor_settings(*args, **kwargs)
    expect_that(
        isinstance(settings, dict),
        "monitor_settings() should return a dict.",
        expected="a dict",
        actual=type(settings).__name__,
    )
    keys = {"source", "sink", "checkpointLocation", "trigger"}
    if set(settings) != keys:
        raise CheckFailed(
            "monitor_settings() should return exactly these keys.",
            expected=sorted(keys),
            actual=sorted(settings),
        )
    return settings


def monitor_settings_as_found(
    connection_string,
    fleet_size,
    checkpoint_root,
    *,
    trigger_ms=500,
    catch_up_factor=10,
    consumer_group="$Default",
):
    """The runbook function as the notebook shows it, found."""
    return {
        "source": {
            "connectionString": connection_string,
            "eventHubName": "heartbeats",
            "consumerGroup": consumer_group,
            "startingPosition": "earliest",
            "maxEventsPerTrigger": str(fleet_size * catch_up_factor // 10),
        },
        "sink": {"connectionString": connection_string, "eventHubName": "status"},
        "checkpointLocation": str(PurePosixPath(checkpoint_root) / "heartbeat-monitor"),
        "trigger": f"{trigger_ms} milliseconds",
    }


#: The notebook's trial of the runbook as found: three machines, a heartbeat each per second for
#: four seconds, all in the hub before a new monitor starts, sized for a 2 s trigger.
TRIAL_FLEET = ["Producer 1", "Producer 2", "Producer 3"]
TRIAL_SECONDS = 4
RUNBOOK_KEYS = ("batch_sizes", "old_events_read")


def _runbook_diagnosis(answer) -> dict:
    expect_keys(answer, "DIAGNOSIS_8_5", RUNBOOK_KEYS)

    def is_count(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if not is_count(answer["old_events_read"]):
        raise CheckFailed(
            "DIAGNOSIS_8_5['old_events_read'] should be a count: a whole number, 0 or more.",
            expected="an int",
            actual=repr(answer["old_events_read"]),
        )
    sizes = answer["batch_sizes"]
    if not isinstance(sizes, list | tuple) or not all(is_count(n) for n in sizes):
        raise CheckFailed(
            "DIAGNOSIS_8_5['batch_sizes'] should be a list of counts, the events each "
            "micro-batch read, in batch order.",
            expected="a list of ints, e.g. [7, 2]",
            actual=repr(sizes),
        )
    return {"old_events_read": answer["old_events_read"], "batch_sizes": list(sizes)}


def _runbook_trial(spark, root: Path) -> dict:
    """The notebook's trial, run here, and what its progress reports say it read."""
    from streamlab.hub import Hub

    with Hub(data_dir=root / "emulator", port=0) as hub:
        _send(
            hub.connection_string,
            [_heartbeat(m) for _ in range(TRIAL_SECONDS) for m in TRIAL_FLEET],
        )
        settings = monitor_settings_as_found(
            hub.connection_string, len(TRIAL_FLEET), str(root), trigger_ms=2_000
        )
        query = (
            spark.readStream.format("eventhubs")
            .options(**settings["source"])
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", settings["checkpointLocation"])
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the trial of the runbook as found to read the hub")
    read = {report["batchId"]: report["numInputRows"] for report in query.recentProgress}
    return {
        "old_events_read": sum(read.values()),
        "batch_sizes": [read[batch] for batch in sorted(read)],
    }


#: What a failed fix of 8.5 is about, whatever the diagnosis said.
FIX_HINT_8_5 = (
    "Four things went wrong, one per promise: where a new monitor starts reading, how "
    "maxEventsPerTrigger scales with the trigger, how a path is joined to a URI root, and what "
    "the function lets through."
)


@exercise("8.5", timeout=360, part="diagnosis")
def test_the_diagnosis_is_what_the_runbook_trial_shows(nb, spark, tmp_path):
    diagnosis = _runbook_diagnosis(nb.DIAGNOSIS_8_5)
    expect_equal(
        diagnosis,
        spark_facts(
            "8.5 the runbook as found",
            lambda: _runbook_trial(spark, tmp_path / "trial"),
            check=__file__,
            inputs=TRIAL_NOTEBOOKS,
        ),
        "DIAGNOSIS_8_5 against the trial run here: the runbook as found, for three machines at a "
        "2 s trigger, on a hub that held four seconds of their heartbeats before the start; "
        "from its progress reports, the events read in all and the events each micro-batch "
        "read, in batch order.",
        hint="Take numInputRows from each report of trial.recentProgress, in batchId order, "
        "and add them up.",
    )


@exercise("8.5", timeout=360, part="fix", hint=FIX_HINT_8_5)
def test_the_settings_for_three_machines(nb, spark, tmp_path):
    got = _settings(nb, CS, 3, "/data/checkpoints")
    expected = {
        "source": {
            "connectionString": CS,
            "eventHubName": "heartbeats",
            "consumerGroup": "$Default",
            "startingPosition": "latest",
            "maxEventsPerTrigger": "15",
        },
        "sink": {"connectionString": CS, "eventHubName": "status"},
        "checkpointLocation": "/data/checkpoints/heartbeat-monitor",
        "trigger": "500 milliseconds",
    }
    for key in ("source", "sink"):
        expect_equal(
            got[key],
            expected[key],
            f"For 3 machines and the defaults, settings[{key!r}] should be this dict. (Every "
            f"value is a string; maxEventsPerTrigger = ceil(3 x 500 x 10 / 1000).)",
        )
    expect_equal(
        (got["checkpointLocation"], got["trigger"]),
        (expected["checkpointLocation"], expected["trigger"]),
        "checkpointLocation and trigger should be these two values (shown as a pair).",
    )


@exercise("8.5", part="fix", hint=FIX_HINT_8_5)
@pytest.mark.parametrize(
    "fleet, trigger_ms, factor",
    [(1, 500, 10), (10_000, 500, 10), (7, 250, 3), (1, 1, 1), (2, 2_000, 1)],
)
def test_max_events_grows_with_the_fleet(nb, fleet, trigger_ms, factor):
    got = _settings(nb, CS, fleet, "/c", trigger_ms=trigger_ms, catch_up_factor=factor)
    expected = str(math.ceil(fleet * trigger_ms * factor / 1000))
    expect_equal(
        got["source"].get("maxEventsPerTrigger"),
        expected,
        f"For {fleet} machine(s), a {trigger_ms} ms trigger and a catch-up factor of {factor}, "
        f"maxEventsPerTrigger should be ceil({fleet} x {trigger_ms} x {factor} / 1000) "
        f"(a string).",
        show=repr,
    )
    expect_equal(
        got["trigger"],
        f"{trigger_ms} milliseconds",
        f"With trigger_ms={trigger_ms} the trigger should be '{trigger_ms} milliseconds'.",
        show=repr,
    )


@exercise("8.5", part="fix", hint=FIX_HINT_8_5)
def test_the_checkpoint_root_may_be_a_uri(nb):
    root = "abfss://monitor@account.dfs.core.windows.net/checkpoints/"
    got = _settings(nb, CS, 3, root, consumer_group="monitor")
    expect_equal(
        got["checkpointLocation"],
        "abfss://monitor@account.dfs.core.windows.net/checkpoints/heartbeat-monitor",
        f"The root {root!r} should give one '/' between root and folder, and the URI left as it "
        f"is (pathlib would turn '//' into '/').",
        show=repr,
    )
    local = _settings(nb, CS, 3, "/srv/box/")["checkpointLocation"]
    expect_equal(
        local,
        "/srv/box/heartbeat-monitor",
        "A local root with a trailing slash keeps every character of its name, and gets one '/' "
        "before the folder.",
    )
    expect_equal(
        got["source"].get("consumerGroup"),
        "monitor",
        "consumer_group='monitor' should be the source's consumerGroup.",
        show=repr,
    )


@exercise("8.5", part="fix", hint=FIX_HINT_8_5)
@pytest.mark.parametrize(
    "args, kwargs, what",
    [
        ((CS + ";EntityPath=heartbeats", 3, "/c"), {}, "a connection string with EntityPath"),
        (
            (CS + ";entitypath=status", 3, "/c"),
            {},
            "a connection string with entitypath in lower case",
        ),
        ((CS, 0, "/c"), {}, "fleet_size 0"),
        ((CS, -2, "/c"), {}, "fleet_size -2"),
        ((CS, 3, "/c"), {"trigger_ms": 0}, "trigger_ms 0"),
        ((CS, 3, "/c"), {"catch_up_factor": 0}, "catch_up_factor 0"),
    ],
    ids=["EntityPath", "entitypath", "no-machines", "negative-fleet", "no-trigger", "no-catch-up"],
)
def test_settings_that_cannot_work_are_refused(nb, args, kwargs, what):
    try:
        got = nb.monitor_settings(*args, **kwargs)
    except ValueError:
        return
    raise CheckFailed(
        f"monitor_settings() with {what} should raise ValueError.",
        expected="ValueError raised",
        actual=f"returned {got!r:.200}",
    )


# --- 8.1 · encoding, on Spark -----------------------------------------------------------------

ROWS = [
    ("m1", INITIALIZING, None, START),
    ("m1", HEALTHY, INITIALIZING, START + timedelta(seconds=1, microseconds=123_456)),
    ('Rack "7" · Ω', UNHEALTHY, HEALTHY, START + timedelta(hours=13, seconds=7, milliseconds=40)),
]
EXPECTED_BODIES = [
    {
        "machine_name": "m1",
        "status": INITIALIZING,
        "previous_status": None,
        "last_status_change_time": "2026-11-22T10:00:00.000Z",
    },
    {
        "machine_name": "m1",
        "status": HEALTHY,
        "previous_status": INITIALIZING,
        "last_status_change_time": "2026-11-22T10:00:01.123Z",
    },
    {
        "machine_name": 'Rack "7" · Ω',
        "status": UNHEALTHY,
        "previous_status": HEALTHY,
        "last_status_change_time": "2026-11-22T23:00:07.040Z",
    },
]


def _encoded(nb, spark) -> list:
    df = expect_dataframe(
        nb.status_events(spark.createDataFrame(ROWS, TRANSITION_DDL)), "status_events"
    )
    got = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    expect_equal(
        got,
        [("body", "string"), ("partitionKey", "string")],
        "status_events() should return the string columns body and partitionKey, in that order.",
    )
    return df.collect()


def _check_bodies(rows, when: str) -> None:
    for row, expected in zip(rows, EXPECTED_BODIES):
        try:
            body = json.loads(row.body, object_pairs_hook=list)
        except (TypeError, ValueError):
            raise CheckFailed(
                "Each body should be JSON.", expected="a JSON object", actual=repr(row.body)
            ) from None
        keys = [k for k, _ in body]
        expect_equal(
            keys,
            TRANSITION_FIELDS,
            f"A body should hold exactly these fields, in that order, null ones included "
            f"(to_json leaves nulls out unless ignoreNullFields is false); {when} one does not: "
            f"{row.body}",
        )
        expect_equal(
            dict(body),
            expected,
            f"{when[0].upper()}{when[1:]}, the transition {expected['machine_name']}: "
            f"{expected['previous_status']} -> {expected['status']} should be encoded with these "
            f"fields and values (its body: {row.body}). Times are UTC, formatted with "
            f"TIMESTAMP_FORMAT.",
        )
        expect_equal(
            row.partitionKey,
            expected["machine_name"],
            "The partition key should be the machine's name.",
            show=repr,
        )


@exercise("8.1", timeout=120)
def test_transitions_become_json_bodies_keyed_by_machine(nb, spark):
    _check_bodies(_encoded(nb, spark), "in a UTC session")


@exercise("8.1", timeout=120)
def test_the_body_does_not_depend_on_the_session_time_zone(nb, spark):
    with session_conf(spark, {"spark.sql.session.timeZone": "America/New_York"}):
        rows = _encoded(nb, spark)
    _check_bodies(rows, "in a session set to America/New_York")


@exercise("8.1", timeout=60)
def test_status_events_works_on_a_stream(nb, spark, tmp_path):
    stream = spark.readStream.schema(TRANSITION_DDL).json(str(tmp_path))
    df = nb.status_events(stream)
    if not (df.isStreaming and df.columns == ["body", "partitionKey"]):
        raise CheckFailed(
            "status_events() on a streaming DataFrame should return a streaming DataFrame with "
            "the columns body and partitionKey: use only transformations (select), no collect().",
            expected="a streaming DataFrame with the columns ['body', 'partitionKey']",
            actual=f"{'a streaming' if df.isStreaming else 'a batch'} "
            f"{type(df).__name__} with the columns {df.columns}",
        )


# --- 8.2 · predict the status hub after a crash -----------------------------------------------


def _contract_events(transitions):
    """The contract's status events, encoded here: 8.2 is graded apart from 8.1."""
    from pyspark.sql import functions as F

    options = {
        "ignoreNullFields": "false",
        "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
        "timeZone": "UTC",
    }
    return transitions.select(
        F.to_json(F.struct(*TRANSITION_FIELDS), options).alias("body"),
        F.col("machine_name").alias("partitionKey"),
    )


def _status_hub_after_a_replay(spark, tmp_path: Path) -> list[tuple]:
    """Lab 05's processor and the contract's events into a status hub, its last batch's
    commit lost, restarted: the (machine_name, status) of every event the hub then holds."""
    from streamlab.hub import Hub, partition_for_key

    incoming, checkpoint = tmp_path / "hub-files", tmp_path / "checkpoint"
    numbers: dict[str, int] = {}
    for second in (0, 1):
        rows = []
        for machine in ("Producer 1", "Producer 2"):
            partition = str(partition_for_key(machine, 4))
            number = numbers.get(partition, 0)
            numbers[partition] = number + 1
            rows.append(
                {
                    "body": _heartbeat(machine)[1],
                    "partition": partition,
                    "offset": str(number),
                    "sequenceNumber": number,
                    "enqueuedTime": START + timedelta(seconds=second),
                    "publisher": None,
                    "partitionKey": machine,
                    "properties": [],
                }
            )
        incoming.mkdir(parents=True, exist_ok=True)
        path = incoming / f"{second:03d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=HUB_ARROW_SCHEMA), path)
        os.utime(path, (START.timestamp() + second,) * 2)
    lab05 = _lab05()
    with Hub(data_dir=tmp_path / "hub", eventhubs={"status": 1}, port=0) as hub:

        def run() -> None:
            from streamlab.eventhubs import SCHEMA

            events = (
                spark.readStream.schema(SCHEMA)
                .option("maxFilesPerTrigger", 1)
                .parquet(str(incoming))
            )
            transitions = lab05.catch_up_changes(
                lab05.parse_heartbeats(events), lab05.CatchUpProcessor(timeout_ms=5_000)
            )
            _run_available(
                spark,
                _contract_events(transitions)
                .writeStream.format("eventhubs")
                .option("connectionString", hub.connection_string)
                .option("eventHubName", "status")
                .option("checkpointLocation", str(checkpoint)),
            )

        run()
        commits = checkpoint / "commits"
        last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        for name in (str(last), f".{last}.crc"):
            (commits / name).unlink(missing_ok=True)
        run()
        events = _status_events(hub.connection_string)
    return sorted(
        (json.loads(e.body_as_str())["machine_name"], json.loads(e.body_as_str())["status"])
        for e in events
    )


@exercise("8.2", timeout=420)
def test_the_status_hub_after_a_replay_is_as_predicted(nb, spark, tmp_path):
    predicted = nb.PREDICTED_STATUS_EVENTS
    if not isinstance(predicted, (list, tuple)) or not all(
        isinstance(e, (list, tuple)) and len(e) == 2 for e in predicted
    ):
        raise CheckFailed(
            "PREDICTED_STATUS_EVENTS should be a list of (machine_name, status) pairs, sorted.",
            expected="a list of pairs",
            actual=predicted,
        )
    predicted = [tuple(e) for e in predicted]
    actual = spark_facts(
        "8.2 the replay", lambda: _status_hub_after_a_replay(spark, tmp_path), check=__file__
    )
    expect_equal(
        predicted,
        actual,
        "PREDICTED_STATUS_EVENTS should be every event the status hub holds after the crash and "
        "the restart, as sorted (machine_name, status) pairs, repeats included (expected: what "
        "the hub held on the same input).",
        hint="A restarted query runs its last unrecorded batch again from the state of the batch "
        "before it: it computes the same changes and sends them again.",
    )


# --- 8.4 · the pipeline over files -----------------------------------------------------------

TRANSITION_COLUMNS = [
    ("machine_name", "string"),
    ("status", "string"),
    ("previous_status", "string"),
    ("last_status_change_time", "timestamp"),
    ("noticed_time", "timestamp"),
]


def _heartbeat(machine: str, machine_time: str = "2026-11-22T10:00:00Z") -> tuple[str, bytes]:
    # Every heartbeat says 10:00:00 on the machine's clock: the pipeline must go by enqueue time.
    return machine, heartbeat_line(machine, machine_time).encode()


def _write_events(
    folder: Path, second: int, first_number: int, events: list, last_enqueued: int
) -> int:
    """One file of eventhubs rows on partition 0, enqueued ``second`` s after START.

    ``last_enqueued`` is what the source's systemProperties would say the partition held when
    the batch was planned. Returns the next sequence number.
    """
    rows = [
        {
            "body": body,
            "partition": "0",
            "offset": str(first_number + i),
            "sequenceNumber": first_number + i,
            "enqueuedTime": START + timedelta(seconds=second),
            "publisher": None,
            "partitionKey": key,
            "properties": [],
            "systemProperties": [("lastEnqueuedSequenceNumber", str(last_enqueued))],
        }
        for i, (key, body) in enumerate(events)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{second:03d}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=HUB_SYSTEM_ARROW_SCHEMA), path)
    stamp = START.timestamp() + second  # the file source takes new files in this order
    os.utime(path, (stamp, stamp))
    return first_number + len(events)


def _events_stream(spark, folder: Path, system_properties: bool = True):
    from streamlab.eventhubs import SCHEMA
    from streamlab.kit import SYSTEM_SCHEMA

    schema = SYSTEM_SCHEMA if system_properties else SCHEMA
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))


def _run_available(spark, writer) -> None:
    with session_conf(spark, {NO_DATA_BATCHES: "false"}):
        query = writer.trigger(availableNow=True).start()
    if not query.awaitTermination(300):
        query.stop()
        raise CheckFailed(
            "The query had not finished its input after 300 s.",
            expected="the query done with its input (trigger availableNow)",
            actual="still running after 300 s",
        )
    if query.exception():
        raise query.exception()


def _sortable(row: tuple) -> tuple:
    return tuple("" if value is None else str(value) for value in row)


def _describe(rows) -> str:
    def name(machine) -> str:
        return machine if isinstance(machine, str) and machine.strip() else repr(machine)

    return (
        "; ".join(f"batch {b} {name(m)}: {p} -> {s} at {t}" for b, m, p, s, t in rows) or "nothing"
    )


def _kind(value) -> str:
    """What a function returned, for a check that wanted a streaming DataFrame."""
    from pyspark.sql import DataFrame

    if isinstance(value, DataFrame):
        return "a streaming DataFrame" if value.isStreaming else "a batch DataFrame"
    return type(value).__name__


def _no_query_started(spark, message: str) -> None:
    active = spark.streams.active
    if active:
        raise CheckFailed(
            message,
            expected="no active query",
            actual=f"{len(active)} active: {[q.name for q in active]}",
        )


@exercise("8.4", timeout=60)
def test_the_pipeline_is_returned_unstarted(nb, spark, tmp_path):
    from pyspark.sql import DataFrame

    for system_properties in (True, False):
        events = _events_stream(spark, tmp_path, system_properties)
        transitions = nb.monitor_transitions(events, _processor(HOUR_MS))
        if not (isinstance(transitions, DataFrame) and transitions.isStreaming):
            raise CheckFailed(
                "monitor_transitions() should return the streaming DataFrame of transitions.",
                expected="a streaming DataFrame",
                actual=_kind(transitions),
            )
        got = [(f.name, f.dataType.simpleString()) for f in transitions.schema.fields]
        expect_equal(
            got,
            TRANSITION_COLUMNS,
            "monitor_transitions() should end with lab 05's catch_up_changes, whose rows have "
            "these columns.",
        )
        df = nb.monitor_stream(events, _processor(HOUR_MS))
        if not (isinstance(df, DataFrame) and df.isStreaming):
            raise CheckFailed(
                "monitor_stream() should return the streaming DataFrame of status events.",
                expected="a streaming DataFrame",
                actual=_kind(df),
            )
        expect_equal(
            [(f.name, f.dataType.simpleString()) for f in df.schema.fields],
            [("body", "string"), ("partitionKey", "string")],
            "monitor_stream() should end with status_events: the columns body and partitionKey.",
        )
    _no_query_started(spark, "monitor_stream() should not start a query: return the DataFrame.")


@exercise("8.4", timeout=420)
def test_heartbeats_in_status_events_out(nb, spark, tmp_path):
    incoming, checkpoint = tmp_path / "hub", tmp_path / "checkpoint"
    # Five files of partition 0; the partition holds more than the first four (a backlog), and
    # the fifth reaches its end. The timeout is 5 s.
    n = _write_events(
        incoming,
        0,
        0,
        [
            _heartbeat("m1"),
            _heartbeat("m2"),
            _heartbeat("m3", machine_time="yesterday"),
            ("m4", b""),
            ("m4", b"{oops"),
            ("m4", b"[1, 2]"),
            ("m4", b'{"machine_time": "2026-11-22T10:00:00Z"}'),
            ("m4", b'{"machine_name": "  ", "machine_time": "2026-11-22T10:00:00Z"}'),
        ],
        last_enqueued=100,
    )
    n = _write_events(incoming, 1, n, [_heartbeat("m1")], last_enqueued=100)
    n = _write_events(incoming, 7, n, [_heartbeat("m1")], last_enqueued=100)
    n = _write_events(incoming, 8, n, [_heartbeat("m2")], last_enqueued=100)
    _write_events(incoming, 9, n, [_heartbeat("m3")], last_enqueued=n)
    sent: list[tuple] = []

    def collect(batch, batch_id):
        sent.extend((batch_id, row.body, row.partitionKey) for row in batch.collect())

    df = nb.monitor_stream(_events_stream(spark, incoming), _processor(timeout_ms=5_000))
    try:
        _run_available(
            spark,
            df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint)),
        )
    except Exception as error:
        if is_not_done(error):
            raise
        raise CheckFailed(
            "The pipeline failed on a mix of heartbeats and broken events.",
            expected="the query to run to the end of its input",
            actual=query_cause(error),
        ) from None
    rows = []
    for batch_id, body, key in sent:
        try:
            fields = json.loads(body)
        except (TypeError, ValueError):
            raise CheckFailed(
                "Each status event's body should be JSON (status_events, 8.1).",
                expected="a JSON object",
                actual=f"{body!r:.200}",
            ) from None
        expect_equal(
            key,
            fields.get("machine_name"),
            f"Each status event's partitionKey should be its machine's name (the body: {body}).",
            show=repr,
        )
        rows.append(
            (
                batch_id,
                fields.get("machine_name"),
                fields.get("previous_status"),
                fields.get("status"),
                fields.get("last_status_change_time"),
            )
        )
    rows.sort(key=_sortable)

    def at(second: int) -> str:
        return _stamp(int((START + timedelta(seconds=second)).timestamp() * 1000))

    expected = sorted(
        [
            (0, "m1", None, INITIALIZING, at(0)),
            (0, "m2", None, INITIALIZING, at(0)),
            (0, "m3", None, INITIALIZING, at(0)),
            (1, "m1", INITIALIZING, HEALTHY, at(1)),
            (2, "m2", INITIALIZING, UNHEALTHY, at(5)),
            (2, "m3", INITIALIZING, UNHEALTHY, at(5)),
            (2, "m1", HEALTHY, UNHEALTHY, at(6)),
            (2, "m1", UNHEALTHY, HEALTHY, at(7)),
            (3, "m2", UNHEALTHY, HEALTHY, at(8)),
            (4, "m3", UNHEALTHY, HEALTHY, at(9)),
            (4, "m1", HEALTHY, UNHEALTHY, at(12)),
            (4, "m2", HEALTHY, UNHEALTHY, at(13)),
            (4, "m3", HEALTHY, UNHEALTHY, at(14)),
        ],
        key=_sortable,
    )
    expect_equal(
        rows,
        expected,
        f"Five micro-batches of partition 0 with a 5 s timeout (m1, m2, m3 and five broken events "
        f"at 10:00:00; m1 at :01; m1 at :07; m2 at :08; m3 at :09, the partition's last event): "
        f"the pipeline sent {len(rows)} status events where {len(expected)} were expected. Only "
        f"bodies with a non-blank machine_name are heartbeats (m3's unparsable machine_time still "
        f"counts); event_time is the event's enqueuedTime, not its machine_time; and the last "
        f"batch can close the deadlines only if last_enqueued_sequence_number comes from "
        f"systemProperties.",
        show=_describe,
    )


# --- 8.6 · the wired query --------------------------------------------------------------------

FAKE_CS = (
    "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=course;SharedAccessKey=course;"
    "UseDevelopmentEmulator=true"
)


def _settings_for(
    connection_string: str, checkpoint: Path, trigger: str = "750 milliseconds"
) -> dict:
    return {
        "source": {
            "connectionString": connection_string,
            "eventHubName": "heartbeats",
            "consumerGroup": "$Default",
            "startingPosition": "earliest",
            "maxEventsPerTrigger": "1000",
        },
        "sink": {"connectionString": connection_string, "eventHubName": "status"},
        "checkpointLocation": str(checkpoint),
        "trigger": trigger,
    }


def _writer(nb, spark, settings: dict, timeout_ms: int = HOUR_MS):
    from pyspark.sql.streaming import DataStreamWriter

    writer = nb.monitor_writer(spark, settings, _processor(timeout_ms))
    expect_that(
        isinstance(writer, DataStreamWriter),
        "monitor_writer() should return the DataStreamWriter (df.writeStream... without .start()).",
        expected="a DataStreamWriter",
        actual=type(writer).__name__,
    )
    _no_query_started(spark, "monitor_writer() should not start the query: return the writer.")
    return writer


def _writer_field(writer, name: str):
    # The writer's settings live in private fields of Spark's DataStreamWriter (4.3).
    return writer_setting(writer, name)


def monitor_writer_as_found(spark, settings: dict, processor):
    """The wiring as the notebook shows it, found, on the course's own pipeline."""
    lab08 = load_solution("08")
    events = spark.readStream.format("eventhubs").options(**settings["source"]).load()
    return (
        lab08.monitor_stream(events, processor)
        .select("body")
        .writeStream.format("eventhubs")
        .options(**settings["sink"])
        .option("checkpointLocation", settings["checkpointLocation"])
        .trigger(processingTime=settings["trigger"])
        .queryName("heartbeat_monitor")
    )


WIRING_KEYS = ("read_to_end", "status_events")


def _wiring_diagnosis(answer) -> dict:
    expect_keys(answer, "DIAGNOSIS_8_6", WIRING_KEYS)
    events = answer["status_events"]
    if not isinstance(events, list | tuple) or not all(
        isinstance(e, list | tuple) and len(e) == 3 for e in events
    ):
        raise CheckFailed(
            "DIAGNOSIS_8_6['status_events'] should be a list of (partition key, machine_name, "
            "status) tuples, one per event of the status hub.",
            expected="a list of 3-tuples, e.g. [('Producer 9', 'Producer 9', 'Healthy')]",
            actual=repr(events),
        )
    if not isinstance(answer["read_to_end"], bool):
        raise CheckFailed(
            "DIAGNOSIS_8_6['read_to_end'] should be True or False.",
            expected="a bool",
            actual=repr(answer["read_to_end"]),
        )
    return {
        "read_to_end": answer["read_to_end"],
        "status_events": sorted((tuple(e) for e in events), key=_sortable),
    }


def _offsets(value) -> dict:
    """A progress report's offsets, given as JSON text or already read."""
    return json.loads(value) if isinstance(value, str) else dict(value)


def _wiring_trial(spark, root: Path) -> dict:
    """The notebook's trial of the wiring as found, run here: what the status hub then holds,
    and whether the last batch read every partition to its end, by its progress report."""
    from streamlab.hub import Hub

    with Hub(data_dir=root / "emulator", port=0) as hub:
        cs = hub.connection_string
        _send(cs, [("Producer 3", b"{oops"), _heartbeat("Producer 1"), _heartbeat("Producer 2")])
        wiring = _settings_for(cs, root / "checkpoint", trigger="500 milliseconds")
        writer = monitor_writer_as_found(spark, wiring, _processor(timeout_ms=1))
        with session_conf(spark, {NO_DATA_BATCHES: "false"}):
            query = writer.trigger(availableNow=True).start()
        finish(query, within=240, what="the trial of the wiring as found to read the hub")
        events = _status_events(cs)
    last = query.lastProgress["sources"][0]
    status_events = []
    for event in events:
        body = json.loads(event.body_as_str())
        status_events.append((_key(event), body.get("machine_name"), body.get("status")))
    return {
        "read_to_end": _offsets(last["latestOffset"]) == _offsets(last["endOffset"]),
        "status_events": sorted(status_events, key=_sortable),
    }


#: What a failed fix of 8.6 is about, whatever the diagnosis said.
FIX_HINT_8_6 = (
    "Two promises are broken: one of the processor (it must know when a batch has read a "
    "partition to its end) and one of the contract (which partition of the status hub a "
    "machine's events land on)."
)


@exercise("8.6", timeout=360, part="diagnosis")
def test_the_diagnosis_is_what_the_wiring_trial_shows(nb, spark, tmp_path):
    diagnosis = _wiring_diagnosis(nb.DIAGNOSIS_8_6)
    expect_equal(
        diagnosis,
        spark_facts(
            "8.6 the wiring as found",
            lambda: _wiring_trial(spark, tmp_path / "trial"),
            check=__file__,
            inputs=TRIAL_NOTEBOOKS,
        ),
        "DIAGNOSIS_8_6 against the trial run here: the wiring as found, with a 1 ms timeout, on "
        "a hub holding a broken event and a heartbeat of Producer 1 and of Producer 2: every "
        "event of the status hub as (partition key, machine_name, status), sorted, and whether "
        "the last batch's progress report has each partition's endOffset at its latestOffset.",
        hint="Read wiring_received (each event's partition_key and body) and "
        "wiring_trial.lastProgress['sources'][0].",
    )


@exercise("8.6", timeout=360, part="fix", hint=FIX_HINT_8_6)
def test_the_writer_is_set_up_from_the_settings(nb, spark, tmp_path):
    settings = _settings_for(FAKE_CS, tmp_path / "checkpoint")
    writer = _writer(nb, spark, settings)
    sink = _writer_field(writer, "source")
    expect_equal(sink, "eventhubs", "The writer should write format('eventhubs').", show=repr)
    options = _writer_field(writer, "extraOptions")
    for key, value in [
        ("connectionString", FAKE_CS),
        ("eventHubName", "status"),
        ("checkpointLocation", str(tmp_path / "checkpoint")),
        ("queryName", "heartbeat_monitor"),
    ]:
        found = options.get(key)
        got = found.get() if found.isDefined() else None
        expect_equal(
            got,
            value,
            f"The writer's option {key} should be set from settings['sink'], "
            f"settings['checkpointLocation'] and QUERY_NAME.",
            show=repr,
        )
    trigger = _writer_field(writer, "trigger").toString()
    expect_equal(
        trigger,
        "ProcessingTimeTrigger(750)",
        "With settings['trigger'] = '750 milliseconds', the writer's trigger should be "
        "processingTime 750 ms. Use .trigger(processingTime=settings['trigger']).",
    )


def _send(connection_string: str, events: list[tuple[str, bytes]]) -> None:
    with EventHubProducerClient.from_connection_string(
        connection_string, eventhub_name="heartbeats"
    ) as producer:
        for key, body in events:
            batch = producer.create_batch(partition_key=key)
            batch.add(EventData(body))
            producer.send_batch(batch)


def _status_events(connection_string: str, timeout: float = 60) -> list:
    """Every event in the status hub now: as many as its partition says it holds."""
    client = EventHubConsumerClient.from_connection_string(
        connection_string, consumer_group="$Default", eventhub_name="status"
    )
    with client:
        props = client.get_partition_properties("0")
        count = 0 if props["is_empty"] else props["last_enqueued_sequence_number"] + 1
        received, done = [], threading.Event()

        def on_batch(context, events):
            received.extend(events)
            if len(received) >= count:
                done.set()

        if count:
            thread = threading.Thread(
                target=client.receive_batch,
                daemon=True,
                # A batch as large as the partition: the callback comes once every event is in,
                # not when max_wait_time has passed.
                kwargs=dict(
                    on_event_batch=on_batch,
                    starting_position="-1",
                    max_batch_size=count,
                    max_wait_time=1,
                ),
            )
            thread.start()
            done.wait(timeout)
    read = len(received)
    expect_that(
        read >= count,
        f"Could not read every event of the status hub in {timeout:.0f} s.",
        expected=f"{count} events (as many as its partition holds)",
        actual=f"{read} events read",
    )
    return received


def _key(event) -> str:
    key = event.partition_key
    return key.decode() if isinstance(key, bytes) else key


@exercise("8.6", timeout=480, part="fix", hint=FIX_HINT_8_6)
def test_the_query_turns_heartbeats_into_status_events_on_the_hub(nb, spark, tmp_path):
    from streamlab.hub import Hub

    with Hub(data_dir=tmp_path / "hub", port=0) as hub:
        cs = hub.connection_string
        settings = _settings_for(cs, tmp_path / "checkpoint")
        # The broken event first: the processor sees only heartbeats, and it knows it has read
        # a partition to its end when it sees the partition's last event.
        _send(cs, [("m3", b"{oops"), _heartbeat("m1"), _heartbeat("m2")])
        try:
            # A 1 ms timeout: every heartbeat was sent before the query started, so once the
            # query knows it has read each partition to its end, each machine is overdue.
            _run_available(spark, _writer(nb, spark, settings, timeout_ms=1))
            first = _status_events(cs)
            _send(cs, [_heartbeat("m1")])
            _run_available(spark, _writer(nb, spark, settings, timeout_ms=1))
            events = _status_events(cs)
        except AssertionError:
            raise
        except Exception as error:
            if is_not_done(error):
                raise
            raise CheckFailed(
                "The query failed.",
                expected="the query to run to the end of its input",
                actual=query_cause(error),
            ) from None
    got = [(_key(e), json.loads(e.body_as_str())) for e in events]
    summary = [
        (key, body.get("machine_name"), body.get("previous_status"), body.get("status"))
        for key, body in got
    ]
    expected_first = [
        ("m1", "m1", None, INITIALIZING),
        ("m1", "m1", INITIALIZING, UNHEALTHY),
        ("m2", "m2", None, INITIALIZING),
        ("m2", "m2", INITIALIZING, UNHEALTHY),
    ]
    held = sorted(summary[: len(first)], key=_sortable)
    expect_that(
        held == expected_first and len(first) == 4,
        "The first run, with a 1 ms timeout, read a broken event and two heartbeats from "
        "'heartbeats' (startingPosition earliest, from settings['source']) to the end of the "
        "hub: the status hub should then hold four events, (partition key, machine, previous, "
        "status), shown sorted. Without the option systemProperties the processor cannot know it "
        "read a partition to its end.",
        expected=expected_first,
        actual=held,
    )
    expect_equal(
        summary[len(first) :],
        [("m1", "m1", UNHEALTHY, HEALTHY), ("m1", "m1", HEALTHY, UNHEALTHY)],
        "The second run, on the same checkpoint, read one more heartbeat of m1: it should add "
        "exactly two status events, m1: Unhealthy -> Healthy -> Unhealthy.",
    )
    times = {}
    for key, body in got:
        times.setdefault(key, []).append(body.get("last_status_change_time"))
    for machine, stamps in times.items():
        beat, silent = (datetime.fromisoformat(t) for t in stamps[:2])
        if not (silent - beat == timedelta(milliseconds=1)):
            raise CheckFailed(
                f"{machine}'s Unhealthy event should say it changed 1 ms (the timeout) after its "
                f"heartbeat's enqueue time, {stamps[0]}.",
                expected=f"{stamps[0]} + 1 ms",
                actual=stamps[1],
            )
