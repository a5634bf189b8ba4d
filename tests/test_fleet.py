"""The producer fleet against the real emulator: schedules, controls, injected events."""

from __future__ import annotations

import json

import pytest
from eventhub_clients import Receiver, wait_for

from streamlab.fleet import KILLED, PAUSED, Fleet


def _one_round(fleet):
    start = fleet.rounds
    wait_for(lambda: fleet.rounds >= start + 2, what="two rounds of the fleet")


def test_each_machine_sends_one_heartbeat_a_second_keyed_by_name(fleet, clock, hub):
    with Receiver(hub.connection_string, starting_position="-1") as receiver:
        fleet.add(), fleet.add()
        wait_for(lambda: fleet.events_sent == 2, what="first heartbeats")
        clock.now += 1.0
        wait_for(lambda: fleet.events_sent == 4, what="second heartbeats")
        _one_round(fleet)
        assert fleet.events_sent == 4  # nothing more until the clock moves on
        events = receiver.wait_count(4)
    names = sorted(json.loads(e.body_as_str())["machine_name"] for e in events)
    assert names == ["Producer 1", "Producer 1", "Producer 2", "Producer 2"]
    by_machine = {}
    for event, partition in zip(events, receiver.partitions):
        body = json.loads(event.body_as_str())
        assert event.partition_key in (body["machine_name"], body["machine_name"].encode())
        assert body["machine_time"].endswith("Z")
        by_machine.setdefault(body["machine_name"], set()).add(partition)
    assert all(len(partitions) == 1 for partitions in by_machine.values())


def test_pause_resume_and_kill(fleet, clock):
    fleet.add("a"), fleet.add("b")
    wait_for(lambda: fleet.events_sent == 2, what="first heartbeats")
    fleet.pause("b")
    assert fleet.machine("b").state == PAUSED
    clock.now += 1.0
    wait_for(lambda: fleet.machine("a").sent == 2, what="a's second heartbeat")
    _one_round(fleet)
    assert fleet.machine("b").sent == 1
    fleet.resume("b")
    wait_for(lambda: fleet.machine("b").sent == 2, what="b resumes at once")
    fleet.kill("a")
    clock.now += 5.0
    wait_for(lambda: fleet.machine("b").sent == 3, what="b keeps going")
    _one_round(fleet)
    assert fleet.machine("a").sent == 2 and fleet.machine("a").state == KILLED
    with pytest.raises(ValueError, match="killed"):
        fleet.resume("a")


def test_rate_changes_how_often_a_machine_sends(fleet, clock):
    fleet.add("fast")
    wait_for(lambda: fleet.events_sent == 1, what="first heartbeat")
    fleet.set_rate(4.0)
    for expected in (2, 3, 4, 5):
        clock.now += 0.25
        wait_for(lambda n=expected: fleet.events_sent == n, what=f"heartbeat {expected}")


def test_injected_events_are_sent_once_with_the_machines_key(fleet, clock, hub):
    fleet.add("m")
    wait_for(lambda: fleet.events_sent == 1, what="first heartbeat")
    fleet.pause("m")
    with Receiver(hub.connection_string, starting_position="-1") as receiver:
        fleet.send_malformed("m", "not-json")
        fleet.send_malformed("m", "empty")
        fleet.send_late("m", seconds=120)
        fleet.send_duplicate("m")
        wait_for(lambda: fleet.events_sent == 5, what="injected events")
        events = receiver.wait_count(5)
    bodies = [b"".join(e.body) if not isinstance(e.body, bytes) else e.body for e in events]
    first = json.loads(bodies[0])
    assert bodies[1].startswith(b'{"machine_name": "m", oops')
    assert bodies[2] == b""
    assert json.loads(bodies[3])["machine_time"] < first["machine_time"]
    assert bodies[4] == bodies[0]


def test_bad_controls_say_what_is_wrong(fleet):
    fleet.add("m")
    with pytest.raises(KeyError, match="no machine called 'x'"):
        fleet.pause("x")
    with pytest.raises(ValueError, match="kind must be one of"):
        fleet.send_malformed("m", "garbled")
    with pytest.raises(ValueError, match="already a machine"):
        fleet.add("m")
    with pytest.raises(ValueError, match="positive"):
        fleet.set_rate(0)


def test_a_hub_that_goes_away_is_reported_not_fatal(hub, clock):
    with Fleet(hub.connection_string, clock=clock, tick=0.01) as fleet:
        fleet.add("m")
        wait_for(lambda: fleet.events_sent == 1, what="first heartbeat")
        hub.stop()
        clock.now += 1.0
        wait_for(lambda: fleet.errors, timeout=120, what="the send error")
        assert fleet._thread.is_alive()


def test_a_listener_can_stop_listening(fleet, clock):
    calls = []
    stop = fleet.on_change(lambda: calls.append(1))
    fleet.add("m")
    wait_for(lambda: fleet.events_sent == 1, what="first heartbeat")
    heard = len(calls)
    assert heard >= 2  # the add, and the send
    stop()
    clock.now += 1.0
    wait_for(lambda: fleet.events_sent == 2, what="second heartbeat")
    assert len(calls) == heard


class _Steps:
    """A clock that moves only when the wait sleeps: a timeout without waiting for it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_waiting_for_heartbeats_follows_what_the_panel_changed(fleet):
    for _ in range(3):
        fleet.add()
    fleet.add()  # a producer added in the panel
    fleet.pause("Producer 2")  # and one paused
    steps = _Steps()
    heard = {"Producer 1", "Producer 3"}
    looks = []

    def seen():
        looks.append(steps.now)
        if len(looks) == 3:
            heard.add("Producer 4")
        return heard

    waited = fleet.wait_for_heartbeats(seen, within=60, sleep=steps.sleep, clock=steps)
    assert waited == ["Producer 1", "Producer 3", "Producer 4"]
    assert len(looks) == 3


def test_a_wait_for_heartbeats_that_times_out_names_what_is_missing(fleet):
    for _ in range(4):
        fleet.add()
    fleet.pause("Producer 2")
    steps = _Steps()
    with pytest.raises(TimeoutError) as raised:
        fleet.wait_for_heartbeats(
            lambda: {"Producer 1", "Producer 3"}, within=30, sleep=steps.sleep, clock=steps
        )
    message = str(raised.value)
    assert "Producer 4" in message and "30 s" in message
    assert "Producer 2" not in message.split("heard from")[0]  # paused: not awaited
    with pytest.raises(TimeoutError) as named:
        fleet.wait_for_heartbeats(
            lambda: {"Producer 1"},
            names=["Producer 1", "Producer 2"],
            within=5,
            sleep=steps.sleep,
            clock=steps,
        )
    assert "Producer 2 is paused" in str(named.value)
    fleet.kill("Producer 1")
    fleet.pause("Producer 3")
    fleet.pause("Producer 4")
    with pytest.raises(TimeoutError) as idle:
        fleet.wait_for_heartbeats(lambda: set(), within=5, sleep=steps.sleep, clock=steps)
    assert "no producer is running" in str(idle.value)


def test_a_wait_for_heartbeats_ends_with_the_error_of_the_query_that_died(fleet):
    fleet.add()

    class Died:
        name, isActive = "live_heartbeats", False

        def exception(self):
            return RuntimeError("the source could not reach the hub")

    steps = _Steps()
    with pytest.raises(RuntimeError, match="could not reach the hub"):
        fleet.wait_for_heartbeats(set, query=Died(), within=60, sleep=steps.sleep, clock=steps)
    assert steps.now == 0  # at once, not after the deadline
