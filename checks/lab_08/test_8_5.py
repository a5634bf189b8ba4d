"""Checks of exercise 8.5 · The runbook, as a function.

The runbook, then its diagnosis against a trial of the code as found, run here on an in-process
hub as the notebook runs it: the runbook's source options read to the end of what the hub
holds, by its progress reports.
"""

import math
from pathlib import Path, PurePosixPath

import pytest
from story_08 import (
    TRIAL_NOTEBOOKS,
    _heartbeat,
    _send,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
    expect_keys,
    expect_spark_shows,
    expect_that,
)

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
    expect_spark_shows(
        _runbook_diagnosis(nb.DIAGNOSIS_8_5),
        "8.5 the runbook as found",
        lambda: _runbook_trial(spark, tmp_path / "trial"),
        "DIAGNOSIS_8_5 against the trial run here: the runbook as found, for three machines at a "
        "2 s trigger, on a hub that held four seconds of their heartbeats before the start; "
        "from its progress reports, the events read in all and the events each micro-batch "
        "read, in batch order.",
        hint="Take numInputRows from each report of trial.recentProgress, in batchId order, "
        "and add them up.",
        check=__file__,
        inputs=TRIAL_NOTEBOOKS,
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
