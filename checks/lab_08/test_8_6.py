"""Checks of exercise 8.6 · Wire it to the hubs.

The wired query, looked at unstarted and then run to the end of its input against an in-process
hub, on heartbeats sent before it starts; the diagnosis against a trial of the wiring as found
(its status events and its last progress report).
"""

import json
from datetime import datetime, timedelta
from pathlib import Path

from story_08 import (
    HOUR_MS,
    TRIAL_NOTEBOOKS,
    _heartbeat,
    _no_query_started,
    _processor,
    _run_available,
    _send,
    _sortable,
    _status_events,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_equal,
    expect_keys,
    expect_spark_shows,
    expect_that,
    is_not_done,
    query_cause,
    start_available,
    writer_setting,
)
from streamlab.solutions import load_solution

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
        query = start_available(spark, writer)
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
    expect_spark_shows(
        _wiring_diagnosis(nb.DIAGNOSIS_8_6),
        "8.6 the wiring as found",
        lambda: _wiring_trial(spark, tmp_path / "trial"),
        "DIAGNOSIS_8_6 against the trial run here: the wiring as found, with a 1 ms timeout, on "
        "a hub holding a broken event and a heartbeat of Producer 1 and of Producer 2: every "
        "event of the status hub as (partition key, machine_name, status), sorted, and whether "
        "the last batch's progress report has each partition's endOffset at its latestOffset.",
        hint="Read wiring_received (each event's partition_key and body) and "
        "wiring_trial.lastProgress['sources'][0].",
        check=__file__,
        inputs=TRIAL_NOTEBOOKS,
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


def _key(event) -> str:
    key = event.partition_key
    return key.decode() if isinstance(key, bytes) else key


def _two_runs(nb, spark, tmp_path: Path) -> tuple[list, list]:
    """The monitor query run twice on one checkpoint, one more heartbeat of m1 between:
    the status events after the first run, and after the second."""
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
    return first, events


@exercise("8.6", timeout=480, part="fix", hint=FIX_HINT_8_6)
def test_the_query_turns_heartbeats_into_status_events_on_the_hub(nb, spark, tmp_path):
    first, events = _two_runs(nb, spark, tmp_path)
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
