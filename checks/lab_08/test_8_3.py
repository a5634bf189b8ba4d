"""Checks of exercise 8.3 · Decode status events for the board.

The consumer's decoder on real ``azure.eventhub.EventData`` objects; no Spark.
"""

import json
from datetime import datetime, timedelta

import pytest
from azure.eventhub import EventData

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    TRANSITION_FIELDS,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_equal,
    expect_that,
)


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
